package main

// Hand-made HTTP/2 with golang.org/x/net/http2's Framer and hpack, to send what no gRPC
// library sends: malformed requests (stream faults) and malformed frames (connection faults).
// Each check prints one JSON object of what it observed; run.py judges it against what the
// server under test should do.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	pb "edgegpu/go-peer-proto"
)

const (
	pathUnary  = "/edgegpu.interop.Test/Unary"
	pathStream = "/edgegpu.interop.Test/Stream"
)

type rawStream struct {
	id       uint32
	headers  []hpack.HeaderField
	trailers []hpack.HeaderField
	data     bytes.Buffer
	rst      *http2.ErrCode
	ended    bool
	sendWin  int64
	done     chan struct{}
	openedAt time.Time
	endedAt  time.Time
}

type rawConn struct {
	nc       net.Conn
	fr       *http2.Framer
	wmu      sync.Mutex
	hbuf     bytes.Buffer
	henc     *hpack.Encoder
	mu       sync.Mutex
	cond     *sync.Cond
	nextID   uint32
	streams  map[uint32]*rawStream
	connWin  int64
	initWin  int64
	maxFrame uint32
	settings bool
	goaway   *goawayInfo
	closed   bool
	readErr  error
	closedCh chan struct{}
}

type goawayInfo struct {
	Code       string `json:"code"`
	LastStream uint32 `json:"last_stream"`
	Debug      string `json:"debug"`
}

func rawDial(sock string) (*rawConn, error) {
	nc, err := net.DialTimeout("unix", sock, scale(5*time.Second))
	if err != nil {
		return nil, err
	}
	c := &rawConn{nc: nc, nextID: 1, streams: map[uint32]*rawStream{}, connWin: 65535,
		initWin: 65535, maxFrame: 16384, closedCh: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	c.fr = http2.NewFramer(nc, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c, nil
}

// handshake sends the client preface and SETTINGS and waits for the server's SETTINGS.
func (c *rawConn) handshake() error {
	c.wmu.Lock()
	_, err := c.nc.Write([]byte(http2.ClientPreface))
	if err == nil {
		err = c.fr.WriteSettings()
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	// Reading starts only now: the reader answers the server's SETTINGS, and that ACK must
	// not overtake our preface.
	go c.readLoop()
	return c.waitFor(scale(5*time.Second), func() bool { return c.settings }, "server SETTINGS")
}

func (c *rawConn) close() {
	c.nc.Close()
}

func (c *rawConn) waitFor(d time.Duration, cond func() bool, what string) error {
	t := time.AfterFunc(d, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer t.Stop()
	end := time.Now().Add(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if c.closed && !cond() {
			return fmt.Errorf("connection closed waiting for %s (%v)", what, c.readErr)
		}
		if time.Now().After(end) {
			return fmt.Errorf("timeout waiting for %s", what)
		}
		c.cond.Wait()
	}
	return nil
}

func (c *rawConn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.mu.Lock()
			c.closed = true
			c.readErr = err
			for _, s := range c.streams {
				c.endStream(s)
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			close(c.closedCh)
			return
		}
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = f.ForeachSetting(func(s http2.Setting) error {
					switch s.ID {
					case http2.SettingInitialWindowSize:
						d := int64(s.Val) - c.initWin
						c.initWin = int64(s.Val)
						for _, st := range c.streams {
							st.sendWin += d
						}
					case http2.SettingMaxFrameSize:
						c.maxFrame = s.Val
					}
					return nil
				})
				c.settings = true
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				data := f.Data
				c.write(func() error { return c.fr.WritePing(true, data) })
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				c.connWin += int64(f.Increment)
			} else if s := c.streams[f.StreamID]; s != nil {
				s.sendWin += int64(f.Increment)
			}
		case *http2.DataFrame:
			// Flow control counts the whole frame, padding included.
			n := f.Header().Length
			id := f.StreamID
			s := c.streams[id]
			if s != nil {
				s.data.Write(f.Data())
				if f.StreamEnded() {
					c.endStream(s)
				}
			}
			if n > 0 {
				open := s != nil && !s.ended
				c.write(func() error {
					if err := c.fr.WriteWindowUpdate(0, n); err != nil || !open {
						return err
					}
					return c.fr.WriteWindowUpdate(id, n)
				})
			}
		case *http2.MetaHeadersFrame:
			if s := c.streams[f.StreamID]; s != nil {
				if s.headers == nil {
					s.headers = f.Fields
				} else {
					s.trailers = f.Fields
				}
				if f.StreamEnded() {
					c.endStream(s)
				}
			}
		case *http2.RSTStreamFrame:
			if s := c.streams[f.StreamID]; s != nil {
				code := f.ErrCode
				if s.rst == nil {
					s.rst = &code
				}
				c.endStream(s)
			}
		case *http2.GoAwayFrame:
			c.goaway = &goawayInfo{Code: f.ErrCode.String(), LastStream: f.LastStreamID,
				Debug: string(f.DebugData())}
		}
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// endStream is called with c.mu held.
func (c *rawConn) endStream(s *rawStream) {
	if !s.ended {
		s.ended = true
		s.endedAt = time.Now()
		close(s.done)
	}
}

// write runs @fn holding the write lock; errors are ignored (the reader sees the close).
func (c *rawConn) write(fn func() error) {
	go func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		_ = fn()
	}()
}

// open starts a stream with the usual gRPC request headers; @ctype "" keeps the default,
// extra pairs are appended.
func (c *rawConn) open(method, path, ctype string, endStream bool, extra ...string) (*rawStream, error) {
	if ctype == "" {
		ctype = "application/grpc"
	}
	hf := []hpack.HeaderField{
		{Name: ":method", Value: method}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: path}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: ctype}, {Name: "user-agent", Value: "edgegpu-raw/1"},
		{Name: "te", Value: "trailers"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i] == ":authority" { // replaces the default
			hf[3].Value = extra[i+1]
			continue
		}
		hf = append(hf, hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	s := &rawStream{id: c.nextID, sendWin: c.initWin, done: make(chan struct{}), openedAt: time.Now()}
	c.nextID += 2
	c.streams[s.id] = s
	c.mu.Unlock()
	c.hbuf.Reset()
	for _, f := range hf {
		if err := c.henc.WriteField(f); err != nil {
			return nil, err
		}
	}
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: c.hbuf.Bytes(),
		EndStream: endStream, EndHeaders: true})
	return s, err
}

var errStreamEnded = errors.New("stream ended by the server")

// send writes @data on @s within the peer's flow-control windows, END_STREAM on the last frame
// when @end. It stops early (errStreamEnded) once the server has ended or reset the stream.
func (c *rawConn) send(s *rawStream, data []byte, end bool) error {
	// Wake the wait below now and then, so a server that stops granting window is noticed.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-tick.C:
				c.mu.Lock()
				c.cond.Broadcast()
				c.mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	for {
		c.mu.Lock()
		limit := time.Now().Add(scale(10 * time.Second))
		for !s.ended && !c.closed && (c.connWin <= 0 || s.sendWin <= 0) && len(data) > 0 {
			if time.Now().After(limit) {
				c.mu.Unlock()
				return fmt.Errorf("no flow-control window from the server for 10 s "+
					"(connection %d, stream %d, %d bytes left)", c.connWin, s.sendWin, len(data))
			}
			c.cond.Wait()
		}
		if s.ended {
			c.mu.Unlock()
			return errStreamEnded
		}
		if c.closed {
			c.mu.Unlock()
			return fmt.Errorf("connection closed: %v", c.readErr)
		}
		n := int64(len(data))
		n = min64(n, c.connWin, s.sendWin, int64(c.maxFrame))
		c.connWin -= n
		s.sendWin -= n
		c.mu.Unlock()
		last := int(n) == len(data)
		c.wmu.Lock()
		err := c.fr.WriteData(s.id, end && last, data[:n])
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}

func min64(v int64, more ...int64) int64 {
	for _, m := range more {
		if m < v {
			v = m
		}
	}
	return v
}

func grpcFrame(flag byte, msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	b[0] = flag
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

func (c *rawConn) wait(s *rawStream, d time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(d):
		return false
	}
}

// result is what a stream ended with, as run.py reads it.
type result struct {
	Ended        bool   `json:"ended"`
	Status       string `json:"status"`
	GrpcStatus   string `json:"grpc_status"`
	GrpcMessage  string `json:"grpc_message"`
	TrailersOnly bool   `json:"trailers_only"`
	Rst          string `json:"rst,omitempty"`
	Messages     int    `json:"messages"`
	Ms           int64  `json:"ms"`
	Err          string `json:"err,omitempty"`
	msgs         [][]byte
}

func field(hf []hpack.HeaderField, name string) (string, bool) {
	for _, f := range hf {
		if f.Name == name {
			return f.Value, true
		}
	}
	return "", false
}

func (c *rawConn) result(s *rawStream) result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := result{Ended: s.ended}
	r.Status, _ = field(s.headers, ":status")
	if v, ok := field(s.trailers, "grpc-status"); ok {
		r.GrpcStatus = v
		r.GrpcMessage, _ = field(s.trailers, "grpc-message")
	} else if v, ok := field(s.headers, "grpc-status"); ok {
		r.GrpcStatus = v
		r.GrpcMessage, _ = field(s.headers, "grpc-message")
		r.TrailersOnly = true
	}
	if s.rst != nil {
		r.Rst = s.rst.String()
	}
	if s.ended {
		r.Ms = s.endedAt.Sub(s.openedAt).Milliseconds()
	}
	b := s.data.Bytes()
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:]))
		if len(b) < 5+n {
			r.Err = "truncated gRPC message in the response"
			break
		}
		r.msgs = append(r.msgs, b[5:5+n])
		b = b[5+n:]
	}
	if len(b) > 0 && len(b) < 5 {
		r.Err = "trailing bytes in the response"
	}
	r.Messages = len(r.msgs)
	return r
}

// unary makes a good Unary call on @c and returns "" or why it failed.
func (c *rawConn) unary(size int) string {
	req, _ := proto.Marshal(&pb.UnaryRequest{Payload: pattern(size), ResponseSize: uint32(size)})
	s, err := c.open("POST", pathUnary, "", false)
	if err != nil {
		return "open: " + err.Error()
	}
	if err := c.send(s, grpcFrame(0, req), true); err != nil {
		return "send: " + err.Error()
	}
	if !c.wait(s, scale(5*time.Second)) {
		return "no response within 5 s"
	}
	r := c.result(s)
	if r.Status != "200" || r.GrpcStatus != "0" || r.Messages != 1 {
		j, _ := json.Marshal(r)
		return "bad response: " + string(j)
	}
	var resp pb.UnaryResponse
	if err := proto.Unmarshal(r.msgs[0], &resp); err != nil {
		return "decode: " + err.Error()
	}
	if len(resp.Payload) != size || !isPattern(resp.Payload) || int(resp.Received) != size ||
		!resp.ReceivedOk {
		return "wrong payload in the response"
	}
	return ""
}

func printJSON(v interface{}) {
	j, _ := json.Marshal(v)
	fmt.Println(string(j))
}

type streamFaultReport struct {
	Check         string `json:"check"`
	Fault         result `json:"fault"`
	SiblingBefore string `json:"sibling_before"` // a stream opened before the fault: "" = ok
	SiblingAfter  string `json:"sibling_after"`  // a unary call after the fault: "" = ok
	Error         string `json:"error,omitempty"`
}

type connFaultReport struct {
	Check       string      `json:"check"`
	Goaway      *goawayInfo `json:"goaway"`
	Closed      bool        `json:"closed"`
	ReadErr     string      `json:"read_err,omitempty"`
	OtherBefore string      `json:"other_before"`
	OtherAfter  string      `json:"other_after"`
	Error       string      `json:"error,omitempty"`
}

func runRaw(sock, check string, args []string) int {
	switch check {
	case "content-type", "unknown-path", "compressed", "oversized", "method", "server-deadline",
		"authority-path":
		return rawStreamFault(sock, check, args)
	case "truncated-frame", "oversized-frame", "bad-preface":
		return rawConnFault(sock, check)
	}
	fmt.Printf("unknown raw check %q\n", check)
	return 2
}

func rawStreamFault(sock, check string, args []string) int {
	rep := streamFaultReport{Check: check}
	defer printJSON(&rep)
	c, err := rawDial(sock)
	if err != nil {
		rep.Error = "dial: " + err.Error()
		return 1
	}
	defer c.close()
	if err := c.handshake(); err != nil {
		rep.Error = err.Error()
		return 1
	}
	// The sibling: a server stream of 3 messages 150 ms apart, opened before the fault.
	sreq, _ := proto.Marshal(&pb.StreamRequest{Count: 3, IntervalMs: 150, Size: 32})
	sib, err := c.open("POST", pathStream, "", false)
	if err == nil {
		err = c.send(sib, grpcFrame(0, sreq), true)
	}
	if err != nil {
		rep.Error = "sibling: " + err.Error()
		return 1
	}

	good, _ := proto.Marshal(&pb.UnaryRequest{Payload: pattern(10), ResponseSize: 10})
	var s *rawStream
	var body []byte
	switch check {
	case "content-type":
		s, err = c.open("POST", pathUnary, "text/plain", false)
		body = grpcFrame(0, good)
	case "unknown-path":
		s, err = c.open("POST", "/edgegpu.interop.Test/NoSuchMethod", "", false)
		body = grpcFrame(0, good)
	case "compressed":
		s, err = c.open("POST", pathUnary, "", false)
		body = grpcFrame(1, good)
	case "method":
		s, err = c.open("GET", pathUnary, "", false)
		body = grpcFrame(0, good)
	case "authority-path":
		// Not a fault: kubelets before 1.26 send the socket path as :authority
		// (interop-notes.md trap 1), which nghttp2's HTTP messaging would reject.
		s, err = c.open("POST", pathUnary, "", false, ":authority", sock)
		body = grpcFrame(0, good)
	case "server-deadline":
		// The server must end the call by itself once grpc-timeout has passed.
		slow, _ := proto.Marshal(&pb.UnaryRequest{SleepMs: 5000})
		s, err = c.open("POST", pathUnary, "", false, "grpc-timeout", "200m")
		body = grpcFrame(0, slow)
	case "oversized":
		// A message one byte over the server's limit (args[0], default 16 MiB); its bytes are
		// really sent, within flow control, until the server ends the stream.
		limit := 16 << 20
		if len(args) > 0 {
			limit, _ = strconv.Atoi(args[0])
		}
		s, err = c.open("POST", pathUnary, "", false)
		body = make([]byte, 5+limit+1)
		binary.BigEndian.PutUint32(body[1:], uint32(limit+1))
	}
	if err == nil {
		err = c.send(s, body, true)
		if err == errStreamEnded {
			err = nil
		}
	}
	if err != nil {
		rep.Error = "fault stream: " + err.Error()
		return 1
	}
	if !c.wait(s, scale(10*time.Second)) {
		rep.Error = "no answer to the fault stream within 10 s"
		rep.Fault = c.result(s)
		return 1
	}
	rep.Fault = c.result(s)
	rep.SiblingAfter = c.unary(100)
	if !c.wait(sib, scale(5*time.Second)) {
		rep.SiblingBefore = "sibling stream did not end"
	} else if r := c.result(sib); r.Status != "200" || r.GrpcStatus != "0" || r.Messages != 3 {
		j, _ := json.Marshal(r)
		rep.SiblingBefore = "sibling stream: " + string(j)
	}
	return 0
}

func rawConnFault(sock, check string) int {
	rep := connFaultReport{Check: check}
	defer printJSON(&rep)
	other, err := rawDial(sock)
	if err == nil {
		err = other.handshake()
	}
	if err != nil {
		rep.Error = "other connection: " + err.Error()
		return 1
	}
	defer other.close()
	rep.OtherBefore = other.unary(100)

	c, err := rawDial(sock)
	if err != nil {
		rep.Error = "dial: " + err.Error()
		return 1
	}
	defer c.close()
	switch check {
	case "bad-preface":
		c.wmu.Lock()
		_, err = c.nc.Write([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
		c.wmu.Unlock()
		go c.readLoop()
	case "truncated-frame":
		// A PING carries exactly 8 bytes; this one has 4 (RFC 9113 6.7: FRAME_SIZE_ERROR).
		if err = c.handshake(); err == nil {
			c.wmu.Lock()
			err = c.fr.WriteRawFrame(http2.FramePing, 0, 0, []byte{1, 2, 3, 4})
			c.wmu.Unlock()
		}
	case "oversized-frame":
		// One DATA frame a byte larger than the server's SETTINGS_MAX_FRAME_SIZE.
		if err = c.handshake(); err == nil {
			var s *rawStream
			if s, err = c.open("POST", pathUnary, "", false); err == nil {
				c.mu.Lock()
				n := int(c.maxFrame) + 1
				c.mu.Unlock()
				c.wmu.Lock()
				_ = c.fr.WriteData(s.id, true, make([]byte, n))
				c.wmu.Unlock()
			}
		}
	}
	if err != nil {
		rep.Error = "sending the fault: " + err.Error()
		return 1
	}
	select {
	case <-c.closedCh:
		rep.Closed = true
	case <-time.After(scale(5 * time.Second)):
	}
	c.mu.Lock()
	rep.Goaway = c.goaway
	if c.readErr != nil {
		rep.ReadErr = c.readErr.Error()
	}
	c.mu.Unlock()
	rep.OtherAfter = other.unary(100)
	return 0
}
