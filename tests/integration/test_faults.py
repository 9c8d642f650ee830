#!/usr/bin/python3
"""Start-up faults: NVML missing, a missing symbol, init failure, driver/library mismatch,
failOnInitError both ways, and a node whose GPUs appear later."""

import os
import signal
import time

from common import RESOURCE, NodeTest, load_fixture, main, uuids, wait_until
from edgegpu import binary


def still_serving(d):
    """The daemon's loop still turns: a SIGHUP is taken (the event that says it did not exit
    or hang, in place of watching it for a while)."""
    mark = d.mark()
    d.send_signal(signal.SIGHUP)
    d.wait_log("reloading", since=mark, timeout=10)
    return d.alive()


def wait_until_logged(d, msg, count, timeout=20):
    """Waits until the daemon has logged `msg` `count` times."""
    return wait_until(lambda: len(d.find_logs(msg)) >= count, timeout,
                      f"{count} log lines msg={msg!r}")


def no_registration(n):
    return n.emu.find(lambda e: e.get("event") == "register_begin") == []


class NvmlMissing(NodeTest):
    def missing_lib(self, n):
        return os.path.join(n.root, "no-driver", "libnvidia-ml.so.1")

    def test_fail_on_init_error_true_exits(self):
        n = self.node()
        lib = self.missing_lib(n)
        d = n.start_daemon(nvml_lib=lib, wait_control=False)
        rc = d.wait(timeout=10)
        self.assertNotEqual(rc, 0)
        text = d.text()
        self.assertIn(lib, text, "the message does not name what is missing")
        rec = d.wait_log("initialisation failed", timeout=10)
        self.assertEqual(rec["level"], "error")
        self.assertIn("failOnInitError", rec["_line"])
        self.assertTrue(no_registration(n))
        self.assertFalse(os.path.exists(n.socket()))

    def test_missing_symbol_named(self):
        nosym = binary("FAKE_NVML_NOSYM")
        n = self.node()
        d = n.start_daemon(nvml_lib=nosym, wait_control=False)
        self.assertNotEqual(d.wait(timeout=10), 0)
        self.assertIn("nvmlDeviceGetMinorNumber", d.text())
        self.assertTrue(no_registration(n))

    def test_fail_on_init_error_false_keeps_running(self):
        n = self.node()
        lib = self.missing_lib(n)
        d = n.start_daemon(nvml_lib=lib, wait_control=False,
                           config="version: v1\nflags:\n  failOnInitError: false\n"
                                  "edgegpu:\n  rediscoverInterval: 1s\n")
        rec = d.wait_log("GPU discovery failed, registering nothing, retrying", timeout=10)
        self.assertIn(lib, rec["reason"])
        self.assertEqual(rec["level"], "warn")
        # Re-checks with the library missing leave no trace to wait for: a window of about two
        # of them (a slow machine makes the check weaker, not the test fail).
        time.sleep(2.5)
        self.assertTrue(still_serving(d), d.tail())
        self.assertEqual(len(d.find_logs("GPU discovery failed, registering nothing, retrying")),
                         1, "the reason is repeated at every re-check")
        self.assertTrue(no_registration(n))
        self.assertFalse(os.path.exists(n.socket()))
        rc, _ = d.stop(timeout=10)
        self.assertEqual(rc, 0)


class InitFailure(NodeTest):
    def test_init_failure_exits(self):
        n = self.node("init-fail.conf")
        d = n.start_daemon(wait_control=False)
        self.assertNotEqual(d.wait(timeout=10), 0)
        rec = d.find_logs("initialisation failed")
        self.assertEqual(len(rec), 1, d.text())
        self.assertIn("Driver Not Loaded", rec[0]["reason"])
        self.assertIn("nvmlInit", rec[0]["reason"])
        self.assertTrue(no_registration(n))

    def test_init_failure_tolerated_then_fixed(self):
        n = self.node("init-fail.conf")
        d = n.start_daemon(config="version: v1\nflags:\n  failOnInitError: false\n"
                                  "edgegpu:\n  rediscoverInterval: 1s\n", wait_control=False)
        rec = d.wait_log("GPU discovery failed, registering nothing, retrying", timeout=10)
        self.assertIn("Driver Not Loaded", rec["reason"])
        self.assertTrue(still_serving(d), d.tail())
        self.assertTrue(no_registration(n))
        # The driver gets loaded: a re-check (NVML loaded again) finds the GPUs.
        n.replace_fixture("two-gpus.conf")
        reg = n.wait_register(timeout=10)
        self.assertTrue(reg["ok"])
        ev = n.wait_devices(healthy_count=2)
        self.assertEqual(sorted(ev["healthy"]), sorted(uuids("two-gpus.conf")))


class Mismatch(NodeTest):
    def test_version_mismatch_at_start(self):
        fx = load_fixture("mismatch.conf")["global"]
        n = self.node("mismatch.conf")
        d = n.start_daemon(wait_control=False, fake_host=True)
        self.assertNotEqual(d.wait(timeout=10), 0)
        rec = d.find_logs("initialisation failed")
        self.assertEqual(len(rec), 1, d.text())
        reason = rec[0]["reason"]
        self.assertIn("version", reason)
        self.assertIn(fx["nvml_version"], reason, "library version not in the message")
        self.assertIn(fx["kernel_driver_version"], reason,
                      "kernel module version not in the message")
        self.assertIn("mismatch", reason.lower())
        self.assertTrue(no_registration(n))

    def test_version_mismatch_tolerated(self):
        n = self.node("mismatch.conf")
        d = n.start_daemon(fake_host=True, flags=["--fail-on-init-error=false"],
                           wait_control=False)
        rec = d.wait_log("GPU discovery failed, registering nothing, retrying", timeout=10)
        self.assertIn(load_fixture("mismatch.conf")["global"]["kernel_driver_version"],
                      rec["reason"])
        self.assertTrue(still_serving(d), d.tail())
        self.assertTrue(no_registration(n))


class LateGpus(NodeTest):
    def test_zero_gpus_then_two(self):
        n = self.node("zero-gpus.conf")
        d = n.start_daemon(config="version: v1\nedgegpu:\n  rediscoverInterval: 1s\n")
        d.wait_log("no devices found, retrying", timeout=10)
        # A re-check finds none again, and nothing registered meanwhile.
        wait_until_logged(d, "no devices found, retrying", 2)
        self.assertTrue(no_registration(n), "registered with no devices")
        self.assertTrue(d.alive())
        self.assertEqual(n.nvml.load("two-gpus.conf"), "gpus=2")
        reg = n.wait_register(timeout=10)
        self.assertTrue(reg["ok"])
        ev = n.wait_devices(healthy_count=2)
        self.assertEqual(sorted(ev["healthy"]), sorted(uuids("two-gpus.conf")))
        n.emu.assert_no_empty_list(RESOURCE)
        # The late GPUs are health-monitored like any other.
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        self.assertEqual(n.wait_devices(since=since, timeout=10)["unhealthy"],
                         [uuids("two-gpus.conf")[0]])


if __name__ == "__main__":
    main()
