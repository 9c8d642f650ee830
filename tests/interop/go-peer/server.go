package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "edgegpu/go-peer-proto"
)

const tagOpen = -2

type testServer struct {
	pb.UnimplementedTestServer
	mu    sync.Mutex
	open  uint32
	peak  uint32
	calls uint64
	conns uint32
	tags  map[string]int32
}

func (s *testServer) begin(tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open++
	s.calls++
	if s.open > s.peak {
		s.peak = s.open
	}
	if tag != "" {
		s.tags[tag] = tagOpen
	}
}

func (s *testServer) end(tag string, code codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if tag != "" {
		s.tags[tag] = int32(code)
	}
}

func ctxCode(ctx context.Context) codes.Code {
	if ctx.Err() == context.DeadlineExceeded {
		return codes.DeadlineExceeded
	}
	return codes.Canceled
}

func (s *testServer) Unary(ctx context.Context, req *pb.UnaryRequest) (*pb.UnaryResponse, error) {
	code := codes.OK
	s.begin(req.Tag)
	defer func() { s.end(req.Tag, code) }()
	if req.SleepMs > 0 {
		select {
		case <-time.After(time.Duration(req.SleepMs) * time.Millisecond):
		case <-ctx.Done():
			code = ctxCode(ctx)
			return nil, status.Error(code, ctx.Err().Error())
		}
	}
	if req.StatusCode != 0 {
		code = codes.Code(req.StatusCode)
		return nil, status.Error(code, req.StatusMessage)
	}
	return &pb.UnaryResponse{
		Payload:    pattern(int(req.ResponseSize)),
		Received:   uint32(len(req.Payload)),
		ReceivedOk: isPattern(req.Payload),
	}, nil
}

func (s *testServer) Stream(req *pb.StreamRequest, st pb.Test_StreamServer) error {
	code := codes.OK
	s.begin(req.Tag)
	defer func() { s.end(req.Tag, code) }()
	ctx := st.Context()
	for i := uint32(0); i < req.Count; i++ {
		if i > 0 {
			select {
			case <-time.After(time.Duration(req.IntervalMs) * time.Millisecond):
			case <-ctx.Done():
				code = ctxCode(ctx)
				return status.Error(code, ctx.Err().Error())
			}
		}
		if err := st.Send(&pb.StreamResponse{Seq: i, Payload: pattern(int(req.Size))}); err != nil {
			code = ctxCode(ctx)
			return err
		}
	}
	if req.HoldOpen {
		<-ctx.Done()
		code = ctxCode(ctx)
		return status.Error(code, ctx.Err().Error())
	}
	return nil
}

func (s *testServer) Stats(ctx context.Context, req *pb.StatsRequest) (*pb.StatsResponse, error) {
	s.begin("")
	defer s.end("", codes.OK)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &pb.StatsResponse{Streams: s.open, StreamsPeak: s.peak, Conns: s.conns, Calls: s.calls,
		TagStatus: -1}
	if req.Tag != "" {
		if v, ok := s.tags[req.Tag]; ok {
			r.TagStatus = v
		}
	}
	return r, nil
}

// countingListener keeps the number of open connections for Stats.
type countingListener struct {
	net.Listener
	s *testServer
}

type countedConn struct {
	net.Conn
	s    *testServer
	once sync.Once
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.mu.Lock()
	l.s.conns++
	l.s.mu.Unlock()
	return &countedConn{Conn: c, s: l.s}, nil
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		c.s.conns--
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

func runServer(sock string) int {
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	ts := &testServer{tags: map[string]int32{}}
	srv := grpc.NewServer()
	pb.RegisterTestServer(srv, ts)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Stop()
	}()
	fmt.Printf("grpc-go server listening on %s\n", sock)
	if err := srv.Serve(&countingListener{Listener: lis, s: ts}); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}
