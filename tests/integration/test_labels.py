#!/usr/bin/env python3
"""GPU Feature Discovery parity of the node labels file the daemon writes, on the fake NVML:
fixtures with and without each feature GFD labels (MIG capability, MIG-enabled GPUs, the PCI
class of a compute or a graphics card, several models), the timestamp and GFD's switch for it.
The values are GFD's (k8s-device-plugin internal/lm), docs/metrics.md "Node labels against
GFD"."""

import os
import signal
import time

from common import NodeTest, main, wait_until

FAST = "version: v1\nedgegpu:\n  metrics:\n    minInterval: 100ms\n"


class GfdLabels(NodeTest):
    def labels(self, n, want_key="nvidia.com/gpu.count"):
        """The label lines of the node's file once it holds `want_key`."""
        def read():
            try:
                with open(n.labels_file) as f:
                    text = f.read()
            except FileNotFoundError:
                return None
            lines = dict(line.split("=", 1) for line in text.splitlines()
                         if line and not line.startswith("#"))
            return lines if want_key in lines else None
        return wait_until(read, 10, "the labels file")

    def assertLabels(self, lines, want):
        self.assertEqual({k: lines.get(k) for k in want}, want)

    def assertTimestamp(self, lines, before):
        ts = int(lines["nvidia.com/gfd.timestamp"])
        self.assertTrue(before <= ts <= int(time.time()), (before, ts))

    def test_mig_capable_and_mig_enabled_counted(self):
        # A100 served, an A100 and an H100 with MIG on (skipped, counted by model).
        before = int(time.time())
        n, d = self.up("gfd-mig.conf", config=FAST, healthy=1)
        lines = self.labels(n)
        self.assertLabels(lines, {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
            "nvidia.com/gpu.count": "2",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/gpu.mode": "compute",
            "nvidia.com/gpu.family": "ampere",
            "nvidia.com/gpu.replicas": "1",
        })
        self.assertNotIn("nvidia.com/mig.strategy", lines)  # GFD's "none": not written
        self.assertTimestamp(lines, before)

    def test_graphics_card_without_mig(self):
        n, d = self.up("geforce.conf", config=FAST)
        lines = self.labels(n)
        self.assertLabels(lines, {
            "nvidia.com/gpu.mode": "graphics",
            "nvidia.com/mig.capable": "false",
            "nvidia.com/gpu.family": "ada-lovelace",
            "nvidia.com/gpu.count": "2",
            "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090",
        })

    def test_two_models_counted_per_model(self):
        # An A2 and an L4: the A2 described, counted alone, as GFD counts.
        n, d = self.up("two-gpus.conf", config=FAST)
        lines = self.labels(n)
        self.assertLabels(lines, {
            "nvidia.com/gpu.product": "NVIDIA-A2",
            "nvidia.com/gpu.count": "1",
            "nvidia.com/mig.capable": "false",
            "nvidia.com/gpu.mode": "compute",
        })

    def test_mig_only_node(self):
        # No GPU served, yet GFD labels the node: the MIG-enabled model, without sharing.
        n = self.node("mig-only.conf")
        n.start_daemon(config=FAST)
        lines = self.labels(n)
        self.assertLabels(lines, {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/gpu.count": "2",
            "nvidia.com/gpu.memory": "81920",
            "nvidia.com/gpu.replicas": "0",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": "true",
        })

    def test_gpus_gone_labels_go(self):
        # The GPUs go (a rediscovery finds none): the GPU labels leave the file at once, as
        # they leave GFD's at its next pass, and are not kept alive by the expiry refresh.
        n, d = self.up("two-gpus.conf", config=FAST)
        self.labels(n)
        self.assertEqual(n.nvml.load("zero-gpus.conf"), "gpus=0")
        since = d.mark()
        d.send_signal(signal.SIGHUP)
        d.wait_log("no devices found, retrying", since=since, timeout=10)

        def gone():
            with open(n.labels_file) as f:
                text = f.read()
            lines = [line for line in text.splitlines() if line and not line.startswith("#")]
            return text if not lines and "# +expiry-time=" in text else None
        wait_until(gone, 10, "the labels file without labels")
        # And back with the GPUs.
        self.assertEqual(n.nvml.load("two-gpus.conf"), "gpus=2")
        d.send_signal(signal.SIGHUP)
        self.assertEqual(self.labels(n)["nvidia.com/gpu.count"], "1")

    def test_no_timestamp(self):
        # GFD's flags.gfd.noTimestamp in the config file, then its environment variable.
        n, d = self.up("two-gpus.conf",
                       config=FAST + "flags:\n  gfd:\n    noTimestamp: true\n")
        lines = self.labels(n)
        self.assertNotIn("nvidia.com/gfd.timestamp", lines)
        d.stop()
        os.unlink(n.labels_file)
        before = int(time.time())
        n.start_daemon(config=FAST)
        self.assertTimestamp(self.labels(n, "nvidia.com/gfd.timestamp"), before)
        n.daemon.stop()
        os.unlink(n.labels_file)
        n.start_daemon(config=FAST, env={"GFD_NO_TIMESTAMP": "true"})
        self.assertNotIn("nvidia.com/gfd.timestamp", self.labels(n))


if __name__ == "__main__":
    main()
