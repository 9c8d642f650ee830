#!/usr/bin/python3
"""Per-pod attribution against a hostile host (issue 16, item 2): the real daemon on eight fake
GPUs with 512 processes, whose host /proc and kubelet log trees are built to hurt
(tests/lib/hostile_host.py: 64 KiB cgroup files, a FIFO, links out of the tree, 100,000
container links, a pods/ entry linking to a 100,000-entry directory). The kubelet's Allocates
issued while scrapes attribute those processes all succeed well inside the kubelet's deadline,
what a link leads to never becomes a label, memory stays far below the DaemonSet's limit, and
every limit that cut the attribution short is reported in a metric and a log line."""

import os
import threading

from common import RESOURCE, SANITIZED, NodeTest, main, wait_until
from edgegpu import samples
from hostile_host import GPUS, SECRET, HostileHost

CONFIG = "version: v1\nedgegpu:\n  metrics:\n    minInterval: 100ms\n"
# The kubelet gives Allocate 5 s; the test asks for a fifth of that (twice as much with the
# sanitizers' slowdown), which a loop blocked by a scrape's file reads does not meet.
ALLOCATE_MAX_US = 2_000_000 if SANITIZED else 1_000_000
# The DaemonSet's memory limit is 64 Mi; the daemon stays at a fraction of it.
HWM_MAX_KIB = 24 * 1024
RUNS = 6  # attribution runs (new samples) the Allocates must overlap


def used_by_container(expo):
    return {(lab["pod"], lab["container"]): v
            for lab, v in samples(expo, "edgegpu_pod_gpu_memory_used_bytes")}


def unattributed(expo):
    return {int(lab["pid"]): lab["reason"]
            for lab, _ in samples(expo, "edgegpu_unattributed_gpu_memory_used_bytes")}


def cuts(expo):
    return {lab["reason"]: v for lab, v in samples(expo, "edgegpu_attribution_cut_total")}


class HostileAttribution(NodeTest):
    def test_allocate_unaffected_and_nothing_followed_out_of_the_tree(self):
        n = self.node("eight-gpus.conf")
        host = HostileHost(n.proc_dir, n.log_dir, os.path.join(n.root, "outside")).build()
        d = n.start_daemon(config=CONFIG)
        n.wait_register(timeout=10)
        n.wait_devices(healthy_count=GPUS, timeout=10)
        for g, procs in host.processes.items():
            n.nvml.set(g, "processes", procs)

        # Every process is attributed, or reported with its reason: nothing is dropped.
        def complete():
            e = d.scrape(timeout=30)
            return e if used_by_container(e) == host.pods else None
        expo = wait_until(complete, 120, "every pod's usage attributed")
        self.assertEqual(unattributed(expo), host.unattributed)
        c = cuts(expo)
        for reason in ("cgroup-size", "link", "not-regular-file", "dir-entries"):
            self.assertGreater(c.get(reason, 0), 0, f"cut {reason} reported: {c}")
        for reason in ("link", "not-regular-file", "cgroup-size", "dir-entries"):
            d.wait_log("pod attribution cut short, serving what was read", reason=reason)

        # Scrapes in a loop, each after minInterval so each takes a new sample and a new
        # attribution run, and each adding a container link (the containers/ directory
        # changes, so each run lists its 100,000 entries again). Meanwhile the kubelet
        # allocates: every call succeeds, far inside its deadline.
        stop = threading.Event()
        bodies, errors = [], []

        def scraper():
            i = host.links
            while not stop.is_set():
                host.junk_link(i)
                i += 1
                try:
                    status, _, body = d.http("/metrics", timeout=30)
                except OSError as e:
                    errors.append(repr(e))
                    continue
                if status == 200:
                    bodies.append(body.decode())
                elif status != 429:
                    errors.append(status)
        t = threading.Thread(target=scraper)
        samples0 = samples(expo, "edgegpu_metrics_samples_total")[0][1]
        loads = []
        t.start()
        try:
            def overlapped():
                loads.append(n.emu.load(RESOURCE, "allocate", 200, 1))
                s = samples(d.scrape(timeout=30), "edgegpu_metrics_samples_total")[0][1]
                return s - samples0 >= RUNS
            wait_until(overlapped, 300, f"{RUNS} attribution runs during Allocates", step=0)
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])
        for ev in loads:
            self.assertEqual(ev.get("errors", 0), 0, ev)
            self.assertLess(ev["max_us"], ALLOCATE_MAX_US, ev)

        # What links lead to never became a label, in any answer.
        self.assertTrue(bodies)
        for body in bodies:
            self.assertNotIn(SECRET, body)
            self.assertNotIn("only-dir", body)
            self.assertNotIn('pod="leak"', body)
            self.assertNotIn('pod="big"', body)
        expo = wait_until(complete, 120, "every pod's usage, after the load")
        self.assertEqual(unattributed(expo), host.unattributed)
        if not SANITIZED:  # ASan's shadow and quarantine are not the daemon's
            hwm = int(d.status("VmHWM").split()[0])
            self.assertLess(hwm, HWM_MAX_KIB, "peak RSS far below the 64 Mi limit")
        self.assertTrue(d.alive())


if __name__ == "__main__":
    main()
