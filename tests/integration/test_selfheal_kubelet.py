#!/usr/bin/python3
"""Self-healing on the kubelet side (issue 7): the device-plugin directory deleted and
recreated (item 1), the kubelet's pid recorded at Register (item 2), and gpumem placement
seeing live pods through pod-resources List answers whose order changes on every call, as the
real kubelet's do (item 8). The emulator shuffles List by default (--podres-order)."""

import os
import shutil
import stat
import time
import unittest
from collections import Counter

from common import NodeTest, main, uuids, wait_until

GPUMEM = "nvidia.com/gpumem"
TWO8 = uuids("sharing/two-8g.conf")
DEBUG = {"EDGEGPU_LOG_LEVEL": "debug"}
BIG_IDS = ("--max-ids", "400000")  # the emulator lists IDs in its events up to this many
MASK_CONFIG = ("version: v1\nedgegpu:\n  sharing:\n    memory:\n      devices: [0, 1]\n"
               "      reserveMiB: 0\n")


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


class PluginDir(NodeTest):
    def recreate_dir(self, n):
        """rm -rf and mkdir of the device-plugin directory, the mkdir once the daemon has
        seen it gone: its socket cannot be served meanwhile, and it says so."""
        mark = n.daemon.mark()
        for _ in range(50):
            # The daemon recreates its socket as soon as it sees it deleted, which can beat
            # the rmdir (rm -rf fails the same way): try again.
            try:
                shutil.rmtree(n.dir)
                break
            except OSError:
                time.sleep(0.01)
        self.assertFalse(os.path.exists(n.dir))
        n.daemon.wait_log("cannot serve the device plugin socket, retrying", since=mark,
                          path=n.socket(), timeout=10)
        os.mkdir(n.dir, 0o750)

    def test_recreated_dir_then_kubelet_restart(self):
        # Today: the watch on the removed directory is never re-armed, so the restarted
        # kubelet's cleanup deleting our socket goes unseen and Register keeps failing (the
        # kubelet cannot dial back); nothing ever registers again.
        n, d = self.up()
        self.recreate_dir(n)
        since = n.emu.mark()
        n.emu.restart(downtime=0.5)
        n.wait_register(since=since, timeout=10)
        ev = n.wait_devices(since=since, healthy_count=2, timeout=10)
        self.assertEqual(ev["count"], 2)
        self.assertTrue(is_socket(n.socket()), "our socket is not in the new directory")
        d.wait_log("directory gone, waiting for it to come back", path=n.dir, timeout=10)
        d.wait_log("directory back, watching it again", path=n.dir, timeout=10)
        # Again: the new directory's watch works as the first one did.
        self.recreate_dir(n)
        since = n.emu.mark()
        n.emu.restart(downtime=0.5)
        n.wait_register(since=since, timeout=10)
        n.wait_devices(since=since, healthy_count=2, timeout=10)
        self.assertTrue(d.alive())

    def test_recreated_dir_served_again_without_kubelet_restart(self):
        # The daemon acts on KUBELET_EVENT_DIR_BACK: it listens again, then registers.
        n, d = self.up()
        self.recreate_dir(n)
        self.assertTrue(wait_until(lambda: is_socket(n.socket()), 15),
                        "socket not served again in the recreated directory")

    def test_register_records_the_kubelets_pid(self):
        n, d = self.up()
        rec = d.wait_log("registered with the kubelet", timeout=10)
        self.assertEqual(rec.get("kubelet_pid"), str(n.emu.proc.pid), rec)


class GpumemLivePods(NodeTest):
    def test_live_pods_seen_through_a_shuffled_list(self):
        # A pod holds 6 GiB of GPU 0 and edgegpu restarts, forgetting what it allocated:
        # only pod-resources can tell it, and the mask must move to GPU 1. Today two List
        # answers are compared byte for byte, and a shuffled List never gives two equal ones.
        n = self.node("sharing/two-8g.conf", emulator_args=BIG_IDS)
        self.assertEqual(n.emu.wait_event("serving")["podres_order"], "shuffle")
        d = n.start_daemon(config=MASK_CONFIG, env=DEBUG)
        n.wait_register(GPUMEM, timeout=10)
        n.wait_devices(GPUMEM, healthy_count=8192, timeout=10)
        ev = n.emu.admit("a", f"c1:{GPUMEM}=6144")
        self.assertTrue(ev["ok"], ev)
        ids = n.emu.allocations("a")[0]["ids"]
        self.assertEqual(len(Counter(i[0] for i in ids)), 1, "units from two GPUs")
        letter = ids[0][0]
        # Other pods' devices, so the pod order changes too.
        n.emu.podres_pad(50)
        # Our List answers really do come in a new order each time.
        orders = set()
        for _ in range(4):
            pods = n.emu.podres_list()["pods"]
            orders.add(tuple(e["device_ids"][0]
                             for e in pods[0]["containers"][0]["devices"][:20]))
        self.assertGreater(len(orders), 1, "the emulator's List is not shuffled")

        rc, _ = d.stop()
        self.assertEqual(rc, 0, d.tail())
        since = n.emu.mark()
        d2 = n.start_daemon(config=n.config_path, env=DEBUG)
        reg = n.wait_register(GPUMEM, since=since, timeout=10)
        # Two equal answers 2 s apart: within ~6 s of the restart.
        settled = n.wait_devices(GPUMEM, since=since, timeout=10, reg=reg["reg"],
                                 unhealthy_count=2048)
        self.assertEqual(Counter(i[0] for i in settled["unhealthy"]), Counter({letter: 2048}))
        d2.wait_log("gpumem mask moved", gpu_from="0", gpu_to="1", timeout=10)
        d2.wait_log("pod-resources answer", resource=GPUMEM, live_units="6144", timeout=10)
        # Unchanged answers are recognised as unchanged: handed over once, not every poll.
        # The emulator says nothing per List call, so a window of about two polls (2 s
        # apart) is left to pass; a slow machine makes it weaker, never the test fail.
        time.sleep(4.5)
        # A changed set is recognised as changed: the pod goes, the mask may move back. Its
        # answer is the sentinel: every unchanged answer before it was handed over once.
        n.emu.delete("a")
        d2.wait_log("pod-resources answer", resource=GPUMEM, live_units="0", timeout=20)
        self.assertEqual(len(d2.find_logs("pod-resources answer", resource=GPUMEM,
                                          live_units="6144")), 1)
        self.assertEqual(d2.find_logs("pod-resources List failed, retrying"), [])


if __name__ == "__main__":
    main()
