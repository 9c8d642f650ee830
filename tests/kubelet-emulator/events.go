package main

// Events: one JSON object per line on stdout. Keys keep the order they are given in, with
// "event" first and the two timestamps after it:
//
//	"t"    wall clock, unix milliseconds
//	"t_us" CLOCK_MONOTONIC in microseconds: the same clock as Python's time.monotonic() and
//	       C's clock_gettime(CLOCK_MONOTONIC), so a test can compare its own timestamps
//	       (e.g. the moment it injected a fault) with the emulator's.

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

type emitter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

var out = &emitter{w: bufio.NewWriterSize(os.Stdout, 1<<16)}

// monoUS returns CLOCK_MONOTONIC in microseconds.
func monoUS() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Sec*1000000 + ts.Nsec/1000
}

// emit writes one event. kv holds key, value pairs; a value is encoded with encoding/json.
func emit(event string, kv ...interface{}) {
	buf := make([]byte, 0, 256)
	buf = append(buf, `{"event":`...)
	buf = appendJSON(buf, event)
	buf = append(buf, `,"t":`...)
	buf = appendJSON(buf, time.Now().UnixNano()/1000000)
	buf = append(buf, `,"t_us":`...)
	buf = appendJSON(buf, monoUS())
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		buf = append(buf, ',')
		buf = appendJSON(buf, k)
		buf = append(buf, ':')
		buf = appendJSON(buf, kv[i+1])
	}
	buf = append(buf, "}\n"...)
	out.mu.Lock()
	out.w.Write(buf)
	out.w.Flush()
	out.mu.Unlock()
}

func appendJSON(buf []byte, v interface{}) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(err.Error())
	}
	return append(buf, b...)
}

// errText returns "" for nil, else err.Error().
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
