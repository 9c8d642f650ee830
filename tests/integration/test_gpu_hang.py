#!/usr/bin/python3
"""NVML calls that hang (issue 16, items 6 and 7): a GPU is judged by its own answers.

A call that hangs on one GPU makes that GPU Unhealthy and nothing else: the GPU monitor leaves
the stuck worker thread in the driver and carries on with a new one, so the other GPUs are
still probed, sampled and allocatable. At most four worker threads exist (the worker and the
ones left in hung calls): at that bound no new one starts and every GPU is Unhealthy until a
call returns. When a call returns, its GPU is judged by the usual rules and its thread exits.
Also: a stop while the event thread waits in the event set does not free the set under it."""

import signal

from common import RESOURCE, NodeTest, main, uuids, wait_until
from edgegpu import samples

EIGHT = uuids("eight-gpus.conf")
HUNG = "nvml call hung, its gpus are unhealthy until it returns, serving on"
LIMIT = "nvml worker limit reached, every gpu unhealthy until a hung call returns"
# Probes every 200 ms, a call is hung after 500 ms, a sample is at most 100 ms old.
CONFIG = ("version: v1\nedgegpu:\n  health:\n    pollInterval: 200ms\n"
          "    eventPollInterval: 200ms\n    callTimeout: 500ms\n"
          "  metrics:\n    minInterval: 100ms\n")


def one(expo, name, **match):
    got = samples(expo, name, **match)
    if len(got) != 1:
        raise AssertionError(f"{name} {match}: {len(got)} samples: {got}")
    return got[0][1]


def value(d, name):
    return one(d.scrape(), name)


class Hang(NodeTest):
    def assertOnlyUnhealthy(self, n, since, want):
        """Every device list the kubelet got since event index `since` had at most `want`
        Unhealthy: no other GPU flapped meanwhile."""
        for ev in n.emu.find(lambda e: e.get("event") == "devices" and
                             e.get("resource") == RESOURCE, since):
            self.assertLessEqual(set(ev["unhealthy"]), set(want), ev)

    def release_at_end(self, n, func, gpu=None):
        def release():
            try:
                n.nvml.release(func, gpu)
            except Exception:  # noqa: BLE001 - the daemon (and the fake with it) may be gone
                pass
        self.addCleanup(release)

    def test_power_reading_hangs_on_one_of_eight(self):
        n, d = self.up("eight-gpus.conf", config=CONFIG)
        threads0 = value(d, "edgegpu_gpu_threads")
        since, lsince = n.emu.mark(), d.mark()
        since0 = since
        n.nvml.block("nvmlDeviceGetPowerUsage", 3)
        self.release_at_end(n, "nvmlDeviceGetPowerUsage", 3)
        # A scrape asks for a sample of every GPU: GPU 3's power reading hangs in the driver.
        wait_until(lambda: d.scrape() and n.nvml.blocked("nvmlDeviceGetPowerUsage") == 1, 10,
                   "a sample blocked in GPU 3's power reading")
        rec = d.wait_log(HUNG, since=lsince, timeout=10)
        self.assertEqual((rec["call"], rec["device"]), ("nvmlDeviceGetPowerUsage", EIGHT[3]))
        d.wait_log("device health changed", since=lsince, timeout=10,
                   reason="nvml call nvmlDeviceGetPowerUsage hung")
        ev = n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        self.assertEqual(ev["unhealthy"], [EIGHT[3]])
        self.assertEqual(sorted(ev["healthy"]), sorted(EIGHT[:3] + EIGHT[4:]))
        # The seven others are allocatable: a pod asking for seven GPUs gets exactly them.
        adm = n.emu.admit("seven", "c:nvidia.com/gpu=7")
        self.assertTrue(adm["ok"], adm)
        got = n.emu.allocations("seven")[0]["ids"]
        self.assertEqual(sorted(got), sorted(EIGHT[:3] + EIGHT[4:]))
        # Their health probes go on (another worker), and so does their telemetry.
        probes = n.nvml.count("nvmlDeviceGetMemoryInfo")
        wait_until(lambda: n.nvml.count("nvmlDeviceGetMemoryInfo") >= probes + 14, 20,
                   "two more probes of each of the seven others")
        n.nvml.cmd("temp 0 66")
        wait_until(lambda: one(d.scrape(), "DCGM_FI_DEV_GPU_TEMP", gpu="0") == 66, 10,
                   "a fresh sample of GPU 0 while GPU 3's call hangs")
        expo = d.scrape()
        self.assertEqual(samples(expo, "DCGM_FI_DEV_POWER_USAGE", gpu="3"), [],
                         "GPU 3 has no sample while its call hangs")
        self.assertEqual(one(expo, "edgegpu_nvml_call_hung"), 1)
        self.assertEqual(one(expo, "edgegpu_nvml_hung_threads"), 1)
        self.assertEqual(one(expo, "edgegpu_gpu_threads"), threads0 + 1)
        self.assertEqual(n.nvml.blocked("nvmlDeviceGetPowerUsage"), 1, "GPU 3 asked again")
        self.assertOnlyUnhealthy(n, since0, [EIGHT[3]])
        # An XID on another GPU is seen as before; it is the only change.
        since = n.emu.mark()
        n.nvml.xid(6, 79)
        self.assertFirstUpdateIs(n, since, [EIGHT[3], EIGHT[6]])
        # The call returns: GPU 3 is judged again (it answers: Healthy), its thread exits.
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.release("nvmlDeviceGetPowerUsage", 3)
        d.wait_log("nvml call returned", since=lsince, timeout=10,
                   call="nvmlDeviceGetPowerUsage", device=EIGHT[3])
        ev = n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        self.assertEqual(ev["unhealthy"], [EIGHT[6]])
        wait_until(lambda: value(d, "edgegpu_gpu_threads") == threads0, 10,
                   "the thread left in the hung call exits once it returns")
        self.assertEqual(value(d, "edgegpu_nvml_hung_threads"), 0)
        wait_until(lambda: samples(d.scrape(), "DCGM_FI_DEV_POWER_USAGE", gpu="3"), 10,
                   "GPU 3 sampled again")
        self.assertEqual(value(d, "edgegpu_nvml_hung_calls_total"), 1)

    def test_health_probe_hangs_on_one_gpu(self):
        n, d = self.up("eight-gpus.conf", config=CONFIG)
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.block("nvmlDeviceGetMemoryInfo", 2)
        self.release_at_end(n, "nvmlDeviceGetMemoryInfo", 2)
        rec = d.wait_log(HUNG, since=lsince, timeout=10)
        self.assertEqual((rec["call"], rec["device"]), ("nvmlDeviceGetMemoryInfo", EIGHT[2]))
        ev = n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        self.assertEqual(ev["unhealthy"], [EIGHT[2]])
        # Probe rounds of the others go on meanwhile (a new worker), none of them Unhealthy.
        probes = n.nvml.count("nvmlDeviceGetMemoryInfo")
        wait_until(lambda: n.nvml.count("nvmlDeviceGetMemoryInfo") >= probes + 14, 20,
                   "two more probes of each of the seven others")
        self.assertOnlyUnhealthy(n, since, [EIGHT[2]])
        self.assertEqual(n.nvml.blocked("nvmlDeviceGetMemoryInfo"), 1, "GPU 2 asked again")
        # A GPU falls off the bus: the event says only that some GPU is lost, the probes of
        # the others (on a new worker) say which.
        since = n.emu.mark()
        n.nvml.lost(5)
        ev = n.wait_devices(since=since, unhealthy_count=2, timeout=10)
        self.assertEqual(sorted(ev["unhealthy"]), sorted([EIGHT[2], EIGHT[5]]))
        d.wait_log("gpu unhealthy", device=EIGHT[5], reason="gpu is lost (fell off the bus)")
        # The probe returns: GPU 2 answers, so it is Healthy again; GPU 5 stays lost.
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.release("nvmlDeviceGetMemoryInfo", 2)
        d.wait_log("nvml call returned", since=lsince, timeout=10,
                   call="nvmlDeviceGetMemoryInfo", device=EIGHT[2])
        ev = n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        self.assertEqual(ev["unhealthy"], [EIGHT[5]])

    def test_power_limit_hang_named(self):
        n, d = self.up("two-gpus.conf", config=CONFIG)
        two = uuids("two-gpus.conf")
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.block("nvmlDeviceGetEnforcedPowerLimit", 1)
        self.release_at_end(n, "nvmlDeviceGetEnforcedPowerLimit", 1)
        wait_until(lambda: d.scrape() and n.nvml.blocked("nvmlDeviceGetEnforcedPowerLimit"),
                   10, "a sample blocked in GPU 1's power limit")
        rec = d.wait_log(HUNG, since=lsince, timeout=10)
        self.assertEqual((rec["call"], rec["device"]),
                         ("nvmlDeviceGetEnforcedPowerLimit", two[1]))
        ev = n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        self.assertEqual(ev["unhealthy"], [two[1]])
        d.wait_log("device health changed", since=lsince, timeout=10,
                   reason="nvml call nvmlDeviceGetEnforcedPowerLimit hung")

    def test_hangs_on_every_gpu_stop_at_four_threads(self):
        n, d = self.up("eight-gpus.conf", config=CONFIG)
        threads0 = value(d, "edgegpu_gpu_threads")
        since, lsince = n.emu.mark(), d.mark()
        # Every GPU's probe hangs: each hang leaves its thread and a new worker probes the next
        # GPU, until four threads are stuck; then no new one starts.
        n.nvml.block("nvmlDeviceGetMemoryInfo")
        self.release_at_end(n, "nvmlDeviceGetMemoryInfo")
        rec = d.wait_log(LIMIT, since=lsince, timeout=30)
        self.assertEqual(rec["threads"], "4")
        self.assertEqual(rec["level"], "error")
        ev = n.wait_devices(since=since, unhealthy_count=8, timeout=10)
        self.assertEqual(ev["healthy"], [])
        # Probe rounds keep coming and find no worker: they are deferred, no thread starts.
        deferred = value(d, "edgegpu_gpu_probes_deferred_total")
        wait_until(lambda: value(d, "edgegpu_gpu_probes_deferred_total") >= deferred + 5, 20,
                   "five probe rounds deferred at the bound")
        self.assertEqual(n.nvml.blocked("nvmlDeviceGetMemoryInfo"), 4)
        expo = d.scrape()
        self.assertEqual(one(expo, "edgegpu_nvml_hung_threads"), 4)
        self.assertEqual(one(expo, "edgegpu_gpu_threads"), threads0 + 3)
        self.assertEqual(one(expo, "edgegpu_nvml_worker_limit_total"), 1)
        self.assertEqual(one(expo, "edgegpu_nvml_hung_calls_total"), 4)
        self.assertEqual(len(d.find_logs(LIMIT, since=lsince)), 1, "logged once")
        # The calls return: every GPU answers and is Healthy, the threads left behind exit.
        since = n.emu.mark()
        n.nvml.release("nvmlDeviceGetMemoryInfo")
        n.wait_devices(since=since, healthy_count=8, timeout=10)
        wait_until(lambda: value(d, "edgegpu_gpu_threads") == threads0, 10,
                   "the threads left in hung calls exit")
        self.assertEqual(value(d, "edgegpu_nvml_hung_threads"), 0)


class EventSetAtStop(NodeTest):
    def test_stop_while_the_event_thread_waits_in_the_set(self):
        n, d = self.up("two-gpus.conf", config=CONFIG)
        # Hold the event thread inside nvmlEventSetWait_v2: block the function, and end the
        # wait in progress with an application XID (ignored) so that the next one starts.
        n.nvml.block("nvmlEventSetWait_v2")
        n.nvml.xid(0, 13)
        wait_until(lambda: n.nvml.blocked("nvmlEventSetWait_v2") == 1, 10,
                   "the event thread held in its wait")
        # A driver change: the worker has to close the event set to re-initialise, and waits
        # for the event thread to leave it, which it cannot.
        lsince = d.mark()
        n.nvml.mismatch(True)
        rec = d.wait_log(HUNG, since=lsince, timeout=20)
        # The stop ends the worker's wait; the set must not be freed under the waiting thread
        # (the fake aborts the process if it is: a use after free in a real driver).
        d.send_signal(signal.SIGTERM)
        rc = d.wait(timeout=30)
        self.assertNotIn("nvmlEventSetFree", d.text())
        self.assertEqual(rc, 0, d.tail())
        d.wait_log("stopped", timeout=10)
        self.assertEqual(rec["call"], "nvmlEventSetWait_v2", "the hang names what it waits for")


if __name__ == "__main__":
    main()
