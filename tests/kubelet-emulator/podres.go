package main

// v1.PodResourcesLister built from what the emulator allocated (kubelet-contract.md §4).

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	prv1 "edgegpu/podresources/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const podNamespace = "default"

type podresServer struct {
	prv1.UnimplementedPodResourcesListerServer
	k *kubelet
}

// containerDevices is containerDevicesFromResourceDeviceInstances: one entry per
// (device, NUMA node), a device without NUMA information once without topology.
func containerDevices(a *allocation) []*prv1.ContainerDevices {
	var out []*prv1.ContainerDevices
	for _, id := range a.ids {
		nodes := a.numa[id]
		if len(nodes) == 0 {
			out = append(out, &prv1.ContainerDevices{ResourceName: a.resource, DeviceIds: []string{id}})
			continue
		}
		for _, n := range nodes {
			out = append(out, &prv1.ContainerDevices{ResourceName: a.resource, DeviceIds: []string{id},
				Topology: &prv1.TopologyInfo{Nodes: []*prv1.NUMANode{{ID: n}}}})
		}
	}
	return out
}

func (k *kubelet) podResourcesLocked(p *pod) *prv1.PodResources {
	pr := &prv1.PodResources{Name: p.name, Namespace: podNamespace}
	for _, c := range p.containers {
		cr := &prv1.ContainerResources{Name: c.name}
		for _, a := range c.allocs {
			cr.Devices = append(cr.Devices, containerDevices(a)...)
		}
		pr.Containers = append(pr.Containers, cr)
	}
	return pr
}

func (s *podresServer) List(ctx context.Context, _ *prv1.ListPodResourcesRequest) (*prv1.ListPodResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	resp := &prv1.ListPodResourcesResponse{}
	for _, p := range k.pods {
		resp.PodResources = append(resp.PodResources, k.podResourcesLocked(p))
	}
	if !k.podresStable {
		k.shuffleLocked(resp.PodResources)
	}
	resp.PodResources = append(resp.PodResources, k.pad...)
	if !k.podresStable {
		prs := resp.PodResources
		k.rng.Shuffle(len(prs), func(i, j int) { prs[i], prs[j] = prs[j], prs[i] })
	}
	return resp, nil
}

// shuffleLocked reorders the containers of each pod and the devices and IDs of each container,
// as the kubelet's List does: it walks maps (podDevices by pod UID, container, resource; the
// device instances of a resource), whose order Go makes differ from one walk to the next.
// Only pods built for this answer: the padding pods are shared between answers.
func (k *kubelet) shuffleLocked(pods []*prv1.PodResources) {
	for _, p := range pods {
		cs := p.Containers
		k.rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		for _, c := range cs {
			ds := c.Devices
			k.rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			for _, d := range ds {
				ids := d.DeviceIds
				k.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			}
		}
	}
}

func (s *podresServer) Get(ctx context.Context, req *prv1.GetPodResourcesRequest) (*prv1.GetPodResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.findPodLocked(req.PodName)
	if p == nil || req.PodNamespace != podNamespace {
		return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
	}
	pr := k.podResourcesLocked(p)
	if !k.podresStable {
		k.shuffleLocked([]*prv1.PodResources{pr})
	}
	return &prv1.GetPodResourcesResponse{PodResources: pr}, nil
}

// GetAllocatableResources: every healthy device, built from the plugin's own Device objects,
// so a non-nil but empty TopologyInfo matches neither branch and the device is left out.
func (s *podresServer) GetAllocatableResources(ctx context.Context, _ *prv1.AllocatableResourcesRequest) (*prv1.AllocatableResourcesResponse, error) {
	k := s.k
	k.mu.Lock()
	defer k.mu.Unlock()
	resp := &prv1.AllocatableResourcesResponse{}
	for _, name := range sortedResourceNames(k.resources) {
		r := k.resources[name]
		for _, id := range sortedKeys(r.healthy) {
			d := r.all[id]
			if d == nil {
				continue
			}
			if d.Topology == nil {
				resp.Devices = append(resp.Devices, &prv1.ContainerDevices{ResourceName: name,
					DeviceIds: []string{id}})
				continue
			}
			for _, n := range d.Topology.Nodes {
				resp.Devices = append(resp.Devices, &prv1.ContainerDevices{ResourceName: name,
					DeviceIds: []string{id}, Topology: &prv1.TopologyInfo{Nodes: []*prv1.NUMANode{{ID: n.ID}}}})
			}
		}
	}
	return resp, nil
}

func sortedResourceNames(m map[string]*resource) []string {
	set := map[string]bool{}
	for k := range m {
		set[k] = true
	}
	return sortedKeys(set)
}

// padPods adds n fake pods (one container, one device each) so a test can make List big.
func (k *kubelet) padPods(n int) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	base := len(k.pad)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("pad-%08d", base+i)
		k.pad = append(k.pad, &prv1.PodResources{Name: id, Namespace: podNamespace,
			Containers: []*prv1.ContainerResources{{Name: "pad", Devices: []*prv1.ContainerDevices{{
				ResourceName: "example.com/pad", DeviceIds: []string{id}}}}}})
	}
	resp := &prv1.ListPodResourcesResponse{}
	for _, p := range k.pods {
		resp.PodResources = append(resp.PodResources, k.podResourcesLocked(p))
	}
	resp.PodResources = append(resp.PodResources, k.pad...)
	return proto.Size(resp)
}

// rateLimiter is the kubelet's pod-resources limiter: a token bucket, 100 qps, burst 10.
type rateLimiter struct {
	mu     sync.Mutex
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

func newRateLimiter(qps, burst float64) *rateLimiter {
	return &rateLimiter{qps: qps, burst: burst, tokens: burst, last: time.Now()}
}

func (l *rateLimiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.tokens += now.Sub(l.last).Seconds() * l.qps
	if l.tokens > l.burst {
		l.tokens = l.burst
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

func (l *rateLimiter) intercept(ctx context.Context, req interface{}, info *grpc.UnaryServerInfo,
	handler grpc.UnaryHandler) (interface{}, error) {
	if !l.allow() {
		return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
	}
	return handler(ctx, req)
}

// podresClient dials the emulator's own pod-resources socket, as an exporter would.
func podresClient(path string, maxRecv int) (prv1.PodResourcesListerClient, *grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, path, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithAuthority("localhost"),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecv)))
	if err != nil {
		return nil, nil, err
	}
	return prv1.NewPodResourcesListerClient(conn), conn, nil
}

func devicesJSON(devs []*prv1.ContainerDevices) []interface{} {
	out := []interface{}{}
	for _, d := range devs {
		e := map[string]interface{}{"resource_name": d.ResourceName, "device_ids": d.DeviceIds}
		if d.Topology != nil {
			nodes := []int64{}
			for _, n := range d.Topology.Nodes {
				nodes = append(nodes, n.ID)
			}
			e["topology"] = nodes
		}
		out = append(out, e)
	}
	return out
}

// podresList calls List over the socket and reports what came back (pad pods only counted).
func (k *kubelet) podresList(maxRecv int) error {
	c, conn, err := podresClient(k.podresPath, maxRecv)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.List(ctx, &prv1.ListPodResourcesRequest{})
	if err != nil {
		emit("podres_list", "ok", false, "error", err.Error(), "code", status.Code(err).String())
		return err
	}
	pods := []interface{}{}
	pad := 0
	for _, p := range resp.PodResources {
		if len(p.Containers) == 1 && p.Containers[0].Name == "pad" {
			pad++
			continue
		}
		cs := []interface{}{}
		for _, c := range p.Containers {
			cs = append(cs, map[string]interface{}{"name": c.Name, "devices": devicesJSON(c.Devices)})
		}
		pods = append(pods, map[string]interface{}{"name": p.Name, "namespace": p.Namespace,
			"containers": cs})
	}
	emit("podres_list", "ok", true, "size", proto.Size(resp), "pods", pods, "pad", pad)
	return nil
}

func (k *kubelet) podresAllocatable(maxRecv int) error {
	c, conn, err := podresClient(k.podresPath, maxRecv)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.GetAllocatableResources(ctx, &prv1.AllocatableResourcesRequest{})
	if err != nil {
		emit("podres_allocatable", "ok", false, "error", err.Error(), "code", status.Code(err).String())
		return err
	}
	emit("podres_allocatable", "ok", true, "size", proto.Size(resp), "devices", devicesJSON(resp.Devices))
	return nil
}
