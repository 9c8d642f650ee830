// testplugin: a tiny device plugin with configurable behaviour, for the kubelet emulator's
// conformance tests. It prints one JSON event per line (every RPC it receives, its Register
// results) and takes commands on stdin, each answered by {"event":"done",...}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dp "edgegpu/deviceplugin/v1beta1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var outMu sync.Mutex

func emit(event string, kv ...interface{}) {
	m := map[string]interface{}{"event": event, "t_ms": time.Now().UnixNano() / 1000000}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	outMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	outMu.Unlock()
}

type plugin struct {
	dp.UnimplementedDevicePluginServer
	opts     *dp.DevicePluginOptions
	prefer   []string
	allocErr string
	allocNil bool

	mu      sync.Mutex
	devices []*dp.Device
	streams map[int]chan *dp.ListAndWatchResponse
	ends    map[int]chan struct{}
	nstream int
}

// parseDevices parses "id[=health][@numa[+numa]|@empty],...".
func parseDevices(spec string) ([]*dp.Device, error) {
	var devs []*dp.Device
	if spec == "" || spec == "-" {
		return devs, nil
	}
	for _, item := range strings.Split(spec, ",") {
		d := &dp.Device{Health: "Healthy"}
		rest := item
		if i := strings.Index(rest, "@"); i >= 0 {
			topo := rest[i+1:]
			rest = rest[:i]
			d.Topology = &dp.TopologyInfo{}
			if topo != "empty" {
				for _, n := range strings.Split(topo, "+") {
					id, err := strconv.ParseInt(n, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("bad NUMA node %q", n)
					}
					d.Topology.Nodes = append(d.Topology.Nodes, &dp.NUMANode{ID: id})
				}
			}
		}
		id, health, ok := strings.Cut(rest, "=")
		if ok {
			d.Health = health
		}
		d.ID = id
		devs = append(devs, d)
	}
	return devs, nil
}

func deadlineUS(ctx context.Context) interface{} {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d).Microseconds()
	}
	return nil
}

func authority(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(":authority"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (p *plugin) GetDevicePluginOptions(ctx context.Context, _ *dp.Empty) (*dp.DevicePluginOptions, error) {
	emit("call", "method", "GetDevicePluginOptions", "deadline_us", deadlineUS(ctx),
		"authority", authority(ctx))
	return &dp.DevicePluginOptions{PreStartRequired: p.opts.PreStartRequired,
		GetPreferredAllocationAvailable: p.opts.GetPreferredAllocationAvailable}, nil
}

func (p *plugin) ListAndWatch(_ *dp.Empty, s dp.DevicePlugin_ListAndWatchServer) error {
	ch := make(chan *dp.ListAndWatchResponse, 16)
	end := make(chan struct{})
	p.mu.Lock()
	p.nstream++
	id := p.nstream
	p.streams[id] = ch
	p.ends[id] = end
	first := &dp.ListAndWatchResponse{Devices: p.devices}
	p.mu.Unlock()
	emit("call", "method", "ListAndWatch", "stream", id, "deadline_us", deadlineUS(s.Context()),
		"authority", authority(s.Context()))
	defer func() {
		p.mu.Lock()
		delete(p.streams, id)
		delete(p.ends, id)
		p.mu.Unlock()
	}()
	if err := s.Send(first); err != nil {
		emit("stream_closed", "stream", id, "error", err.Error())
		return err
	}
	for {
		select {
		case m := <-ch:
			if err := s.Send(m); err != nil {
				emit("stream_closed", "stream", id, "error", err.Error())
				return err
			}
		case <-end:
			emit("stream_ended", "stream", id)
			return nil
		case <-s.Context().Done():
			emit("stream_closed", "stream", id, "error", s.Context().Err().Error())
			return nil
		}
	}
}

func (p *plugin) GetPreferredAllocation(ctx context.Context, r *dp.PreferredAllocationRequest) (*dp.PreferredAllocationResponse, error) {
	resp := &dp.PreferredAllocationResponse{}
	reqs := []interface{}{}
	for _, c := range r.ContainerRequests {
		avail := append([]string(nil), c.AvailableDeviceIDs...)
		sort.Strings(avail)
		reqs = append(reqs, map[string]interface{}{"available": avail,
			"must_include": c.MustIncludeDeviceIDs, "size": c.AllocationSize})
		var ids []string
		if p.prefer != nil {
			ids = p.prefer
		} else {
			ids = append(ids, c.MustIncludeDeviceIDs...)
			for _, id := range avail {
				if len(ids) >= int(c.AllocationSize) {
					break
				}
				ids = append(ids, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses,
			&dp.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	emit("call", "method", "GetPreferredAllocation", "requests", reqs,
		"deadline_us", deadlineUS(ctx))
	return resp, nil
}

func (p *plugin) Allocate(ctx context.Context, r *dp.AllocateRequest) (*dp.AllocateResponse, error) {
	reqs := [][]string{}
	resp := &dp.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		reqs = append(reqs, c.DevicesIds)
		ids := append([]string(nil), c.DevicesIds...)
		sort.Strings(ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &dp.ContainerAllocateResponse{
			Envs:        map[string]string{"TEST_DEVICES": strings.Join(ids, ",")},
			Mounts:      []*dp.Mount{{ContainerPath: "/test", HostPath: "/tmp", ReadOnly: true}},
			Devices:     []*dp.DeviceSpec{{ContainerPath: "/dev/null", HostPath: "/dev/null", Permissions: "rw"}},
			Annotations: map[string]string{"test/annotation": "1"},
			CdiDevices:  []*dp.CDIDevice{{Name: "example.com/dev=" + strings.Join(ids, "_")}},
		})
	}
	emit("call", "method", "Allocate", "requests", reqs, "deadline_us", deadlineUS(ctx))
	if p.allocErr != "" {
		return nil, status.Error(3, p.allocErr)
	}
	if p.allocNil {
		return &dp.AllocateResponse{}, nil
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(ctx context.Context, r *dp.PreStartContainerRequest) (*dp.PreStartContainerResponse, error) {
	emit("call", "method", "PreStartContainer", "ids", r.DevicesIds, "deadline_us", deadlineUS(ctx))
	return &dp.PreStartContainerResponse{}, nil
}

// push sends the current list (or m) to every open stream.
func (p *plugin) push(m *dp.ListAndWatchResponse) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == nil {
		m = &dp.ListAndWatchResponse{Devices: p.devices}
	}
	for _, ch := range p.streams {
		ch <- m
	}
	return len(p.streams)
}

// bigList builds a ListAndWatchResponse whose encoding is exactly size bytes.
func bigList(size int) (*dp.ListAndWatchResponse, error) {
	if size < 64 {
		return nil, fmt.Errorf("size %d too small", size)
	}
	const idLen = 1000
	m := &dp.ListAndWatchResponse{}
	for proto.Size(m) < size-2*idLen {
		m.Devices = append(m.Devices, &dp.Device{
			ID: fmt.Sprintf("big-%06d-%s", len(m.Devices), strings.Repeat("x", idLen-11)), Health: "Healthy"})
	}
	// Grow the last ID one byte at a time; a varint boundary can skip the exact size, so
	// retry with one padding device fewer.
	for try := 0; try < 3; try++ {
		last := &dp.Device{Health: "Healthy"}
		m.Devices = append(m.Devices, last)
		for n := 1; n < 4*idLen; n++ {
			last.ID = "big-last-" + strings.Repeat("y", n)
			if s := proto.Size(m); s == size {
				return m, nil
			} else if s > size {
				break
			}
		}
		if len(m.Devices) < 2 {
			break
		}
		m.Devices = m.Devices[:len(m.Devices)-2]
	}
	return nil, fmt.Errorf("cannot build a list of exactly %d bytes", size)
}

type server struct {
	mu     sync.Mutex
	p      *plugin
	path   string
	mode   string
	srv    *grpc.Server
	lis    net.Listener
	silent []net.Conn
}

func (s *server) start() error {
	if s.mode == "none" {
		return nil
	}
	os.Remove(s.path)
	lis, err := net.Listen("unix", s.path)
	if err != nil {
		return err
	}
	s.lis = lis
	if s.mode == "silent" {
		// Accept and hold connections, never speak HTTP/2.
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				s.silent = append(s.silent, c)
			}
		}()
		return nil
	}
	s.srv = grpc.NewServer()
	dp.RegisterDevicePluginServer(s.srv, s.p)
	go s.srv.Serve(lis)
	return nil
}

func (s *server) stop() {
	if s.srv != nil {
		s.srv.Stop()
		s.srv = nil
	} else if s.lis != nil {
		s.lis.Close()
	}
	s.lis = nil
}

type regArgs struct {
	kubelet, version, endpoint, resource string
	timeout                              time.Duration
}

func register(a regArgs) error {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, a.kubelet, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err == nil {
		defer conn.Close()
		rctx := context.Background()
		if a.timeout > 0 {
			var c context.CancelFunc
			rctx, c = context.WithTimeout(rctx, a.timeout)
			defer c()
		}
		_, err = dp.NewRegistrationClient(conn).Register(rctx, &dp.RegisterRequest{
			Version: a.version, Endpoint: a.endpoint, ResourceName: a.resource})
	}
	st, _ := status.FromError(err)
	msg, code := "", ""
	if err != nil {
		msg, code = st.Message(), st.Code().String()
	}
	emit("register", "resource", a.resource, "version", a.version, "endpoint", a.endpoint,
		"ok", err == nil, "error", msg, "code", code, "dur_ms", time.Since(t0).Milliseconds())
	return err
}

func main() {
	dir := flag.String("dir", "", "device-plugin directory")
	sock := flag.String("socket", "testplugin.sock", "socket file name to serve")
	res := flag.String("resource", "example.com/dev", "resource name")
	version := flag.String("version", "v1beta1", "API version to register with")
	endpoint := flag.String("endpoint", "", "endpoint to send (default: --socket)")
	mode := flag.String("serve", "grpc", "grpc | silent (accept, never answer) | none (no socket)")
	preferred := flag.Bool("preferred", false, "advertise GetPreferredAllocation")
	prestart := flag.Bool("prestart", false, "advertise PreStartContainer")
	devices := flag.String("devices", "dev0,dev1", "id[=health][@numa[+numa]|@empty],...")
	prefer := flag.String("prefer", "", "IDs GetPreferredAllocation answers (default: the first free ones)")
	allocErr := flag.String("allocate-error", "", "Allocate fails with INVALID_ARGUMENT and this text")
	allocNil := flag.Bool("allocate-empty", false, "Allocate answers with no container responses")
	noReg := flag.Bool("no-register", false, "do not register at start")
	regTimeout := flag.Duration("register-timeout", 0, "deadline on Register (0: none)")
	serveDelay := flag.Duration("serve-delay", 0, "start serving the socket only after this long")
	flag.Parse()
	if *endpoint == "" {
		*endpoint = *sock
	}
	devs, err := parseDevices(*devices)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	p := &plugin{devices: devs, streams: map[int]chan *dp.ListAndWatchResponse{},
		ends: map[int]chan struct{}{}, allocErr: *allocErr, allocNil: *allocNil}
	p.opts = &dp.DevicePluginOptions{GetPreferredAllocationAvailable: *preferred,
		PreStartRequired: *prestart}
	if *prefer != "" {
		p.prefer = strings.Split(*prefer, ",")
	}
	s := &server{p: p, path: filepath.Join(*dir, *sock), mode: *mode}
	if *serveDelay > 0 {
		go func() {
			time.Sleep(*serveDelay)
			s.mu.Lock()
			defer s.mu.Unlock()
			if err := s.start(); err != nil {
				emit("error", "error", err.Error())
				os.Exit(1)
			}
			emit("serving_late", "socket", s.path)
		}()
	} else if err := s.start(); err != nil {
		emit("error", "error", err.Error())
		os.Exit(1)
	}
	emit("serving", "socket", s.path, "mode", *mode)
	def := regArgs{kubelet: filepath.Join(*dir, "kubelet.sock"), version: *version,
		endpoint: *endpoint, resource: *res, timeout: *regTimeout}
	// The first registration runs beside the command loop, so a test can act while the
	// kubelet dials back.
	if !*noReg {
		go register(def)
	}

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		args := strings.Fields(sc.Text())
		if len(args) == 0 {
			continue
		}
		var err error
		extra := []interface{}{}
		switch args[0] {
		case "register": // register [RESOURCE [VERSION [ENDPOINT]]]
			a := def
			if len(args) > 1 {
				a.resource = args[1]
			}
			if len(args) > 2 {
				a.version = args[2]
			}
			if len(args) > 3 {
				a.endpoint = args[3]
			}
			err = register(a)
		case "devices":
			spec := ""
			if len(args) > 1 {
				spec = args[1]
			}
			var d []*dp.Device
			if d, err = parseDevices(spec); err == nil {
				p.mu.Lock()
				p.devices = d
				p.mu.Unlock()
				extra = append(extra, "streams", p.push(nil))
			}
		case "big":
			var n int
			var m *dp.ListAndWatchResponse
			if n, err = strconv.Atoi(args[1]); err == nil {
				if m, err = bigList(n); err == nil {
					extra = append(extra, "streams", p.push(m), "size", proto.Size(m))
				}
			}
		case "end":
			p.mu.Lock()
			for id, ch := range p.ends {
				close(ch)
				delete(p.ends, id)
			}
			p.mu.Unlock()
		case "ping": // a round trip: every event written before it has been read
		case "stop":
			s.mu.Lock()
			s.stop()
			s.mu.Unlock()
		case "serve":
			s.mu.Lock()
			err = s.start()
			s.mu.Unlock()
		case "quit":
			s.mu.Lock()
			s.stop()
			emit("done", "cmd", sc.Text(), "ok", true)
			return
		default:
			err = fmt.Errorf("unknown command %q", args[0])
		}
		kv := append([]interface{}{"cmd", sc.Text(), "ok", err == nil}, extra...)
		if err != nil {
			kv = append(kv, "error", err.Error())
		}
		emit("done", kv...)
	}
	s.stop()
}
