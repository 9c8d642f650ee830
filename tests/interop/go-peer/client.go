package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "edgegpu/go-peer-proto"
)

// errMsg is the status message of the "error" check: non-ASCII, '%', a tab and spaces, so
// both percent-encoding and decoding are exercised.
const errMsg = "bad r\u00e9sum\u00e9: 100% done\t[x]"

const bigSize = 3 << 20

// scale stretches waits when the server runs under valgrind (INTEROP_TIMEOUT_SCALE).
func scale(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("INTEROP_TIMEOUT_SCALE"), 64); err == nil && f > 1 {
		return time.Duration(float64(d) * f)
	}
	return d
}

type checkFn func(ctx context.Context, c pb.TestClient) (string, error)

var checks = map[string]checkFn{
	"unary":      checkUnary,
	"error":      checkError,
	"big":        checkBig,
	"stream":     checkStream,
	"cancel":     checkCancel,
	"concurrent": checkConcurrent,
	"deadline":   checkDeadline,
	"drain":      checkDrain,
}

func runClient(sock, name string) int {
	fn, ok := checks[name]
	if !ok {
		fmt.Printf("unknown check %q\n", name)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), scale(30*time.Second))
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, scale(10*time.Second))
	defer dcancel()
	// Dial as the kubelet does (pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go).
	conn, err := grpc.DialContext(dctx, sock, grpc.WithAuthority("localhost"), grpc.WithInsecure(),
		grpc.WithBlock(), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		fmt.Printf("dial: %v\n", err)
		return 1
	}
	defer conn.Close()
	detail, err := fn(ctx, pb.NewTestClient(conn))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("ok:", detail)
	return 0
}

func newTag(check string) string {
	return fmt.Sprintf("go-%s-%d-%d", check, os.Getpid(), rand.Int63())
}

func verifyUnary(r *pb.UnaryResponse, sent, want int) error {
	if len(r.Payload) != want || !isPattern(r.Payload) {
		return fmt.Errorf("response payload: %d bytes (pattern ok %v), want %d", len(r.Payload),
			isPattern(r.Payload), want)
	}
	if int(r.Received) != sent || !r.ReceivedOk {
		return fmt.Errorf("server received %d bytes (pattern ok %v), sent %d", r.Received,
			r.ReceivedOk, sent)
	}
	return nil
}

func checkUnary(ctx context.Context, c pb.TestClient) (string, error) {
	t0 := time.Now()
	r, err := c.Unary(ctx, &pb.UnaryRequest{Payload: pattern(1000), ResponseSize: 1000})
	if err != nil {
		return "", fmt.Errorf("unary: %v", err)
	}
	if err := verifyUnary(r, 1000, 1000); err != nil {
		return "", err
	}
	return fmt.Sprintf("1000 bytes each way in %v", time.Since(t0)), nil
}

func checkError(ctx context.Context, c pb.TestClient) (string, error) {
	_, err := c.Unary(ctx, &pb.UnaryRequest{StatusCode: int32(codes.InvalidArgument),
		StatusMessage: errMsg})
	st, _ := status.FromError(err)
	if st.Code() != codes.InvalidArgument || st.Message() != errMsg {
		return "", fmt.Errorf("got code=%v message=%q, want InvalidArgument %q", st.Code(),
			st.Message(), errMsg)
	}
	return fmt.Sprintf("code=%v message=%q", st.Code(), st.Message()), nil
}

func checkBig(ctx context.Context, c pb.TestClient) (string, error) {
	t0 := time.Now()
	r, err := c.Unary(ctx, &pb.UnaryRequest{Payload: pattern(bigSize), ResponseSize: bigSize})
	if err != nil {
		return "", fmt.Errorf("unary: %v", err)
	}
	if err := verifyUnary(r, bigSize, bigSize); err != nil {
		return "", err
	}
	return fmt.Sprintf("3 MiB each way in %v", time.Since(t0)), nil
}

func checkStream(ctx context.Context, c pb.TestClient) (string, error) {
	t0 := time.Now()
	st, err := c.Stream(ctx, &pb.StreamRequest{Count: 3, IntervalMs: 1000, Size: 64})
	if err != nil {
		return "", fmt.Errorf("stream: %v", err)
	}
	var at []time.Duration
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("recv after %d messages: %v", len(at), err)
		}
		if m.Seq != uint32(len(at)) || len(m.Payload) != 64 || !isPattern(m.Payload) {
			return "", fmt.Errorf("message %d: seq %d, %d bytes", len(at), m.Seq, len(m.Payload))
		}
		at = append(at, time.Since(t0))
	}
	if len(at) != 3 {
		return "", fmt.Errorf("got %d messages, want 3", len(at))
	}
	for i := 1; i < 3; i++ {
		if gap := at[i] - at[i-1]; gap < 900*time.Millisecond {
			return "", fmt.Errorf("messages %d and %d only %v apart", i-1, i, gap)
		}
	}
	return fmt.Sprintf("3 messages at %v, then OK", at), nil
}

// waitTag polls Stats until the call tagged @tag has closed with one of @want.
func waitTag(ctx context.Context, c pb.TestClient, tag string, want ...int32) (int32, error) {
	deadline := time.Now().Add(scale(5 * time.Second))
	last := int32(-1)
	for time.Now().Before(deadline) {
		r, err := c.Stats(ctx, &pb.StatsRequest{Tag: tag})
		if err != nil {
			return 0, fmt.Errorf("stats: %v", err)
		}
		last = r.TagStatus
		for _, w := range want {
			if last == w {
				return last, nil
			}
		}
		if last >= 0 {
			return 0, fmt.Errorf("server closed the call with status %d, want %v", last, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("server never closed the call (tag status %d)", last)
}

func checkCancel(ctx context.Context, c pb.TestClient) (string, error) {
	tag := newTag("cancel")
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Stream(sctx, &pb.StreamRequest{Count: 1000000, IntervalMs: 50, Size: 16,
		HoldOpen: true, Tag: tag})
	if err != nil {
		return "", fmt.Errorf("stream: %v", err)
	}
	for i := 0; i < 2; i++ {
		if _, err := st.Recv(); err != nil {
			return "", fmt.Errorf("recv %d: %v", i, err)
		}
	}
	cancel()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		return "", fmt.Errorf("after cancel: %v", err)
	}
	code, err := waitTag(ctx, c, tag, int32(codes.Canceled))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("server closed the stream with status %d", code), nil
}

func checkConcurrent(ctx context.Context, c pb.TestClient) (string, error) {
	s0, err := c.Stats(ctx, &pb.StatsRequest{})
	if err != nil {
		return "", fmt.Errorf("stats: %v", err)
	}
	if s0.StreamsPeak >= 101 {
		return "", fmt.Errorf("server not fresh: peak already %d", s0.StreamsPeak)
	}
	tag := newTag("concurrent")
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Stream(sctx, &pb.StreamRequest{Count: 1000000, IntervalMs: 100, Size: 16,
		HoldOpen: true, Tag: tag})
	if err != nil {
		return "", fmt.Errorf("stream: %v", err)
	}
	if _, err := st.Recv(); err != nil {
		return "", fmt.Errorf("stream recv: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Unary(ctx, &pb.UnaryRequest{Payload: pattern(10), ResponseSize: 10,
				SleepMs: 500})
			if err == nil {
				err = verifyUnary(r, 10, 10)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	var first error
	for e := range errs {
		if first == nil {
			first = e
		}
		n++
	}
	if n > 0 {
		return "", fmt.Errorf("%d of 100 unary calls failed, first: %v", n, first)
	}
	if _, err := st.Recv(); err != nil {
		return "", fmt.Errorf("stream after the unary calls: %v", err)
	}
	s1, err := c.Stats(ctx, &pb.StatsRequest{})
	if err != nil {
		return "", fmt.Errorf("stats: %v", err)
	}
	if s1.StreamsPeak < 101 {
		return "", fmt.Errorf("server peak of open streams %d, want >= 101", s1.StreamsPeak)
	}
	cancel()
	if _, err := waitTag(ctx, c, tag, int32(codes.Canceled)); err != nil {
		return "", err
	}
	return fmt.Sprintf("100 unary ok beside an open stream; peak %d -> %d", s0.StreamsPeak,
		s1.StreamsPeak), nil
}

func checkDeadline(ctx context.Context, c pb.TestClient) (string, error) {
	tag := newTag("deadline")
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := c.Unary(dctx, &pb.UnaryRequest{SleepMs: 3000, Tag: tag})
	el := time.Since(t0)
	if status.Code(err) != codes.DeadlineExceeded {
		return "", fmt.Errorf("got %v, want DeadlineExceeded", err)
	}
	if el > scale(2*time.Second) {
		return "", fmt.Errorf("DeadlineExceeded only after %v", el)
	}
	code, err := waitTag(ctx, c, tag, int32(codes.Canceled), int32(codes.DeadlineExceeded))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("DeadlineExceeded after %v; server closed the call with %d", el, code), nil
}

// checkDrain holds a stream open and has a slow unary call in flight, prints "ready" and
// waits: run.py then stops the server (SIGTERM -> graceful shutdown). The stream must end
// with OK and the unary call must still complete.
func checkDrain(ctx context.Context, c pb.TestClient) (string, error) {
	st, err := c.Stream(ctx, &pb.StreamRequest{Count: 1, Size: 16, HoldOpen: true})
	if err != nil {
		return "", fmt.Errorf("stream: %v", err)
	}
	if _, err := st.Recv(); err != nil {
		return "", fmt.Errorf("stream recv: %v", err)
	}
	tag := newTag("drain")
	unary := make(chan error, 1)
	go func() {
		r, err := c.Unary(ctx, &pb.UnaryRequest{Payload: pattern(10), ResponseSize: 10,
			SleepMs: 1500, Tag: tag})
		if err == nil {
			err = verifyUnary(r, 10, 10)
		}
		unary <- err
	}()
	for {
		r, err := c.Stats(ctx, &pb.StatsRequest{Tag: tag})
		if err != nil {
			return "", fmt.Errorf("stats: %v", err)
		}
		if r.TagStatus == tagOpen {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("ready")
	t0 := time.Now()
	if _, err := st.Recv(); err != io.EOF {
		return "", fmt.Errorf("held stream ended with %v, want OK", err)
	}
	streamEnd := time.Since(t0)
	if err := <-unary; err != nil {
		return "", fmt.Errorf("unary call in flight during shutdown: %v", err)
	}
	return fmt.Sprintf("held stream ended OK %v after ready; in-flight unary completed",
		streamEnd), nil
}
