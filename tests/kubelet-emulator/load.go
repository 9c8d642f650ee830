package main

// Load mode: N calls with concurrency C over the registered connection, latency percentiles.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	dp "edgegpu/deviceplugin/v1beta1"
)

// load runs `load RESOURCE METHOD N C [K]`. allocate sends K device IDs per call and
// preferred asks for K out of every healthy device (K defaults to 1). The calls bypass the
// emulator's allocation bookkeeping.
func (k *kubelet) load(resName, method string, n, conc, size int) error {
	if n <= 0 || conc <= 0 || size <= 0 {
		return fmt.Errorf("load: N, C and K must be positive")
	}
	ep, err := k.currentEndpoint(resName)
	if err != nil {
		return err
	}
	k.mu.Lock()
	healthy := sortedKeys(k.resources[resName].healthy)
	k.mu.Unlock()

	var call func() error
	switch method {
	case "options":
		call = func() error {
			_, err := ep.client.GetDevicePluginOptions(context.Background(), &dp.Empty{})
			return err
		}
	case "allocate", "preferred":
		if len(healthy) < size {
			return fmt.Errorf("load: %s has %d healthy devices, %d needed", resName, len(healthy), size)
		}
		if method == "allocate" {
			req := &dp.AllocateRequest{ContainerRequests: []*dp.ContainerAllocateRequest{
				{DevicesIds: healthy[:size]}}}
			call = func() error {
				resp, err := ep.client.Allocate(context.Background(), req)
				if err == nil && len(resp.ContainerResponses) == 0 {
					err = fmt.Errorf("no containers return in allocation response")
				}
				return err
			}
		} else {
			req := &dp.PreferredAllocationRequest{ContainerRequests: []*dp.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: healthy, MustIncludeDeviceIDs: []string{}, AllocationSize: int32(size)}}}
			call = func() error {
				_, err := ep.client.GetPreferredAllocation(context.Background(), req)
				return err
			}
		}
	default:
		return fmt.Errorf("load: unknown method %q (options|allocate|preferred)", method)
	}

	lat := make([]int64, n)
	var next, errs int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	t0 := monoUS()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1) - 1
				if i >= int64(n) {
					return
				}
				t := monoUS()
				err := call()
				lat[i] = monoUS() - t
				if err != nil {
					atomic.AddInt64(&errs, 1)
					firstErr.Store(err.Error())
				}
			}
		}()
	}
	wg.Wait()
	total := monoUS() - t0
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	pct := func(q float64) int64 {
		i := int(math.Ceil(q*float64(n))) - 1
		if i < 0 {
			i = 0
		}
		return lat[i]
	}
	var sum int64
	for _, l := range lat {
		sum += l
	}
	fe, _ := firstErr.Load().(string)
	emit("load", "resource", resName, "method", method, "n", n, "c", conc, "k", size,
		"errors", errs, "first_error", fe, "p50_us", pct(0.50), "p90_us", pct(0.90),
		"p99_us", pct(0.99), "max_us", lat[n-1], "min_us", lat[0], "mean_us", sum/int64(n),
		"total_us", total)
	if errs > 0 {
		return fmt.Errorf("load: %d of %d calls failed: %s", errs, n, fe)
	}
	return nil
}
