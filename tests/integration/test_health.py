#!/usr/bin/python3
"""Health: events injected through the fake NVML's control socket and what the kubelet
emulator sees on the open ListAndWatch stream."""

import time

from common import RESOURCE, NodeTest, main, mono_us, uuids
from edgegpu import APP_XIDS

TWO = uuids("two-gpus.conf")
DEBUG = {"EDGEGPU_LOG_LEVEL": "debug"}


def health_config(**health):
    lines = "".join(f"    {k}: {v}\n" for k, v in health.items())
    return "version: v1\nedgegpu:\n  health:\n" + lines


class Events(NodeTest):
    def test_critical_xid_unhealthy_within_1s(self):
        n, d = self.up("two-gpus.conf")
        since = n.emu.mark()
        t0 = mono_us()
        self.assertEqual(n.nvml.xid(1, 79), 1, "the daemon has one event set registered")
        ev = n.wait_devices(since=since, timeout=2)
        self.assertEqual(ev["unhealthy"], [TWO[1]])
        self.assertEqual(ev["healthy"], [TWO[0]])
        self.assertEqual(ev["reg"], 1, "same stream, no re-registration")
        self.assertWithin(1.0, t0, ev["recv_us"], "XID to Unhealthy on the stream")
        rec = d.wait_log("gpu unhealthy", device=TWO[1], timeout=1)
        self.assertIn("79", rec["reason"])

    def test_application_xids_ignored(self):
        n, d = self.up("two-gpus.conf", env=DEBUG)
        since, lsince = n.emu.mark(), d.mark()
        for x in APP_XIDS:
            n.nvml.xid(1, x)
        deadline = time.monotonic() + 3
        while len(d.find_logs("xid ignored", since=lsince)) < len(APP_XIDS):
            self.assertLess(time.monotonic(), deadline, d.tail())
            time.sleep(0.02)
        got = sorted(int(r["xid"]) for r in d.find_logs("xid ignored", since=lsince))
        self.assertEqual(got, sorted(APP_XIDS))
        self.assertNoDevicesEvent(n, since, 0.3)
        # And a critical one after them still counts.
        n.nvml.xid(1, 48)
        ev = n.wait_devices(since=since, timeout=2)
        self.assertEqual(ev["unhealthy"], [TWO[1]])

    def test_ignored_xids_from_config(self):
        n, d = self.up("two-gpus.conf", config=health_config(ignoredXids="[94, 0x3f]"))
        since = n.emu.mark()
        n.nvml.xid(0, 94)
        n.nvml.xid(0, 63)
        self.assertNoDevicesEvent(n, since, 0.5)
        n.nvml.xid(0, 79)
        self.assertEqual(n.wait_devices(since=since)["unhealthy"], [TWO[0]])

    def test_dp_disable_healthchecks_list(self):
        n, d = self.up("two-gpus.conf", env={"DP_DISABLE_HEALTHCHECKS": "48, 79"})
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        n.nvml.xid(1, 48)
        self.assertNoDevicesEvent(n, since, 0.5)
        n.nvml.xid(1, 94)
        ev = n.wait_devices(since=since, timeout=2)
        self.assertEqual(ev["unhealthy"], [TWO[1]])

    def test_dp_disable_healthchecks_all(self):
        n, d = self.up("two-gpus.conf", env={"DP_DISABLE_HEALTHCHECKS": "all"},
                       config=health_config(pollInterval="100ms"))
        d.wait_log("health checks disabled", timeout=2)
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
        rec = d.wait_log("single-bit ecc error, counting only", since=lsince, timeout=2)
        self.assertEqual(rec["device"], TWO[1])
        self.assertNoDevicesEvent(n, since, 0.3)
        t0 = mono_us()
        n.nvml.ecc(0, "double")
        ev = n.wait_devices(since=since, timeout=2)
        self.assertEqual(ev["unhealthy"], [TWO[0]])
        self.assertWithin(1.0, t0, ev["recv_us"], "double-bit ECC to Unhealthy")

    def test_gpu_lost_unhealthy(self):
        n, d = self.up("two-gpus.conf")
        since = n.emu.mark()
        t0 = mono_us()
        n.nvml.lost(0)
        ev = n.wait_devices(since=since, timeout=2)
        self.assertEqual(ev["unhealthy"], [TWO[0]])
        self.assertWithin(1.0, t0, ev["recv_us"], "GPU lost to Unhealthy")
        d.wait_log("gpu unhealthy", device=TWO[0], timeout=1)


class Recovery(NodeTest):
    def test_recovery_after_quiet_period(self):
        n, d = self.up("two-gpus.conf",
                       config=health_config(recoveryQuietPeriod="1s", pollInterval="200ms"))
        since = n.emu.mark()
        n.nvml.xid(1, 79)
        bad = n.wait_devices(since=since, unhealthy_count=1, timeout=2)
        good = n.wait_devices(since=n.emu.mark(), healthy_count=2, timeout=4)
        dt = (good["recv_us"] - bad["recv_us"]) / 1e6
        self.assertGreaterEqual(dt, 0.95, "healthy again before the quiet period")
        self.assertLessEqual(dt, 2.0, "recovery too late")
        d.wait_log("gpu healthy again", device=TWO[1], timeout=1)

    def test_new_xid_restarts_quiet_period(self):
        n, d = self.up("two-gpus.conf",
                       config=health_config(recoveryQuietPeriod="1s", pollInterval="200ms"))
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        bad = n.wait_devices(since=since, unhealthy_count=1, timeout=2)
        time.sleep(0.6)
        n.nvml.xid(0, 79)
        good = n.wait_devices(since=n.emu.mark(), healthy_count=2, timeout=4)
        self.assertGreaterEqual((good["recv_us"] - bad["recv_us"]) / 1e6, 1.5)

    def test_lost_gpu_stays_unhealthy_until_back(self):
        n, d = self.up("two-gpus.conf",
                       config=health_config(recoveryQuietPeriod="500ms", pollInterval="100ms"))
        since = n.emu.mark()
        n.nvml.lost(1)
        n.wait_devices(since=since, unhealthy=[TWO[1]], timeout=2)
        mid = n.emu.mark()
        time.sleep(1.5)
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices" and
                                    e.get("healthy_count") == 2, mid), [],
                         "a lost GPU came back Healthy")
        n.nvml.back(1)
        t0 = mono_us()
        good = n.wait_devices(since=mid, healthy_count=2, timeout=3)
        self.assertWithin(1.5, t0, good["recv_us"], "back to Healthy after the GPU returned")

    def test_recovery_off_by_default(self):
        n, d = self.up("two-gpus.conf", config=health_config(pollInterval="100ms"))
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        n.wait_devices(since=since, unhealthy_count=1, timeout=2)
        self.assertNoDevicesEvent(n, n.emu.mark(), 1.0)


class Polling(NodeTest):
    def test_eventless_gpu_polled_and_healthy(self):
        ids = uuids("no-events.conf")
        n, d = self.up("no-events.conf", config=health_config(pollInterval="200ms"))
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy_count"], 2)
        since = n.emu.mark()
        c0 = n.nvml.count("nvmlDeviceGetMemoryInfo")
        time.sleep(1.1)
        polls = n.nvml.count("nvmlDeviceGetMemoryInfo") - c0
        # GPU 0 (no events) probed every 200 ms: about 5 probes; GPU 1's events work, so it
        # is probed only every eventPollInterval (60 s). Allow for scheduling.
        self.assertGreaterEqual(polls, 3, "not polled")
        self.assertLessEqual(polls, 15, "polled far more often than the interval")
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices", since), [],
                         "an event-less GPU changed health")
        # The poll is what notices a problem on the GPU without events.
        t0 = mono_us()
        n.nvml.lost(0)
        ev = n.wait_devices(since=since, timeout=2)
        self.assertEqual(ev["unhealthy"], [ids[0]])
        self.assertWithin(0.2 + 0.5, t0, ev["recv_us"], "poll detecting a lost GPU")

    def test_failing_event_wait_backs_off(self):
        n, d = self.up("two-gpus.conf")
        lsince = d.mark()
        n.nvml.fail("nvmlEventSetWait_v2", "UNKNOWN")
        # The wait in progress (a long slice) is not affected: an ignored XID ends it, and
        # every wait after it fails.
        n.nvml.xid(0, 13)
        c0 = n.nvml.count("nvmlEventSetWait_v2")
        cpu0 = d.cpu_ticks()
        time.sleep(2.0)
        calls = n.nvml.count("nvmlEventSetWait_v2") - c0
        self.assertLessEqual(calls, 30, f"{calls} event waits in 2 s: spinning")
        self.assertLessEqual(d.cpu_ticks() - cpu0, 20, "busy while the wait fails")
        d.wait_log("gpu event wait failing, retrying with back-off, probing meanwhile",
                   since=lsince, timeout=1)
        n.nvml.fail("nvmlEventSetWait_v2", "off")
        d.wait_log("gpu event wait works again", since=lsince, timeout=6)
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        self.assertEqual(n.wait_devices(since=since, timeout=2)["unhealthy"], [TWO[0]])


class Driver(NodeTest):
    def test_runtime_version_mismatch_then_reinit(self):
        n, d = self.up("two-gpus.conf", config=health_config(pollInterval="200ms"))
        since, lsince = n.emu.mark(), d.mark()
        inits = n.nvml.count("nvmlInit_v2")
        t0 = mono_us()
        n.nvml.mismatch(True)
        ev = n.wait_devices(since=since, unhealthy_count=2, timeout=2)
        self.assertWithin(1.0, t0, ev["recv_us"], "mismatch to every GPU Unhealthy")
        d.wait_log("nvidia driver changed, re-initialising nvml", since=lsince, timeout=1)
        time.sleep(0.5)
        self.assertEqual(n.emu.last_devices(RESOURCE)["unhealthy_count"], 2,
                         "healthy again while still mismatched")
        n.nvml.mismatch(False)  # the fake: the driver was reloaded to match
        d.wait_log("nvml re-initialised", since=lsince, timeout=12)
        n.wait_devices(since=since, healthy_count=2, timeout=3)
        self.assertGreater(n.nvml.count("nvmlInit_v2"), inits)
        # Events work on the new event set.
        since = n.emu.mark()
        self.assertEqual(n.nvml.xid(1, 79), 1)
        self.assertEqual(n.wait_devices(since=since, timeout=2)["unhealthy"], [TWO[1]])

    def test_driver_reload_reinitialises(self):
        n, d = self.up("two-gpus.conf")
        since, lsince = n.emu.mark(), d.mark()
        n.nvml.reload()
        d.wait_log("nvml re-initialised", since=lsince, timeout=5)
        last = n.wait_devices(since=since, healthy_count=2, timeout=3)
        self.assertEqual(sorted(last["healthy"]), sorted(TWO))
        since = n.emu.mark()
        self.assertEqual(n.nvml.xid(0, 79), 1, "event set registered again after reload")
        self.assertEqual(n.wait_devices(since=since, timeout=2)["unhealthy"], [TWO[0]])


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
        deadline = time.monotonic() + 15
        while len(d.find_logs("xid ignored", since=lsince)) < ignored_total:
            self.assertLess(time.monotonic(), deadline,
                            f"{len(d.find_logs('xid ignored', since=lsince))} ignored XIDs "
                            f"logged of {ignored_total}")
            time.sleep(0.05)
        # A marker after the storm: once it is seen, every storm event was consumed (FIFO).
        n.nvml.xid(7, 79)
        want_final = sorted(want + [ids[7]])
        ev = n.wait_devices(since=since, unhealthy=want_final, timeout=5)
        self.assertEqual(len(d.find_logs("xid ignored", since=lsince)), ignored_total)
        self.assertEqual(sorted(ev["healthy"]), sorted(set(ids) - set(want_final)))
        self.assertGreaterEqual(n.nvml.count("nvmlEventSetWait_v2") - waits0, 10001,
                                "the fake saw fewer event waits than events")
        snaps = n.emu.find(lambda e: e.get("event") == "devices", since)
        self.assertLessEqual(len(snaps), 3, "one snapshot per health change at most")
        self.assertNoDevicesEvent(n, n.emu.mark(), 0.3)
        self.assertEqual(n.emu.last_devices(RESOURCE)["unhealthy"], want_final)


if __name__ == "__main__":
    main()
