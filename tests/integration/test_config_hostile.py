#!/usr/bin/python3
"""Configurations that used to freeze or quietly break the daemon (issue 7):

- item 7: a FIFO at the config path blocked the daemon's only thread in open(), at start and on
  SIGHUP. The file is now opened non-blocking and must be a regular file: at start the daemon
  refuses it with a clear error and exits non-zero at once; on SIGHUP it logs the error, keeps
  the old config and keeps serving.
- item 1 (config side): a socket path longer than sun_path (107 bytes) can never be served; the
  daemon used to start and serve nothing. It is now refused at start, naming the key, the path and
  the limit, with a non-zero exit.
"""

import os
import signal

from common import RESOURCE, NodeTest, main, uuids, wait_until
from edgegpu import PluginClient

TWO = uuids("two-gpus.conf")
EXIT_WAIT = 10  # seconds: the daemon must have exited by then


class FifoConfig(NodeTest):
    def test_fifo_at_start_is_refused_at_once(self):
        n = self.node("two-gpus.conf")
        os.mkfifo(n.config_path)
        d = n.start_daemon(config=n.config_path, wait_control=False)
        try:
            rc = d.wait(timeout=EXIT_WAIT)
        except Exception:
            self.fail(f"the daemon did not exit within {EXIT_WAIT}s with a FIFO as its config "
                      f"(blocked opening it?); log:\n{d.tail()}")
        self.assertNotEqual(rc, 0)
        text = d.text()
        self.assertIn(n.config_path, text)
        self.assertIn("it is a FIFO, not a regular file", text)
        self.assertEqual(n.registrations(RESOURCE), [])

    def test_fifo_on_sighup_keeps_serving(self):
        n = self.node("two-gpus.conf")
        d = n.start_daemon(config="version: v1\n")
        n.wait_register(RESOURCE, timeout=10)
        n.wait_devices(RESOURCE, healthy_count=2, timeout=10)
        os.remove(n.config_path)
        os.mkfifo(n.config_path)
        mark = d.mark()
        d.send_signal(signal.SIGHUP)
        rec = d.wait_log("invalid config, keeping the previous one", since=mark, timeout=10)
        self.assertIn(n.config_path, rec["detail"])
        self.assertIn("it is a FIFO, not a regular file", rec["detail"])
        # Still serving: an Allocate answers at once.
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        r = c.allocate([TWO[1]], timeout=10)
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.responses[0]["envs"]["NVIDIA_VISIBLE_DEVICES"], TWO[1])
        # A second SIGHUP with the FIFO still there: the same, no hang.
        mark = d.mark()
        d.send_signal(signal.SIGHUP)
        d.wait_log("invalid config, keeping the previous one", since=mark, timeout=10)
        # A regular file again: the next SIGHUP applies it.
        os.remove(n.config_path)
        ev_mark = len(n.emu.events)
        n.write_config("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                       "    - name: nvidia.com/gpu\n      replicas: 2\n")
        d.send_signal(signal.SIGHUP)
        n.wait_devices(RESOURCE, since=ev_mark, healthy_count=4, timeout=10)
        self.assertTrue(d.alive())


class SocketPathLimit(NodeTest):
    def long_dir(self, n, total):
        """An existing directory under the node root whose path is `total` bytes long."""
        base = os.path.join(n.root, "p")
        path = base + "x" * (total - len(base))
        os.makedirs(path)
        self.assertEqual(len(path), total)
        return path

    def test_long_device_plugin_path_is_refused(self):
        n = self.node("two-gpus.conf")
        # <dir>/nvidia-gpu.sock is 16 bytes more: 108 + 16 > 107.
        long = self.long_dir(n, 108)
        d = n.start_daemon(flags=("--device-plugin-path", long), wait_control=False)
        try:
            rc = d.wait(timeout=EXIT_WAIT)
        except Exception:
            self.fail(f"the daemon kept running with a plugin socket path over 107 bytes; "
                      f"log:\n{d.tail()}")
        self.assertNotEqual(rc, 0)
        text = d.text()
        self.assertIn("edgegpu.devicePluginPath", text)
        self.assertIn(os.path.join(long, "nvidia-gpu.sock"), text)
        self.assertIn("longer than the 107", text)
        self.assertIn("sun_path", text)

    def test_socket_at_the_limit_is_served(self):
        n = self.node("two-gpus.conf")
        # Exactly 107 bytes: <dir>/nvidia-gpu.sock. The emulator stays in its own directory.
        ok = self.long_dir(n, 107 - len("/nvidia-gpu.sock"))
        d = n.start_daemon(flags=("--device-plugin-path", ok))
        d.wait_log("starting", timeout=10)
        sock = os.path.join(ok, "nvidia-gpu.sock")
        wait_until(lambda: os.path.exists(sock), 10, f"{sock}; log:\n{d.tail()}")
        self.assertTrue(d.alive())


if __name__ == "__main__":
    main()
