"""Self-healing (issue 7): NVML never runs on the loop (a hung call marks its GPUs Unhealthy
and serving goes on), reloads never stall serving and apply the paths they change, a plugin
socket that cannot be served is retried until it can, and the CDI spec is honest."""

import os
import signal
import stat
import threading

from common import RESOURCE, NodeTest, main, uuids, wait_until
from edgegpu import Daemon, Emulator, PluginClient, base_env

TWO = uuids("two-gpus.conf")


def health_config(**kw):
    return "version: v1\nedgegpu:\n  health:\n" + "".join(
        f"    {k}: {v}\n" for k, v in kw.items())


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


class HungNvml(NodeTest):
    """The fake NVML's "block FUNC" holds every later call of FUNC inside the driver."""

    def blocked(self, n, func="nvmlDeviceGetMemoryInfo", timeout=10):
        n.nvml.block(func)
        self.addCleanup(lambda: self._release(n, func))
        self.assertTrue(wait_until(lambda: n.nvml.blocked(func) >= 1, timeout),
                        f"no call entered {func}")

    @staticmethod
    def _release(n, func):
        try:
            n.nvml.release(func)
        except Exception:  # the daemon (and the fake with it) may be gone
            pass

    def test_hung_probe_marks_unhealthy_and_serving_goes_on(self):
        n, d = self.up(config=health_config(pollInterval="200ms", eventPollInterval="200ms",
                                            callTimeout="500ms"))
        since, lsince = n.emu.mark(), d.mark()
        self.blocked(n)
        ev = n.wait_devices(since=since, unhealthy_count=2, timeout=10)
        self.assertEqual(sorted(ev["unhealthy"]), sorted(TWO))
        rec = d.wait_log("nvml call hung, its gpus are unhealthy until it returns, serving on",
                         since=lsince, timeout=10)
        self.assertEqual(rec["call"], "nvmlDeviceGetMemoryInfo")
        d.wait_log("device health changed", since=lsince, timeout=10,
                   reason="nvml call nvmlDeviceGetMemoryInfo hung")
        # The loop is not stuck: calls are answered (Allocate refuses the Unhealthy GPU).
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        self.assertEqual(c.call("GetDevicePluginOptions").code, "OK")
        r = c.allocate([TWO[0]])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn("unhealthy", r.details.lower())
        # A SIGHUP is taken (its rediscovery waits behind the hung call, serving does not).
        d.send_signal(signal.SIGHUP)
        d.wait_log("reloading", since=lsince, timeout=10)
        self.assertEqual(c.call("GetDevicePluginOptions").code, "OK")
        # The call returns: the GPUs are healthy again.
        since = n.emu.mark()
        n.nvml.release("nvmlDeviceGetMemoryInfo")
        n.wait_devices(since=since, healthy_count=2, timeout=10)
        d.wait_log("nvml call returned", since=lsince, timeout=10)
        self.assertTrue(d.alive())

    def test_sigterm_with_a_call_stuck_in_the_driver(self):
        n, d = self.up(config=health_config(pollInterval="200ms", eventPollInterval="200ms"))
        self.blocked(n)
        d.send_signal(signal.SIGTERM)
        # Before the worker thread, the stop joined a thread that never comes back: the call
        # stays blocked until the test ends, so an exit at all is the proof.
        rc = d.wait(timeout=30)
        self.assertEqual(rc, 0, d.tail())
        d.wait_log("stopped", timeout=10)

    def test_sighup_discovery_hung_then_sigterm(self):
        n, d = self.up()
        lsince = d.mark()
        n.nvml.block("nvmlDeviceGetCount_v2")
        self.addCleanup(lambda: self._release(n, "nvmlDeviceGetCount_v2"))
        d.send_signal(signal.SIGHUP)
        self.assertTrue(wait_until(lambda: n.nvml.blocked("nvmlDeviceGetCount_v2") >= 1, 15),
                        "the rediscovery did not start")
        # Serving goes on while the rediscovery is stuck.
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        self.assertEqual(c.allocate([TWO[0]]).code, "OK")
        d.send_signal(signal.SIGTERM)
        self.assertEqual(d.wait(timeout=10), 0, d.tail())
        self.assertTrue(d.find_logs("reloading", since=lsince))


class Reload(NodeTest):
    def test_allocate_answers_through_ten_sighups(self):
        n, d = self.up()
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        stop = threading.Event()
        codes = []

        def load():
            while not stop.is_set():
                codes.append(c.allocate([TWO[len(codes) % 2]], timeout=10).code)

        t = threading.Thread(target=load)
        t.start()
        lsince = d.mark()
        for _ in range(10):
            mark = d.mark()
            d.send_signal(signal.SIGHUP)
            d.wait_log("reloading", since=mark, timeout=10)
        # The reloads' rediscovery finished, and Allocate never failed meanwhile.
        self.assertTrue(wait_until(
            lambda: len(d.find_logs("GPU discovery done", since=lsince)) >= 1, 15))
        self.assertTrue(wait_until(lambda: len(codes) >= 20, 10))
        stop.set()
        t.join(10)
        self.assertEqual(set(codes), {"OK"})
        self.assertEqual(n.registrations(since=0, ok=None)[1:], [],
                         "an unchanged reload registered again")

    def test_sigterm_right_after_sighup(self):
        n, d = self.up()
        d.send_signal(signal.SIGHUP)
        d.send_signal(signal.SIGTERM)
        self.assertEqual(d.wait(timeout=10), 0, d.tail())

    def start_without_path_flags(self, n, config):
        """The daemon with devicePluginPath and kubeletSocket from the config file only, so
        that a SIGHUP can change them."""
        path = n.write_config(config)
        argv = [a for a in n.daemon_argv(config=path, kubelet_socket=None)]
        i = argv.index("--device-plugin-path")
        del argv[i:i + 2]
        env = base_env({"EDGEGPU_FAKE_NVML_FIXTURE": n.fixture,
                        "EDGEGPU_FAKE_NVML_CONTROL": n.ctl_path})
        d = Daemon(argv, env, name="edgegpu#paths",
                   log_path=os.path.join(n.root, "edgegpu.paths.log"))
        n.nvml.close()
        d.start()
        n.daemons.append(d)
        n.daemon = d
        n.nvml.wait_ready(timeout=10)
        return path, d

    def test_sighup_moves_the_device_plugin_path(self):
        n = self.node()
        path, d = self.start_without_path_flags(
            n, f"version: v1\nedgegpu:\n  devicePluginPath: {n.dir}\n")
        n.wait_register(timeout=10)
        old_sock = n.socket()
        self.assertTrue(wait_until(lambda: is_socket(old_sock), 15))
        # A second kubelet elsewhere; the config now points there.
        emu2 = Emulator(root=os.path.join(n.root, "kubelet2"))
        self.addCleanup(emu2.stop)
        lsince = d.mark()
        with open(path, "w") as f:
            f.write(f"version: v1\nedgegpu:\n  devicePluginPath: {emu2.dir}\n")
        d.send_signal(signal.SIGHUP)
        emu2.wait_registered(RESOURCE, timeout=10)
        ev = emu2.wait_devices(RESOURCE, healthy=2, timeout=10)
        self.assertTrue(ev)
        self.assertTrue(is_socket(os.path.join(emu2.dir, "nvidia-gpu.sock")))
        self.assertTrue(wait_until(lambda: not os.path.exists(old_sock), 15),
                        "the old socket is still there")
        d.wait_log("device-plugin paths changed, moving our sockets", since=lsince, timeout=10)

    def test_sighup_restart_only_settings_are_kept_and_logged(self):
        n, d = self.up(config="version: v1\n")
        lsince = d.mark()
        n.write_config("version: v1\nflags:\n  nvidiaDriverRoot: /elsewhere\n")
        d.send_signal(signal.SIGHUP)
        rec = d.wait_log("config setting needs a restart, keeping the running value",
                         since=lsince, timeout=10)
        self.assertIn("nvidiaDriverRoot", rec["key"])
        self.assertTrue(d.alive())


    def test_sighup_applies_grpc_limits(self):
        n, d = self.up(config="version: v1\n")
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        big = "x" * (100 << 10)  # an ID of 100 KiB: a request over 64 KiB
        self.assertEqual(c.allocate([big]).code, "INVALID_ARGUMENT")
        lsince = d.mark()
        n.write_config("version: v1\nedgegpu:\n  grpc:\n    maxRecvMsgBytes: 65536\n")
        d.send_signal(signal.SIGHUP)
        d.wait_log("GPU discovery done", since=lsince, timeout=10)
        self.assertTrue(wait_until(lambda: c.allocate([big]).code == "RESOURCE_EXHAUSTED", 15))
        self.assertEqual(c.allocate([TWO[0]]).code, "OK")


class PluginSocket(NodeTest):
    def test_socket_path_blocked_by_a_directory_is_retried(self):
        n = self.node()
        blocker = n.socket()
        os.makedirs(os.path.join(blocker, "sub"))
        with open(os.path.join(blocker, "sub", "f"), "w") as f:
            f.write("x")
        d = n.start_daemon()
        rec = d.wait_log("cannot serve the device plugin socket, retrying", timeout=10)
        self.assertEqual(rec["path"], blocker)
        # Still trying, with back-off, while the directory is there.
        d.wait_log("cannot serve the device plugin socket, retrying", since=d.mark(),
                   timeout=10)
        since = n.emu.mark()
        os.remove(os.path.join(blocker, "sub", "f"))
        os.rmdir(os.path.join(blocker, "sub"))
        os.rmdir(blocker)
        n.wait_register(since=since, timeout=15)
        n.wait_devices(since=since, healthy_count=2, timeout=10)
        d.wait_log("serving the device plugin socket again", timeout=10)
        self.assertTrue(is_socket(blocker))


class Cdi(NodeTest):
    def cdi_node(self):
        """A node with a fake driver tree; the daemon's argv to serve CDI annotations."""
        from edgegpu import load_fixture
        n = self.node()
        driver = os.path.join(n.root, "driver")
        devroot = os.path.join(n.root, "devroot")
        ver = load_fixture("two-gpus.conf")["global"]["driver_version"]
        libdir = driver + "/usr/lib/x86_64-linux-gnu"
        os.makedirs(libdir)
        for lib in ("libcuda.so.", "libnvidia-ml.so."):
            open(os.path.join(libdir, lib + ver), "w").close()
        os.makedirs(devroot + "/dev")
        for node in ("nvidiactl", "nvidia0", "nvidia1"):
            open(os.path.join(devroot, "dev", node), "w").close()
        config = ("version: v1\nflags:\n  plugin:\n"
                  "    deviceListStrategy: cdi-annotations\n")
        return n, dict(config=config, flags=["--driver-root", driver, "--dev-root", devroot])

    def spec_path(self, n):
        return os.path.join(n.cdi_dir, "k8s.device-plugin.nvidia.com-gpu.json")

    def test_unwritable_spec_dir_fails_allocate_until_written(self):
        n, flags = self.cdi_node()
        # A file where the spec directory should be: no spec can be written.
        if os.path.isdir(n.cdi_dir):
            os.rmdir(n.cdi_dir)
        with open(n.cdi_dir, "w") as f:
            f.write("in the way")
        d = n.start_daemon(**flags)
        n.wait_register(timeout=10)
        d.wait_log("cannot write the cdi spec, retrying", timeout=10)
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        r = c.allocate([TWO[0]])
        self.assertEqual(r.code, "FAILED_PRECONDITION", r)
        self.assertIn("CDI", r.details)
        # The way is cleared: the retry writes the spec, and Allocate names CDI devices.
        os.remove(n.cdi_dir)
        self.assertTrue(wait_until(lambda: os.path.exists(self.spec_path(n)), 15),
                        "spec not written after the directory became writable")
        d.wait_log("cdi spec written", timeout=10)
        self.assertTrue(wait_until(lambda: c.allocate([TWO[0]]).code == "OK", 15))

    def test_deleted_spec_is_written_again(self):
        n, flags = self.cdi_node()
        d = n.start_daemon(**flags)
        n.wait_register(timeout=10)
        self.assertTrue(wait_until(lambda: os.path.exists(self.spec_path(n)), 15))
        with open(self.spec_path(n), "rb") as f:
            want = f.read()
        lsince = d.mark()
        os.remove(self.spec_path(n))
        d.wait_log("cdi spec removed or changed, writing it again", since=lsince, timeout=10)
        self.assertTrue(wait_until(lambda: os.path.exists(self.spec_path(n)), 15))
        with open(self.spec_path(n), "rb") as f:
            self.assertEqual(f.read(), want)
        # Altered by someone else: put back too.
        with open(self.spec_path(n), "w") as f:
            f.write("{}")
        self.assertTrue(wait_until(lambda: open(self.spec_path(n), "rb").read() == want, 15))


if __name__ == "__main__":
    main()
