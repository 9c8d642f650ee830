#!/usr/bin/python3
"""Kubelet lifecycle: registration retries, kubelet restarts, our socket deleted, signals,
SIGKILL and restart, SIGHUP reloads; no empty device list ever."""

import os
import signal

from common import RESOURCE, NodeTest, main, uuids, wait_until
from common import SANITIZED
from edgegpu import PluginClient

TWO = uuids("two-gpus.conf")
SHARED = "nvidia.com/gpu.shared"


def ts_config(replicas=2, rename=None):
    text = ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
            f"      - name: {RESOURCE}\n        replicas: {replicas}\n")
    if rename:
        text += f"        rename: {rename}\n"
    return text


class Registration(NodeTest):
    def test_kubelet_socket_missing_at_start(self):
        n = self.node("two-gpus.conf", start_emulator=False)
        d = n.start_daemon()
        d.wait_log("register failed, retrying", timeout=10)
        # It keeps retrying (the CPU this costs is measured by bench/run, bench_no_kubelet).
        wait_until(lambda: len(d.find_logs("register failed, retrying")) >= 2, 20,
                   "a second Register attempt")
        self.assertTrue(d.alive())
        n.emu.start()
        n.emu.wait_event("serving")
        reg = n.wait_register(timeout=10)
        self.assertTrue(reg["ok"])
        ev = n.wait_devices(healthy_count=2)
        self.assertEqual(sorted(ev["healthy"]), sorted(TWO))
        self.assertEqual(len(n.registrations(ok=None)), 1)

    def test_kubelet_restart_reregisters(self):
        n, d = self.up("two-gpus.conf")
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        since = n.emu.mark()
        n.emu.restart()
        reg = n.wait_register(since=since, timeout=10)
        ev = n.wait_devices(since=since, reg=reg["reg"])
        self.assertEqual(sorted(ev["healthy"]), sorted(TWO))
        self.assertTrue(os.path.exists(n.socket()))
        # The new kubelet allocates through the new connection.
        ev = n.emu.admit("p2", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        n.emu.assert_no_empty_list()
        self.assertFailedRegistersInterrupted(n)

    def test_kubelet_restart_100_times(self):
        n, d = self.up("two-gpus.conf")
        base = None
        for i in range(1, 101):
            since = n.emu.mark()
            n.emu.restart()
            reg = n.wait_register(since=since, timeout=10)
            ev = n.wait_devices(since=since, reg=reg["reg"], timeout=10)
            self.assertEqual(sorted(ev["healthy"]), sorted(TWO), f"restart {i}")
            if i == 10:
                base = (d.fd_count(), d.rss_kib(), d.fds())
        # The last restart's connections close after its device list: wait for that, not
        # for a while. A leak (one fd a restart) stays above the base.
        try:
            wait_until(lambda: d.fd_count() <= base[0], 10, "fds back to the base")
        except AssertionError:
            pass
        fds, rss = d.fd_count(), d.rss_kib()
        self.assertLessEqual(fds, base[0], f"open fds {base[0]} -> {fds}: before {base[2]}, "
                             f"after {d.fds()}")
        if not SANITIZED:  # ASan's quarantine grows RSS; LeakSanitizer finds leaks at exit
            self.assertLessEqual(rss - base[1], 64, f"VmRSS grew {base[1]} -> {rss} KiB")
        self.assertEqual(len(n.registrations()), 101)
        self.assertFailedRegistersInterrupted(n)
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "superseded"), [])
        n.emu.assert_no_empty_list()

    def test_own_socket_deleted_is_recreated(self):
        n, d = self.up("two-gpus.conf")
        lsince, since = d.mark(), n.emu.mark()
        os.unlink(n.socket())
        d.wait_log("device plugin socket deleted, recreating", since=lsince, timeout=10)
        wait_until(lambda: os.path.exists(n.socket()), 10, "the socket recreated")
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        self.assertEqual(c.options().code, "OK")
        r = c.allocate([TWO[0]])
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.responses[0]["envs"], {"NVIDIA_VISIBLE_DEVICES": TWO[0]})
        # The kubelet's stream was never cut: still registered, nothing re-sent empty.
        state = n.emu.state()["resources"][RESOURCE]
        self.assertTrue(state["live"], state)
        self.assertEqual(n.registrations(since=since, ok=False), [])
        # And a later kubelet restart still finds us.
        since = n.emu.mark()
        n.emu.restart()
        n.wait_register(since=since)
        self.assertFailedRegistersInterrupted(n)
        n.emu.assert_no_empty_list()


class Signals(NodeTest):
    def stop_cleanly(self, sig):
        n, d = self.up("two-gpus.conf")
        since = n.emu.mark()
        # How long the stop takes is measured by bench/run (bench_core, SIGTERM to exit).
        rc, _ = d.stop(sig, timeout=10)
        self.assertEqual(rc, 0, d.tail())
        self.assertFalse(os.path.exists(n.socket()), "plugin socket left behind")
        self.assertEqual(sorted(os.listdir(n.dir)), ["kubelet.sock"] +
                         (["kubelet_internal_checkpoint"]
                          if os.path.exists(os.path.join(n.dir, "kubelet_internal_checkpoint"))
                          else []))
        n.emu.wait_event("stream_end", since=since, timeout=10)
        d.wait_log("stopped", timeout=10)
        n.emu.assert_no_empty_list()

    def test_sigterm(self):
        self.stop_cleanly(signal.SIGTERM)

    def test_sigint(self):
        self.stop_cleanly(signal.SIGINT)

    def test_sigkill_then_restart(self):
        n, d = self.up("two-gpus.conf")
        rc, _ = d.kill()
        self.assertEqual(rc, -signal.SIGKILL)
        self.assertTrue(os.path.exists(n.socket()), "a SIGKILL leaves the socket behind")
        n.emu.wait_event("stream_end", timeout=10)
        since = n.emu.mark()
        d2 = n.start_daemon()
        reg = n.wait_register(since=since, timeout=10)
        self.assertEqual(reg["reg"], 2)
        self.assertEqual(reg["endpoint"], "nvidia-gpu.sock")
        ev = n.wait_devices(since=since, reg=2)
        self.assertEqual(sorted(ev["healthy"]), sorted(TWO))
        self.assertEqual(n.registrations(ok=False), [])
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        self.assertEqual(c.options().code, "OK", "the stale socket was not replaced")
        n.emu.assert_no_empty_list()
        self.assertTrue(d2.alive())


class Reload(NodeTest):
    def hup(self, n, d, config=None):
        if config is not None:
            n.write_config(config)
        lsince = d.mark()
        d.send_signal(signal.SIGHUP)
        d.wait_log("reloading", since=lsince, timeout=10)
        return lsince

    def test_sighup_time_slicing_same_name(self):
        n, d = self.up("two-gpus.conf", config="version: v1\n")
        since = n.emu.mark()
        self.hup(n, d, ts_config(2))
        ev = n.wait_devices(since=since, count=4, timeout=10)
        self.assertEqual(ev["reg"], 1, "same resource name: same stream")
        self.assertEqual(sorted(ev["healthy"]),
                         sorted(f"{u}::{k}" for u in TWO for k in range(2)))
        self.assertEqual(n.registrations(since=since, ok=None), [], "re-registered")
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        al = n.emu.allocations("p1")[0]
        self.assertEqual(al["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"],
                         al["ids"][0].split("::")[0])
        # Back to whole GPUs, still on the same stream.
        since = n.emu.mark()
        self.hup(n, d, "version: v1\n")
        ev = n.wait_devices(since=since, count=2, timeout=10)
        self.assertEqual(ev["reg"], 1)
        n.emu.assert_no_empty_list()

    def test_sighup_discovery_failure_keeps_devices_and_health(self):
        n, d = self.up("two-gpus.conf", config="version: v1\n")
        n.nvml.fail("nvmlDeviceGetCount_v2", "UNKNOWN")
        since = n.emu.mark()
        lsince = self.hup(n, d)
        d.wait_log("GPU discovery failed on reload, keeping the devices unchanged", since=lsince,
                   timeout=10)
        n.nvml.fail("nvmlDeviceGetCount_v2", "off")
        # The same stream, the same devices, and health still watched: an XID still lands.
        n.nvml.xid(1, 79)
        ev = n.wait_devices(since=since, unhealthy=[TWO[1]], timeout=10)
        self.assertEqual(ev["reg"], 1)
        self.assertEqual(ev["healthy"], [TWO[0]])
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        self.assertTrue(d.alive())
        n.emu.assert_no_empty_list()

    def test_sighup_rename_registers_new_and_closes_old(self):
        n, d = self.up("two-gpus.conf", config="version: v1\n")
        since = n.emu.mark()
        self.hup(n, d, ts_config(2, rename=SHARED))
        reg = n.wait_register(SHARED, since=since, timeout=10)
        self.assertEqual(reg["endpoint"], "nvidia-gpu.shared.sock")
        ev = n.wait_devices(SHARED, since=since, count=4)
        self.assertEqual(sorted(ev["healthy"]),
                         sorted(f"{u}::{k}" for u in TWO for k in range(2)))
        n.emu.wait_for(lambda e: e.get("event") == "stream_end" and
                       e.get("resource") == RESOURCE, since=since, timeout=10)
        self.assertEqual(n.registrations(RESOURCE, since=since, ok=None), [])
        wait_until(lambda: not os.path.exists(n.socket()), 10, "the old socket removed")
        # Renamed back.
        since = n.emu.mark()
        self.hup(n, d, "version: v1\n")
        n.wait_register(RESOURCE, since=since, timeout=10)
        self.assertEqual(sorted(n.wait_devices(RESOURCE, since=since)["healthy"]), sorted(TWO))
        n.emu.wait_for(lambda e: e.get("event") == "stream_end" and
                       e.get("resource") == SHARED, since=since, timeout=10)
        n.emu.assert_no_empty_list()

    def test_sighup_new_gpu_in_fixture(self):
        three = uuids("three-gpus.conf")
        self.assertEqual(three[:2], TWO)
        n, d = self.up("two-gpus.conf")
        since = n.emu.mark()
        n.nvml.load("three-gpus.conf")
        self.hup(n, d)
        ev = n.wait_devices(since=since, count=3, timeout=10)
        self.assertEqual(ev["reg"], 1)
        self.assertEqual(sorted(ev["healthy"]), sorted(three))
        self.assertEqual(n.registrations(since=since, ok=None), [])
        # The new GPU is monitored too.
        since = n.emu.mark()
        n.nvml.xid(2, 79)
        self.assertEqual(n.wait_devices(since=since, timeout=10)["unhealthy"], [three[2]])
        # And removed again.
        since = n.emu.mark()
        n.nvml.load("two-gpus.conf")
        self.hup(n, d)
        ev = n.wait_devices(since=since, count=2, timeout=10)
        self.assertEqual(sorted(ev["healthy"]), sorted(TWO))
        n.emu.assert_no_empty_list()

    def test_sighup_unchanged_registers_nothing(self):
        n, d = self.up("two-gpus.conf", config=ts_config(2), healthy=4)
        since = n.emu.mark()
        lsince = self.hup(n, d)
        # The reload is done (its rediscovery and plugin sync), and the daemon has served a
        # kubelet call after it: a re-registration would have begun by then.
        d.wait_log("GPU discovery done", since=lsince, timeout=10)
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        self.assertEqual(n.registrations(since=since, ok=None), [])
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "stream_end", since), [])
        self.assertFalse(d.find_logs(since=lsince, level="error"), d.tail())
        n.emu.assert_no_empty_list()

    def test_sighup_bad_config_keeps_old(self):
        n, d = self.up("two-gpus.conf", config=("version: v1\nflags:\n  plugin:\n"
                                                "    deviceListStrategy: volume-mounts\n"))
        since = n.emu.mark()
        bad = {
            "syntax": ("version: v1\nflags:\n  plugin:\n    deviceListStrategy: envvar\n"
                       "   passDeviceSpecs: true\n", 5, None),
            "replicas": (ts_config(1), 6, "sharing.timeSlicing.resources[0].replicas"),
        }
        for what, (text, line, key) in bad.items():
            with self.subTest(what):
                lsince = self.hup(n, d, text)
                rec = d.wait_log("invalid config, keeping the previous one", since=lsince,
                                 timeout=10)
                self.assertIn(f"{n.config_path}:{line}:", rec["detail"])
                if key:
                    self.assertIn(key, rec["detail"])
                self.assertEqual(rec["level"], "error")
        # The daemon answers a kubelet call after the rejected reloads (the sentinel); they
        # changed nothing the kubelet sees.
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        self.assertEqual(n.emu.find(lambda e: e.get("event") in ("register", "stream_end",
                                                                 "devices"), since), [])
        resp = n.emu.allocations("p1")[0]["response"]
        self.assertEqual(resp["envs"], {"NVIDIA_VISIBLE_DEVICES":
                                        "/var/run/nvidia-container-devices"},
                         "the old config (volume-mounts) is no longer in force")
        # A good config after the bad ones is taken.
        self.hup(n, d, "version: v1\n")
        ev = n.emu.admit("p2", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        self.assertEqual(n.emu.allocations("p2")[0]["response"]["envs"],
                         {"NVIDIA_VISIBLE_DEVICES": n.emu.allocations("p2")[0]["ids"][0]})

    def test_no_empty_list_across_reload_restart_and_kill(self):
        n, d = self.up("two-gpus.conf", config="version: v1\n")
        self.hup(n, d, ts_config(2))
        n.wait_devices(count=4, timeout=10)
        since = n.emu.mark()
        n.emu.restart()
        n.wait_register(since=since)
        n.wait_devices(since=since, count=4)
        self.hup(n, d, "version: v1\n")
        n.wait_devices(since=since, count=2, timeout=10)
        d.kill()
        since = n.emu.mark()
        n.start_daemon(config=n.config_path)
        n.wait_register(since=since)
        n.wait_devices(since=since, count=2)
        since = n.emu.mark()
        n.emu.restart()
        n.wait_register(since=since)
        n.wait_devices(since=since, count=2)
        lsince = self.hup(n, n.daemon)
        n.daemon.wait_log("GPU discovery done", since=lsince, timeout=10)
        self.assertGreaterEqual(len(n.emu.devices_events(RESOURCE)), 6)
        n.emu.assert_no_empty_list()
        self.assertFailedRegistersInterrupted(n)


if __name__ == "__main__":
    main()
