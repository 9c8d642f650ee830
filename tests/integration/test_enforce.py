#!/usr/bin/python3
"""gpumem enforcement, the device plugin's side (issue 19, src/enforce/), through the real
daemon, the kubelet emulator and the fake NVML: the interposer library installed into the
state directory, the env and mounts of a gpumem Allocate, the allocation directory (units,
limits, state/region), its removal when its units are allocated again and when pod-resources
shows its pod gone (after the grace, short here through EDGEGPU_GPUMEM_GRACE_MS, a test-only
variable), a restart that keeps live allocations, and a state directory that cannot be
written (Allocate still succeeds, accounting, said at warn), and a reload that moves the state
directory.

The fake NVML has no memory-limit API: the driver path is never in force here, so a node with
the library runs the interposer."""

import filecmp
import os
import re
import subprocess

from common import main, uuids
from edgegpu import PluginClient, wait_until
from test_gpumem import GpumemTest

GPUMEM = "nvidia.com/gpumem"
ONE = uuids("sharing/one-16g.conf")
CONFIG = "version: v1\nedgegpu:\n  sharing:\n    memory:\n      devices: [0]\n"
DEBUG = {"EDGEGPU_LOG_LEVEL": "debug"}
# The library the build made (the meson test depends on it); a stand-in file for tests that
# only look at the files the plugin writes.
BUILT_LIB = os.path.join(os.environ.get("IPZ_BUILD_DIR", ""), "libedgegpu-cuda.so")
IPZ_PATHS = os.environ.get("IPZ_PATHS", "")
FAKE_CUDA_DIR = os.environ.get("FAKE_CUDA_DIR", "")

# Binds each mount of an Allocate response as a runtime would ("$@": pairs host container ro,
# then the program), in a private mount namespace: the container paths under
# /usr/local/edgegpu sit on a tmpfs, /etc/ld.so.preload on a tmpfs copy of /etc, so the host's
# files are never touched.
BIND_SCRIPT = r"""
set -e
mount -t tmpfs -o mode=755 tmpfs /usr/local/edgegpu
etc=$(mktemp -d)
mount -t tmpfs tmpfs "$etc"
cp -a /etc/. "$etc/"
mount --bind "$etc" /etc
while [ "$1" != "--" ]; do
	host=$1 ctr=$2 ro=$3
	shift 3
	if [ -d "$host" ]; then mkdir -p "$ctr"; else mkdir -p "$(dirname "$ctr")"; : > "$ctr"; fi
	mount --bind "$host" "$ctr"
	if [ "$ro" = 1 ]; then mount -o remount,bind,ro "$ctr"; fi
done
shift
exec "$@"
"""


class EnforceTest(GpumemTest):  # its admit()
    def start(self, env=None, state=None, lib=None):
        """A one-GPU gpumem node with enforcement state under the node's directory. Returns
        (node, daemon, state directory, source library)."""
        n = self.node("sharing/one-16g.conf", emulator_args=("--max-ids", "400000"))
        if lib is None:
            lib = BUILT_LIB if os.path.isfile(BUILT_LIB) else os.path.join(n.root, "lib.so")
            if lib != BUILT_LIB:
                with open(lib, "wb") as f:
                    f.write(b"\x7fELF stand-in for libedgegpu-cuda.so\n")
        if state == "file":  # a file where the state directory goes
            state = os.path.join(n.root, "not-a-dir")
            with open(state, "w") as f:
                f.write("x")
        state = state or os.path.join(n.root, "state")
        d = n.start_daemon(config=CONFIG, env=env,
                           flags=("--gpumem-state-dir", state, "--interposer-lib", lib))
        n.wait_register(GPUMEM, timeout=10)
        n.wait_devices(GPUMEM, timeout=10)
        return n, d, state, lib

    def alloc_dirs(self, state):
        d = os.path.join(state, "alloc")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def dir_of(self, resp):
        """The allocation directory a response's limits mount names."""
        m = [m for m in resp["mounts"] if m["container_path"] == "/usr/local/edgegpu/limits"]
        self.assertEqual(len(m), 1, resp["mounts"])
        return os.path.dirname(m[0]["host_path"])


class Allocate(EnforceTest):
    def test_env_mounts_region_and_library(self):
        n, d, state, lib = self.start()
        a = self.admit(n, "p1", 512)
        r = a["response"]
        envs = r["envs"]
        self.assertEqual(envs["NVIDIA_GPU_MEMORY_REQUEST"], "512")
        self.assertEqual(envs["NVIDIA_GPU_MEMORY_LIMIT"], "512")
        self.assertEqual(envs["EDGEGPU_GPUMEM_ENFORCEMENT"], "interposer")
        self.assertEqual(envs["EDGEGPU_GPUMEM_LIMIT_MIB"], "512")
        self.assertNotIn("LD_PRELOAD", envs)
        adir = self.dir_of(r)
        name = os.path.basename(adir)
        self.assertRegex(name, r"^[0-9a-f]{16}$")
        self.assertEqual(os.path.dirname(adir), os.path.join(state, "alloc"))
        got = {m["container_path"]: (m["host_path"], m["read_only"]) for m in r["mounts"]}
        self.assertEqual(got, {
            "/usr/local/edgegpu/libedgegpu-cuda.so":
                (os.path.join(state, "lib", "libedgegpu-cuda.so"), True),
            "/etc/ld.so.preload": (os.path.join(state, "lib", "ld.so.preload"), True),
            "/usr/local/edgegpu/limits": (os.path.join(adir, "limits"), True),
            "/usr/local/edgegpu/state": (os.path.join(adir, "state"), False),
        })
        # The library installed is the source's bytes; ld.so.preload names its container path.
        self.assertTrue(filecmp.cmp(lib, os.path.join(state, "lib", "libedgegpu-cuda.so"),
                                    shallow=False))
        with open(os.path.join(state, "lib", "ld.so.preload")) as f:
            self.assertEqual(f.read(), "/usr/local/edgegpu/libedgegpu-cuda.so\n")
        with open(os.path.join(adir, "units")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], GPUMEM)
        self.assertEqual(sorted(lines[1:]), sorted(a["ids"]))
        with open(os.path.join(adir, "limits")) as f:
            limits = f.read()
        self.assertIn("mode enforce\n", limits)
        self.assertIn(f"gpu {ONE[0]} {512 << 20}\n", limits)
        with open(os.path.join(adir, "mode")) as f:
            self.assertEqual(f.read(), "interposer\n")
        # The region the interposer maps: checked by the region's own reader.
        out = subprocess.run([os.environ["IPZ_SETUP"], "--show",
                              os.path.join(adir, "state", "region")],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(f"gpu=0 uuid={ONE[0]} limit={512 << 20} used=0", out.stdout)

    def test_the_container_the_response_describes_holds_its_limit(self):
        """The whole chain: the daemon's Allocate response, bound as a runtime binds it (the
        read-only /etc/ld.so.preload loads the installed library into every process), holds a
        program on the fake CUDA driver (16 GiB device) to the 512 MiB granted: every allocation
        path gets OUT_OF_MEMORY past 512 MiB and cuMemGetInfo says 512 MiB (ipz-paths checks
        both), and the region the daemon made counts it."""
        if os.geteuid() != 0:
            self.skipTest("needs root for a mount namespace")
        if os.environ.get("EDGEGPU_SANITIZE"):
            # A sanitizer build's interposer, preloaded ahead of the program's sanitizer
            # runtime, is not a program anyone runs (ASan refuses the order, and its dlsym
            # interceptor meets ours); the normal build runs this test, and the interposer's
            # own suites run it on glibc 2.31 and arm64.
            self.skipTest("the interposer is not preloaded into sanitizer builds")
        for path in (BUILT_LIB, IPZ_PATHS, FAKE_CUDA_DIR):
            self.assertTrue(path and os.path.exists(path), f"not built: {path!r}")
        os.makedirs("/usr/local/edgegpu", exist_ok=True)
        n, d, state, lib = self.start(lib=BUILT_LIB)
        r = self.admit(n, "p1", 512)["response"]
        binds = []
        for m in r["mounts"]:
            binds += [m["host_path"], m["container_path"], "1" if m["read_only"] else "0"]
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)}
        env.update(r["envs"])  # what the runtime puts in the container's environment
        env.update({"LD_LIBRARY_PATH": FAKE_CUDA_DIR, "EDGEGPU_FAKE_CUDA_MEM_MIB": "16384"})

        out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                              BIND_SCRIPT, "sh"] + binds + ["--", IPZ_PATHS, "512"],
                             env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, f"ipz-paths under the response's mounts:\n"
                         f"{out.stdout}\n{out.stderr}")
        region = os.path.join(self.dir_of(r), "state", "region")
        shown = subprocess.run([os.environ["IPZ_SETUP"], "--show", region],
                               capture_output=True, text=True, timeout=10)
        self.assertEqual(shown.returncode, 0, shown.stderr)
        m = re.search(r"gpu=0 uuid=\S+ limit=(\d+) used=(\d+) peak=(\d+) ooms=(\d+)",
                      shown.stdout)
        self.assertIsNotNone(m, shown.stdout)
        limit, used, peak, ooms = map(int, m.groups())
        self.assertEqual(limit, 512 << 20)
        self.assertEqual(used, 0, "the program's reservations came back when it exited")
        self.assertEqual(peak, 512 << 20, "the program reached the limit through the region")
        self.assertGreater(ooms, 0, "refusals were counted in the daemon's region")

    def test_units_allocated_again_remove_the_old_directory(self):
        n, d, state, lib = self.start()
        letter = n.emu.last_devices(GPUMEM)["healthy"][0][0]
        ids = [letter + str(i) for i in range(1, 5)]
        c = PluginClient(n.socket("nvidia-gpumem.sock"))
        self.addCleanup(c.close)
        r1 = c.allocate(ids)
        self.assertEqual(r1.code, "OK", r1)
        first = self.dir_of(r1.responses[0])
        self.assertTrue(os.path.isdir(first))
        # Two of its units in a new allocation: a unit is held by one container at a time.
        r2 = c.allocate(ids[2:] + [letter + "9"])
        self.assertEqual(r2.code, "OK", r2)
        second = self.dir_of(r2.responses[0])
        self.assertFalse(os.path.exists(first))
        self.assertTrue(os.path.isdir(second))
        self.assertEqual(self.alloc_dirs(state), [os.path.basename(second)])


class Lifecycle(EnforceTest):
    def test_pod_gone_directory_removed_after_grace(self):
        n, d, state, lib = self.start(env={"EDGEGPU_GPUMEM_GRACE_MS": "300"})
        keep = self.dir_of(self.admit(n, "p1", 100)["response"])
        gone = self.dir_of(self.admit(n, "p2", 200)["response"])
        n.emu.delete("p2")
        wait_until(lambda: not os.path.exists(gone), timeout=30,
                   what=f"{gone} removed after its pod was deleted")
        d.wait_log("gpumem allocation's pod is gone, removing it",
                   name=os.path.basename(gone), timeout=5)
        self.assertTrue(os.path.isdir(keep))

    def test_allocation_whose_pod_never_came_removed_after_grace(self):
        # An Allocate no pod follows (the kubelet failed the pod, or a client like this one):
        # pod-resources never changes, so only the periodic re-read of its answer sees it.
        n, d, state, lib = self.start(env=dict(DEBUG, EDGEGPU_GPUMEM_GRACE_MS="500"))
        # The first stable answer handed over before the Allocate: none comes after it.
        d.wait_log("pod-resources answer stable", timeout=15)
        letter = n.emu.last_devices(GPUMEM)["healthy"][0][0]
        c = PluginClient(n.socket("nvidia-gpumem.sock"))
        self.addCleanup(c.close)
        r = c.allocate([letter + "1", letter + "2"])
        self.assertEqual(r.code, "OK", r)
        adir = self.dir_of(r.responses[0])
        self.assertTrue(os.path.isdir(adir))
        wait_until(lambda: not os.path.exists(adir), timeout=30,
                   what=f"{adir} removed: no pod holds its units")

    def test_restart_keeps_live_allocations(self):
        env = dict(DEBUG, EDGEGPU_GPUMEM_GRACE_MS="300")
        n, d, state, lib = self.start(env=env)
        live = self.dir_of(self.admit(n, "p1", 100)["response"])
        d.stop()
        d = n.start_daemon(config=CONFIG, env=env,
                           flags=("--gpumem-state-dir", state, "--interposer-lib", lib))
        d.wait_log("gpumem allocations read back", kept="1", timeout=10)
        # Pod-resources answered twice the same (p1 listed): acted on, and p1, past its
        # grace, stays because its pod holds its units.
        d.wait_log("pod-resources answer stable", timeout=15)
        self.assertTrue(os.path.isdir(live))
        self.assertEqual(self.alloc_dirs(state), [os.path.basename(live)])


class Reload(EnforceTest):
    def test_state_dir_changed_by_the_config_file(self):
        n = self.node("sharing/one-16g.conf", emulator_args=("--max-ids", "400000"))
        lib = os.path.join(n.root, "lib.so")
        with open(lib, "wb") as f:
            f.write(b"\x7fELF stand-in\n")
        first, second = os.path.join(n.root, "s1"), os.path.join(n.root, "s2")

        def config(state):
            return (CONFIG + "      enforcement:\n"
                    f"        stateDir: {state}\n        library: {lib}\n")
        # The harness's variables out of the way: the file's keys apply.
        d = n.start_daemon(config=config(first), env={"EDGEGPU_GPUMEM_STATE_DIR": None,
                                                      "EDGEGPU_INTERPOSER_LIB": None})
        n.wait_register(GPUMEM, timeout=10)
        n.wait_devices(GPUMEM, timeout=10)
        d.wait_log("gpumem enforcement", state_dir=first, timeout=10)
        old = self.dir_of(self.admit(n, "p1", 64)["response"])
        self.assertTrue(old.startswith(first + "/"))
        n.write_config(config(second))
        d.wait_log("gpumem enforcement", state_dir=second, timeout=20)
        self.assertTrue(filecmp.cmp(lib, os.path.join(second, "lib", "libedgegpu-cuda.so"),
                                    shallow=False))
        new = self.dir_of(self.admit(n, "p2", 64)["response"])
        self.assertTrue(new.startswith(second + "/"), new)
        # The old state directory's allocation stays for a later start to read back.
        self.assertTrue(os.path.isdir(old))


class Hostile(EnforceTest):
    def test_state_dir_unwritable_still_allocates(self):
        n, d, state, lib = self.start(state="file")
        d.wait_log("cannot install the interposer library: gpumem limits are not enforced "
                   "by the interposer", timeout=10)
        a = self.admit(n, "p1", 64)
        envs = a["response"]["envs"]
        self.assertEqual(envs["EDGEGPU_GPUMEM_ENFORCEMENT"], "accounting")
        self.assertEqual(envs["NVIDIA_GPU_MEMORY_LIMIT"], "64")
        self.assertEqual(a["response"]["mounts"], [])
        rec = d.wait_log("gpumem limit NOT enforced: accounting only (metrics and alerts)",
                         timeout=5)
        self.assertEqual(rec["level"], "warn")

    def test_library_missing_is_said_once(self):
        n, d, state, lib = self.start(lib="/nonexistent/libedgegpu-cuda.so")
        rec = d.wait_log("interposer library not found: gpumem limits are not enforced by "
                         "the interposer", timeout=10)
        self.assertEqual(rec["level"], "warn")
        self.assertEqual(rec["path"], "/nonexistent/libedgegpu-cuda.so")
        a = self.admit(n, "p1", 64)
        self.assertEqual(a["response"]["envs"]["EDGEGPU_GPUMEM_ENFORCEMENT"], "accounting")
        self.assertEqual(len(d.find_logs("interposer library not found: gpumem limits are "
                                         "not enforced by the interposer")), 1)


if __name__ == "__main__":
    main()
