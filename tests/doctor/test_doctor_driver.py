"""`edgegpu doctor`'s driver layer on fixture host trees (tests/doctor/hostroot.py), with the
fake NVML loaded through the real dlopen path; the report's JSON checked against
docs/doctor.schema.json with python3-jsonschema; exit codes and the text report's shape.

Runs as root (device nodes are made with mknod). Through meson: `meson test -C build
doctor-driver`; by hand: EDGEGPU=build/edgegpu FAKE_NVML=build/tests/fakes/nvml/libnvidia-ml.so.1
/usr/bin/python3 tests/doctor/test_doctor_driver.py.
"""

import copy
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostroot import LIB_DIR, HostRoot  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(SRC, "docs", "doctor.schema.json")) as f:
    SCHEMA = json.load(f)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)

DRIVER_IDS = ["driver.nvml", "driver.versions", "driver.devices", "driver.tegra",
              "driver.tegra-nodes", "driver.nvidia-smi", "driver.persistence", "driver.boot"]

# The fixed fix texts, word for word as docs/troubleshooting.md shows them.
FIX_NVML_MISSING = (
    "Install the NVIDIA driver for this GPU (Debian/Ubuntu: apt install nvidia-driver, or "
    "NVIDIA's .run installer), reboot, and check that nvidia-smi lists the GPU. If the driver "
    "is installed under another root, pass --driver-root DIR (or --nvml-lib PATH).")
FIX_MISMATCH = (
    "Reboot the node: the driver was upgraded and the old kernel module is still loaded. "
    "Without a reboot, stop every GPU process and reload the modules: rmmod nvidia_uvm "
    "nvidia_drm nvidia_modeset nvidia && modprobe nvidia && modprobe nvidia_uvm")
FIX_NOT_LOADED = (
    "Load the NVIDIA kernel module: modprobe nvidia && modprobe nvidia_uvm. If that fails, "
    "dmesg says why: a module not built for the running kernel (run dkms autoinstall, or "
    "reinstall the driver) or one Secure Boot refuses (enroll the driver's key, or sign it).")
FIX_UVM = (
    "Load the UVM module, which creates /dev/nvidia-uvm: nvidia-modprobe -u -c=0 (or modprobe "
    "nvidia_uvm), and make it load at boot: echo nvidia_uvm > "
    "/etc/modules-load.d/nvidia-uvm.conf")
FIX_SMI = (
    "Install the driver's utilities, which bring nvidia-smi (Debian: apt install nvidia-smi; "
    "Ubuntu: apt install nvidia-utils-<driver branch>, e.g. nvidia-utils-550), then run "
    "nvidia-smi: it must list the GPU.")
FIX_PERSISTENCE = (
    "Start the persistence daemon and enable it at boot: systemctl enable --now "
    "nvidia-persistenced.service (it comes with the driver; nvidia-smi -pm 1 also works, until "
    "the next reboot).")


class DoctorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="doctor-driver-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.n = 0

    def host(self):
        self.n += 1
        return HostRoot(os.path.join(self.tmp, str(self.n)))

    def assertLayerOk(self, r, layer):
        """No check of @layer failed (the other layers fail on a driver-only tree, and the
        exit status follows every check: run_json() checks that)."""
        if r.report is not None:
            bad = [c for c in r.report["checks"] if c["layer"] == layer and c["status"] == "fail"]
            self.assertEqual(bad, [], r)
        else:
            self.assertNotRegex(r.stdout, rf"(?m)^fail  {layer}\.", r)
            self.assertEqual(r.rc, 1 if re.search(r"(?m)^fail  ", r.stdout) else 0, r)

    def run_json(self, h, *args, **kw):
        """Runs the doctor with --json; checks the document against the schema and the exit
        status against the document (1 exactly when a check failed), and returns it."""
        r = h.doctor("--json", *args, **kw)
        self.assertIsNotNone(r.report, r)
        errors = sorted(VALIDATOR.iter_errors(r.report), key=str)
        self.assertEqual(errors, [], f"schema: {errors[:1]}\n{r.stdout}")
        checks = r.report["checks"]
        fails = [c for c in checks if c["status"] == "fail"]
        self.assertEqual(r.rc, 1 if fails else 0, r)
        self.assertEqual(r.report["ok"], not fails)
        for s in ("pass", "warn", "fail", "skip"):
            self.assertEqual(r.report["counts"][s], sum(c["status"] == s for c in checks))
        for c in checks:
            self.assertEqual(c["layer"], c["id"].split(".")[0])
        self.assertEqual([c["id"] for c in checks if c["layer"] == "driver"], DRIVER_IDS)
        self.assertEqual(r.report["hostRoot"], h.root)
        return r

    def assertCheck(self, r, cid, status, summary=None, evidence=None, fix=None):
        c = r.check(cid)
        self.assertEqual(c["status"], status, json.dumps(c, indent=1))
        if summary:
            self.assertRegex(c["summary"], summary)
        for e in evidence or []:
            self.assertTrue(any(re.search(e, line) for line in c["evidence"]),
                            f"no evidence line matches {e!r}: {c['evidence']}")
        if fix is not None:
            self.assertEqual(c.get("fix"), fix)
        return c


class Healthy(DoctorTest):
    def test_healthy_discrete_node(self):
        h = self.host().healthy(gpus=2)
        r = self.run_json(h)
        for cid in DRIVER_IDS:
            self.assertCheck(r, cid, "skip" if cid.startswith("driver.tegra") else "pass")
        c = self.assertCheck(r, "driver.nvml", "pass", r"driver 550\.54\.15, CUDA 12\.4, 2 GPUs",
                             [r"^library: " + re.escape(LIB_DIR + "/libnvidia-ml.so.550.54.15"),
                              r"GPU-00000000-0000-4000-8000-000000000000",
                              r"GPU-00000000-0000-4000-8000-000000000001"])
        self.assertNotIn("fix", c)
        self.assertCheck(r, "driver.versions", "pass", r"550\.54\.15",
                         [r"^kernel module: 550\.54\.15", r"^NVML driver version: 550\.54\.15",
                          r"version 550\.54\.15\)$"])
        self.assertCheck(r, "driver.devices", "pass", r"^2 GPU nodes",
                         [r"^/dev/nvidia1: character device, GPU-", r"^GPUs NVML sees: 2$"])
        self.assertCheck(r, "driver.boot", "pass", None,
                         [r"^containerd\.service: enabled", r"nvidia.ko found in "
                          r"/lib/modules/6\.1\.0-18-amd64"])
        self.assertLayerOk(r, "driver")

    def test_text_report_shape(self):
        h = self.host().healthy(gpus=1)
        r = h.doctor()
        self.assertLayerOk(r, "driver")
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "[driver]")
        heads = [m.groups() for m in (re.match(r"^(pass|warn|fail|skip)  ([a-z]+\.[a-z0-9-]+): (.+)$", ln)
                                      for ln in lines) if m]
        self.assertEqual([h_[1] for h_ in heads if h_[1].startswith("driver.")], DRIVER_IDS)
        for ln in lines:
            self.assertRegex(ln, r"^(\[[a-z]+\]|(pass|warn|fail|skip)  \S+: .+|      \S.*|"
                                 r"           \S.*|"
                                 r"doctor: \d+ pass, \d+ warn, \d+ fail, \d+ skip|)$")
        m = re.match(r"^doctor: (\d+) pass, (\d+) warn, (\d+) fail, (\d+) skip$", lines[-1])
        self.assertTrue(m, lines[-1])
        self.assertEqual(sum(map(int, m.groups())), len(heads))
        # The text and the JSON report say the same.
        j = self.run_json(h)
        self.assertEqual([(c["status"], c["id"], c["summary"]) for c in j.report["checks"]], heads)

    def test_nvml_lib_flag_outside_the_tree(self):
        # --nvml-lib names a file whose name carries no version: two versions to compare.
        h = self.host().healthy(gpus=1)
        h.remove(LIB_DIR)
        r = self.run_json(h, "--nvml-lib", os.environ["FAKE_NVML"])
        self.assertCheck(r, "driver.nvml", "pass", None,
                         [r"^library: " + re.escape(os.path.realpath(os.environ["FAKE_NVML"]))])
        self.assertCheck(r, "driver.versions", "pass", None, [r"not in its name"])


class Nvml(DoctorTest):
    def test_nvml_missing(self):
        h = self.host().healthy(gpus=1)
        h.remove(LIB_DIR)
        r = self.run_json(h)
        self.assertEqual(r.rc, 1)
        self.assertCheck(r, "driver.nvml", "fail", r"NVML not found: the NVIDIA driver is not "
                         r"installed", [re.escape(h.root + "/usr/lib64/libnvidia-ml.so.1")],
                         FIX_NVML_MISSING)
        self.assertCheck(r, "driver.versions", "warn", r"only the kernel module's version",
                         [r"^library file: not found$"])
        # The nodes are still checked, the GPU count is unknown.
        self.assertCheck(r, "driver.devices", "pass", None, [r"^GPUs NVML sees: unknown"])

    def test_nvml_lib_flag_wrong(self):
        h = self.host().healthy(gpus=1)
        r = self.run_json(h, "--nvml-lib", os.path.join(self.tmp, "nowhere", "libnvidia-ml.so.1"))
        self.assertCheck(r, "driver.nvml", "fail", None, [r"nowhere/libnvidia-ml\.so\.1"],
                         FIX_NVML_MISSING)

    def test_version_mismatch_after_upgrade(self):
        # The seed's "Failed to initialize NVML: Driver/library version mismatch".
        h = self.host().healthy(gpus=1)
        h.kmod("535.104.05")
        h.gpus(1, extra="mismatch = on\n")
        r = self.run_json(h)
        self.assertEqual(r.rc, 1)
        self.assertCheck(r, "driver.nvml", "fail",
                         r"^Failed to initialize NVML: Driver/library version mismatch$",
                         [r"kernel module 535\.104\.05"], FIX_MISMATCH)
        self.assertCheck(r, "driver.versions", "fail",
                         r"version mismatch: kernel module 535\.104\.05, NVIDIA libraries "
                         r"550\.54\.15", [r"^kernel module: 535\.104\.05"], FIX_MISMATCH)

    def test_versions_disagree(self):
        # Each pair of the three versions disagreeing is found, NVML working or not.
        for kmod, lib, nvml in (("535.104.05", "550.54.15", "550.54.15"),
                                ("550.54.15", "545.23.08", "550.54.15"),
                                ("550.54.15", "550.54.15", "550.90.07")):
            with self.subTest(kmod=kmod, lib=lib, nvml=nvml):
                h = self.host().healthy(gpus=1)
                h.kmod(kmod).nvml_lib(lib).gpus(1, driver=nvml)
                r = self.run_json(h)
                self.assertCheck(r, "driver.nvml", "pass")
                self.assertCheck(r, "driver.versions", "fail", r"version mismatch",
                                 [f"^kernel module: {re.escape(kmod)}",
                                  f"^NVML driver version: {re.escape(nvml)}",
                                  rf"libnvidia-ml\.so\.{re.escape(lib)} \(version"],
                                 FIX_MISMATCH)

    def test_open_kernel_module_version(self):
        h = self.host().healthy(gpus=1)
        h.kmod("550.54.15", open_module=True)
        r = self.run_json(h)
        self.assertCheck(r, "driver.versions", "pass", None,
                         [r"^kernel module: 550\.54\.15 \(.*Open Kernel Module"])

    def test_driver_not_loaded(self):
        h = self.host().healthy(gpus=1)
        h.remove("/proc/driver")
        h.gpus(1, extra="init_error = DRIVER_NOT_LOADED\n")
        r = self.run_json(h)
        self.assertCheck(r, "driver.nvml", "fail", r"kernel module is not loaded "
                         r"\(NVML_ERROR_DRIVER_NOT_LOADED\)", None, FIX_NOT_LOADED)
        self.assertCheck(r, "driver.versions", "fail", r"NVIDIA kernel module is not loaded",
                         [r"/proc/driver/nvidia/version, missing"], FIX_NOT_LOADED)

    def test_no_permission(self):
        h = self.host().healthy(gpus=1)
        h.gpus(1, extra="init_error = NO_PERMISSION\n")
        r = self.run_json(h)
        c = self.assertCheck(r, "driver.nvml", "fail", r"NVML_ERROR_NO_PERMISSION")
        self.assertIn("sudo edgegpu doctor", c["fix"])

    def test_zero_gpus_is_a_warning(self):
        h = self.host().healthy(gpus=0)
        r = self.run_json(h)
        c = self.assertCheck(r, "driver.nvml", "warn", r"sees 0 GPUs")
        self.assertIn("lspci", c["fix"])

    def test_hung_nvml_init(self):
        h = self.host().healthy(gpus=1)
        h.gpus(1, extra="block = nvmlInit_v2\n")
        t = time.monotonic()
        r = self.run_json(h, "--timeout-ms", "300")
        took = time.monotonic() - t
        self.assertCheck(r, "driver.nvml", "fail", r"^NVML did not answer within 300 ms$",
                         [r"nvmlInit_v2"])
        self.assertIn("dmesg", r.check("driver.nvml")["fix"])
        # The rest of the report is there, and the process left though a thread is stuck.
        self.assertCheck(r, "driver.devices", "pass")
        self.assertLess(took, 10, "the doctor waited for the hung call")

    def test_hung_nvml_discovery_names_the_call(self):
        h = self.host().healthy(gpus=1)
        h.gpus(1, extra="block = nvmlDeviceGetCount_v2\n")
        r = self.run_json(h, "--timeout-ms", "200")
        self.assertCheck(r, "driver.nvml", "fail", r"within 200 ms",
                         [r"^stuck in: listing the GPUs, in nvmlDeviceGetCount_v2$"])


class Devices(DoctorTest):
    def test_gpu_without_its_node(self):
        h = self.host().healthy(gpus=2)
        h.remove("/dev/nvidia1")
        r = self.run_json(h)
        self.assertCheck(r, "driver.devices", "fail", r"NVML sees 2 GPUs but only 1 have",
                         [r"^/dev/nvidia1: missing, GPU-"])

    def test_no_uvm(self):
        h = self.host().healthy(gpus=1)
        h.remove("/dev/nvidia-uvm")
        r = self.run_json(h)
        self.assertCheck(r, "driver.devices", "fail", r"^/dev/nvidia-uvm is missing$",
                         [r"^/dev/nvidia-uvm: missing"], FIX_UVM)

    def test_no_uvm_tools_is_a_warning(self):
        h = self.host().healthy(gpus=1)
        h.remove("/dev/nvidia-uvm-tools")
        r = self.run_json(h)
        self.assertCheck(r, "driver.devices", "warn", r"nvidia-uvm-tools is missing")

    def test_ctl_not_a_char_device(self):
        h = self.host().healthy(gpus=1)
        h.remove("/dev/nvidiactl").file("/dev/nvidiactl", "")
        r = self.run_json(h)
        self.assertCheck(r, "driver.devices", "fail", r"nvidiactl is not a character device")

    def test_more_nodes_than_gpus(self):
        h = self.host().healthy(gpus=2)
        h.dev_nodes(3)
        r = self.run_json(h)
        c = self.assertCheck(r, "driver.devices", "warn", r"3 /dev/nvidia<N> nodes but NVML "
                             r"sees 2 GPUs")
        self.assertIn("Xid 79", c["fix"])

    def test_no_nodes_no_nvml(self):
        h = self.host().healthy(gpus=1)
        h.remove("/dev").remove(LIB_DIR)
        r = self.run_json(h)
        self.assertCheck(r, "driver.devices", "fail", r"nvidiactl is missing",
                         [r"^/dev/nvidia<N> GPU nodes: none$"])


class Tegra(DoctorTest):
    def test_orin_with_l4t(self):
        h = self.host().tegra()
        h.exe("/usr/bin/nvidia-smi")
        r = self.run_json(h)
        self.assertLayerOk(r, "driver")
        self.assertCheck(r, "driver.tegra", "pass",
                         r"L4T R36 \(release\), REVISION: 4\.3, SoC tegra234",
                         [r"^model: NVIDIA Jetson Orin Nano", r"^/dev/nvhost-ctrl-gpu: present"])
        self.assertCheck(r, "driver.nvml", "skip", r"no NVML on this Jetson \(L4T R36")
        for cid in ("driver.versions", "driver.devices", "driver.persistence"):
            self.assertCheck(r, cid, "skip")

    def test_jetson_gpu_nodes_missing(self):
        h = self.host().tegra(nodes=False)
        r = self.run_json(h)
        c = self.assertCheck(r, "driver.tegra", "fail", r"device node /dev/nvmap is missing")
        self.assertIn("nvgpu", c["fix"])

    def test_l4t_release_missing(self):
        h = self.host().tegra(release=None)
        r = self.run_json(h)
        c = self.assertCheck(r, "driver.tegra", "warn", r"L4T release is unknown")
        self.assertIn("/etc/nv_tegra_release", c["fix"])

    def test_old_l4t_has_no_nvidia_smi(self):
        h = self.host().tegra(release="R32 (release), REVISION: 7.4", soc="tegra210")
        r = self.run_json(h)
        self.assertCheck(r, "driver.nvidia-smi", "skip", r"R32 ships no nvidia-smi")

    def test_thor_needs_nvml(self):
        h = self.host().tegra(release="R38 (release), REVISION: 2.0", soc="tegra264",
                              model="NVIDIA Jetson AGX Thor Developer Kit")
        r = self.run_json(h)
        self.assertCheck(r, "driver.tegra", "pass", r"SoC tegra264", [r"^/dev/nvidia0: present"])
        c = self.assertCheck(r, "driver.nvml", "warn", r"NVML not found on this Jetson")
        self.assertIn("nvidia-jetpack", c["fix"])
        # With NVML (JetPack 7) the check passes there too.
        h.kmod("580.00").nvml_lib("580.00").gpus(1, driver="580.00")
        r = self.run_json(h)
        self.assertCheck(r, "driver.nvml", "pass", r"driver 580\.00")
        self.assertCheck(r, "driver.versions", "pass")


class HostTools(DoctorTest):
    def test_no_nvidia_smi(self):
        h = self.host().healthy(gpus=1)
        h.remove("/usr/bin/nvidia-smi")
        r = self.run_json(h)
        self.assertCheck(r, "driver.nvidia-smi", "warn", r"nvidia-smi is not on the PATH",
                         None, FIX_SMI)
        # Only a warning: no driver check fails.
        self.assertEqual([c["id"] for c in r.report["checks"]
                          if c["layer"] == "driver" and c["status"] == "fail"], [])

    def test_nvidia_smi_through_absolute_links_stays_in_the_root(self):
        h = self.host().healthy(gpus=1)
        h.remove("/usr/bin/nvidia-smi")
        h.symlink("/usr/bin/nvidia-smi", "/etc/alternatives/nvidia-smi")
        h.symlink("/etc/alternatives/nvidia-smi", "/usr/lib/nvidia/current/nvidia-smi")
        h.exe("/usr/lib/nvidia/current/nvidia-smi")
        r = self.run_json(h)
        self.assertCheck(r, "driver.nvidia-smi", "pass", None,
                         [r"^/usr/bin/nvidia-smi -> /usr/lib/nvidia/current/nvidia-smi$"])
        h.remove("/usr/lib/nvidia/current/nvidia-smi")  # a dangling link is no nvidia-smi
        self.assertCheck(self.run_json(h), "driver.nvidia-smi", "warn")

    def test_nvidia_smi_not_executable(self):
        h = self.host().healthy(gpus=1)
        h.file("/usr/bin/nvidia-smi", "#!/bin/sh\n", 0o644)
        r = self.run_json(h)
        self.assertCheck(r, "driver.nvidia-smi", "warn", r"not executable",
                         [r"^/usr/bin/nvidia-smi: no execute permission$"])

    def test_persistence_off(self):
        h = self.host().healthy(gpus=1)
        h.persistenced(running=False)
        r = self.run_json(h)
        self.assertCheck(r, "driver.persistence", "warn", r"persistence mode is off",
                         [r"^nvidia-persistenced\.service: enabled"], FIX_PERSISTENCE)
        h.remove("/run/nvidia-persistenced")
        self.assertCheck(self.run_json(h), "driver.persistence", "warn")


class Boot(DoctorTest):
    """The seed's "GPUs gone after a reboot": what must start at boot does."""

    def test_runtime_not_enabled(self):
        h = self.host().healthy(gpus=1)
        h.unit_disabled("containerd.service")
        r = self.run_json(h)
        self.assertEqual(r.rc, 1)
        self.assertCheck(r, "driver.boot", "fail", r"^containerd\.service is not enabled: "
                         r"after a reboot it does not start and the GPUs are gone$",
                         [r"^containerd\.service: installed, not enabled"],
                         "systemctl enable --now containerd.service")

    def test_runtime_masked(self):
        h = self.host().healthy(gpus=1)
        h.unit_masked("containerd.service")
        r = self.run_json(h)
        self.assertCheck(r, "driver.boot", "fail", r"containerd\.service is masked", None,
                         "systemctl unmask containerd.service && systemctl enable --now "
                         "containerd.service")

    def test_persistenced_not_enabled_is_a_warning(self):
        h = self.host().healthy(gpus=1)
        h.unit_disabled("nvidia-persistenced.service")
        r = self.run_json(h)
        self.assertCheck(r, "driver.boot", "warn", r"nvidia-persistenced\.service is not "
                         r"enabled", None, "systemctl enable --now nvidia-persistenced.service")

    def test_worst_finding_wins(self):
        h = self.host().healthy(gpus=1)
        h.unit_disabled("nvidia-persistenced.service").unit_disabled("containerd.service")
        r = self.run_json(h)
        self.assertCheck(r, "driver.boot", "fail", r"^containerd\.service",
                         [r"^nvidia-persistenced\.service: installed, not enabled"],
                         "systemctl enable --now containerd.service")

    def test_k3s_brings_its_own_containerd(self):
        h = self.host().healthy(gpus=1, runtime="k3s-agent.service")
        h.unit("containerd.service")  # installed, disabled: k3s does not use it
        r = self.run_json(h)
        self.assertCheck(r, "driver.boot", "pass", None,
                         [r"^k3s-agent\.service: enabled", r"^containerd\.service: installed, "
                          r"not enabled"])
        h.unit_disabled("k3s-agent.service")
        self.assertCheck(self.run_json(h), "driver.boot", "fail", r"k3s-agent\.service", None,
                         "systemctl enable --now k3s-agent.service")

    def test_microk8s_and_kubeedge(self):
        h = self.host().healthy(gpus=1, runtime=None)
        h.unit("snap.microk8s.daemon-containerd.service", where="/etc/systemd/system")
        c = self.assertCheck(self.run_json(h), "driver.boot", "fail",
                             r"snap\.microk8s\.daemon-containerd\.service is not enabled")
        self.assertIn("snap start --enable microk8s", c["fix"])
        h = self.host().healthy(gpus=1)
        h.unit("edgecore.service", where="/etc/systemd/system")
        self.assertCheck(self.run_json(h), "driver.boot", "fail", r"^edgecore\.service", None,
                         "systemctl enable --now edgecore.service")

    def test_no_runtime_unit(self):
        h = self.host().healthy(gpus=1, runtime=None)
        c = self.assertCheck(self.run_json(h), "driver.boot", "warn",
                             r"no container runtime unit")
        self.assertIn("systemctl enable --now containerd.service", c["fix"])

    def test_module_not_built_for_running_kernel(self):
        # A kernel update without DKMS: the old kernel had the module, the new one has not.
        h = self.host().healthy(gpus=1)
        h.kernel("6.1.0-21-amd64", module=None)
        c = self.assertCheck(self.run_json(h), "driver.boot", "fail",
                             r"no NVIDIA kernel module for the running kernel 6\.1\.0-21-amd64",
                             [r"no nvidia\.ko in /lib/modules/6\.1\.0-21-amd64"])
        self.assertIn("dkms autoinstall", c["fix"])
        h.kernel("6.1.0-21-amd64", module="kernel/drivers/video/nvidia.ko.xz")
        self.assertCheck(self.run_json(h), "driver.boot", "pass")


class ExitAndSchema(DoctorTest):
    def test_usage_errors_exit_2(self):
        h = self.host()
        for args in (["--cuda-version"], ["--bogus"], ["--timeout-ms", "0"],
                     ["--timeout-ms", "x"], ["--host-root"], ["extra"]):
            with self.subTest(args=args):
                r = h.doctor(*args)
                self.assertEqual(r.rc, 2, r)
                self.assertEqual(r.stdout, "")
                self.assertRegex(r.stderr, r"^edgegpu: ")

    def test_fail_exits_1_and_warn_exits_by_the_rest(self):
        h = self.host().healthy(gpus=1)
        h.remove("/dev/nvidia-uvm")
        r = h.doctor()
        self.assertEqual(r.rc, 1)
        self.assertRegex(r.stdout, r"(?m)^fail  driver\.devices: /dev/nvidia-uvm is missing$")
        # The text report wraps a fix over indented lines: joined again, it is the fix itself.
        m = re.search(r"(?m)^fail  driver\.devices: .*\n(?:      (?!fix: ).*\n)*"
                      r"      fix: (.*\n(?:           .*\n)*)", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(" ".join(m.group(1).split()), " ".join(FIX_UVM.split()))

    def test_schema_rejects_broken_reports(self):
        r = self.run_json(self.host().healthy(gpus=1))
        good = r.report
        self.assertTrue(VALIDATOR.is_valid(good))
        breakers = [
            lambda d: d.pop("ok"),
            lambda d: d.__setitem__("schemaVersion", 2),
            lambda d: d.__setitem__("extra", 1),
            lambda d: d["counts"].pop("skip"),
            lambda d: d["counts"].__setitem__("pass", -1),
            lambda d: d["checks"][0].__setitem__("id", "driver.NVML"),
            lambda d: d["checks"][0].__setitem__("id", "gpu.nvml"),
            lambda d: d["checks"][0].__setitem__("status", "ok"),
            lambda d: d["checks"][0].__setitem__("layer", "kernel"),
            lambda d: d["checks"][0].__setitem__("evidence", "one string"),
            lambda d: d["checks"][0].__setitem__("summary", "two\nlines"),
            lambda d: d["checks"][0].__setitem__("fix", ""),
            lambda d: d["checks"][0].__setitem__("hint", "x"),
            lambda d: d["checks"][0].pop("summary"),
        ]
        for i, brk in enumerate(breakers):
            with self.subTest(i=i):
                d = copy.deepcopy(good)
                brk(d)
                self.assertFalse(VALIDATOR.is_valid(d), d)

    def test_schema_is_a_valid_schema(self):
        jsonschema.Draft202012Validator.check_schema(SCHEMA)


if __name__ == "__main__":
    unittest.main(verbosity=2)
