// go-peer: the grpc-go 1.33.3 side of the interop suite (tests/interop/run.py drives it).
//
//	go-peer server SOCK           serve edgegpu.interop.Test on the unix socket SOCK
//	go-peer client SOCK CHECK     run one client check against a server on SOCK
//	go-peer raw SOCK CHECK [ARG]  send hand-made HTTP/2 (malformed on purpose), print JSON
//
// A client check prints one line ("ok: ..." or the reason it failed) and exits 0 or 1.
package main

import (
	"fmt"
	"os"
)

// pattern returns n bytes of the payload pattern every peer uses: byte i is i % 251.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func isPattern(b []byte) bool {
	for i, c := range b {
		if c != byte(i%251) {
			return false
		}
	}
	return true
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go-peer server SOCK | client SOCK CHECK | raw SOCK CHECK [ARG]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	switch os.Args[1] {
	case "server":
		os.Exit(runServer(os.Args[2]))
	case "client":
		if len(os.Args) < 4 {
			usage()
		}
		os.Exit(runClient(os.Args[2], os.Args[3]))
	case "raw":
		if len(os.Args) < 4 {
			usage()
		}
		os.Exit(runRaw(os.Args[2], os.Args[3], os.Args[4:]))
	default:
		usage()
	}
}
