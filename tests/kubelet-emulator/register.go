package main

// v1beta1.Registration as the kubelet serves it (kubelet-contract.md §2.2-§2.6): validation,
// dial-back and GetDevicePluginOptions inside Register, then ListAndWatch in a goroutine.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	dp "edgegpu/deviceplugin/v1beta1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The kubelet's error strings (pkg/kubelet/cm/devicemanager/plugin/v1beta1/api.go).
const (
	errFailedToDialDevicePlugin = "failed to dial device plugin:"
	errUnsupportedVersion       = "requested API version %q is not supported by kubelet. Supported version is %q"
	errInvalidResourceName      = "the ResourceName %q is invalid"
)

// errDuplicateEndpoint is our text for the newer kubelet's same-socket duplicate check
// (kubelet-contract.md §2.6: "the duplicate check in PluginConnected prevents two endpoints from
// coexisting at the same socket path"). The kubelet code with this check was not available, so
// the wording is ours; the behaviour (rejected after the dial-back and GetDevicePluginOptions,
// accepted again once the old ListAndWatch stream has ended) follows the PR discussion.
const errDuplicateEndpoint = "device plugin endpoint for resource %q at socket path %q is still connected: " +
	"a registration at the same socket path is rejected until its ListAndWatch stream ends"

var supportedVersions = []string{"v1beta1"}

// pluginapi.Healthy and pluginapi.Unhealthy (constants.go).
const (
	healthyStr   = "Healthy"
	unhealthyStr = "Unhealthy"
)

const dialTimeout = 10 * time.Second

var (
	qualifiedNameRe = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dns1123SubRe    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// isQualifiedName is apimachinery's IsQualifiedName, returning only whether it passed.
func isQualifiedName(value string) bool {
	parts := strings.Split(value, "/")
	var name string
	switch len(parts) {
	case 1:
		name = parts[0]
	case 2:
		prefix := parts[0]
		name = parts[1]
		if len(prefix) == 0 || len(prefix) > 253 || !dns1123SubRe.MatchString(prefix) {
			return false
		}
	default:
		return false
	}
	return len(name) > 0 && len(name) <= 63 && qualifiedNameRe.MatchString(name)
}

// isExtendedResourceName is v1helper.IsExtendedResourceName.
func isExtendedResourceName(name string) bool {
	// IsNativeResource: no "/" or contains "kubernetes.io/".
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") {
		return false
	}
	if strings.HasPrefix(name, "requests.") {
		return false
	}
	return isQualifiedName("requests." + name)
}

type registrationServer struct {
	dp.UnimplementedRegistrationServer
	k *kubelet
}

func (s *registrationServer) Register(ctx context.Context, r *dp.RegisterRequest) (*dp.Empty, error) {
	k := s.k
	t0 := monoUS()
	k.mu.Lock()
	epoch := k.epoch
	k.regSeq++
	id := k.regSeq
	k.mu.Unlock()
	var deadline interface{}
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d).Microseconds()
	}
	emit("register_begin", "reg", id, "resource", r.ResourceName, "endpoint", r.Endpoint,
		"version", r.Version, "deadline_us", deadline)
	err := k.register(ctx, id, epoch, r, t0)
	if err != nil {
		emit("register", "reg", id, "resource", r.ResourceName, "endpoint", r.Endpoint,
			"ok", false, "error", err.Error(), "dur_us", monoUS()-t0)
	}
	// Plain Go errors: grpc-go turns them into code Unknown, as the kubelet's are.
	return &dp.Empty{}, err
}

// register validates, dials back and connects; on success it emits the "register" event
// itself, before wait-registered waiters wake.
func (k *kubelet) register(ctx context.Context, id, epoch int, r *dp.RegisterRequest, t0 int64) error {
	ok := false
	for _, v := range supportedVersions {
		if r.Version == v {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf(errUnsupportedVersion, r.Version, supportedVersions)
	}
	if !isExtendedResourceName(r.ResourceName) {
		return fmt.Errorf(errInvalidResourceName, r.ResourceName)
	}
	// The endpoint is only joined to the directory, never validated (§2.2.4).
	socket := filepath.Join(k.dir, r.Endpoint)
	ep, err := k.dial(ctx, socket)
	if err != nil {
		return err
	}
	ep.id, ep.resource, ep.name, ep.epoch = id, r.ResourceName, r.Endpoint, epoch

	// PluginConnected: GetDevicePluginOptions on the Register call's context ([DM-new]).
	opts, err := ep.client.GetDevicePluginOptions(ctx, &dp.Empty{})
	if err != nil {
		ep.conn.Close()
		return fmt.Errorf("failed to get device plugin options: %v", err)
	}
	ep.opts = opts
	emit("options", "reg", id, "resource", r.ResourceName, "endpoint", r.Endpoint,
		"pre_start_required", opts.PreStartRequired,
		"get_preferred_allocation_available", opts.GetPreferredAllocationAvailable)

	k.mu.Lock()
	if epoch != k.epoch {
		k.mu.Unlock()
		ep.conn.Close()
		return errors.New("kubelet restarted during registration")
	}
	for _, old := range k.endpoints {
		if old.live && old.resource == r.ResourceName && old.socket == socket {
			k.mu.Unlock()
			ep.conn.Close()
			return fmt.Errorf(errDuplicateEndpoint, r.ResourceName, socket)
		}
	}
	res := k.resources[r.ResourceName]
	if res == nil {
		res = &resource{name: r.ResourceName, healthy: map[string]bool{},
			unhealthy: map[string]bool{}, all: map[string]*dp.Device{}}
		k.resources[r.ResourceName] = res
	}
	prev := res.ep
	res.ep = ep
	ep.live = true
	k.endpoints = append(k.endpoints, ep)
	if prev != nil && prev.live {
		emit("superseded", "resource", r.ResourceName, "reg", prev.id, "endpoint", prev.name,
			"by", id)
	}
	emit("register", "reg", id, "resource", r.ResourceName, "endpoint", r.Endpoint,
		"ok", true, "error", "", "dur_us", monoUS()-t0)
	k.notifyLocked()
	k.mu.Unlock()
	go k.runClient(ep)
	return nil
}

// dial is the kubelet's dial (§2.3): 10 s bounded by the Register context, WithBlock,
// authority "localhost", plain text over a unix socket.
func (k *kubelet) dial(ctx context.Context, socket string) (*endpoint, error) {
	raw := &rawConns{}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := grpc.DialContext(dctx, socket,
		grpc.WithAuthority("localhost"),
		grpc.WithInsecure(),
		grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", addr)
			if err == nil {
				raw.add(c)
			}
			return c, err
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(k.maxRecv)),
	)
	if err != nil {
		return nil, fmt.Errorf(errFailedToDialDevicePlugin+" %v", err)
	}
	return &endpoint{socket: socket, conn: conn, client: dp.NewDevicePluginClient(conn), raw: raw}, nil
}

// runClient is the kubelet's client.Run plus disconnectClient: any end of the stream is the
// plugin unregistering.
func (k *kubelet) runClient(ep *endpoint) {
	stream, err := ep.client.ListAndWatch(context.Background(), &dp.Empty{})
	if err == nil {
		for {
			resp, rerr := stream.Recv()
			if rerr != nil {
				err = rerr
				break
			}
			k.receive(ep, resp, monoUS())
		}
	}
	k.disconnect(ep, err)
}

// receive is genericDeviceUpdateCallback: a full replacement of the resource's device sets.
// recvUS is when Recv returned (CLOCK_MONOTONIC), reported as "recv_us".
func (k *kubelet) receive(ep *endpoint, resp *dp.ListAndWatchResponse, recvUS int64) {
	size := proto.Size(resp)
	healthy := map[string]bool{}
	unhealthy := map[string]bool{}
	all := map[string]*dp.Device{}
	dups, emptyTopo, longIDs := 0, 0, 0
	odd := map[string]int{}
	numa := map[string][]int64{}
	for _, d := range resp.Devices {
		if _, seen := all[d.ID]; seen {
			dups++
		}
		if d.Health == healthyStr {
			healthy[d.ID] = true
		} else {
			unhealthy[d.ID] = true
			if d.Health != unhealthyStr {
				odd[d.Health]++
			}
		}
		all[d.ID] = d
		if d.Topology != nil && len(d.Topology.Nodes) == 0 {
			emptyTopo++
		}
		if d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				numa[d.ID] = append(numa[d.ID], n.ID)
			}
		}
		if len(d.ID) > 63 {
			longIDs++
		}
	}

	k.mu.Lock()
	if ep.epoch != k.epoch {
		k.mu.Unlock()
		return
	}
	ep.seq++
	seq := ep.seq
	res := k.resources[ep.resource]
	if res.ep != ep {
		k.mu.Unlock()
		emit("devices_ignored", "resource", ep.resource, "endpoint", ep.name, "reg", ep.id,
			"seq", seq, "size", size, "reason", "endpoint superseded by a newer registration")
		return
	}
	was := len(res.healthy)
	res.healthy, res.unhealthy, res.all = healthy, unhealthy, all
	emitHealthy(res, was, "list", ep.id)

	kv := []interface{}{"resource", ep.resource, "endpoint", ep.name, "reg", ep.id,
		"seq", seq, "recv_us", recvUS, "size", size, "count", len(resp.Devices),
		"healthy_count", len(healthy), "unhealthy_count", len(unhealthy)}
	if len(resp.Devices) <= k.maxIDs {
		kv = append(kv, "healthy", sortedKeys(healthy), "unhealthy", sortedKeys(unhealthy))
		if len(numa) > 0 {
			kv = append(kv, "numa", numa)
		}
	} else {
		kv = append(kv, "ids_omitted", true)
	}
	if dups > 0 {
		kv = append(kv, "duplicates", dups)
	}
	if len(odd) > 0 {
		kv = append(kv, "nonstandard_health", odd)
	}
	if emptyTopo > 0 {
		kv = append(kv, "empty_topology", emptyTopo)
	}
	if longIDs > 0 {
		kv = append(kv, "long_ids", longIDs)
	}
	// The event goes out before waiters wake, so a "done" of wait-devices never precedes it.
	emit("devices", kv...)
	k.notifyLocked()
	k.mu.Unlock()
}

// disconnect is disconnectClient + PluginDisconnected: every healthy device of the resource
// becomes unhealthy (Allocatable 0, Capacity kept) and the endpoint is stopped.
func (k *kubelet) disconnect(ep *endpoint, err error) {
	k.mu.Lock()
	if ep.epoch != k.epoch {
		k.mu.Unlock()
		return
	}
	ep.live = false
	ep.stopped = true
	res := k.resources[ep.resource]
	current := res.ep == ep
	if current {
		was := len(res.healthy)
		for id := range res.healthy {
			res.unhealthy[id] = true
		}
		res.healthy = map[string]bool{}
		emitHealthy(res, was, "stream_end", ep.id)
	}
	code := ""
	if st, ok := status.FromError(err); ok && err != nil {
		code = st.Code().String()
	}
	emit("stream_end", "resource", ep.resource, "endpoint", ep.name, "reg", ep.id,
		"seq", ep.seq, "current", current, "error", errText(err), "code", code)
	k.notifyLocked()
	k.mu.Unlock()
	ep.conn.Close()
}

// liveEndpoint returns the current endpoint of resource r if its stream is live.
func (k *kubelet) currentEndpoint(r string) (*endpoint, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	res := k.resources[r]
	if res == nil || res.ep == nil {
		return nil, fmt.Errorf("unknown Device Plugin %s", r)
	}
	if res.ep.stopped {
		return nil, fmt.Errorf("endpoint %v has been stopped", res.ep.name)
	}
	return res.ep, nil
}

func sortedIDs(ids []string) []string {
	s := append([]string(nil), ids...)
	sort.Strings(s)
	return s
}

// emitHealthy writes a "healthy" event when the resource's healthy count changed from was:
// the node's Allocatable over time, whatever changed it (cause: "list", "stream_end",
// "restart"; reg: the registration it came from, 0 for a restart). Called with k.mu held.
func emitHealthy(res *resource, was int, cause string, reg int) {
	if len(res.healthy) == was {
		return
	}
	emit("healthy", "resource", res.name, "healthy", len(res.healthy), "was", was,
		"cause", cause, "reg", reg)
}
