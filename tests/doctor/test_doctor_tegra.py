#!/usr/bin/python3
"""`edgegpu doctor` on each Jetson fixture board (tests/fixtures/tegra/make-board: Nano R32,
Xavier NX R35, Orin Nano R36, AGX Thor R38, Thor with a discrete card, and a non-Tegra arm64
server), each a copy of build/tests/fixtures/tegra/<board> given as --host-root, with the fake
NVML where the board has NVML (its nvml.conf): the board's facts against its expect.json, the
device nodes, the container runtime's mode; then hostile copies: nv_tegra_release missing,
garbage or a directory, a node missing, config.toml mode=cdi without a spec, mode=csv without
the CSV files, mode=legacy, an L4T R32 board asked for CUDA 12.2. Every report is checked
against docs/doctor.schema.json and every fix against docs/troubleshooting.md. (The image
checks on a board, --image against a real Docker engine, are in test_doctor_compat.py.)

Through meson: `meson test -C build doctor-tegra`; by hand: EDGEGPU=build/edgegpu
FAKE_NVML=build/tests/fakes/nvml/libnvidia-ml.so.1 TEGRA_BOARDS=build/tests/fixtures/tegra
/usr/bin/python3 tests/doctor/test_doctor_tegra.py.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from edgegpu import base_env, binary, sanitizer_report  # noqa: E402
from fixes import assert_documented  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(SRC, "docs", "doctor.schema.json")) as f:
    VALIDATOR = jsonschema.Draft202012Validator(json.load(f))

BOARDS = ["nano-r32", "xavier-nx-r35", "orin-nano-r36", "agx-thor-r38", "thor-dgpu"]
CSV_DIR = "etc/nvidia-container-runtime/host-files-for-container.d"
TOOLKIT_CFG = "etc/nvidia-container-runtime/config.toml"
TEGRA_IDS = ["driver.tegra", "driver.tegra-nodes", "runtime.tegra-mode"]
GPUS_NOT_SUPPORTED = "docker --gpus is not supported"
FIX_TEGRA_CUDA_OLD = (
    "On Jetson the CUDA driver comes with the L4T release: flash a JetPack whose CUDA is at "
    "least the requested one (the evidence shows what this release ships), or run an image "
    "built for the CUDA this release ships.")


def boards_dir():
    d = os.environ.get("TEGRA_BOARDS")
    if not d or not os.path.isdir(os.path.join(d, "nano-r32")):
        raise RuntimeError("$TEGRA_BOARDS must name build/tests/fixtures/tegra (meson test "
                           "builds it)")
    return d


class Report:
    def __init__(self, proc, root):
        self.rc, self.stdout, self.stderr, self.root = (proc.returncode, proc.stdout,
                                                        proc.stderr, root)
        self.doc = json.loads(proc.stdout) if proc.stdout.strip() else None

    def check(self, cid):
        for c in (self.doc or {}).get("checks", []):
            if c["id"] == cid:
                return c
        raise AssertionError(f"no check {cid}: {self}")

    def __repr__(self):
        return f"<doctor rc={self.rc} on {self.root}\n{self.stdout}\n{self.stderr}>"


class Tegra(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="doctor-tegra-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.n = 0

    def board(self, name):
        """A private copy of the board's tree (links kept as links), and its expect.json."""
        self.n += 1
        root = os.path.join(self.tmp, f"{self.n}-{name}")
        shutil.copytree(os.path.join(boards_dir(), name), root, symlinks=True)
        with open(os.path.join(root, "expect.json")) as f:
            return root, json.load(f)

    def put(self, root, rel, text):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)

    def doctor(self, root, *args):
        """`edgegpu doctor --host-root ROOT --json`, with the board's fake NVML when it has
        one (else no NVML is found under the tree, as on a Jetson before Thor)."""
        argv = [binary("EDGEGPU"), "doctor", "--host-root", root, "--json",
                "--timeout-ms", "5000"]
        env = {}
        if os.path.exists(os.path.join(root, "nvml.conf")):
            argv += ["--nvml-lib", binary("FAKE_NVML")]
            env["EDGEGPU_FAKE_NVML_FIXTURE"] = os.path.join(root, "nvml.conf")
        p = subprocess.run(argv + list(args), env=base_env(env), capture_output=True, text=True,
                           timeout=60)
        rep = sanitizer_report(p.stderr)
        self.assertFalse(rep, f"edgegpu doctor: {rep}")
        r = Report(p, root)
        self.assertIsNotNone(r.doc, r)
        self.assertEqual(sorted(VALIDATOR.iter_errors(r.doc), key=str), [], r)
        fails = [c for c in r.doc["checks"] if c["status"] == "fail"]
        self.assertEqual(r.rc, 1 if fails else 0, r)
        assert_documented(r.doc)
        return r

    def assertCheck(self, r, cid, status, summary=None, evidence=(), fix=None):
        c = r.check(cid)
        self.assertEqual(c["status"], status, json.dumps(c, indent=1))
        if summary:
            self.assertRegex(c["summary"], summary, json.dumps(c, indent=1))
        for e in evidence:
            self.assertTrue(any(re.search(e, line) for line in c["evidence"]),
                            f"{cid}: no evidence line matches {e!r}: {c['evidence']}")
        if fix is not None:
            self.assertIn(fix, c.get("fix", ""), json.dumps(c, indent=1))
        return c

    # --- each board as it is made ---

    def test_each_board(self):
        for name in BOARDS:
            with self.subTest(board=name):
                root, want = self.board(name)
                igpu = want["gpus"][0]
                r = self.doctor(root)
                major, rev = want["l4t"].split(".", 1)
                c = self.assertCheck(
                    r, "driver.tegra", "pass",
                    rf"L4T R{major} \(release\), REVISION: {re.escape(rev)}, "
                    rf"SoC {want['soc']}",
                    [rf"^model: {re.escape(want['model'])}$",
                     rf"^SoC: {want['soc']}, chip id {want['chip_id']}$",
                     rf"^L4T: {re.escape(want['l4t'])} \(.*/etc/nv_tegra_release\)$",
                     rf"^JetPack: {re.escape(want['jetpack'])}$",
                     rf"^power mode: {re.escape(igpu['power_mode'])}$"])
                self.assertNotIn("fix", c)
                # Every node the release's devices.csv lists is in the tree, and edgegpu's
                # Tegra backend delivers each one (none left out of its list).
                n = len(igpu["nodes"])
                c = self.assertCheck(r, "driver.tegra-nodes", "pass",
                                     rf"the {n} nodes this L4T release lists are present",
                                     [rf"devices\.csv: {n} dev entries, {n} present$"])
                self.assertFalse([e for e in c["evidence"]
                                  if "missing" in e or "not in edgegpu's" in e], c)
                # No toolkit config in the tree: the mode is not set (auto: csv).
                self.assertCheck(r, "runtime.tegra-mode", "warn", r"mode is not set",
                                 [r"config\.toml: absent \(mode auto, csv on a Jetson\)"],
                                 GPUS_NOT_SUPPORTED)
                # No /proc/sys/kernel/arch in the tree: a Jetson is arm64, never this
                # machine's uname.
                self.assertCheck(r, "compat.arch", "pass", r"linux/arm64$",
                                 [r"Jetson/Tegra board"])
                # NVML: none before Thor (the skip says so); the fake one where it exists.
                nvml = r.check("driver.nvml")
                if os.path.exists(os.path.join(root, "nvml.conf")):
                    self.assertEqual(nvml["status"], "pass", nvml)
                else:
                    self.assertEqual(nvml["status"], "skip", nvml)
                    self.assertRegex(nvml["summary"], rf"no NVML on this Jetson \(L4T R{major}")
                self.assertEqual(r.check("driver.devices")["status"], "skip")

    def test_arm64_server_is_no_jetson(self):
        root, want = self.board("arm64-server")
        self.assertFalse(want["tegra"])
        r = self.doctor(root)
        for cid in TEGRA_IDS:
            c = self.assertCheck(r, cid, "skip", r"not a Jetson/Tegra board")
        self.assertCheck(r, "driver.nvml", "pass", r"NVML works: driver 550\.54\.15",
                         [r"NVIDIA A2"])
        self.assertCheck(r, "compat.cuda", "skip", r"no --cuda-version")
        # Its CUDA is judged against the driver, not an L4T release.
        r = self.doctor(root, "--cuda-version", "12.2")
        c = self.assertCheck(r, "compat.cuda", "pass", r"the driver supports CUDA 12\.2")
        self.assertFalse([e for e in c["evidence"] if "L4T" in e], c)

    # --- hostile copies ---

    def test_release_file_missing_garbage_or_directory(self):
        for name in ("nano-r32", "orin-nano-r36"):
            for how in ("missing", "garbage", "directory", "empty"):
                with self.subTest(board=name, how=how):
                    root, want = self.board(name)
                    rel = os.path.join(root, "etc/nv_tegra_release")
                    os.unlink(rel)
                    if how == "garbage":
                        with open(rel, "wb") as f:
                            f.write(b"\x00\xffR\x00X (release), REVISION: ..\n" * 50)
                    elif how == "directory":
                        os.mkdir(rel)
                    elif how == "empty":
                        open(rel, "w").close()
                    r = self.doctor(root, "--cuda-version", "10.2")
                    # Still a Jetson (device tree, soc0); the release unknown, said so.
                    c = self.assertCheck(
                        r, "driver.tegra", "warn", r"L4T release is unknown: "
                        r"/etc/nv_tegra_release is " +
                        ("missing" if how == "missing" else "not in NVIDIA's format"),
                        [rf"^model: {re.escape(want['model'])}$", r"^L4T: unknown"],
                        "nvidia-l4t-core")
                    if how == "directory":
                        self.assertTrue(any("/etc/nv_tegra_release: cannot read" in e
                                            for e in c["evidence"]), c)
                    self.assertCheck(r, "compat.cuda", "skip", r"L4T release is unknown")

    def test_node_missing(self):
        for name, node in (("nano-r32", "nvmap"), ("orin-nano-r36", "nvmap"),
                           ("agx-thor-r38", "nvidiactl")):
            with self.subTest(board=name, node=node):
                root, _ = self.board(name)
                os.unlink(os.path.join(root, "dev", node))
                r = self.doctor(root)
                self.assertCheck(r, "driver.tegra", "fail", rf"/dev/{node} is missing",
                                 fix="nvidia-l4t-kernel")
                self.assertCheck(r, "driver.tegra-nodes", "warn",
                                 rf"1 of the \d+ nodes this L4T release lists are missing: "
                                 rf"/dev/{node}$", [rf"^missing: /dev/{node}$"],
                                 "mount the host's /dev")
                self.assertEqual(r.rc, 1)
        # A codec node: the GPU works (driver.tegra passes), the container lacks the node.
        root, _ = self.board("xavier-nx-r35")
        os.unlink(os.path.join(root, "dev/nvhost-nvdec"))
        r = self.doctor(root)
        self.assertCheck(r, "driver.tegra", "pass")
        self.assertCheck(r, "driver.tegra-nodes", "warn", r"missing: /dev/nvhost-nvdec$",
                         fix="nvidia-l4t-kernel")

    def test_devices_csv_missing_or_odd(self):
        root, _ = self.board("orin-nano-r36")
        os.unlink(os.path.join(root, CSV_DIR, "devices.csv"))
        r = self.doctor(root)
        self.assertCheck(r, "driver.tegra-nodes", "warn", r"no devices\.csv",
                         [r"devices\.csv: No such file"], "nvidia-container")
        # Lines that are no dev entries, a directory where a node should be, a glob.
        self.put(root, os.path.join(CSV_DIR, "devices.csv"),
                 "# comment\nlib, /usr/lib/x.so\ndev,/dev/nvmap\ndev , /dev/dri/renderD*\n"
                 "dev /dev/nvidiactl\ndev, relative\ngarbage\n\ndev, /dev/nvgpu\n")
        r = self.doctor(root)
        self.assertCheck(r, "driver.tegra-nodes", "pass",
                         r"the 3 nodes this L4T release lists are present")

    def test_dev_missing_whole(self):
        root, _ = self.board("xavier-nx-r35")
        shutil.rmtree(os.path.join(root, "dev"))
        r = self.doctor(root)
        self.assertEqual(r.check("driver.tegra")["status"], "fail", r)
        self.assertCheck(r, "driver.tegra-nodes", "warn",
                         r"(\d+) of the \1 nodes this L4T release lists are missing")

    def test_runtime_modes(self):
        spec_tegra = json.dumps({"cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu",
                                 "devices": [{"name": "tegra", "containerEdits": {
                                     "deviceNodes": [{"path": "/dev/nvmap"}]}}]})
        spec_other = json.dumps({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
                                 "devices": [{"name": "0", "containerEdits": {}}]})
        cases = [
            # (mode line, prepare, status, summary, fix word)
            ('mode = "csv"', None, "pass", r"CSV mode: devices\.csv, drivers\.csv and l4t\.csv",
             None),
            ('mode = "auto"', None, "pass", r"CSV mode", None),
            ("", None, "pass", r"CSV mode", None),
            ('mode = "csv"', "no-csv", "fail",
             r"CSV mode but the mount specs are missing: devices\.csv, drivers\.csv, l4t\.csv",
             GPUS_NOT_SUPPORTED),
            ('mode = "csv"', "no-l4t-csv", "fail", r"missing: l4t\.csv$", "--runtime=nvidia"),
            ('mode = "cdi"', None, "fail", r"CDI mode but no CDI spec names the integrated GPU",
             "with the device tegra"),
            ('mode = "cdi"', "spec-other", "fail", r"no CDI spec names", "device tegra"),
            ('mode = "cdi"', "spec-tegra", "pass", r"a CDI spec names the integrated GPU", None),
            ('mode = "legacy"', None, "fail", r"mode legacy does not work on a Jetson",
             "needs NVML"),
            ('mode = "jit-cdi"', None, "warn", r"neither csv nor cdi", 'mode = "csv"'),
            ("mode = [", None, "fail", r"config is not valid TOML|cannot be read", None),
        ]
        for mode, prep, status, summary, fix in cases:
            with self.subTest(mode=mode, prep=prep):
                root, _ = self.board("orin-nano-r36")
                self.put(root, TOOLKIT_CFG, f"[nvidia-container-runtime]\n{mode}\n")
                if prep == "no-csv":
                    shutil.rmtree(os.path.join(root, CSV_DIR))
                elif prep == "no-l4t-csv":
                    os.unlink(os.path.join(root, CSV_DIR, "l4t.csv"))
                elif prep == "spec-tegra":
                    self.put(root, "var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json",
                             spec_tegra)
                elif prep == "spec-other":
                    self.put(root, "etc/cdi/nvidia.json", spec_other)
                r = self.doctor(root)
                c = self.assertCheck(r, "runtime.tegra-mode", status, summary, fix=fix)
                if "csv" in summary.lower() and status == "pass":
                    self.assertTrue(any(GPUS_NOT_SUPPORTED in e for e in c["evidence"]), c)

    def test_mount_spec_path_from_config(self):
        root, _ = self.board("xavier-nx-r35")
        shutil.move(os.path.join(root, CSV_DIR), os.path.join(root, "opt-csv"))
        self.put(root, TOOLKIT_CFG, '[nvidia-container-runtime]\nmode = "csv"\n'
                 '[nvidia-container-runtime.modes.csv]\nmount-spec-path = "/opt-csv"\n')
        r = self.doctor(root)
        self.assertCheck(r, "runtime.tegra-mode", "pass", r"CSV mode",
                         [r"/opt-csv/devices\.csv: present"])

    def test_r32_board_with_cuda_12(self):
        """The classic Jetson failure: CUDA 12 on L4T R32 (JetPack 4 ships CUDA 10.2)."""
        root, _ = self.board("nano-r32")
        r = self.doctor(root, "--cuda-version", "12.2")
        self.assertCheck(r, "compat.cuda", "fail",
                         r"CUDA 12\.2 is newer than this L4T release supports \(CUDA 10\.2\)",
                         [r"Tegra board, L4T release: R32 \(release\), REVISION: 7\.4",
                          r"^JetPack: 4\.6\.4$", r"no cuda-compat package",
                          r"last release for Jetson Nano and TX2",
                          r"insufficient for CUDA runtime version"],
                         FIX_TEGRA_CUDA_OLD)
        r = self.doctor(root, "--cuda-version", "10.2")
        self.assertCheck(r, "compat.cuda", "pass", r"CUDA 10\.2 runs on this L4T release")
        # R36.4 ships 12.6; 12.8 through cuda-compat (a warning); 13.0 fails.
        root, _ = self.board("orin-nano-r36")
        for v, st in (("12.6", "pass"), ("12.8", "warn"), ("13.0", "fail")):
            r = self.doctor(root, "--cuda-version", v)
            self.assertCheck(r, "compat.cuda", st, rf"CUDA {re.escape(v)}")
        root, _ = self.board("agx-thor-r38")
        r = self.doctor(root, "--cuda-version", "13.0")
        self.assertCheck(r, "compat.cuda", "pass", r"ships CUDA 13\.0")

    def test_no_image_no_image_cuda(self):
        root, _ = self.board("orin-nano-r36")
        r = self.doctor(root)
        self.assertCheck(r, "compat.image-cuda", "skip", r"no --image given")


if __name__ == "__main__":
    unittest.main(verbosity=2)
