"""Shared pieces of the integration tests: the test base class and small helpers."""

import os
import sys
import time
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from edgegpu import (RESOURCE, Node, load_fixture, mono_us, wait_until)  # noqa: E402,F401

__all__ = ["RESOURCE", "Node", "load_fixture", "mono_us", "wait_until", "FIXTURES", "SANITIZED",
           "uuids",
           "NodeTest", "main"]

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# The daemon is built with sanitizers (tests/integration/meson.build): its RSS then holds
# ASan's quarantine and shadow, and leaks are LeakSanitizer's to find at exit.
SANITIZED = os.environ.get("EDGEGPU_SANITIZE", "none") not in ("", "none")


def uuids(fixture):
    return [g["uuid"] for g in load_fixture(fixture)["gpus"]]


class NodeTest(unittest.TestCase):
    """Each test gets fresh nodes from self.node(); on failure their logs are printed."""

    maxDiff = None

    def node(self, fixture="two-gpus.conf", **kw):
        n = Node(fixture=fixture, **kw)
        self.addCleanup(self._close_node, n)
        return n

    def _failed(self):
        res = getattr(getattr(self, "_outcome", None), "result", None)
        if res is None:
            return True
        return any(getattr(t, "test_case", t) is self for t, _ in res.failures + res.errors)

    def _close_node(self, n):
        if self._failed():
            print(f"\n===== {self.id()}: node {n.root}", file=sys.stderr)
            n.dump()
        n.close()
        if n.emu.stderr_text.strip():
            # A Go panic or race report in the emulator is a failure of the test run.
            self.assertNotIn("panic", n.emu.stderr_text, n.emu.stderr_text[-2000:])

    def up(self, fixture="two-gpus.conf", config=None, healthy=None, **kw):
        """A node with the daemon registered and its first device list seen."""
        n = self.node(fixture, **{k: v for k, v in kw.items() if k in ("start_emulator",)})
        d = n.start_daemon(config=config, **{k: v for k, v in kw.items()
                                             if k != "start_emulator"})
        n.wait_register(timeout=10)
        want = len(load_fixture(fixture)["gpus"]) if healthy is None else healthy
        n.wait_devices(healthy_count=want, timeout=10)
        return n, d

    CANCELLED_TEXTS = ("context canceled", "code = Canceled",
                       "kubelet restarted during registration")

    def assertFailedRegistersInterrupted(self, node):
        """Every refused Register was cut short by a kubelet restart: it began before a
        `restart` event (emitted once the old incarnation has stopped), its failure came before
        the next restart (the same cycle, however long the machine took), and it failed with a
        cancellation (the daemon re-registers as soon as its stream ends, which can reach the
        old kubelet while it is going away). Any other refusal, such as the same-socket
        duplicate check, fails the test."""
        evs = list(node.emu.events)
        begin = {e["reg"]: i for i, e in enumerate(evs) if e.get("event") == "register_begin"}
        restarts = [i for i, e in enumerate(evs) if e.get("event") == "restart"]
        for i, e in enumerate(evs):
            if e.get("event") != "register" or e.get("ok"):
                continue
            b = begin.get(e["reg"], i)
            around = "\n".join(str(x)[:220] for x in evs[max(0, b - 4):i + 2])
            after = [r for r in restarts if r > b]
            ok = (any(t in (e.get("error") or "") for t in self.CANCELLED_TEXTS) and after
                  and (len(after) < 2 or i < after[1]))
            self.assertTrue(ok, f"Register refused, not because of a restart: {e}; events:\n"
                            + around)

    def assertFirstUpdateIs(self, node, since, unhealthy, resource=RESOURCE, timeout=10):
        """The first ListAndWatch snapshot after event index `since` is the sentinel's: exactly
        the devices `unhealthy` are Unhealthy. Call it after injecting a sentinel (a critical
        XID on a GPU the events before it did not touch): the fake NVML delivers events in
        order, so nothing injected before the sentinel changed health. No quiet window."""
        ev = node.wait_devices(resource, since=since, timeout=timeout)
        self.assertEqual(sorted(ev["unhealthy"]), sorted(unhealthy),
                         f"a device list update before the sentinel: {ev}")
        return ev

    def assertNoDevicesEvent(self, node, since, seconds, resource=RESOURCE):
        """No new ListAndWatch snapshot for `seconds` after event index `since`. Only where
        no sentinel exists (nothing the daemon does could announce the end of the window):
        a slow machine makes the check weaker, never the test fail."""
        time.sleep(seconds)
        evs = node.emu.find(lambda e: e.get("event") == "devices" and
                            e.get("resource") == resource, since)
        self.assertEqual(evs, [], "unexpected device list update")


def main():
    # The emulator driver leaves its pipes to the garbage collector.
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(verbosity=2)
