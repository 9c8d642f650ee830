#!/usr/bin/python3
"""libedgegpu-cuda.so end to end: the test programs (ipz-*.c) on the fake CUDA driver, in a
container's layout made with a private mount namespace.

Each test makes an allocation directory with ipz-setup (the limits file and the region the
device plugin would write), then runs a program with `unshare -m`: a tmpfs on
/usr/local/edgegpu holds the mount points, and the allocation's limits (read-only), its state
directory and the library are bind-mounted there, as the plugin's mounts put them in a
container. The library is preloaded with LD_PRELOAD, or through a bind-mounted
/etc/ld.so.preload (a copy of /etc in a tmpfs, so the host's /etc is never touched).
LD_LIBRARY_PATH names the fake libcuda.so.1 and the fake libnvidia-ml.so.1.

Needs root (mount namespaces) and /usr/local/edgegpu as a directory to mount on (made when
missing). Environment (from tests/interposer/meson.build): IPZ_BIN (the programs and
ipz-setup), IPZ_LIB (libedgegpu-cuda.so), FAKE_CUDA_DIR, FAKE_NVML_DIR.
"""

import os
import re
import struct
import subprocess
import tempfile
import unittest

BIN = os.environ.get("IPZ_BIN", "")
LIB = os.environ.get("IPZ_LIB", "")
FAKE_CUDA = os.environ.get("FAKE_CUDA_DIR", "")
FAKE_NVML = os.environ.get("FAKE_NVML_DIR", "")
IPZ_DIR = "/usr/local/edgegpu"
MIB = 1 << 20

# Runs "$@" in the container layout; $A is the allocation directory.
NAMESPACE_SCRIPT = r"""
set -e
mount -t tmpfs -o mode=755 tmpfs "$IPZ_DIR"
mkdir "$IPZ_DIR/state"
: > "$IPZ_DIR/limits"
: > "$IPZ_DIR/libedgegpu-cuda.so"
mount --bind "$A/limits" "$IPZ_DIR/limits"
mount -o remount,bind,ro "$IPZ_DIR/limits"
mount --bind "$A/state" "$IPZ_DIR/state"
mount --bind "$IPZ_LIB" "$IPZ_DIR/libedgegpu-cuda.so"
mount -o remount,bind,ro "$IPZ_DIR/libedgegpu-cuda.so"
case "$PRELOAD" in
etc)
	mount -t tmpfs tmpfs "$ETC_COPY"
	cp -a /etc/. "$ETC_COPY/"
	echo "$IPZ_DIR/libedgegpu-cuda.so" > "$ETC_COPY/ld.so.preload"
	mount --bind "$ETC_COPY" /etc
	exec "$@" ;;
env)
	exec env LD_PRELOAD="$IPZ_DIR/libedgegpu-cuda.so" "$@" ;;
*)
	exec "$@" ;;
esac
"""


def uuid(i):
    return "GPU-00000000-0000-4000-8000-%012x" % i


def prog(name):
    return os.path.join(BIN, name)


class Allocation:
    """An allocation directory: limits + state/region, made by ipz-setup."""

    def __init__(self, test, limits, report=False, managed_ignore=False):
        self.tmp = tempfile.TemporaryDirectory(prefix="ipz-")
        test.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        spec = ",".join("%s:%d" % (u, mib * MIB) for u, mib in limits)
        argv = [prog("ipz-setup"), self.dir, spec]
        if report:
            argv.append("--report")
        if managed_ignore:
            argv.append("--managed-ignore")
        subprocess.run(argv, check=True, timeout=30)
        self.meter = os.path.join(self.dir, "meter")  # the fake driver's EDGEGPU_FAKE_CUDA_SHM

    def show(self):
        """The region per GPU: {uuid: {limit, used, peak, ooms}}."""
        out = subprocess.run([prog("ipz-setup"), "--show",
                              os.path.join(self.dir, "state", "region")],
                             check=True, capture_output=True, text=True, timeout=30).stdout
        gpus = {}
        for line in out.splitlines():
            m = re.match(r"gpu=\d+ uuid=(\S+) limit=(\d+) used=(\d+) peak=(\d+) ooms=(\d+)", line)
            if m:
                gpus[m.group(1)] = dict(zip(("limit", "used", "peak", "ooms"),
                                            map(int, m.groups()[1:])))
        return gpus

    def meter_peak(self):
        """The most device memory all processes held at once (struct fake_cuda_shm)."""
        with open(self.meter, "rb") as f:
            data = f.read(280)
        return struct.unpack_from("<Q", data, 8 + 16 * 8 * 2 + 8)[0]


def command(alloc, argv, preload="env", env=None, etc_copy=None, libcuda=True):
    """The unshare command line and environment that run argv in alloc's container layout."""
    e = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES")}
    dirs = ([FAKE_CUDA] if libcuda else []) + ([FAKE_NVML] if FAKE_NVML else [])
    e.update({"A": alloc.dir, "IPZ_DIR": IPZ_DIR, "IPZ_LIB": LIB, "PRELOAD": preload,
              "ETC_COPY": etc_copy or "", "LD_LIBRARY_PATH": ":".join(dirs),
              "EDGEGPU_FAKE_CUDA_SHM": alloc.meter})
    e.update(env or {})
    return (["unshare", "-m", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "sh"]
            + argv, e)


def run(alloc, argv, timeout=120, **kw):
    cmd, env = command(alloc, argv, **kw)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


class InterposerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root for mount namespaces")
        for path in (LIB, FAKE_CUDA, prog("ipz-setup")):
            if not path or not os.path.exists(path):
                raise unittest.SkipTest("not built: %r" % path)
        os.makedirs(IPZ_DIR, exist_ok=True)

    def assertRan(self, r, what):
        self.assertEqual(r.returncode, 0, "%s: rc %d\nstdout:\n%s\nstderr:\n%s"
                         % (what, r.returncode, r.stdout, r.stderr))

    def assertRegionEmpty(self, alloc):
        for u, g in alloc.show().items():
            self.assertEqual(g["used"], 0, "%s still has %d bytes reserved" % (u, g["used"]))

    def nvml_fixture(self, n):
        f = tempfile.NamedTemporaryFile("w", prefix="ipz-nvml-", suffix=".conf", delete=False)
        self.addCleanup(os.unlink, f.name)
        f.write("[gpu]\n" * n)
        f.close()
        return {"EDGEGPU_FAKE_NVML_FIXTURE": f.name}

    # --- every allocation path ---

    PATHS = ("plain", "pitch", "managed", "vmm", "async", "pool", "arrays", "graph")

    def test_paths(self):
        # One process per path: a path that leaves something counted fails alone.
        for path in self.PATHS:
            with self.subTest(path=path):
                alloc = Allocation(self, [(uuid(0), 64)])
                r = run(alloc, [prog("ipz-paths"), "64", "path=" + path])
                self.assertRan(r, "ipz-paths path=" + path)
                self.assertRegionEmpty(alloc)
                self.assertLessEqual(alloc.meter_peak(), 64 * MIB)

    def test_paths_all_in_one_process(self):
        for extra in ([], ["managed-ignore"]):
            with self.subTest(extra=extra):
                alloc = Allocation(self, [(uuid(0), 64)], managed_ignore=bool(extra))
                r = run(alloc, [prog("ipz-paths"), "64"] + extra)
                self.assertRan(r, "ipz-paths")
                self.assertRegionEmpty(alloc)
                self.assertLessEqual(alloc.meter_peak(), 64 * MIB + 64 * MIB * bool(extra))

    def test_paths_through_etc_ld_so_preload(self):
        alloc = Allocation(self, [(uuid(0), 64)])
        etc = tempfile.TemporaryDirectory(prefix="ipz-etc-")
        self.addCleanup(etc.cleanup)
        r = run(alloc, [prog("ipz-paths"), "64"], preload="etc", etc_copy=etc.name)
        self.assertRan(r, "ipz-paths under /etc/ld.so.preload")
        self.assertRegionEmpty(alloc)
        self.assertLessEqual(alloc.meter_peak(), 64 * MIB)

    # --- the container's processes together ---

    def test_stress_never_past_the_limit(self):
        alloc = Allocation(self, [(uuid(0), 256)])
        r = run(alloc, [prog("ipz-stress"), "8", "10000", "16384", "7"], timeout=600)
        self.assertRan(r, "ipz-stress")
        ooms = sum(int(m) for m in re.findall(r"oom=(\d+)", r.stdout))
        self.assertGreater(ooms, 0, "the limit was never reached:\n" + r.stdout)
        peak = alloc.meter_peak()
        self.assertGreater(peak, 0)
        self.assertLessEqual(peak, 256 * MIB, "the processes held %d bytes at once" % peak)
        self.assertRegionEmpty(alloc)

    def test_over_limit_gets_oom_and_the_others_the_rest(self):
        alloc = Allocation(self, [(uuid(0), 64)])
        first = self.hold(alloc, ["8", "40"])
        self.assertEqual(first["allocated"], 40)
        second = self.hold(alloc, ["8"])
        self.assertEqual(second["allocated"], 24, "the second process got the wrong rest")
        for h in (first, second):
            out, err = h["proc"].communicate(timeout=60)
            self.assertEqual(h["proc"].returncode, 0, err)
        self.assertRegionEmpty(alloc)
        self.assertLessEqual(alloc.meter_peak(), 64 * MIB)

    def hold(self, alloc, args, **kw):
        """Starts ipz-hog and waits for it to hold its memory; returns its MiB and process."""
        cmd, env = command(alloc, [prog("ipz-hog")] + args, **kw)
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        def reap():
            if p.poll() is None:
                p.kill()
            p.wait()
            for f in (p.stdin, p.stdout, p.stderr):
                if not f.closed:
                    f.close()
        self.addCleanup(reap)
        line = p.stdout.readline()
        m = re.match(r"allocated (\d+)", line)
        self.assertTrue(m, "ipz-hog said %r" % line)
        state = p.stdout.readline().strip()
        self.assertIn(state, ("holding", "looping"))
        return {"allocated": int(m.group(1)), "proc": p, "state": state}

    def test_sigkill_while_allocating_leaks_nothing(self):
        alloc = Allocation(self, [(uuid(0), 64)])
        for i in range(5):
            with self.subTest(round=i):
                h = self.hold(alloc, ["8", "32", "loop"])
                self.assertEqual(h["state"], "looping")
                h["proc"].kill()
                h["proc"].wait(timeout=30)
                again = self.hold(alloc, ["8"])
                self.assertEqual(again["allocated"], 64, "the killed process's memory is lost")
                again["proc"].stdin.close()
                again["proc"].wait(timeout=60)
        self.assertRegionEmpty(alloc)

    # --- what processes are told ---

    def test_info_reports_the_slice(self):
        alloc = Allocation(self, [(uuid(0), 64)])
        nvml = ["nvml"] if FAKE_NVML else []
        r = run(alloc, [prog("ipz-info"), "64", "alloc=16"] + nvml, env=self.nvml_fixture(1))
        self.assertRan(r, "ipz-info")
        self.assertRegionEmpty(alloc)

    def test_info_refuses_a_bad_list(self):
        # An empty or malformed list once ran the checks with want[] unset (read uninitialised).
        env = dict(os.environ, LD_LIBRARY_PATH=FAKE_CUDA)
        for argv in ([""], [","], ["64,"], ["x"], ["64,,32"], [",".join(["1"] * 17)],
                     ["64", "alloc="], ["64", "alloc=x"], ["64", "nvm"]):
            with self.subTest(argv=argv):
                r = subprocess.run([prog("ipz-info")] + argv, env=env, capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("usage", r.stderr)

    def test_visible_devices_subset_and_order(self):
        # Two devices with different limits: the limit follows the device, by UUID.
        alloc = Allocation(self, [(uuid(0), 64), (uuid(1), 32)])
        env = self.nvml_fixture(2)
        env["EDGEGPU_FAKE_CUDA_DEVICES"] = "2"
        nvml = ["nvml"] if FAKE_NVML else []
        for visible, want in ((None, "64,32"), ("1,0", "32,64"), ("1", "32"), ("0", "64"),
                              (uuid(1), "32"), ("GPU-00000000-0000-4000-8000-000000000001,0",
                                                "32,64")):
            with self.subTest(visible=visible):
                e = dict(env)
                if visible is not None:
                    e["CUDA_VISIBLE_DEVICES"] = visible
                r = run(alloc, [prog("ipz-info"), want, "alloc=8"] + nvml, env=e)
                self.assertRan(r, "ipz-info CUDA_VISIBLE_DEVICES=%s" % visible)
        e = dict(env, CUDA_VISIBLE_DEVICES="1")
        h = self.hold(alloc, ["8"], env=e)
        self.assertEqual(h["allocated"], 32, "device 1's limit not applied to ordinal 0")
        h["proc"].stdin.close()
        h["proc"].wait(timeout=60)
        self.assertRegionEmpty(alloc)

    def test_report_mode_refuses_nothing(self):
        alloc = Allocation(self, [(uuid(0), 64)], report=True)
        r = run(alloc, [prog("ipz-paths"), "64", "report"])
        self.assertRan(r, "ipz-paths report")
        r = run(alloc, [prog("ipz-info"), "64", "alloc=100"])
        self.assertRan(r, "ipz-info past the slice in report mode")
        self.assertRegionEmpty(alloc)
        self.assertGreater(alloc.meter_peak(), 64 * MIB)

    # --- processes that are not CUDA programs ---

    def test_non_cuda_processes_unaffected(self):
        alloc = Allocation(self, [(uuid(0), 64)])
        etc = tempfile.TemporaryDirectory(prefix="ipz-etc-")
        self.addCleanup(etc.cleanup)
        for preload in ("env", "etc"):
            for libcuda in (True, False):
                with self.subTest(preload=preload, libcuda=libcuda):
                    kw = dict(preload=preload, etc_copy=etc.name, libcuda=libcuda)
                    r = run(alloc, ["/bin/true"], **kw)
                    self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
                    r = run(alloc, ["python3", "-c", "print(1)"], **kw)
                    self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "1\n", ""))

    def test_no_libcuda_fails_as_without_us(self):
        alloc = Allocation(self, [(uuid(0), 64)])
        without = run(alloc, [prog("ipz-paths"), "64"], preload="none", libcuda=False)
        under = run(alloc, [prog("ipz-paths"), "64"], libcuda=False)
        self.assertNotEqual(without.returncode, 0)
        self.assertEqual((under.returncode, under.stdout, under.stderr),
                         (without.returncode, without.stdout, without.stderr))
        self.assertRegionEmpty(alloc)


if __name__ == "__main__":
    unittest.main(verbosity=2)
