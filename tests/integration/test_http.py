#!/usr/bin/python3
"""The liveness endpoint under the five HTTP starvation patterns (issue 16, item 1): with every
connection slot of the metrics server held by hostile clients (tests/lib/httpattack.py), the
kubelet's liveness probe (a fresh connection each, as the kubelet sends it) gets every answer
within the probe timeout of our DaemonSet, and Allocate keeps succeeding meanwhile."""

import threading

from common import RESOURCE, NodeTest, main, wait_until
from edgegpu import samples
from httpattack import Attack, probe

PROBES = 20
# deployments/base/daemonset.yaml: livenessProbe timeoutSeconds.
PROBE_TIMEOUT = 2.0
SLOTS = 16  # edgegpu.metrics.maxConnections, default


def held(d, port):
    """Connections to @port the daemon has accepted (not those waiting in the backlog)."""
    inodes = {t[len("socket:["):-1] for t in d.fds().values() if t.startswith("socket:[")}
    n = 0
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{d.pid}/net/{name}") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            local, state, inode = f[1], f[3], f[9]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "01" and inode in inodes:
                n += 1
    return n


class Starvation(NodeTest):
    def starve(self, pattern):
        n, d = self.up("two-gpus.conf")
        port = d.metrics_port()
        self.assertEqual(probe(port, PROBE_TIMEOUT), 200)

        def in_place():
            return attack.ready() and held(d, port) >= SLOTS

        with Attack(port, pattern, SLOTS) as attack:
            wait_until(in_place, 30, f"{pattern}: {SLOTS} attackers holding connections")
            load = {}
            t = threading.Thread(target=lambda: load.update(
                ev=n.emu.load(RESOURCE, "allocate", 300, 2)))
            t.start()
            got = []
            for i in range(PROBES):
                # Each probe meets the attack in full: the connection it displaced (if any)
                # is back first.
                wait_until(in_place, 30, f"{pattern}: attackers back before probe {i}")
                got.append(probe(port, PROBE_TIMEOUT))
            t.join()
            self.assertEqual(got, [200] * PROBES, f"{pattern}: liveness probes answered")
            self.assertEqual(load["ev"].get("errors", 0), 0, load["ev"])
            self.assertTrue(attack.ready(), f"{pattern}: the attack went on throughout")
        self.assertTrue(d.alive())
        return d

    def evicted(self, d, reason):
        got = samples(d.scrape(), "edgegpu_http_connections_evicted_total", reason=reason)
        return got[0][1] if got else 0

    def cut(self, d):
        """Drippers closed: to make room (full) or at their request deadline. A probe that
        meets 16 drippers finds room by one or the other (a deadline that falls between the
        test's count of the attackers and the probe's connect makes room by itself)."""
        return self.evicted(d, "full") + self.evicted(d, "request_deadline")

    def test_drip(self):
        d = self.starve("drip")
        # Each probe took a dripper's place; the counters say so.
        self.assertGreater(self.evicted(d, "full"), 0)
        self.assertGreaterEqual(self.cut(d), PROBES)

    def test_drip_from_many_addresses(self):
        d = self.starve("drip-many")
        self.assertGreater(self.evicted(d, "full"), 0)
        self.assertGreaterEqual(self.cut(d), PROBES)

    def test_non_reading_pipeliners(self):
        self.starve("pipeline")

    def test_tarpit(self):
        d = self.starve("tarpit")
        self.assertGreater(samples(d.scrape(), "edgegpu_metrics_scrapes_throttled_total")[0][1], 0)

    def test_keepalive_scrapers_in_a_loop(self):
        self.starve("keepalive")

    def test_drip_is_cut_at_the_request_deadline(self):
        """With nobody to make room for, a dripping connection is still cut: the header must
        be whole within connectionTimeout (3 s), although a byte comes every 2 s."""
        cfg = "version: v1\nedgegpu:\n  metrics:\n    connectionTimeout: 3s\n"
        n, d = self.up("two-gpus.conf", config=cfg)
        port = d.metrics_port()
        with Attack(port, "drip", 2) as attack:
            wait_until(lambda: attack.closed >= 2, 30, "both drippers cut")
        wait_until(lambda: self.evicted(d, "request_deadline") >= 2, 10,
                   "the cuts counted as request_deadline")


if __name__ == "__main__":
    main()
