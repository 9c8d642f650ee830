package main

// The emulated kubelet: its device-manager state, the registration server on kubelet.sock,
// the pod-resources server, start-up cleanup and restart.

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	dp "edgegpu/deviceplugin/v1beta1"
	prv1 "edgegpu/podresources/v1"

	"google.golang.org/grpc"
)

const checkpointName = "kubelet_internal_checkpoint"

// endpoint is one successful registration: a ClientConn to the plugin socket and its
// ListAndWatch stream.
type endpoint struct {
	id       int
	resource string
	name     string // endpoint as the plugin sent it
	socket   string // filepath.Join(dir, name)
	conn     *grpc.ClientConn
	client   dp.DevicePluginClient
	opts     *dp.DevicePluginOptions
	epoch    int // kubelet incarnation; a restart makes every older endpoint dead
	raw      *rawConns

	// Guarded by kubelet.mu.
	live    bool // ListAndWatch stream not ended
	stopped bool // PluginDisconnected ran (or superseded endpoint ended)
	seq     int  // ListAndWatch messages received
}

// rawConns keeps the net.Conns the context dialer made, so a restart can drop them the way a
// dying kubelet process does (no GOAWAY, just EOF).
type rawConns struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (r *rawConns) add(c net.Conn) {
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
}

func (r *rawConns) closeAll() {
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
}

// resource is the device manager's view of one extended resource.
type resource struct {
	name      string
	healthy   map[string]bool
	unhealthy map[string]bool
	all       map[string]*dp.Device
	ep        *endpoint // newest endpoint; nil after a restart until the plugin re-registers
}

type allocation struct {
	resource string
	ids      []string
	numa     map[string][]int64 // device -> NUMA nodes at allocation time; empty: no topology
	resp     *dp.ContainerAllocateResponse
}

type container struct {
	name   string
	allocs []*allocation
}

type pod struct {
	name       string
	containers []*container
}

type kubelet struct {
	dir        string
	podresPath string
	maxRecv    int
	maxIDs     int
	// podresStable keeps List in admission order; by default it is shuffled on every
	// call, as the kubelet's (built from Go maps) is.
	podresStable bool
	rng          *rand.Rand // List's shuffle; used with mu held

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every state change (for wait-*)
	epoch     int
	regSeq    int
	resources map[string]*resource
	pods      []*pod
	pad       []*prv1.PodResources
	endpoints []*endpoint // every endpoint of this epoch, live or not

	regServer    *grpc.Server
	podresServer *grpc.Server
}

func newKubelet(dir, podres string, maxRecv, maxIDs int) *kubelet {
	return &kubelet{
		dir:        dir,
		podresPath: podres,
		maxRecv:    maxRecv,
		maxIDs:     maxIDs,
		changed:    make(chan struct{}),
		resources:  map[string]*resource{},
		rng:        rand.New(rand.NewSource(time.Now().UnixNano())),
	}
}

// notifyLocked wakes every waiter. Called with k.mu held.
func (k *kubelet) notifyLocked() {
	close(k.changed)
	k.changed = make(chan struct{})
}

func (k *kubelet) kubeletSocket() string { return filepath.Join(k.dir, "kubelet.sock") }

// cleanupPluginDirectory deletes every unix socket in dir, as the kubelet's
// CleanupPluginDirectory does: directories, regular files and the checkpoint survive.
func (k *kubelet) cleanupPluginDirectory() []string {
	removed := []string{}
	names, err := readDirNames(k.dir)
	if err != nil {
		emit("error", "where", "cleanup", "error", err.Error())
		return removed
	}
	for _, name := range names {
		if name == checkpointName {
			continue
		}
		p := filepath.Join(k.dir, name)
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st.IsDir() || st.Mode()&os.ModeSocket == 0 {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			emit("error", "where", "cleanup", "path", p, "error", err.Error())
			continue
		}
		removed = append(removed, name)
	}
	return removed
}

func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// start does what the kubelet's device manager and pod-resources server do at start-up.
func (k *kubelet) start() error {
	if err := os.MkdirAll(k.dir, 0750); err != nil {
		return err
	}
	removed := k.cleanupPluginDirectory()
	emit("cleanup", "dir", k.dir, "removed", removed)
	k.writeCheckpoint()

	lis, err := net.Listen("unix", k.kubeletSocket())
	if err != nil {
		return fmt.Errorf("listen %s: %v", k.kubeletSocket(), err)
	}
	listenUS := monoUS()
	// Like the kubelet: grpc.NewServer() with no options (4 MiB receive limit).
	srv := grpc.NewServer()
	dp.RegisterRegistrationServer(srv, &registrationServer{k: k})
	go srv.Serve(lis)

	if err := os.MkdirAll(filepath.Dir(k.podresPath), 0750); err != nil {
		srv.Stop()
		return err
	}
	os.Remove(k.podresPath)
	plis, err := net.Listen("unix", k.podresPath)
	if err != nil {
		srv.Stop()
		return fmt.Errorf("listen %s: %v", k.podresPath, err)
	}
	psrv := grpc.NewServer(grpc.UnaryInterceptor(newRateLimiter(100, 10).intercept))
	prv1.RegisterPodResourcesListerServer(psrv, &podresServer{k: k})
	go psrv.Serve(plis)

	k.mu.Lock()
	k.regServer = srv
	k.podresServer = psrv
	k.mu.Unlock()
	emit("serving", "socket", k.kubeletSocket(), "socket_us", listenUS,
		"pod_resources", k.podresPath, "max_recv", k.maxRecv,
		"podres_order", map[bool]string{true: "stable", false: "shuffle"}[k.podresStable])
	return nil
}

// stop ends this kubelet incarnation: every server and plugin connection goes away at once.
// A stopped grpc listener unlinks its socket (Go's UnixListener does), as the kubelet's does.
//
// The servers stop first: a plugin that re-registers as soon as its stream ends must find no
// kubelet.sock, as with a real kubelet, and not a Register handler of this dying incarnation
// that would read the next epoch and leave a live endpoint behind in it.
func (k *kubelet) stop() {
	k.mu.Lock()
	srv, psrv := k.regServer, k.podresServer
	k.regServer, k.podresServer = nil, nil
	k.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	if psrv != nil {
		psrv.Stop()
	}
	k.mu.Lock()
	k.epoch++
	eps := k.endpoints
	k.endpoints = nil
	k.notifyLocked()
	k.mu.Unlock()
	for _, ep := range eps {
		ep.raw.closeAll()
		ep.conn.Close()
	}
}

// restart models a kubelet restart: the process goes away, a new one reads its checkpoint
// (allocations kept, every known resource back with empty device sets and no endpoint), deletes
// every socket in the directory and serves a new kubelet.sock.
func (k *kubelet) restart(downtime time.Duration) error {
	k.stop()
	if _, err := os.Stat(filepath.Join(k.dir, checkpointName)); err != nil {
		emit("error", "where", "restart",
			"error", "checkpoint file "+checkpointName+" is gone: something deleted a non-socket file")
	}
	k.mu.Lock()
	for _, r := range k.resources {
		was := len(r.healthy)
		r.healthy = map[string]bool{}
		emitHealthy(r, was, "restart", 0)
		r.unhealthy = map[string]bool{}
		r.all = map[string]*dp.Device{}
		r.ep = nil
	}
	k.notifyLocked()
	k.mu.Unlock()
	if downtime > 0 {
		time.Sleep(downtime)
	}
	emit("restart", "downtime_us", downtime.Microseconds())
	return k.start()
}

// writeCheckpoint writes a file shaped like the kubelet's checkpoint. Only its presence
// matters here (a plugin must not delete it); the checksum is not computed.
func (k *kubelet) writeCheckpoint() {
	type entry struct {
		PodUID        string
		ContainerName string
		ResourceName  string
		DeviceIDs     map[string][]string
	}
	k.mu.Lock()
	entries := []entry{}
	for _, p := range k.pods {
		for _, c := range p.containers {
			for _, a := range c.allocs {
				ids := map[string][]string{}
				for _, id := range a.ids {
					nodes := a.numa[id]
					if len(nodes) == 0 {
						ids["-1"] = append(ids["-1"], id)
					}
					for _, n := range nodes {
						key := fmt.Sprint(n)
						ids[key] = append(ids[key], id)
					}
				}
				entries = append(entries, entry{p.name, c.name, a.resource, ids})
			}
		}
	}
	reg := map[string][]string{}
	for name, r := range k.resources {
		reg[name] = sortedKeys(r.healthy)
	}
	k.mu.Unlock()
	data := map[string]interface{}{
		"Data":     map[string]interface{}{"PodDeviceEntries": entries, "RegisteredDevices": reg},
		"Checksum": 0,
	}
	b, _ := json.Marshal(data)
	tmp := filepath.Join(k.dir, "."+checkpointName+".tmp")
	if err := os.WriteFile(tmp, b, 0644); err == nil {
		os.Rename(tmp, filepath.Join(k.dir, checkpointName))
	}
}

func sortedKeys(m map[string]bool) []string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// allocatedLocked returns the devices of resource r held by any pod.
func (k *kubelet) allocatedLocked(r string) map[string]bool {
	set := map[string]bool{}
	for _, p := range k.pods {
		for _, c := range p.containers {
			for _, a := range c.allocs {
				if a.resource == r {
					for _, id := range a.ids {
						set[id] = true
					}
				}
			}
		}
	}
	return set
}

// waitFor blocks until cond (called with k.mu held) is true or the timeout passes.
func (k *kubelet) waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		ok := cond()
		ch := k.changed
		k.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			k.mu.Lock()
			ok = cond()
			k.mu.Unlock()
			return ok
		}
	}
}
