#!/usr/bin/python3
"""The gpumem backstop (issue 19, item 5; docs/sharing.md "Backstop"): the real daemon on the
fake NVML, whose per-process usage names REAL child processes of this test (sleep), mapped to
pods by fake host /proc cgroup files and the kubelet's log links (as test_attribution.py), with
the emulator's pod-resources answer naming each pod's gpumem units. A process whose container
stays above limit x tolerance for `after` is killed (the test waits for the child to die), with
its log line and counter; a container under its limit, a host process and a whole-GPU pod over
any size are never touched; off by default; without the host's PID namespace it says it cannot
act and kills nothing."""

import os
import signal
import subprocess
import time

from common import RESOURCE, NodeTest, main, uuids, wait_until
from edgegpu import samples

GPUMEM = "nvidia.com/gpumem"
MIB = 1 << 20
TWO = uuids("two-gpus.conf")

BASE = ("version: v1\nedgegpu:\n  metrics:\n    minInterval: 100ms\n"
        "  sharing:\n    memory:\n      devices: [0]\n      unitMiB: 256\n      reserveMiB: 512\n")
ON = BASE + ("      enforcement:\n        backstop:\n          enabled: true\n"
             "          tolerancePercent: 110\n          after: 1s\n          interval: 200ms\n")


def uid(n):
    return f"{n:08x}-1111-4222-8333-{n:012x}"


def cid(n):
    return f"{n:064x}"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class Backstop(NodeTest):
    def setUp(self):
        self.children = []

    def tearDown(self):
        for c in self.children:
            if c.poll() is None:
                c.kill()
            c.wait()

    def child(self):
        c = subprocess.Popen(["sleep", "1000"])
        self.children.append(c)
        return c

    def host_process(self, n, c, k, pod, container):
        """Makes child `c` look like a process of `pod`'s `container` in the fake host /proc:
        its cgroup (cgroup v2, cgroupfs driver), its real stat (the start time the kill
        re-checks) and the kubelet's log link naming it."""
        d = os.path.join(n.proc_dir, str(c.pid))
        if pod:
            write(os.path.join(d, "cgroup"), f"0::/kubepods/burstable/pod{uid(k)}/{cid(k)}\n")
            link = os.path.join(n.log_dir, "containers",
                                f"{pod}_default_{container}-{cid(k)}.log")
            if not os.path.lexists(link):
                os.symlink(f"/var/log/pods/default_{pod}_{uid(k)}/{container}/0.log", link)
        else:
            write(os.path.join(d, "cgroup"), "0::/system.slice/ollama.service\n")
        with open(f"/proc/{c.pid}/stat") as f:
            write(os.path.join(d, "stat"), f.read())

    def node_with_pods(self, config, host_pid=True):
        n = self.node("two-gpus.conf")
        if host_pid:
            # The fake host's PID namespace is ours (the daemon compares it with its own).
            os.makedirs(os.path.join(n.proc_dir, "1", "ns"))
            os.symlink(f"/proc/{os.getpid()}/ns/pid", os.path.join(n.proc_dir, "1", "ns", "pid"))
        d = n.start_daemon(config=config)
        n.wait_register(timeout=10)
        n.wait_devices(GPUMEM, timeout=10)
        for pod, req in (("hog", f"c1:{GPUMEM}=4"), ("calm", f"c1:{GPUMEM}=4"),
                         ("whole", f"main:{RESOURCE}=1")):
            ev = n.emu.admit(pod, req)
            self.assertTrue(ev["ok"], ev)
        self.hog, self.hog_small = self.child(), self.child()
        self.calm, self.host, self.whole = self.child(), self.child(), self.child()
        self.host_process(n, self.hog, 1, "hog", "c1")
        self.host_process(n, self.hog_small, 1, "hog", "c1")
        self.host_process(n, self.calm, 2, "calm", "c1")
        self.host_process(n, self.host, 3, None, None)
        self.host_process(n, self.whole, 4, "whole", "main")
        # GPU 0 (gpumem, 1 GiB slices): hog 1100 + 100 MiB of 1024 (x 1.1 = 1126.4), calm
        # 900 MiB, a host process and the whole-GPU pod's process far over any slice.
        n.nvml.set(0, "processes",
                   f"{self.hog.pid}:{1100 * MIB},{self.hog_small.pid}:{100 * MIB},"
                   f"{self.calm.pid}:{900 * MIB},{self.host.pid}:{6000 * MIB},"
                   f"{self.whole.pid}:{6000 * MIB}")
        n.nvml.set(1, "processes", f"{self.whole.pid}:{20000 * MIB}")
        return n, d

    def metric(self, d, name, **match):
        got = samples(d.scrape(), name, **match)
        return got[0][1] if got else None

    def rounds_after(self, d, more):
        """Waits for `more` backstop rounds (each a sample judged) from now."""
        start = self.metric(d, "edgegpu_gpumem_backstop_rounds_total")
        wait_until(lambda: self.metric(d, "edgegpu_gpumem_backstop_rounds_total") >= start + more,
                   30, f"{more} backstop rounds")

    def wait_exit(self, c, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if c.poll() is not None:
                return c.returncode
            time.sleep(0.05)
        self.fail(f"pid {c.pid} still alive after {timeout}s")

    def alive(self, *cs):
        for c in cs:
            self.assertIsNone(c.poll(), f"pid {c.pid} was killed")

    def test_over_limit_killed_others_never(self):
        n, d = self.node_with_pods(ON)
        d.wait_log("gpumem backstop active", tolerance_percent="110")
        self.assertEqual(self.metric(d, "edgegpu_gpumem_backstop_state", state="active"), 1)
        rc = self.wait_exit(self.hog, 30)
        self.assertEqual(rc, -signal.SIGKILL)
        # The driver forgets a dead process: so does the fake. hog is now under its slice.
        n.nvml.set(0, "processes",
                   f"{self.hog_small.pid}:{100 * MIB},{self.calm.pid}:{900 * MIB},"
                   f"{self.host.pid}:{6000 * MIB},{self.whole.pid}:{6000 * MIB}")
        rec = d.wait_log("killed a process over its container's gpumem limit",
                         pid=str(self.hog.pid))
        self.assertEqual((rec["namespace"], rec["pod"], rec["container"], rec["gpu"]),
                         ("default", "hog", "c1", TWO[0]))
        self.assertEqual(rec["limit"], str(1024 * MIB))
        self.assertEqual(rec["used"], str(1200 * MIB))
        self.assertEqual(rec["level"], "warn")
        self.assertGreaterEqual(float(rec["seconds_over"]), 1.0)
        kills = {(lab["namespace"], lab["pod"], lab["container"]): v for lab, v in
                 samples(d.scrape(), "edgegpu_gpumem_backstop_kills_total")}
        self.assertEqual(kills, {("default", "hog", "c1"): 1})
        # Ten more rounds (2 s, twice `after`): the largest process alone was killed; the
        # container under its slice, the host process and the whole-GPU pod never are.
        self.rounds_after(d, 10)
        self.alive(self.hog_small, self.calm, self.host, self.whole)
        self.assertEqual(len(d.find_logs("killed a process over its container's gpumem limit")),
                         1)
        self.assertEqual(self.metric(d, "edgegpu_gpumem_backstop_enabled"), 1)

    def test_off_by_default(self):
        n, d = self.node_with_pods(BASE)
        self.assertEqual(self.metric(d, "edgegpu_gpumem_backstop_enabled"), 0)
        self.assertEqual(self.metric(d, "edgegpu_gpumem_backstop_state", state="disabled"), 1)
        # Twenty samples 100 ms apart (2 s, twice `after` had it been on): nobody dies.
        start = self.metric(d, "edgegpu_metrics_samples_total")
        wait_until(lambda: self.metric(d, "edgegpu_metrics_samples_total") >= start + 20, 30,
                   "twenty samples")
        self.alive(self.hog, self.hog_small, self.calm, self.host, self.whole)
        self.assertEqual(samples(d.scrape(), "edgegpu_gpumem_backstop_kills_total"), [])

    def test_without_host_pid_says_so_and_kills_nothing(self):
        n, d = self.node_with_pods(ON, host_pid=False)
        rec = d.wait_log("the gpumem backstop is enabled but cannot act: deploy with hostPID "
                         "(deployments/overlays/backstop)")
        self.assertEqual(rec["level"], "error")
        self.assertEqual(self.metric(d, "edgegpu_gpumem_backstop_state", state="no-host-pid"), 1)
        start = self.metric(d, "edgegpu_metrics_samples_total")
        wait_until(lambda: self.metric(d, "edgegpu_metrics_samples_total") >= start + 20, 30,
                   "twenty samples")
        self.alive(self.hog, self.hog_small, self.calm, self.host, self.whole)
        self.assertEqual(len(d.find_logs("the gpumem backstop is enabled but cannot act: "
                                         "deploy with hostPID (deployments/overlays/backstop)")),
                         1)


if __name__ == "__main__":
    main()
