package main

// Pod admission as the kubelet's device manager does it (kubelet-contract.md §2.7, §2.8):
// per container, per resource: checks, GetPreferredAllocation when advertised, the kubelet's
// choice, one Allocate RPC; PreStartContainer when advertised.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	dp "edgegpu/deviceplugin/v1beta1"
)

const preStartTimeout = 30 * time.Second

type resourceRequest struct {
	name string
	n    int
}

type containerSpec struct {
	name string
	reqs []resourceRequest
}

// parseContainers parses "CONTAINER:RESOURCE=N[,RESOURCE=N]" words.
func parseContainers(words []string) ([]containerSpec, error) {
	var specs []containerSpec
	for _, w := range words {
		name, rest, _ := strings.Cut(w, ":")
		if name == "" {
			return nil, fmt.Errorf("bad container %q: want NAME:RESOURCE=N[,RESOURCE=N]", w)
		}
		spec := containerSpec{name: name}
		if rest != "" {
			for _, item := range strings.Split(rest, ",") {
				r, ns, ok := strings.Cut(item, "=")
				n, err := strconv.Atoi(ns)
				if !ok || r == "" || err != nil || n < 0 {
					return nil, fmt.Errorf("bad request %q in %q: want RESOURCE=N", item, w)
				}
				spec.reqs = append(spec.reqs, resourceRequest{r, n})
			}
		}
		specs = append(specs, spec)
	}
	if len(specs) == 0 {
		return nil, errors.New("admit needs at least one container")
	}
	return specs, nil
}

func (k *kubelet) findPodLocked(name string) *pod {
	for _, p := range k.pods {
		if p.name == name {
			return p
		}
	}
	return nil
}

func (k *kubelet) removePodLocked(name string) *pod {
	for i, p := range k.pods {
		if p.name == name {
			k.pods = append(k.pods[:i], k.pods[i+1:]...)
			return p
		}
	}
	return nil
}

// admit runs the device manager's part of pod admission. A pod already known keeps what its
// containers hold (the kubelet makes no RPC for them); a failed admission fails the pod and
// its devices are freed (the kubelet garbage-collects them before the next allocation).
func (k *kubelet) admit(podName string, specs []containerSpec) error {
	t0 := monoUS()
	k.mu.Lock()
	p := k.findPodLocked(podName)
	if p == nil {
		p = &pod{name: podName}
		k.pods = append(k.pods, p)
	}
	k.mu.Unlock()

	var err error
	for _, s := range specs {
		k.mu.Lock()
		var c *container
		for _, cc := range p.containers {
			if cc.name == s.name {
				c = cc
			}
		}
		if c == nil {
			c = &container{name: s.name}
			p.containers = append(p.containers, c)
		}
		k.mu.Unlock()
		for _, r := range s.reqs {
			if err = k.allocate(p, c, r.name, r.n); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		k.mu.Lock()
		k.removePodLocked(podName)
		k.notifyLocked()
		k.mu.Unlock()
		k.writeCheckpoint()
		emit("admit", "pod", podName, "ok", false, "error", err.Error(),
			"reason", "UnexpectedAdmissionError",
			"message", fmt.Sprintf("Allocate failed due to %v, which is unexpected", err),
			"dur_us", monoUS()-t0)
		return err
	}
	k.writeCheckpoint()
	admitted := monoUS() - t0

	prestartFailed := false
	k.mu.Lock()
	type job struct {
		c string
		a *allocation
	}
	var jobs []job
	for _, c := range p.containers {
		for _, a := range c.allocs {
			jobs = append(jobs, job{c.name, a})
		}
	}
	k.mu.Unlock()
	for _, j := range jobs {
		if err := k.preStart(podName, j.c, j.a); err != nil {
			prestartFailed = true
		}
	}

	k.mu.Lock()
	containers := []interface{}{}
	for _, c := range p.containers {
		res := map[string][]string{}
		for _, a := range c.allocs {
			res[a.resource] = a.ids
		}
		containers = append(containers, map[string]interface{}{"name": c.name, "devices": res})
	}
	k.mu.Unlock()
	emit("admit", "pod", podName, "ok", true, "containers", containers,
		"prestart_failed", prestartFailed, "dur_us", admitted)
	return nil
}

// allocate is devicesToAllocate + the Allocate RPC for one (container, resource).
func (k *kubelet) allocate(p *pod, c *container, resName string, needed int) error {
	k.mu.Lock()
	for _, a := range c.allocs {
		if a.resource == resName {
			k.mu.Unlock()
			if len(a.ids) != needed {
				return fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d",
					p.name, c.name, resName, len(a.ids), needed)
			}
			return nil
		}
	}
	res := k.resources[resName]
	if res == nil {
		k.mu.Unlock()
		return fmt.Errorf("cannot allocate unregistered device %s", resName)
	}
	if needed == 0 {
		k.mu.Unlock()
		return nil
	}
	if len(res.healthy) == 0 {
		k.mu.Unlock()
		return fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", resName)
	}
	inUse := k.allocatedLocked(resName)
	available := map[string]bool{}
	for id := range res.healthy {
		if !inUse[id] {
			available[id] = true
		}
	}
	if len(available) < needed {
		k.mu.Unlock()
		return fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d",
			resName, needed, len(available))
	}
	ep := res.ep
	k.mu.Unlock()
	if ep == nil {
		return fmt.Errorf("unknown Device Plugin %s", resName)
	}
	if ep.stopped {
		return fmt.Errorf("endpoint %v has been stopped", ep.name)
	}

	chosen := map[string]bool{}
	var order []string
	take := func(id string) {
		if len(order) < needed && available[id] && !chosen[id] {
			chosen[id] = true
			order = append(order, id)
		}
	}
	if ep.opts.GetPreferredAllocationAvailable {
		// Go map iteration: the kubelet's sets are unordered too.
		availList := make([]string, 0, len(available))
		for id := range available {
			availList = append(availList, id)
		}
		req := &dp.PreferredAllocationRequest{ContainerRequests: []*dp.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   availList,
			MustIncludeDeviceIDs: []string{},
			AllocationSize:       int32(needed),
		}}}
		t := monoUS()
		resp, err := ep.client.GetPreferredAllocation(context.Background(), req)
		dur := monoUS() - t
		if err != nil {
			emit("preferred", "pod", p.name, "container", c.name, "resource", resName,
				"ok", false, "error", err.Error(), "dur_us", dur)
			return fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %v", err)
		}
		var pref []string
		if len(resp.ContainerResponses) > 0 {
			pref = resp.ContainerResponses[0].DeviceIDs
		}
		prefSet := map[string]bool{}
		for _, id := range pref {
			prefSet[id] = true
		}
		for id := range prefSet {
			take(id)
		}
		kv := []interface{}{"pod", p.name, "container", c.name, "resource", resName, "ok", true,
			"available", len(availList), "must_include", []string{}, "size", needed,
			"preferred", pref, "responses", len(resp.ContainerResponses), "dur_us", dur}
		if len(availList) <= k.maxIDs {
			kv = append(kv, "available_ids", sortedIDs(availList))
		}
		emit("preferred", kv...)
	}
	for id := range available {
		if len(order) >= needed {
			break
		}
		take(id)
	}

	req := &dp.AllocateRequest{ContainerRequests: []*dp.ContainerAllocateRequest{{DevicesIds: order}}}
	t := monoUS()
	resp, err := ep.client.Allocate(context.Background(), req)
	dur := monoUS() - t
	if err == nil && len(resp.ContainerResponses) == 0 {
		err = fmt.Errorf("no containers return in allocation response %v", resp)
	}
	if err != nil {
		emit("allocate", "pod", p.name, "container", c.name, "resource", resName, "ids", order,
			"ok", false, "error", err.Error(), "dur_us", dur)
		return err
	}
	a := &allocation{resource: resName, ids: order, numa: map[string][]int64{},
		resp: resp.ContainerResponses[0]}
	k.mu.Lock()
	for _, id := range order {
		if d := res.all[id]; d != nil && d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				a.numa[id] = append(a.numa[id], n.ID)
			}
		}
	}
	c.allocs = append(c.allocs, a)
	k.notifyLocked()
	k.mu.Unlock()
	emit("allocate", "pod", p.name, "container", c.name, "resource", resName, "ids", order,
		"ok", true, "response", respJSON(a.resp), "responses", len(resp.ContainerResponses),
		"dur_us", dur)
	return nil
}

// preStart calls PreStartContainer (30 s deadline) when the endpoint advertised it.
func (k *kubelet) preStart(podName, cname string, a *allocation) error {
	ep, err := k.currentEndpoint(a.resource)
	if err != nil || !ep.opts.PreStartRequired {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), preStartTimeout)
	defer cancel()
	t := monoUS()
	_, err = ep.client.PreStartContainer(ctx, &dp.PreStartContainerRequest{DevicesIds: a.ids})
	if err != nil {
		err = fmt.Errorf("device plugin PreStartContainer rpc failed with err: %v", err)
	}
	emit("prestart", "pod", podName, "container", cname, "resource", a.resource, "ids", a.ids,
		"ok", err == nil, "error", errText(err), "dur_us", monoUS()-t)
	return err
}

func (k *kubelet) deletePod(name string) error {
	k.mu.Lock()
	p := k.removePodLocked(name)
	k.notifyLocked()
	k.mu.Unlock()
	if p == nil {
		return fmt.Errorf("pod %s not found", name)
	}
	freed := map[string][]string{}
	for _, c := range p.containers {
		for _, a := range c.allocs {
			freed[a.resource] = append(freed[a.resource], a.ids...)
		}
	}
	k.writeCheckpoint()
	emit("delete", "pod", name, "freed", freed)
	return nil
}

func respJSON(r *dp.ContainerAllocateResponse) map[string]interface{} {
	envs := map[string]string{}
	for k, v := range r.Envs {
		envs[k] = v
	}
	ann := map[string]string{}
	for k, v := range r.Annotations {
		ann[k] = v
	}
	mounts := []interface{}{}
	for _, m := range r.Mounts {
		mounts = append(mounts, map[string]interface{}{"container_path": m.ContainerPath,
			"host_path": m.HostPath, "read_only": m.ReadOnly})
	}
	devs := []interface{}{}
	for _, d := range r.Devices {
		devs = append(devs, map[string]interface{}{"container_path": d.ContainerPath,
			"host_path": d.HostPath, "permissions": d.Permissions})
	}
	cdi := []string{}
	for _, d := range r.CdiDevices {
		cdi = append(cdi, d.Name)
	}
	return map[string]interface{}{"envs": envs, "mounts": mounts, "devices": devs,
		"annotations": ann, "cdi_devices": cdi}
}
