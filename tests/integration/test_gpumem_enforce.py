#!/usr/bin/python3
"""Which gpumem enforcement is in force, said by the real daemon (issue 19): on the fake NVML
with CUDA 13.4's memory limits (memory_limits = supported), the CDI strategy and a host root
whose nvidia-cdi-hook has apply-cuda-memory-limits, the CDI spec carries the hook on each GPU
and the node's metric and label say driver (both with the interposer installed); with an
older driver or toolkit, interposer or accounting and the reason. Per container allocation,
edgegpu_gpumem_container_enforcement_info with the pod's names."""

import json
import os
import subprocess

from common import NodeTest, load_fixture, main, uuids
from edgegpu import samples, wait_until

GPUMEM = "nvidia.com/gpumem"
CDI_FILE = "k8s.device-plugin.nvidia.com-gpu.json"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
LABEL = "edgegpu.io/gpumem.enforcement"
HOOK = "/usr/bin/nvidia-cdi-hook"
# A Go binary holds its subcommand names as strings: the daemon scans for the name.
HOOK_NEW = "#!/bin/sh\n# update-ldcache create-symlinks apply-cuda-memory-limits\nexit 0\n"
HOOK_OLD = "#!/bin/sh\n# update-ldcache create-symlinks\nexit 0\n"


def write(root, rel, text="", mode=0o644):
    p = root + rel
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
    return p


class EnforceTest(NodeTest):
    def start(self, fixture, hook=HOOK_NEW, interposer=True, cgroup2=True, strategy="cdi-cri"):
        n = self.node(fixture)
        driver, host = os.path.join(n.root, "driver"), os.path.join(n.root, "host")
        ver = load_fixture(fixture)["global"]["driver_version"]
        for lib in ("libcuda.so.", "libnvidia-ml.so."):
            write(driver, f"{LIBDIR}/{lib}{ver}", mode=0o755)
        for node in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1"):
            write(driver, node)
        os.makedirs(host)
        if cgroup2:
            write(host, "/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n")
        if hook is not None:
            write(host, HOOK, hook, 0o755)
        env = {}
        if interposer:
            env["EDGEGPU_INTERPOSER_LIB"] = write(n.root, "/libedgegpu-cuda.so", "\x7fELF fake")
        cfg = ("version: v1\nflags:\n  plugin:\n"
               f"    deviceListStrategy: {strategy}\n"
               "edgegpu:\n  sharing:\n    memory:\n      devices: [0, 1]\n"
               "      unitMiB: 1024\n      reserveMiB: 0\n")
        d = n.start_daemon(config=cfg, env=env,
                           flags=["--driver-root", driver, "--host-root", host])
        n.wait_register(GPUMEM, timeout=15)
        n.wait_devices(GPUMEM, timeout=15)
        return n, d, driver

    def node_info(self, d, mode, driver_reason="", interposer_reason=""):
        """Waits for the node's enforcement metric to say `mode` with these reasons."""
        def get():
            s = samples(d.scrape(), "edgegpu_gpumem_enforcement_info")
            return s[0][0] if len(s) == 1 else None
        want = {"mode": mode, "driver_reason": driver_reason,
                "interposer_reason": interposer_reason}
        wait_until(lambda: get() == want, timeout=15, what=f"enforcement_info {want}")

    def label(self, n, value):
        def get():
            try:
                with open(n.labels_file) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                return None
            return [ln for ln in lines if ln.startswith(LABEL + "=")]
        wait_until(lambda: get() == [f"{LABEL}={value}"], timeout=15,
                   what=f"label {LABEL}={value}")

    def spec(self, n):
        with open(os.path.join(n.cdi_dir, CDI_FILE)) as f:
            return json.load(f)

    def hooks(self, n):
        out = {}
        for dev in self.spec(n)["devices"]:
            for h in dev["containerEdits"].get("hooks", []):
                out.setdefault(dev["name"], []).append(h)
        return out

    def test_driver_and_interposer_both(self):
        n, d, driver = self.start("memory-limits-on.conf")
        self.node_info(d, "both")
        self.label(n, "both")
        hooks = self.hooks(n)
        ids = uuids("memory-limits-on.conf")
        self.assertEqual(sorted(hooks), sorted(ids))
        for uuid in ids:
            self.assertEqual(hooks[uuid], [{
                "hookName": "createRuntime", "path": HOOK,
                "args": ["nvidia-cdi-hook", "apply-cuda-memory-limits",
                         "--driver-root", driver, "--gpu-id", uuid]}])
        validator = os.environ.get("CDI_VALIDATE")
        self.assertTrue(validator, "CDI_VALIDATE not set")
        r = subprocess.run([validator, "-spec", os.path.join(n.cdi_dir, CDI_FILE)],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

        # A container: the env the hook reads, and its own enforcement series with its pod.
        ev = n.emu.admit("infer", f"c1:{GPUMEM}=4")
        self.assertTrue(ev["ok"], ev)
        envs = n.emu.allocations("infer")[0]["response"]["envs"]
        self.assertEqual(envs.get("NVIDIA_GPU_MEMORY_LIMIT"), "4096")
        self.assertEqual(envs.get("NVIDIA_GPU_MEMORY_REQUEST"), "4096")

        def ctr():
            s = samples(d.scrape(), "edgegpu_gpumem_container_enforcement_info", pod="infer")
            return s[0][0] if s else None
        wait_until(lambda: ctr() is not None, timeout=20, what="container enforcement series")
        c = ctr()
        self.assertEqual((c["mode"], c["reason"], c["container"], c["resource"]),
                         ("both", "", "c1", GPUMEM), c)
        self.assertRegex(c["allocation"], r"^[0-9a-f]{16}$")

    def test_driver_without_interposer(self):
        n, d, _ = self.start("memory-limits-on.conf", interposer=False)
        self.node_info(d, "driver", interposer_reason="not-installed")
        self.label(n, "driver")

    def test_old_driver_interposer(self):
        n, d, _ = self.start("two-gpus.conf")
        self.node_info(d, "interposer", driver_reason="driver-unsupported")
        self.label(n, "interposer")
        self.assertEqual(self.hooks(n), {})

    def test_old_toolkit_accounting(self):
        """Memory limits in the driver, but a hook without the subcommand and no library:
        accounting only, said with both reasons; no hook in the spec."""
        n, d, _ = self.start("memory-limits-on.conf", hook=HOOK_OLD, interposer=False)
        self.node_info(d, "accounting", driver_reason="no-cdi-hook",
                       interposer_reason="not-installed")
        self.label(n, "accounting")
        self.assertEqual(self.hooks(n), {})
        d.wait_log(pred=lambda r: "lacks apply-cuda-memory-limits" in r.get("msg", ""))

    def test_envvar_strategy_not_cdi(self):
        n, d, _ = self.start("memory-limits-on.conf", strategy="envvar")
        self.node_info(d, "interposer", driver_reason="not-cdi")
        self.label(n, "interposer")


if __name__ == "__main__":
    main()
