"""Fixture host trees for `edgegpu doctor --host-root` tests.

A HostRoot lays out, in a temporary directory, the files a node's doctor reads: the kernel
module's /proc/driver/nvidia/version, /dev nodes (real character devices: os.mknod, so the
tests run as root), the NVML library (a copy of the fake NVML named like a driver's),
systemd units and their enablement links, a Jetson's /etc/nv_tegra_release and device tree.
The fake NVML's own fixture (GPUs, versions, injected failures) lives beside the tree, not in
it. Standard library only; run with Debian's /usr/bin/python3.

    h = HostRoot(tmp)                      # tree in tmp/root, NVML fixture tmp/nvml.conf
    h.healthy(gpus=2)                      # a working discrete-GPU kubeadm node
    h.kmod("535.104.05")                   # ... now the loaded module is older
    r = h.doctor("--json")                 # runs edgegpu doctor --host-root tmp/root
    check = r.check("driver.versions")     # {"id":..., "status": "fail", ...}

Each call returns self where that reads well (h.kmod(...).dev_nodes(2)).
"""

import json
import os
import platform
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
from edgegpu import base_env, sanitizer_report  # noqa: E402
from fixes import assert_documented  # noqa: E402

NVIDIA_MAJOR = 195          # /dev/nvidia<N> and /dev/nvidiactl (minor 255)
UVM_MAJOR = 235             # dynamic on real hosts; any value does here
MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}.get(
    platform.machine(), "")
LIB_DIR = f"/usr/lib/{MULTIARCH}" if MULTIARCH else "/usr/lib64"


def kmod_text(version, open_module=False, arch="x86_64"):
    """/proc/driver/nvidia/version as the driver writes it."""
    kind = (f"NVIDIA UNIX Open Kernel Module for {arch}" if open_module
            else f"NVIDIA UNIX {arch} Kernel Module")
    return (f"NVRM version: {kind}  {version}  Tue Mar  5 22:23:56 UTC 2024\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


class DoctorResult:
    """A finished `edgegpu doctor`: rc, stdout, stderr, and with --json the parsed report."""

    def __init__(self, proc, argv):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.argv = argv
        self.report = None
        if "--json" in argv and self.stdout.strip():
            self.report = json.loads(self.stdout)
            assert_documented(self.report)

    def check(self, cid):
        """The check with id `cid` from the JSON report; AssertionError when absent."""
        if self.report is None:
            raise AssertionError(f"no JSON report (rc={self.rc}): {self.stderr}")
        for c in self.report["checks"]:
            if c["id"] == cid:
                return c
        raise AssertionError(f"no check {cid} in {[c['id'] for c in self.report['checks']]}")

    def __repr__(self):
        return f"<doctor rc={self.rc}\n{self.stdout}\n{self.stderr}>"


class HostRoot:
    def __init__(self, base):
        self.base = os.path.abspath(base)
        self.root = os.path.join(self.base, "root")
        self.nvml_fixture = os.path.join(self.base, "nvml.conf")
        os.makedirs(self.root, exist_ok=True)
        self.fixture("[gpu]\n")

    # --- plain files ---

    def path(self, p):
        """Where host path `p` ("/etc/x") lies in the tree."""
        return os.path.join(self.root, p.lstrip("/"))

    def dir(self, p, mode=0o755):
        os.makedirs(self.path(p), mode=mode, exist_ok=True)
        return self

    def file(self, p, text="", mode=0o644):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.chmod(full, mode)
        return self

    def exe(self, p, text="#!/bin/sh\nexit 0\n"):
        return self.file(p, text, 0o755)

    def symlink(self, p, target):
        """`p` -> `target` (as written: an absolute target means the host's, i.e. in the tree)."""
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.unlink(full)
        os.symlink(target, full)
        return self

    def link_tree(self, p, src):
        """`p` in the tree as a copy of the directory `src` outside it: its directories made,
        its files (unix sockets included) hard-linked. A socket reached through a hard link is
        the same listening socket, so a daemon or kubelet running at `src` answers at `p`,
        while the doctor never has to leave its host root (it refuses links out of it). `src`
        must be on the tree's filesystem; what is created under `src` afterwards is not seen."""
        dst = self.path(p)
        for d, dirs, files in os.walk(src):
            rel = os.path.relpath(d, src)
            os.makedirs(os.path.normpath(os.path.join(dst, rel)), exist_ok=True)
            for f in files:
                target = os.path.normpath(os.path.join(dst, rel, f))
                if os.path.lexists(target):
                    os.unlink(target)
                os.link(os.path.join(d, f), target, follow_symlinks=False)
        return self

    def remove(self, p):
        full = self.path(p)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        elif os.path.lexists(full):
            os.unlink(full)
        return self

    def chardev(self, p, major, minor, mode=0o666):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            os.unlink(full)
        os.mknod(full, mode | stat.S_IFCHR, os.makedev(major, minor))
        return self

    # --- the NVIDIA driver ---

    def fixture(self, text):
        """The fake NVML's fixture (tests/fakes/nvml/README.md): GPUs, versions, failures."""
        with open(self.nvml_fixture, "w") as f:
            f.write(text)
        return self

    def gpus(self, n, driver="550.54.15", extra=""):
        """A fake-NVML fixture with `n` GPUs of driver `driver` (and `extra` global lines)."""
        return self.fixture(f"driver_version = {driver}\nnvml_version = 12.{driver}\n"
                            f"{extra}" + "[gpu]\n" * n)

    def kmod(self, version, open_module=False):
        """The loaded kernel module: /proc/driver/nvidia/version."""
        return self.file("/proc/driver/nvidia/version", kmod_text(version, open_module))

    def dev_nodes(self, n, ctl=True, uvm=True, uvm_tools=True):
        """/dev/nvidia0..n-1, /dev/nvidiactl, /dev/nvidia-uvm(-tools) as character devices."""
        for i in range(n):
            self.chardev(f"/dev/nvidia{i}", NVIDIA_MAJOR, i)
        if ctl:
            self.chardev("/dev/nvidiactl", NVIDIA_MAJOR, 255)
        if uvm:
            self.chardev("/dev/nvidia-uvm", UVM_MAJOR, 0)
        if uvm_tools:
            self.chardev("/dev/nvidia-uvm-tools", UVM_MAJOR, 1)
        return self

    def nvml_lib(self, version, src=None, libdir=LIB_DIR):
        """The driver's NVML: <libdir>/libnvidia-ml.so.<version> (a copy of the fake NVML,
        $FAKE_NVML) and libnvidia-ml.so.1 -> it, as the driver packages install them."""
        src = src or os.environ["FAKE_NVML"]
        d = self.path(libdir)
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            if name.startswith("libnvidia-ml.so."):
                os.unlink(os.path.join(d, name))
        shutil.copyfile(src, os.path.join(d, f"libnvidia-ml.so.{version}"))
        return self.symlink(f"{libdir}/libnvidia-ml.so.1", f"libnvidia-ml.so.{version}")

    def kernel(self, release="6.1.0-18-amd64", module="updates/dkms/nvidia-current.ko"):
        """The running kernel (/proc/sys/kernel/osrelease) and, unless `module` is None, the
        NVIDIA module built for it under /lib/modules/<release>/."""
        self.file("/proc/sys/kernel/osrelease", release + "\n")
        self.dir(f"/lib/modules/{release}/kernel")
        if module:
            self.file(f"/lib/modules/{release}/{module}", "\x7fELF")
        return self

    def persistenced(self, pid=4242, running=True):
        """nvidia-persistenced's pid file, and with `running` its /proc/<pid>/comm."""
        self.file("/run/nvidia-persistenced/nvidia-persistenced.pid", f"{pid}\n")
        if running:
            self.file(f"/proc/{pid}/comm", "nvidia-persiste\n")
        else:
            self.remove(f"/proc/{pid}")
        return self

    # --- systemd ---

    def unit(self, name, where="/lib/systemd/system"):
        """An installed (not enabled) unit."""
        return self.file(f"{where}/{name}", f"[Unit]\nDescription={name}\n\n[Service]\n"
                         "ExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n")

    def unit_enabled(self, name, target="multi-user.target", where="/lib/systemd/system"):
        """An installed unit enabled for `target`, as `systemctl enable` leaves it."""
        self.unit(name, where)
        return self.symlink(f"/etc/systemd/system/{target}.wants/{name}", f"{where}/{name}")

    def unit_disabled(self, name):
        """Undoes unit_enabled (the unit stays installed)."""
        wants = self.path("/etc/systemd/system")
        for d in os.listdir(wants) if os.path.isdir(wants) else []:
            p = os.path.join(wants, d, name)
            if os.path.lexists(p):
                os.unlink(p)
        return self

    def unit_masked(self, name):
        return self.symlink(f"/etc/systemd/system/{name}", "/dev/null")

    # --- Jetson ---

    def tegra(self, release="R36 (release), REVISION: 4.3", soc="tegra234",
              model="NVIDIA Jetson Orin Nano Developer Kit", nodes=True):
        """A Jetson: /etc/nv_tegra_release (None: missing), the device tree (compatible,
        model) and, with `nodes`, the integrated GPU's nodes for its generation."""
        if release is not None:
            self.file("/etc/nv_tegra_release",
                      f"# {release}, GCID: 38968081, BOARD: generic, EABI: aarch64, "
                      "DATE: Tue Jan  8 21:54:51 UTC 2025\n# KERNEL_VARIANT: oot\n"
                      "TARGET_USERSPACE_LIB_DIR=nvidia\n")
        # /proc/device-tree is an absolute link into /sys on a real board.
        base = "/sys/firmware/devicetree/base"
        self.file(f"{base}/compatible",
                  f"nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0nvidia,{soc}\0".encode())
        self.file(f"{base}/model", model.encode() + b"\0")
        self.symlink("/proc/device-tree", base)
        major = int(release[1:3]) if release and release[1:3].isdigit() else 0
        if nodes and (major >= 38 or soc == "tegra264"):
            self.chardev("/dev/nvidiactl", NVIDIA_MAJOR, 255)
            self.chardev("/dev/nvidia0", NVIDIA_MAJOR, 0)
        elif nodes:
            self.chardev("/dev/nvmap", 10, 120)
            self.chardev("/dev/nvhost-ctrl-gpu", 492, 0)
            self.chardev("/dev/nvhost-gpu", 492, 1)
        return self

    # --- whole nodes ---

    def healthy(self, gpus=2, driver="550.54.15", runtime="containerd.service"):
        """A working discrete-GPU node: driver `driver` everywhere (module, NVML, library
        file), `gpus` GPUs with their nodes, nvidia-smi, nvidia-persistenced running and
        enabled, the module built for the running kernel, `runtime` enabled at boot."""
        self.gpus(gpus, driver)
        self.kmod(driver).dev_nodes(gpus).nvml_lib(driver)
        self.exe("/usr/bin/nvidia-smi")
        self.kernel()
        self.persistenced()
        self.unit_enabled("nvidia-persistenced.service")
        if runtime:
            self.unit_enabled(runtime)
        return self

    def containerd_nvidia(self, binary="/usr/bin/nvidia-container-runtime"):
        """containerd (config version 2, as nvidia-ctk --set-as-default writes it) with the
        nvidia runtime as the default, and the NVIDIA Container Toolkit installed."""
        p = 'plugins."io.containerd.grpc.v1.cri".containerd'
        self.file("/etc/containerd/config.toml", "\n".join([
            "version = 2", "[plugins]", '  [plugins."io.containerd.grpc.v1.cri"]',
            f"    [{p}]", '      default_runtime_name = "nvidia"',
            f"      [{p}.runtimes.runc]", '        runtime_type = "io.containerd.runc.v2"',
            f"      [{p}.runtimes.nvidia]", '        runtime_type = "io.containerd.runc.v2"',
            f"        [{p}.runtimes.nvidia.options]", f'          BinaryName = "{binary}"', ""]))
        for b in ("nvidia-container-runtime", "nvidia-ctk", "nvidia-container-runtime-hook"):
            self.exe("/usr/bin/" + b)
        self.file("/etc/nvidia-container-runtime/config.toml", "[nvidia-container-runtime]\n")
        return self

    # --- running the doctor ---

    def doctor(self, *args, env=None, timeout=30, host_root=True):
        """Runs `edgegpu doctor --host-root <tree> ARGS` with the fake NVML's fixture and
        returns a DoctorResult. NVML is found as on a host: under the tree's driver root
        (nvml_lib()), or where an --nvml-lib in ARGS points."""
        argv = [os.environ["EDGEGPU"], "doctor"]
        if host_root:
            argv += ["--host-root", self.root]
        argv += list(args)
        e = {"EDGEGPU_FAKE_NVML_FIXTURE": self.nvml_fixture}
        e.update(env or {})
        p = subprocess.run(argv, env=base_env(e), capture_output=True, text=True,
                           timeout=timeout)
        rep = sanitizer_report(p.stderr)
        if rep:
            raise AssertionError(f"edgegpu doctor (rc={p.returncode}): {rep}")
        return DoctorResult(p, argv)
