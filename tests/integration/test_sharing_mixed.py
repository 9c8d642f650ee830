#!/usr/bin/python3
"""Time-slicing with a different `replicas` per GPU under one resource name (issue 7, item 5):
two sharing.timeSlicing entries named nvidia.com/gpu, GPU 0 four ways and GPU 1 two ways, are six
devices (before the fix: four, because one count was applied to every GPU of the resource).
Through the real daemon, the kubelet emulator and the fake NVML: the advertised list, Allocate of
a replica on each GPU, GetPreferredAllocation spreading by each GPU's share taken, and the config
error for `devices: all` beside a list of the same resource (docs/sharing.md)."""

from common import RESOURCE, NodeTest, main, uuids
from edgegpu import PluginClient

TWO = uuids("two-gpus.conf")

MIXED = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
      devices: [0]
    - name: nvidia.com/gpu
      replicas: 2
      devices: [1]
"""


def replicas(uuid, n):
    return [f"{uuid}::{i}" for i in range(n)]


class MixedReplicas(NodeTest):
    def start(self):
        n = self.node("two-gpus.conf")
        d = n.start_daemon(config=MIXED)
        n.wait_register(RESOURCE, timeout=10)
        n.wait_devices(RESOURCE, healthy_count=6, timeout=10)
        return n, d

    def test_six_devices_each_gpu_its_own_count(self):
        n, d = self.start()
        ev = n.emu.last_devices(RESOURCE)
        self.assertEqual(sorted(ev["healthy"]), sorted(replicas(TWO[0], 4) + replicas(TWO[1], 2)))
        self.assertEqual(ev["unhealthy"], [])
        self.assertEqual(len(n.registrations(RESOURCE)), 1)

    def test_allocate_maps_each_replica_to_its_gpu(self):
        n, d = self.start()
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        r = c.allocate([f"{TWO[0]}::3"], [f"{TWO[1]}::1"], [f"{TWO[0]}::0", f"{TWO[1]}::0"])
        self.assertEqual(r.code, "OK", r)
        envs = [x["envs"]["NVIDIA_VISIBLE_DEVICES"] for x in r.responses]
        self.assertEqual(envs, [TWO[0], TWO[1], f"{TWO[0]},{TWO[1]}"])
        # GPU 1 has no third replica, though GPU 0 does.
        r = c.allocate([f"{TWO[1]}::2"])
        self.assertNotEqual(r.code, "OK", r)
        # Through the kubelet emulator: a one-replica pod per GPU, as the kubelet would do it.
        got = []
        for pod in ("p0", "p1"):
            ev = n.emu.admit(pod, f"c1:{RESOURCE}=1")
            self.assertTrue(ev["ok"], ev)
            al = n.emu.allocations(pod)
            self.assertEqual(len(al), 1, al)
            self.assertTrue(al[0]["ok"], al[0])
            got.append((al[0]["ids"], al[0]["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"]))
        self.assertEqual(got, [([f"{TWO[0]}::0"], TWO[0]), ([f"{TWO[1]}::0"], TWO[1])])

    def test_preferred_spreads_by_share_taken(self):
        n, d = self.start()
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        every = replicas(TWO[0], 4) + replicas(TWO[1], 2)
        r = c.preferred(every, [], 3)
        self.assertEqual(r.code, "OK", r)
        # One on each, then GPU 0 (a quarter taken) before GPU 1 (half taken).
        self.assertEqual(r.ids, [f"{TWO[0]}::0", f"{TWO[1]}::0", f"{TWO[0]}::1"])
        r = c.preferred(every, [], 6)
        self.assertEqual(sorted(r.ids), sorted(every))


class AllBesideList(NodeTest):
    def test_all_and_a_list_for_one_name_is_refused(self):
        n = self.node("two-gpus.conf")
        cfg = MIXED.replace("devices: [1]", "devices: all")
        path = n.write_config(cfg)
        d = n.start_daemon(config=path, wait_control=False)
        self.assertIsNotNone(d.wait(timeout=10), "the daemon kept running")
        self.assertNotEqual(d.returncode, 0)
        text = d.text()
        # Both entries, by key and position.
        self.assertIn(f"{path}:10:16", text)
        self.assertIn("sharing.timeSlicing.resources[1].devices", text)
        self.assertIn(f"sharing.timeSlicing.resources[0].devices ({path}:7:16)", text)


if __name__ == "__main__":
    main()
