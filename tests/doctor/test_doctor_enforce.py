#!/usr/bin/python3
"""`edgegpu doctor`'s plugin.gpumem-enforcement on fixture host trees (hostroot.py): which
enforcement of nvidia.com/gpumem limits is in force (driver, interposer, both, accounting) and
each condition missing, from the fake NVML's memory-limit support (`memory_limits`), the host
root's cgroup version, the toolkit's nvidia-cdi-hook with or without apply-cuda-memory-limits,
the interposer library in <stateDir>/lib, and the container allocations' mode files."""

import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostroot import HostRoot  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(SRC, "docs", "doctor.schema.json")) as f:
    VALIDATOR = jsonschema.Draft202012Validator(json.load(f))

CHECK = "plugin.gpumem-enforcement"
STATE = "/var/lib/edgegpu"
HOOK = "/usr/bin/nvidia-cdi-hook"
# A Go binary holds its subcommand names among its strings; the scan looks for the name.
HOOK_NEW = "#!/bin/sh\n# update-ldcache create-symlinks apply-cuda-memory-limits\nexit 0\n"
HOOK_OLD = "#!/bin/sh\n# update-ldcache create-symlinks\nexit 0\n"


class EnforceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="doctor-enforce-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.n = 0

    def host(self, limits="supported", cgroup=2, hook=HOOK_NEW, lib=True):
        self.n += 1
        h = HostRoot(os.path.join(self.tmp, str(self.n))).healthy(gpus=2)
        h.fixture("driver_version = 550.54.15\nnvml_version = 12.550.54.15\n"
                  f"[gpu]\nmemory_limits = {limits}\n[gpu]\nmemory_limits = {limits}\n")
        if cgroup == 2:
            h.file("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
        else:
            h.dir("/sys/fs/cgroup/memory")
        if hook is not None:
            h.exe(HOOK, hook)
        if lib:
            h.file(f"{STATE}/lib/libedgegpu-cuda.so", "\x7fELF")
        return h

    def config(self, h, strategy="cdi-cri", extra=""):
        path = os.path.join(h.base, "config.yaml")
        with open(path, "w") as f:
            f.write("version: v1\nflags:\n  plugin:\n"
                    f"    deviceListStrategy: [{strategy}]\n"
                    "edgegpu:\n  sharing:\n    memory:\n      devices: [0, 1]\n"
                    f"      enforcement:\n        stateDir: {STATE}\n{extra}")
        return path

    def run_check(self, h, cfg):
        r = h.doctor("--json", "--config-file", cfg)
        self.assertIsNotNone(r.report, r)
        errors = sorted(VALIDATOR.iter_errors(r.report), key=str)
        self.assertEqual(errors, [], f"schema: {errors[:1]}\n{r.stdout}")
        return r.check(CHECK)

    def assertEvidence(self, c, pattern):
        self.assertTrue(any(re.search(pattern, e) for e in c["evidence"]),
                        f"no evidence line matches {pattern!r}: {json.dumps(c, indent=1)}")

    def assertNoEvidence(self, c, pattern):
        self.assertFalse(any(re.search(pattern, e) for e in c["evidence"]),
                         f"evidence line matches {pattern!r}: {json.dumps(c, indent=1)}")

    def test_both_on_a_cuda_13_4_node(self):
        h = self.host()
        c = self.run_check(h, self.config(h))
        self.assertEqual(c["status"], "pass", c)
        self.assertEqual(c["summary"], "gpumem limits: both")
        self.assertEvidence(c, r"^GPU 0 .*: driver memory limits supported$")
        self.assertEvidence(c, r"^cgroup: v2$")
        self.assertEvidence(c, rf"^{HOOK}: has apply-cuda-memory-limits$")
        self.assertEvidence(c, r"interposer library .*: installed$")
        self.assertNoEvidence(c, r"lacks")
        self.assertNotIn("fix", c)

    def test_driver_only_without_the_interposer(self):
        h = self.host(lib=False)
        c = self.run_check(h, self.config(h, extra="        interposer: false\n"))
        self.assertEqual((c["status"], c["summary"]), ("pass", "gpumem limits: driver"), c)
        self.assertEvidence(c, r"^interposer enforcement lacks: turned off in the config \(off\)")

    def test_old_driver_is_interposer(self):
        h = self.host(limits="not_supported")
        c = self.run_check(h, self.config(h))
        self.assertEqual((c["status"], c["summary"]), ("pass", "gpumem limits: interposer"), c)
        self.assertEvidence(c, r"^GPU 1 .*: driver memory limits not supported$")
        self.assertEvidence(c, r"^driver enforcement lacks: .*\(driver-unsupported\)\. Fix: .*CUDA 13\.4")
        self.assertNoEvidence(c, r"cgroup-v1|no-cdi-hook|not-cdi")

    def test_each_missing_condition_is_named(self):
        """cgroup v1, no CDI and an old hook at once: every one is said, with its fix."""
        h = self.host(cgroup=1, hook=HOOK_OLD)
        c = self.run_check(h, self.config(h, strategy="envvar"))
        self.assertEqual(c["summary"], "gpumem limits: interposer", c)
        self.assertEvidence(c, r"^cgroup: v1$")
        self.assertEvidence(c, rf"^{HOOK}: present, without apply-cuda-memory-limits")
        for reason in ("cgroup-v1", "not-cdi", "no-cdi-hook"):
            self.assertEvidence(c, rf"^driver enforcement lacks: .*\({reason}\)\. Fix: ")
        self.assertNoEvidence(c, r"driver-unsupported")

    def test_hook_missing(self):
        h = self.host(hook=None)
        c = self.run_check(h, self.config(h))
        self.assertEqual(c["summary"], "gpumem limits: interposer", c)
        self.assertEvidence(c, rf"^{HOOK}: ")
        self.assertEvidence(c, r"\(no-cdi-hook\)\. Fix: .*apply-cuda-memory-limits")

    def test_accounting_only_warns(self):
        h = self.host(limits="not_supported", lib=False)
        c = self.run_check(h, self.config(h))
        self.assertEqual(c["status"], "warn", c)
        self.assertRegex(c["summary"], r"^gpumem limits: accounting only")
        self.assertEvidence(c, r"interposer library /var/lib/edgegpu/lib/libedgegpu-cuda\.so: missing")
        self.assertEvidence(c, r"^interposer enforcement lacks: .*\(not-installed\)")
        self.assertIn("libedgegpu-cuda.so is not installed", c["fix"])

    def test_per_container_modes(self):
        h = self.host(limits="not_supported")
        h.file(f"{STATE}/alloc/00000000000000a1/mode", "interposer\n")
        h.file(f"{STATE}/alloc/00000000000000b2/mode", "accounting state-write-failed\n")
        h.dir(f"{STATE}/alloc/00000000000000c3")  # no mode file (being written)
        h.file(f"{STATE}/alloc/00000000000000d4/mode", b"\xff\xfe\n")
        c = self.run_check(h, self.config(h))
        self.assertEvidence(c, r"^container allocation 00000000000000a1: interposer$")
        self.assertEvidence(c, r"^container allocation 00000000000000b2: accounting state-write-failed$")
        self.assertEvidence(c, r"^container allocation 00000000000000c3: mode ")
        self.assertEvidence(c, r"^container allocation 00000000000000d4: \(not UTF-8\)$")

    def test_hostile_hook_and_state(self):
        """The hook a directory, a FIFO, a link out of the root; alloc/ a file."""
        h = self.host()
        h.remove(HOOK).dir(HOOK)
        c = self.run_check(h, self.config(h))
        self.assertEqual(c["summary"], "gpumem limits: interposer", c)
        h.remove(HOOK)
        os.mkfifo(h.path(HOOK))
        c = self.run_check(h, self.config(h))  # never opened: no hang
        self.assertEqual(c["summary"], "gpumem limits: interposer", c)
        h.remove(HOOK)
        outside = os.path.join(self.tmp, "outside-hook")
        with open(outside, "w") as f:
            f.write(HOOK_NEW)
        h.symlink(HOOK, outside)  # absolute: taken under the root, where it is not
        h.file(f"{STATE}/alloc", "not a directory\n")
        c = self.run_check(h, self.config(h))
        self.assertEqual(c["summary"], "gpumem limits: interposer", c)
        self.assertEvidence(c, rf"^{STATE}/alloc: ")

    def test_no_gpumem_skips(self):
        h = self.host()
        r = h.doctor("--json")
        self.assertEqual(r.check(CHECK)["status"], "skip")


if __name__ == "__main__":
    unittest.main(verbosity=2)
