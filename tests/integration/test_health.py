#!/usr/bin/python3
"""Health: events injected through the fake NVML's control socket and what the kubelet
emulator sees on the open ListAndWatch stream."""

import time

from common import RESOURCE, NodeTest, main, mono_us, uuids, wait_until
from edgegpu import APP_XIDS

TWO = uuids("two-gpus.conf")
DEBUG = {"EDGEGPU_LOG_LEVEL": "debug"}


def health_config(**health):
    lines = "".join(f"    {k}: {v}\n" for k, v in health.items())
    return "version: v1\nedgegpu:\n  health:\n" + lines


class Events(NodeTest):
    # The latency (XID to the kubelet seeing Unhealthy) is measured by bench/run (bench_xid).
    def test_critical_xid_unhealthy(self):
        n, d = self.up("two-gpus.conf")
        since = n.emu.mark()
        self.assertEqual(n.nvml.xid(1, 79), 1, "the daemon has one event set registered")
        ev = n.wait_devices(since=since, timeout=10)
        self.assertEqual(ev["unhealthy"], [TWO[1]])
        self.assertEqual(ev["healthy"], [TWO[0]])
        self.assertEqual(ev["reg"], 1, "same stream, no re-registration")
        rec = d.wait_log("gpu unhealthy", device=TWO[1], timeout=10)
        self.assertIn("79", rec["reason"])

    def test_application_xids_ignored(self):
        n, d = self.up("two-gpus.conf", env=DEBUG)
        since, lsince = n.emu.mark(), d.mark()
        for x in APP_XIDS:
            n.nvml.xid(1, x)
        wait_until(lambda: len(d.find_logs("xid ignored", since=lsince)) >= len(APP_XIDS),
                   10, "every application XID logged as ignored")
        got = sorted(int(r["xid"]) for r in d.find_logs("xid ignored", since=lsince))
        self.assertEqual(got, sorted(APP_XIDS))
        # A sentinel on the other GPU: the first update is its, so the ignored ones made none.
        n.nvml.xid(0, 79)
        self.assertFirstUpdateIs(n, since, [TWO[0]])
        # And a critical one after them still counts.
        n.nvml.xid(1, 48)
        ev = n.wait_devices(since=since, unhealthy_count=2, timeout=10)
        self.assertEqual(sorted(ev["unhealthy"]), sorted(TWO))

    def test_ignored_xids_from_config(self):
        n, d = self.up("two-gpus.conf", config=health_config(ignoredXids="[94, 0x3f]"))
        since = n.emu.mark()
        n.nvml.xid(0, 94)
        n.nvml.xid(0, 63)
        n.nvml.xid(1, 79)  # the sentinel, on the other GPU
        self.assertFirstUpdateIs(n, since, [TWO[1]])
        n.nvml.xid(0, 79)
        self.assertEqual(sorted(n.wait_devices(since=since, unhealthy_count=2,
                                               timeout=10)["unhealthy"]), sorted(TWO))

    def test_dp_disable_healthchecks_list(self):
        n, d = self.up("two-gpus.conf", env={"DP_DISABLE_HEALTHCHECKS": "48, 79"})
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.xid(0, 79)
        n.nvml.xid(1, 48)
        n.nvml.xid(1, 94)  # the sentinel: GPU 0's 79 made no update before it ...
        self.assertFirstUpdateIs(n, since, [TWO[1]])
        # ... and GPU 1's 48 none either: the first health change logged is the 94.
        rec = d.wait_log("gpu unhealthy", since=lsince, timeout=10)
        self.assertEqual(rec["device"], TWO[1])
        self.assertIn("94", rec["reason"])

    def test_dp_disable_healthchecks_all(self):
        n, d = self.up("two-gpus.conf", env={"DP_DISABLE_HEALTHCHECKS": "all"},
                       config=health_config(pollInterval="100ms"))
        d.wait_log("health checks disabled", timeout=10)
        self.assertEqual(n.nvml.count("nvmlEventSetCreate"), 0, "no event set with 'all'")
        probes = n.nvml.count("nvmlDeviceGetMemoryInfo")
        since = n.emu.mark()
        n.nvml.xid(0, 79)  # nobody listens: delivered to no set
        n.nvml.ecc(1, "double")
        n.nvml.lost(1)
        self.assertNoDevicesEvent(n, since, 0.6)
        self.assertEqual(n.nvml.count("nvmlDeviceGetMemoryInfo"), probes, "no probes either")
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy_count"], 2)

    def test_double_bit_ecc_unhealthy_single_bit_logged(self):
        n, d = self.up("two-gpus.conf")
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.ecc(1, "single", 3)
        rec = d.wait_log("single-bit ecc error, counting only", since=lsince, timeout=10)
        self.assertEqual(rec["device"], TWO[1])
        # The double-bit error on GPU 0 is the sentinel: GPU 1's single-bit ones changed nothing.
        n.nvml.ecc(0, "double")
        self.assertFirstUpdateIs(n, since, [TWO[0]])

    def test_gpu_lost_unhealthy(self):
        n, d = self.up("two-gpus.conf")
        since = n.emu.mark()
        n.nvml.lost(0)
        ev = n.wait_devices(since=since, timeout=10)
        self.assertEqual(ev["unhealthy"], [TWO[0]])
        d.wait_log("gpu unhealthy", device=TWO[0], timeout=10)


class Recovery(NodeTest):
    def test_recovery_after_quiet_period(self):
        n, d = self.up("two-gpus.conf",
                       config=health_config(recoveryQuietPeriod="1s", pollInterval="200ms"))
        since = n.emu.mark()
        t0 = mono_us()
        n.nvml.xid(1, 79)
        bad = n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        good = n.wait_devices(since=n.emu.mark(), healthy_count=2, timeout=15)
        # A lower bound only: the quiet period starts after the injection, so no load can
        # make this fail; how late recovery comes is the machine's business.
        self.assertGreaterEqual((good["recv_us"] - t0) / 1e6, 0.95,
                                "healthy again before the quiet period")
        self.assertLess(bad["recv_us"], good["recv_us"])
        d.wait_log("gpu healthy again", device=TWO[1], timeout=10)

    def test_new_xid_restarts_quiet_period(self):
        n, d = self.up("two-gpus.conf",
                       config=health_config(recoveryQuietPeriod="1s", pollInterval="200ms"))
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        time.sleep(0.6)  # the scenario: part of the quiet period passes, not a settle
        mid = n.emu.mark()
        t1 = mono_us()
        n.nvml.xid(0, 79)
        good = n.wait_devices(since=mid, healthy_count=2, timeout=15)
        # A full quiet period after the second XID (a lower bound: load cannot break it).
        self.assertGreaterEqual((good["recv_us"] - t1) / 1e6, 0.95,
                                "the second XID did not restart the quiet period")

    def test_lost_gpu_stays_unhealthy_until_back(self):
        n, d = self.up("two-gpus.conf",
                       config=health_config(recoveryQuietPeriod="500ms", pollInterval="100ms"))
        since = n.emu.mark()
        n.nvml.lost(1)
        n.wait_devices(since=since, unhealthy=[TWO[1]], timeout=10)
        mid = n.emu.mark()
        # The daemon looks at a faulted GPU again each time its quiet period ends: three more
        # probes are three quiet periods the lost GPU stayed Unhealthy through.
        probes = n.nvml.count("nvmlDeviceGetMemoryInfo")
        wait_until(lambda: n.nvml.count("nvmlDeviceGetMemoryInfo") >= probes + 3, 15,
                   "three more probes of the lost GPU")
        # GPU 0's XID is the sentinel: no update came between, in particular no Healthy one.
        n.nvml.xid(0, 79)
        self.assertFirstUpdateIs(n, mid, TWO)
        n.nvml.back(1)
        good = n.wait_devices(since=mid, healthy=[TWO[1]], timeout=15)
        self.assertEqual(good["unhealthy"], [TWO[0]], "back to Healthy after the GPU returned")

    def test_recovery_off_by_default(self):
        n, d = self.up("two-gpus.conf", config=health_config(pollInterval="100ms"))
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        n.wait_devices(since=since, unhealthy_count=1, timeout=10)
        self.assertNoDevicesEvent(n, n.emu.mark(), 1.0)


class Polling(NodeTest):
    def test_eventless_gpu_polled_and_healthy(self):
        ids = uuids("no-events.conf")
        n, d = self.up("no-events.conf", config=health_config(pollInterval="200ms"))
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy_count"], 2)
        since = n.emu.mark()
        c0 = n.nvml.count("nvmlDeviceGetMemoryInfo")
        # GPU 0 (no events) is probed every pollInterval; the rate is measured by bench/run
        # (bench_poll), here only that probes come.
        wait_until(lambda: n.nvml.count("nvmlDeviceGetMemoryInfo") >= c0 + 3, 15,
                   "three probes of the event-less GPU")
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices", since), [],
                         "an event-less GPU changed health")
        # The poll is what notices a problem on the GPU without events.
        n.nvml.lost(0)
        ev = n.wait_devices(since=since, timeout=10)
        self.assertEqual(ev["unhealthy"], [ids[0]])

    def test_failing_event_wait_backs_off(self):
        n, d = self.up("two-gpus.conf")
        lsince = d.mark()
        n.nvml.fail("nvmlEventSetWait_v2", "UNKNOWN")
        # The wait in progress (a long slice) is not affected: an ignored XID ends it, and
        # every wait after it fails.
        n.nvml.xid(0, 13)
        # How often it retries and the CPU it costs meanwhile: bench/run (bench_wait_failing).
        d.wait_log("gpu event wait failing, retrying with back-off, probing meanwhile",
                   since=lsince, timeout=10)
        c0 = n.nvml.count("nvmlEventSetWait_v2")
        wait_until(lambda: n.nvml.count("nvmlEventSetWait_v2") > c0, 15,
                   "a retry of the failing event wait")
        self.assertTrue(d.alive())
        n.nvml.fail("nvmlEventSetWait_v2", "off")
        d.wait_log("gpu event wait works again", since=lsince, timeout=15)
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        self.assertEqual(n.wait_devices(since=since, timeout=10)["unhealthy"], [TWO[0]])


class Driver(NodeTest):
    def test_runtime_version_mismatch_then_reinit(self):
        n, d = self.up("two-gpus.conf", config=health_config(pollInterval="200ms"))
        since, lsince = n.emu.mark(), d.mark()
        inits = n.nvml.count("nvmlInit_v2")
        n.nvml.mismatch(True)
        n.wait_devices(since=since, unhealthy_count=2, timeout=10)
        d.wait_log("nvidia driver changed, re-initialising nvml", since=lsince, timeout=10)
        # A re-initialisation attempt while still mismatched leaves every GPU Unhealthy.
        wait_until(lambda: n.nvml.count("nvmlInit_v2") > inits, 15,
                   "a re-initialisation attempt")
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices" and
                                    e.get("unhealthy_count") != 2, since), [],
                         "healthy again while still mismatched")
        n.nvml.mismatch(False)  # the fake: the driver was reloaded to match
        d.wait_log("nvml re-initialised", since=lsince, timeout=30)
        n.wait_devices(since=since, healthy_count=2, timeout=10)
        self.assertGreater(n.nvml.count("nvmlInit_v2"), inits)
        # Events work on the new event set.
        since = n.emu.mark()
        self.assertEqual(n.nvml.xid(1, 79), 1)
        self.assertEqual(n.wait_devices(since=since, timeout=10)["unhealthy"], [TWO[1]])

    def test_driver_reload_reinitialises(self):
        n, d = self.up("two-gpus.conf")
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.reload()
        d.wait_log("nvml re-initialised", since=lsince, timeout=10)
        last = n.wait_devices(since=since, healthy_count=2, timeout=10)
        self.assertEqual(sorted(last["healthy"]), sorted(TWO))
        since = n.emu.mark()
        self.assertEqual(n.nvml.xid(0, 79), 1, "event set registered again after reload")
        self.assertEqual(n.wait_devices(since=since, timeout=10)["unhealthy"], [TWO[0]])


class Storm(NodeTest):
    def test_xid_storm_10000_events(self):
        ids = uuids("eight-gpus.conf")
        n, d = self.up("eight-gpus.conf", env=DEBUG)
        critical = {2: [79, 48, 79, 48], 5: [94, 63, 94, 63]}
        n_critical = sum(len(v) for v in critical.values())
        pairs = [(g, x) for g in range(len(ids)) for x in APP_XIDS]
        ignored_total = 10000 - n_critical
        counts = {p: ignored_total // len(pairs) for p in pairs}
        for p in pairs[:ignored_total % len(pairs)]:
            counts[p] += 1
        since, lsince = n.emu.mark(), d.mark()
        waits0 = n.nvml.count("nvmlEventSetWait_v2")
        delivered = 0
        # Rounds of 50 per pair, the critical ones spread among them.
        rnd = 0
        while any(counts.values()) or any(critical.values()):
            for p in pairs:
                k = min(50, counts[p])
                if k:
                    delivered += n.nvml.xid(p[0], p[1], k)
                    counts[p] -= k
            for g, xs in critical.items():
                if xs and rnd % 5 == 4:
                    delivered += n.nvml.xid(g, xs.pop())
            rnd += 1
        self.assertEqual(delivered, 10000)
        want = sorted(ids[g] for g in critical)
        wait_until(lambda: len(d.find_logs("xid ignored", since=lsince)) >= ignored_total, 60,
                   f"{ignored_total} ignored XIDs logged")
        # A marker after the storm: once it is seen, every storm event was consumed (FIFO).
        n.nvml.xid(7, 79)
        want_final = sorted(want + [ids[7]])
        ev = n.wait_devices(since=since, unhealthy=want_final, timeout=30)
        self.assertEqual(len(d.find_logs("xid ignored", since=lsince)), ignored_total)
        self.assertEqual(sorted(ev["healthy"]), sorted(set(ids) - set(want_final)))
        self.assertGreaterEqual(n.nvml.count("nvmlEventSetWait_v2") - waits0, 10001,
                                "the fake saw fewer event waits than events")
        snaps = n.emu.find(lambda e: e.get("event") == "devices", since)
        self.assertLessEqual(len(snaps), 3, "one snapshot per health change at most")
        # A second marker: the first update after the first one is its, nothing trailed.
        mark = n.emu.mark()
        n.nvml.xid(0, 79)
        self.assertFirstUpdateIs(n, mark, want_final + [ids[0]])


if __name__ == "__main__":
    main()
