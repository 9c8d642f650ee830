#!/usr/bin/python3
"""A healthy node from end to end: the driver (fake NVML, module, device nodes, units), the
runtime (containerd with the nvidia runtime as the default, the toolkit) and the device plugin
(the real kubelet emulator and the real daemon, serving and registered) all in one host tree.
`edgegpu doctor` must then pass every layer and exit 0; breaking one layer at a time must make
exactly that layer's check fail and the exit status 1. (bench/run's bench_doctor times the
same tree.)"""

import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from edgegpu import RESOURCE, Node  # noqa: E402
from hostroot import HostRoot  # noqa: E402


def healthy_node(tmp, node):
    """The host tree: driver and runtime healthy, /var/lib/kubelet -> /data/kubelet (an absolute
    link, as hosts with the kubelet's data on another disk have it: followed inside the tree),
    and there the node's kubelet dir (hard links to its sockets: the doctor never leaves the
    tree)."""
    h = HostRoot(tmp).healthy(gpus=2).containerd_nvidia()
    h.link_tree("/data/kubelet", node.root)
    h.symlink("/var/lib/kubelet", "/data/kubelet")
    shutil.copyfile(node.fixture, h.nvml_fixture)  # the daemon's GPUs are the doctor's
    return h


class HealthyNode(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = Node()
        # Two GPUs of one model (the fake's default name), as HostRoot.gpus() writes them.
        with open(cls.node.fixture, "w") as f:
            f.write("driver_version = 550.54.15\nnvml_version = 12.550.54.15\n[gpu]\n[gpu]\n")
        cls.daemon = cls.node.start_daemon()
        cls.node.wait_register(RESOURCE, timeout=15)
        cls.node.wait_devices(RESOURCE, healthy_count=2, timeout=15)
        cls.port = cls.daemon.metrics_port()

    @classmethod
    def tearDownClass(cls):
        cls.node.close()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="doctor-node-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.h = healthy_node(self.tmp, self.node)

    def doctor(self):
        return self.h.doctor("--json", "--metrics-address", f"127.0.0.1:{self.port}")

    def statuses(self, r):
        return {c["id"]: c["status"] for c in r.report["checks"]}

    def test_every_layer_passes(self):
        r = self.doctor()
        st = self.statuses(r)
        self.assertEqual(r.rc, 0, r)
        self.assertTrue(r.report["ok"])
        self.assertEqual([i for i, s in st.items() if s == "fail"], [], r)
        want_pass = ["driver.nvml", "driver.versions", "driver.devices", "driver.nvidia-smi",
                     "driver.persistence", "driver.boot", "runtime.layout",
                     "runtime.containerd-nvidia", "runtime.toolkit", "plugin.dir",
                     "plugin.kubelet-socket", "plugin.sockets", "plugin.registered",
                     "plugin.allocations", "compat.gpu-models", "compat.arch"]
        self.assertEqual({i: st.get(i) for i in want_pass}, {i: "pass" for i in want_pass}, r)
        for i in ("driver.tegra", "runtime.docker", "compat.cuda", "compat.image"):
            self.assertEqual(st.get(i), "skip", i)
        # The label value a pod selects this model by is the one labels.c writes for NFD.
        self.assertIn("pods select this node's model with nodeSelector nvidia.com/gpu.product: "
                      "NVIDIA-Fake-GPU", r.check("compat.gpu-models")["evidence"])
        alloc = r.check("plugin.allocations")
        self.assertIn(f"{RESOURCE}: 2 allocatable, 0 allocated, 2 free", alloc["evidence"])

    def test_one_broken_layer_fails_alone(self):
        breakers = {
            "driver.versions": lambda h: h.kmod("535.104.05"),
            "runtime.containerd-nvidia": lambda h: h.remove("/usr/bin/nvidia-container-runtime"),
            "plugin.dir": lambda h: (h.remove("/var/lib/kubelet"), h.dir("/var/lib/kubelet")),
        }
        for cid, brk in breakers.items():
            with self.subTest(check=cid):
                h = self.h = healthy_node(os.path.join(self.tmp, cid), self.node)
                brk(h)
                r = self.doctor()
                failed = [i for i, s in self.statuses(r).items() if s == "fail"]
                self.assertEqual(r.rc, 1, r)
                self.assertIn(cid, failed)
                layer = cid.split(".")[0]
                self.assertEqual({i.split(".")[0] for i in failed}, {layer}, failed)


class OverlappingUpgrade(unittest.TestCase):
    """A second instance started while the first runs serves at nvidia-gpu-1.sock (plugin.h);
    with the first killed (its socket left stale), that one stands for the resource."""

    def test_the_new_instance_at_its_alternate_path_counts(self):
        node = Node()
        self.addCleanup(node.close)
        with open(node.fixture, "w") as f:
            f.write("driver_version = 550.54.15\nnvml_version = 12.550.54.15\n[gpu]\n[gpu]\n")
        old = node.start_daemon()
        node.wait_register(RESOURCE, timeout=15)
        mark = node.emu.mark()
        new = node.start_daemon()
        node.wait_register(RESOURCE, since=mark, timeout=15)
        old.kill()
        tmp = tempfile.mkdtemp(prefix="doctor-node-")
        self.addCleanup(shutil.rmtree, tmp, True)
        h = healthy_node(tmp, node)
        r = h.doctor("--json", "--metrics-address", f"127.0.0.1:{new.metrics_port()}")
        c = r.check("plugin.sockets")
        self.assertEqual(c["status"], "pass", r)
        self.assertTrue(any(e.endswith("nvidia-gpu-1.sock: accepts connections")
                            for e in c["evidence"]), c)


if __name__ == "__main__":
    unittest.main(verbosity=2)
