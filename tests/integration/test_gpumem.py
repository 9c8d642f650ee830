#!/usr/bin/python3
"""nvidia.com/gpumem (edgegpu.sharing.memory) through the real daemon, the kubelet emulator
and the fake NVML: unit counts and IDs, Allocate env values, best-fit GetPreferredAllocation
under the emulator's kubelet-like selection, onSplit both ways, placement: mask (admission
refusal of a fragmented node, hysteresis, ties, health, pod-resources after a restart and over
4 MiB), unit doubling on big GPUs, and ID stability (docs/sharing.md, issue 4).

Mask timing: the daemon polls pod-resources List every 2 s and acts after two equal answers;
units it hands out in Allocate count as used at once."""

import json
import time
from collections import Counter

from common import RESOURCE, NodeTest, main, uuids
from edgegpu import PluginClient, run_cli

GPUMEM = "nvidia.com/gpumem"
ONE = uuids("sharing/one-16g.conf")
TWO8 = uuids("sharing/two-8g.conf")
TWO = uuids("two-gpus.conf")
MIB3 = 3 << 20
MIB4 = 4 << 20
B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
DEBUG = {"EDGEGPU_LOG_LEVEL": "debug"}
BIG_IDS = ("--max-ids", "400000")  # the emulator lists IDs in its events up to this many
# Two 8 GiB GPUs with no reserve: 8192 units each.
MASK = dict(reserveMiB=0)
PREFERRED = dict(reserveMiB=0, placement="preferred")


def b36(v):
    s = ""
    while True:
        s = B36[v % 36] + s
        v //= 36
        if not v:
            return s


def mem_config(devices="[0, 1]", extra="", **keys):
    """edgegpu.sharing.memory with the given keys (unitMiB=..., reserveMiB=..., ...)."""
    out = ["version: v1", "edgegpu:", "  sharing:", "    memory:", f"      devices: {devices}"]
    out += [f"      {k}: {v}" for k, v in keys.items()]
    return "\n".join(out) + "\n" + extra


def letters(ids):
    return Counter(i[0] for i in ids)


def all_ids(ev):
    return ev["healthy"] + ev["unhealthy"]


class GpumemTest(NodeTest):
    def start(self, fixture, config, resources, emulator_args=BIG_IDS, **kw):
        """A node whose daemon registered every resource in `resources` {name: healthy count
        or None} and sent a first list of each. Returns (node, daemon)."""
        n = self.node(fixture, emulator_args=emulator_args)
        d = n.start_daemon(config=config, **kw)
        for name, healthy in resources.items():
            n.wait_register(name, timeout=10)
            if healthy is None:
                n.wait_devices(name, timeout=10)
            else:
                n.wait_devices(name, healthy_count=healthy, timeout=10)
        return n, d

    def admit(self, n, pod, count, resource=GPUMEM):
        ev = n.emu.admit(pod, f"c1:{resource}={count}")
        self.assertTrue(ev["ok"], ev)
        al = n.emu.allocations(pod)
        self.assertEqual(len(al), 1, al)
        self.assertTrue(al[0]["ok"], al[0])
        self.assertEqual(len(al[0]["ids"]), count)
        return al[0]

    def one_gpu(self, alloc, uuid):
        """Every unit of the allocation is on one GPU, and that GPU is `uuid`. Returns the
        GPU's letter."""
        ls = letters(alloc["ids"])
        self.assertEqual(len(ls), 1, f"units from {len(ls)} GPUs: {dict(ls)}")
        self.assertEqual(alloc["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"], uuid)
        return next(iter(ls))

    def mem_envs(self, alloc):
        e = alloc["response"]["envs"]
        return {k: v for k, v in e.items()
                if k == "EDGEGPU_GPUMEM_LIMIT_MIB" or k.startswith("CUDA_DEVICE_MEMORY_LIMIT")}

    def settle(self, n, since, timeout=10, **match):
        """The gpumem list the mask settles on after `since` (first event matching)."""
        return n.wait_devices(GPUMEM, since=since, timeout=timeout, **match)


# --- units, IDs, the static split ---

class Units(GpumemTest):
    def test_one_gpu_unit_count_and_ids(self):
        n, d = self.start("sharing/one-16g.conf", mem_config("[0]"), {GPUMEM: 16384 - 512},
                          fake_host=True)
        ev = n.emu.last_devices(GPUMEM)
        self.assertEqual(ev["endpoint"], "nvidia-gpumem.sock")
        self.assertEqual(ev["count"], 15872)
        self.assertEqual(ev["unhealthy"], [])
        ids = ev["healthy"]
        self.assertNotIn("duplicates", ev)
        self.assertEqual(len(letters(ids)), 1)
        letter = ids[0][0]
        self.assertEqual(sorted(ids), sorted(letter + b36(i) for i in range(15872)))
        self.assertLessEqual(max(len(i) for i in ids), 6)
        # The GPU has NUMA node 0 in the fake sysfs, yet units carry no TopologyInfo.
        d.wait_log("found GPU", gpu="0", numa="0", timeout=10)
        self.assertNotIn("numa", ev)
        self.assertNotIn("empty_topology", ev)
        # The GPU is not also a whole nvidia.com/gpu, and one GPU needs no pod-resources.
        self.assertEqual(n.registrations(RESOURCE, ok=None), [])
        self.assertEqual(d.find_logs("watching pod-resources for gpumem placement"), [])
        d.wait_log("advertising resource", resource=GPUMEM, devices="15872", timeout=10)

    def test_unit_and_reserve(self):
        cfg = mem_config("[0]", unitMiB=3, reserveMiB=100)
        n, d = self.start("sharing/one-16g.conf", cfg, {GPUMEM: (16384 - 100) // 3})
        self.assertEqual(n.emu.last_devices(GPUMEM)["count"], 5428)

    def test_gpumem_gpu_absent_from_whole_gpus(self):
        n, d = self.start("two-gpus.conf", mem_config("[1]"),
                          {GPUMEM: 23034 - 512, RESOURCE: 1})
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy"], [TWO[0]])
        self.assertEqual(n.emu.last_devices(GPUMEM)["count"], 23034 - 512)
        a = self.admit(n, "p1", 1, RESOURCE)
        self.assertEqual(a["ids"], [TWO[0]])
        a = self.admit(n, "p2", 100)
        self.one_gpu(a, TWO[1])

    def test_two_gpus_unit_counts_by_gpu(self):
        # 15356 MiB and 23034 MiB: each GPU's count is (memory - reserve) / unit.
        cfg = mem_config(unitMiB=16, reserveMiB=256, placement="preferred")
        n, d = self.start("two-gpus.conf", cfg, {GPUMEM: None})
        ev = n.emu.last_devices(GPUMEM)
        self.assertEqual(sorted(letters(all_ids(ev)).values()),
                         sorted([(15356 - 256) // 16, (23034 - 256) // 16]))
        self.assertEqual(ev["unhealthy"], [], "placement: preferred masks nothing")
        self.assertEqual(n.registrations(RESOURCE, ok=None), [])

    def letter_of_each_gpu(self, fixture):
        """{uuid: letter} learnt by allocating unit 0 of each letter directly."""
        n, d = self.start(fixture, mem_config(**PREFERRED), {GPUMEM: 16384})
        c = PluginClient(n.socket("nvidia-gpumem.sock"))
        self.addCleanup(c.close)
        out = {}
        for letter in sorted(letters(n.emu.last_devices(GPUMEM)["healthy"])):
            r = c.allocate([letter + "0"])
            self.assertEqual(r.code, "OK", r)
            out[r.responses[0]["envs"]["NVIDIA_VISIBLE_DEVICES"]] = letter
        return out

    def test_ids_follow_the_uuid_not_the_index(self):
        a = self.letter_of_each_gpu("sharing/two-8g.conf")
        b = self.letter_of_each_gpu("sharing/two-8g-swapped.conf")
        self.assertEqual(sorted(a), sorted(TWO8))
        self.assertEqual(a, b)


# --- Allocate on one GPU ---

class Allocate(GpumemTest):
    def test_three_pods_share_one_gpu(self):
        n, d = self.start("sharing/one-16g.conf", mem_config("[0]"), {GPUMEM: 15872})
        seen = set()
        for pod, size in (("infer-a", 4096), ("infer-b", 2048), ("infer-c", 1024)):
            with self.subTest(pod=pod):
                a = self.admit(n, pod, size)
                self.one_gpu(a, ONE[0])
                # With issue 19's variables (no interposer library here: accounting).
                self.assertEqual(a["response"]["envs"],
                                 {"NVIDIA_VISIBLE_DEVICES": ONE[0],
                                  "EDGEGPU_GPUMEM_LIMIT_MIB": str(size),
                                  "CUDA_DEVICE_MEMORY_LIMIT_0": f"{size}m",
                                  "NVIDIA_GPU_MEMORY_REQUEST": str(size),
                                  "NVIDIA_GPU_MEMORY_LIMIT": str(size),
                                  "EDGEGPU_GPUMEM_ENFORCEMENT": "accounting"})
                self.assertFalse(seen & set(a["ids"]), "a unit given twice")
                seen |= set(a["ids"])
                pref = n.emu.find(lambda e: e.get("event") == "preferred" and
                                  e.get("pod") == pod)
                self.assertEqual(len(pref[0]["preferred"]), size, "exactly allocation_size")
                self.assertEqual(sorted(pref[0]["preferred"]), sorted(a["ids"]))
        # One GPU, no mask: the device list never changed.
        self.assertEqual(len(n.emu.devices_events(GPUMEM)), 1)

    def test_limit_is_units_times_unit(self):
        n, d = self.start("sharing/one-16g.conf", mem_config("[0]", unitMiB=4),
                          {GPUMEM: (16384 - 512) // 4})
        a = self.admit(n, "p1", 100)
        self.assertEqual(self.mem_envs(a), {"EDGEGPU_GPUMEM_LIMIT_MIB": "400",
                                            "CUDA_DEVICE_MEMORY_LIMIT_0": "400m"})

    def test_delivered_like_a_whole_gpu(self):
        extra = "flags:\n  plugin:\n    deviceListStrategy: volume-mounts\n"
        n, d = self.start("sharing/one-16g.conf", mem_config("[0]", extra=extra),
                          {GPUMEM: 15872})
        a = self.admit(n, "p1", 512)
        r = a["response"]
        # Issue 19 added the toolkit's memory variables and the enforcement in force (no
        # interposer library on this node: accounting, and no interposer mounts).
        self.assertEqual(r["envs"], {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices",
                                     "EDGEGPU_GPUMEM_LIMIT_MIB": "512",
                                     "CUDA_DEVICE_MEMORY_LIMIT_0": "512m",
                                     "NVIDIA_GPU_MEMORY_REQUEST": "512",
                                     "NVIDIA_GPU_MEMORY_LIMIT": "512",
                                     "EDGEGPU_GPUMEM_ENFORCEMENT": "accounting"})
        self.assertEqual([(m["container_path"], m["host_path"]) for m in r["mounts"]],
                         [(f"/var/run/nvidia-container-devices/{ONE[0]}", "/dev/null")])

    def test_unknown_and_duplicate_units_refused(self):
        n, d = self.start("sharing/one-16g.conf", mem_config("[0]"), {GPUMEM: 15872})
        letter = n.emu.last_devices(GPUMEM)["healthy"][0][0]
        c = PluginClient(n.socket("nvidia-gpumem.sock"))
        self.addCleanup(c.close)
        other = "b" if letter == "a" else "a"
        for ids in ([letter + b36(15872)], [other + "0"], [letter + "00"], [letter + "1234567"],
                    [letter + "1", letter + "1"]):
            with self.subTest(ids=ids):
                r = c.allocate(ids)
                self.assertEqual(r.code, "INVALID_ARGUMENT", r)
                self.assertIn(ids[-1], r.details)


# --- GetPreferredAllocation and the split policy (placement: preferred) ---

class Preferred(GpumemTest):
    def test_every_unit_on_the_gpu_we_preferred(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**PREFERRED), {GPUMEM: 16384})
        # Best fit: the GPU with the fewest free units that still fits; equal -> lower index.
        plan = [("a", 6000, 0), ("b", 1000, 0), ("c", 3000, 1), ("d", 1100, 0),
                ("e", 5000, 1), ("f", 150, 1), ("g", 90, 0)]
        for pod, size, gpu in plan:
            with self.subTest(pod=pod):
                a = self.admit(n, pod, size)
                self.one_gpu(a, TWO8[gpu])
                pref = n.emu.find(lambda e: e.get("event") == "preferred" and
                                  e.get("pod") == pod)[0]
                self.assertEqual(len(pref["preferred"]), size)
                self.assertEqual(sorted(a["ids"]), sorted(pref["preferred"]),
                                 "the kubelet took exactly the preferred units")

    def test_preferred_direct_must_include_and_size(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**PREFERRED), {GPUMEM: 16384})
        every = n.emu.last_devices(GPUMEM)["healthy"]
        l0, l1 = sorted(letters(every))
        c = PluginClient(n.socket("nvidia-gpumem.sock"))
        self.addCleanup(c.close)
        for must in (l0 + "5", l1 + "zz"):
            with self.subTest(must=must):
                r = c.preferred(every, [must], 10)
                self.assertEqual(r.code, "OK", r)
                self.assertEqual(len(r.ids), 10)
                self.assertIn(must, r.ids)
                self.assertEqual(set(letters(r.ids)), {must[0]}, "must-include keeps its GPU")
        # Best fit among partly offered GPUs: 300 of one, 100 of the other -> 50 go to the
        # one with 100 free.
        offer = [l0 + b36(i) for i in range(300)] + [l1 + b36(i) for i in range(100)]
        r = c.preferred(offer, [], 50)
        self.assertEqual(sorted(r.ids), sorted(l1 + b36(i) for i in range(50)))
        r = c.preferred(offer, [], 200)
        self.assertEqual(set(letters(r.ids)), {l0})
        self.assertEqual(len(r.ids), 200)


class Split(GpumemTest):
    def test_split_rejected(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**PREFERRED), {GPUMEM: 16384})
        ev = n.emu.admit("big", f"c1:{GPUMEM}=10000")
        self.assertFalse(ev["ok"], ev)
        al = n.emu.allocations("big")
        self.assertEqual(len(al), 1, "edgegpu got the Allocate")
        self.assertEqual(len(letters(al[0]["ids"])), 2, "the preferred answer had to split")
        self.assertIn("code = FailedPrecondition", ev["error"])
        self.assertIn("gpumem request of 10000 units (10000 MiB) spans 2 GPUs and onSplit is "
                      "reject", ev["error"])
        self.assertIn("edgegpu.sharing.memory.onSplit: allow", ev["error"])
        # Nothing was taken: the node can still place a pod that fits one GPU.
        a = self.admit(n, "ok", 8192)
        self.one_gpu(a, TWO8[0])

    def test_split_allowed(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(onSplit="allow", **PREFERRED),
                          {GPUMEM: 16384})
        self.one_gpu(self.admit(n, "first", 6000), TWO8[0])
        # 9000 units: no GPU holds them; all 8192 of GPU 1 and 808 of GPU 0.
        a = self.admit(n, "big", 9000)
        envs = a["response"]["envs"]
        self.assertEqual(envs["NVIDIA_VISIBLE_DEVICES"], f"{TWO8[0]},{TWO8[1]}")
        self.assertEqual(self.mem_envs(a), {"EDGEGPU_GPUMEM_LIMIT_MIB": "9000",
                                            "CUDA_DEVICE_MEMORY_LIMIT_0": "808m",
                                            "CUDA_DEVICE_MEMORY_LIMIT_1": "8192m"})
        self.assertEqual(sorted(letters(a["ids"]).values()), [808, 8192])


# --- placement: mask ---

class Mask(GpumemTest):
    def masked(self, ev):
        """(letters of the healthy units, letters of the unhealthy ones) as Counters."""
        return letters(ev["healthy"]), letters(ev["unhealthy"])

    def test_initial_mask_on_lower_index(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**MASK), {GPUMEM: 8192})
        ev = n.emu.last_devices(GPUMEM)
        h, u = self.masked(ev)
        self.assertEqual(len(h), 1)
        self.assertEqual(len(u), 1)
        self.assertEqual(list(h.values()), [8192])
        self.assertEqual(list(u.values()), [8192])
        d.wait_log("gpumem mask moved", gpu_from="-1", gpu_to="0", timeout=10)
        # The healthy letter is GPU 0's: a pod lands there.
        self.assertEqual(self.one_gpu(self.admit(n, "p", 1), TWO8[0]), next(iter(h)))
        d.wait_log("watching pod-resources for gpumem placement",
                   socket=n.emu.podres_socket, timeout=10)

    def test_fragmented_node_refused_at_admission(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**MASK), {GPUMEM: 8192}, env=DEBUG)
        since = n.emu.mark()
        l0 = self.one_gpu(self.admit(n, "a", 6144), TWO8[0])
        # GPU 1 now has 6 GiB more free: the mask moves there at once.
        ev = self.settle(n, since, healthy_count=6144 + 8192)
        self.assertEqual(letters(ev["unhealthy"]), Counter({l0: 2048}))
        d.wait_log("gpumem mask moved", gpu_from="0", gpu_to="1", timeout=10)
        since = n.emu.mark()
        l1 = self.one_gpu(self.admit(n, "b", 6144), TWO8[1])
        self.assertNotEqual(l0, l1)
        # 6 GiB used on each: 2 GiB free on each, 4 GiB on the node. Let pod-resources confirm
        # both pods (two equal List answers) before asking.
        d.wait_log("pod-resources answer", resource=GPUMEM, live_units=str(2 * 6144),
                   timeout=10)
        ev = n.emu.last_devices(GPUMEM)
        self.assertEqual(ev["healthy_count"], 6144 + 6144 + 2048)
        self.assertEqual(letters(ev["unhealthy"]), Counter({l0: 2048}))
        mark = n.emu.mark()
        ev = n.emu.admit("c", f"c1:{GPUMEM}=4096")
        self.assertFalse(ev["ok"], ev)
        self.assertEqual(ev["error"], f"requested number of devices unavailable for {GPUMEM}. "
                         "Requested: 4096, Available: 2048")
        # Refused at admission: edgegpu never saw a GetPreferredAllocation or an Allocate.
        self.assertEqual(n.emu.find(lambda e: e.get("event") in ("preferred", "allocate") and
                                    e.get("pod") == "c", mark), [])
        self.assertEqual(n.emu.allocations("c"), [])
        # A pod that fits the masked GPU still goes.
        self.one_gpu(self.admit(n, "d", 2048), TWO8[1])

    def test_without_mask_the_same_node_fails_in_allocate(self):
        # The contrast: placement: preferred lets the kubelet admit the 4 GiB pod, and the
        # Allocate it sends has to be refused (onSplit: reject).
        n, d = self.start("sharing/two-8g.conf", mem_config(**PREFERRED), {GPUMEM: 16384})
        self.one_gpu(self.admit(n, "a", 6144), TWO8[0])
        self.one_gpu(self.admit(n, "b", 6144), TWO8[1])
        ev = n.emu.admit("c", f"c1:{GPUMEM}=4096")
        self.assertFalse(ev["ok"], ev)
        self.assertIn("spans 2 GPUs", ev["error"])
        self.assertEqual(len(n.emu.allocations("c")), 1)

    def test_hysteresis(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**MASK), {GPUMEM: 8192}, env=DEBUG)
        first = n.emu.last_devices(GPUMEM)
        since = n.emu.mark()
        l0 = self.one_gpu(self.admit(n, "a", 1000), TWO8[0])
        # 1000 MiB less free on GPU 0 is below maskHysteresisMiB (1024): no move, not even once
        # pod-resources has confirmed the pod.
        d.wait_log("pod-resources answer", resource=GPUMEM, live_units="1000", timeout=10)
        self.assertEqual(d.find_logs("gpumem mask moved", gpu_from="0"), [])
        self.assertEqual(n.emu.last_devices(GPUMEM)["unhealthy"], first["unhealthy"])
        # 100 more: 1100 MiB difference, the mask moves to GPU 1. That move is the sentinel:
        # it is the first gpumem update since the first pod, so the first one moved nothing.
        self.one_gpu(self.admit(n, "b", 100), TWO8[0])
        ev = self.settle(n, since)
        self.assertEqual(ev["healthy_count"], 1100 + 8192, "an update before the move")
        self.assertEqual(letters(ev["unhealthy"]), Counter({l0: 8192 - 1100}))
        d.wait_log("gpumem mask moved", gpu_from="0", gpu_to="1", timeout=10)
        # GPU 1 gives 1100 then 1000 units: GPU 0 has 0, then 1000 MiB more free -> no move.
        since = n.emu.mark()
        l1 = self.one_gpu(self.admit(n, "c", 1100), TWO8[1])
        self.one_gpu(self.admit(n, "d", 1000), TWO8[1])
        d.wait_log("pod-resources answer", resource=GPUMEM, live_units="3200", timeout=10)
        # 1100 more on GPU 1: GPU 0 has 1200 MiB more free, the mask moves back: the first
        # update since pod c (the sentinel), so c and d moved nothing.
        self.one_gpu(self.admit(n, "e", 1100), TWO8[1])
        ev = self.settle(n, since)
        self.assertTrue(ev["unhealthy"] and ev["unhealthy"][0][0] == l1,
                        f"an update before the move back: {ev['unhealthy'][:3]}")
        self.assertEqual(letters(ev["unhealthy"]), Counter({l1: 8192 - 3200}))
        d.wait_log("gpumem mask moved", gpu_from="1", gpu_to="0", timeout=10)

    def test_ties_go_to_the_lower_index(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(maskHysteresisMiB=0, **MASK),
                          {GPUMEM: 8192})
        since = n.emu.mark()
        l0 = self.one_gpu(self.admit(n, "a", 10), TWO8[0])
        ev = self.settle(n, since, healthy_count=10 + 8192)
        self.assertEqual(letters(ev["unhealthy"]), Counter({l0: 8182}))
        since = n.emu.mark()
        l1 = self.one_gpu(self.admit(n, "b", 10), TWO8[1])
        # 8182 free on each: the tie goes back to GPU 0.
        ev = self.settle(n, since, healthy_count=10 + 8192)
        self.assertEqual(letters(ev["unhealthy"]), Counter({l1: 8182}))
        d.wait_log("gpumem mask moved", gpu_from="1", gpu_to="0", timeout=10)

    def test_xid_marks_every_unit_unhealthy_and_moves_the_mask(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**MASK), {GPUMEM: 8192})
        a = self.admit(n, "a", 100)
        l0 = self.one_gpu(a, TWO8[0])
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        ev = self.settle(n, since, timeout=10)
        h, u = self.masked(ev)
        # Every unit of GPU 0, the 100 allocated ones too; GPU 1 is offered instead even
        # though GPU 0 had less than 1024 MiB less free.
        self.assertEqual(u, Counter({l0: 8192}))
        self.assertTrue(set(a["ids"]) <= set(ev["unhealthy"]))
        self.assertEqual(len(h), 1)
        self.assertEqual(list(h.values()), [8192])
        d.wait_log("gpumem mask moved", gpu_from="0", gpu_to="1", timeout=10)
        self.one_gpu(self.admit(n, "b", 200), TWO8[1])
        # Both GPUs bad: nothing is offered.
        since = n.emu.mark()
        n.nvml.xid(1, 48)
        ev = self.settle(n, since, timeout=10, healthy_count=0)
        self.assertEqual(ev["unhealthy_count"], 16384)
        ev = n.emu.admit("c", f"c1:{GPUMEM}=1")
        self.assertFalse(ev["ok"])
        self.assertIn("no healthy devices present", ev["error"])

    def test_lost_gpu_never_masked_in(self):
        n, d = self.start("sharing/two-8g.conf", mem_config(**MASK), {GPUMEM: 8192})
        since = n.emu.mark()
        l0 = self.one_gpu(self.admit(n, "a", 2000), TWO8[0])
        self.settle(n, since, healthy_count=2000 + 8192)
        b = self.admit(n, "b", 100)
        l1 = self.one_gpu(b, TWO8[1])
        since = n.emu.mark()
        n.nvml.lost(1)
        # GPU 1 has the most free units but is gone: GPU 0 is offered, all of GPU 1 is not.
        ev = self.settle(n, since, timeout=10)
        self.assertEqual(letters(ev["unhealthy"]), Counter({l1: 8192}))
        self.assertTrue(set(b["ids"]) <= set(ev["unhealthy"]))
        self.assertEqual(letters(ev["healthy"]), Counter({l0: 8192}))
        self.one_gpu(self.admit(n, "c", 300), TWO8[0])


# --- pod-resources, restarts ---

class PodResources(GpumemTest):
    def restart_with_live_pod(self, pad=0):
        """A pod holds 6 GiB of GPU 0, edgegpu restarts (forgetting what it allocated), and
        pod-resources alone must bring the mask to GPU 1. Returns (node, new daemon, t0 of
        the restart, IDs before, the first list after, the settled list)."""
        n, d = self.start("sharing/two-8g.conf", mem_config(**MASK), {GPUMEM: 8192}, env=DEBUG)
        since = n.emu.mark()
        l0 = self.one_gpu(self.admit(n, "a", 6144), TWO8[0])
        before = self.settle(n, since, healthy_count=6144 + 8192)
        if pad:
            ev = n.emu.podres_pad(pad)
            self.assertGreater(ev["size"], MIB4, "List must pass 4 MiB")
            self.assertEqual(n.emu.podres_list()["size"], ev["size"])
        rc, _ = d.stop()
        self.assertEqual(rc, 0, d.tail())
        since = n.emu.mark()
        t0 = time.monotonic()
        d2 = n.start_daemon(config=n.config_path, env=DEBUG)
        reg = n.wait_register(GPUMEM, since=since, timeout=10)
        first = n.wait_devices(GPUMEM, since=since, reg=reg["reg"], timeout=10)
        settled = self.settle(n, since, timeout=10, reg=reg["reg"], unhealthy_count=2048)
        self.assertEqual(letters(settled["unhealthy"]), Counter({l0: 2048}))
        rec = d2.wait_log("gpumem mask moved", gpu_from="0", gpu_to="1", timeout=10)
        # Two equal List answers 2 s apart: not before ~2 s (a lower bound: t0 is taken before
        # the start, so load only makes the gap longer).
        self.assertGreaterEqual(rec["_t"] - t0, 1.8, "acted on a single List answer")
        self.assertEqual(d2.find_logs("pod-resources List failed, retrying"), [])
        self.assertEqual(d2.find_logs("pod-resources List refused, retrying"), [])
        return n, d2, before, first, settled

    def test_ids_stable_and_mask_from_pod_resources_after_restart(self):
        n, d2, before, first, settled = self.restart_with_live_pod()
        self.assertEqual(sorted(all_ids(first)), sorted(all_ids(before)), "IDs changed")
        self.assertEqual(sorted(all_ids(settled)), sorted(all_ids(before)))
        # Until pod-resources has answered twice, the new daemon knows no live unit: a tie.
        self.assertEqual(first["unhealthy_count"], 8192)
        d2.wait_log("pod-resources answer", resource=GPUMEM, live_units="6144", timeout=10)
        # The kubelet's view after the restart: the pod's units are still allocated there.
        self.one_gpu(self.admit(n, "b", 8192), TWO8[1])

    def test_pod_resources_answer_over_4mib(self):
        n, d2, before, first, settled = self.restart_with_live_pod(pad=70000)
        self.assertEqual(sorted(all_ids(settled)), sorted(all_ids(before)))
        rec = d2.wait_log("pod-resources answer", resource=GPUMEM, timeout=10)
        self.assertEqual(rec["live_units"], "6144", "padding pods are not gpumem")


# --- unit doubling on big GPUs ---

class Doubling(GpumemTest):
    def discover(self, fixture, config):
        n = self.node(fixture, start_emulator=False)
        r = run_cli(["discover", "--json"], fixture=fixture,
                    env={"CONFIG_FILE": n.write_config(config)})
        self.assertEqual(r.returncode, 0, r.stderr)
        res = [x for x in json.loads(r.stdout)["resources"] if x["name"] == GPUMEM]
        self.assertEqual(len(res), 1, r.stdout)
        return res[0], r

    def test_two_80g_stay_at_1mib_under_3mib(self):
        units = 2 * (81920 - 512)
        n, d = self.start("sharing/two-80g.conf", mem_config(), {GPUMEM: units // 2})
        ev = n.emu.last_devices(GPUMEM)
        self.assertEqual(ev["count"], units)
        self.assertLess(ev["size"], MIB3, "ListAndWatch message over 3 MiB")
        ids = all_ids(ev)
        self.assertEqual(len(set(ids)), units)
        self.assertLessEqual(max(len(i) for i in ids), 6)
        self.assertEqual(d.find_logs("gpumem unit doubled to keep the device list under 3 MiB"),
                         [])
        res, _ = self.discover("sharing/two-80g.conf", mem_config())
        self.assertEqual((res["unit_mib"], res["unit_mib_configured"]), (1, 1))
        self.assertNotIn("warning", res)
        self.assertEqual(res["devices"], units)
        self.assertLess(res["list_bytes"], MIB3)
        a = self.admit(n, "p", 40000)
        self.assertEqual(self.mem_envs(a), {"EDGEGPU_GPUMEM_LIMIT_MIB": "40000",
                                            "CUDA_DEVICE_MEMORY_LIMIT_0": "40000m"})
        # Every unit Unhealthy (both GPUs lost) is the longest the list gets: still under the
        # kubelet's 4 MiB, on the same stream.
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        n.nvml.xid(1, 79)
        ev = self.settle(n, since, timeout=10, unhealthy_count=units)
        self.assertLess(ev["size"], MIB4)
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "stream_end"), [])

    def test_three_80g_double_to_2mib(self):
        units = 3 * ((81920 - 512) // 2)
        n, d = self.start("sharing/three-80g.conf", mem_config("[0, 1, 2]"),
                          {GPUMEM: units // 3}, emulator_args=())
        ev = n.emu.last_devices(GPUMEM)
        self.assertEqual(ev["count"], units)
        self.assertLess(ev["size"], MIB3)
        rec = d.wait_log("gpumem unit doubled to keep the device list under 3 MiB", timeout=10)
        self.assertEqual((rec["resource"], rec["unit_mib"], rec["asked_mib"], rec["units"]),
                         (GPUMEM, "2", "1", str(units)))
        self.assertEqual(rec["level"], "warn")
        res, _ = self.discover("sharing/three-80g.conf", mem_config("[0, 1, 2]"))
        self.assertEqual((res["unit_mib"], res["unit_mib_configured"]), (2, 1))
        self.assertIn("unit doubled from 1 to 2 MiB", res["warning"])
        self.assertIn("units x 2 MiB", res["warning"])
        self.assertEqual(res["devices"], units)
        text = run_cli(["discover"], fixture="sharing/three-80g.conf",
                       env={"CONFIG_FILE": n.write_config(mem_config("[0, 1, 2]"))})
        self.assertIn("unit 2 MiB (doubled", text.stdout)
        # A request counts units: 2048 of them are 4096 MiB.
        a = self.admit(n, "p", 2048)
        self.assertEqual(len(letters(a["ids"])), 1)
        self.assertEqual(self.mem_envs(a), {"EDGEGPU_GPUMEM_LIMIT_MIB": "4096",
                                            "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m"})

    def test_configured_unit_that_fits_is_kept(self):
        res, _ = self.discover("sharing/three-80g.conf", mem_config("[0, 1, 2]", unitMiB=4))
        self.assertEqual((res["unit_mib"], res["unit_mib_configured"]), (4, 4))
        self.assertNotIn("warning", res)
        self.assertEqual(res["devices"], 3 * ((81920 - 512) // 4))


if __name__ == "__main__":
    main()
