#!/usr/bin/python3
"""Configuration: every error kind through `edgegpu check-config` and through `serve`, with
file:line:column and key; warnings; precedence flag > environment > file."""

import os
import re

from common import FIXTURES, RESOURCE, NodeTest, load_fixture, main, uuids
from edgegpu import run_cli

CFG = os.path.join(FIXTURES, "config")

# (file, text on the offending line, token the column points at (None: any column), key,
#  substrings of the message)
ERRORS = [
    ("syntax.yaml", "passDeviceSpecs: true", None, None, ["YAML"]),
    ("unknown-key.yaml", "passDeviceSpec:", "passDeviceSpec", "flags.plugin.passDeviceSpec",
     ["unknown key"]),
    ("wrong-type.yaml", '"yes"', '"yes"', "flags.failOnInitError", ["true or false"]),
    ("wrong-type-duration.yaml", "soon", "soon", "edgegpu.health.recoveryQuietPeriod",
     ["soon"]),
    ("bad-enum.yaml", "serial", "serial", "flags.plugin.deviceIDStrategy",
     ["serial", "uuid", "index"]),
    ("replicas.yaml", "replicas: 1", "1", "sharing.timeSlicing.resources[0].replicas",
     ["at least 2"]),
    ("unsupported-mig.yaml", "mixed", "mixed", "flags.migStrategy", ["not supported"]),
    ("unsupported-mps.yaml", "resources:", "resources", "sharing.mps", ["not supported"]),
    ("unsupported-gds.yaml", "gdsEnabled: true", "true", "flags.gdsEnabled",
     ["not supported"]),
]


def position(path, line_text, token):
    with open(path) as f:
        for no, line in enumerate(f, 1):
            if line_text in line:
                return no, (line.index(token, line.index(line_text)) + 1 if token else None)
    raise AssertionError(f"{line_text!r} not in {path}")


def expected_prefix(path, line_text, token, key):
    line, col = position(path, line_text, token)
    pat = re.escape(f"{path}:{line}:") + (re.escape(f"{col}:") if col else r"\d+:")
    return pat + (re.escape(f" {key}:") if key else "")


def parse_dump(text):
    """The YAML check-config prints (maps, lists of scalars, scalars) -> dict of dotted keys."""
    out, stack = {}, []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        s = raw.strip()
        while stack and stack[-1][0] >= indent and not (s.startswith("- ") and
                                                         stack[-1][0] == indent - 2):
            stack.pop()
        if s.startswith("- "):
            key = ".".join(k for _, k in stack)
            out.setdefault(key, []).append(s[2:].strip('"'))
            continue
        k, _, v = s.partition(":")
        v = v.strip()
        path = ".".join([k2 for _, k2 in stack] + [k])
        if v == "":
            stack.append((indent, k))
        else:
            out[path] = [] if v == "[]" else v.strip('"')
    return out


class CheckConfig(NodeTest):
    def test_every_error_kind(self):
        for name, line_text, token, key, msgs in ERRORS:
            with self.subTest(name):
                path = os.path.join(CFG, name)
                r = run_cli(["check-config", path])
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertEqual(r.stdout, "", "an invalid config was printed")
                self.assertRegex(r.stderr, expected_prefix(path, line_text, token, key))
                for m in msgs:
                    self.assertIn(m, r.stderr)

    def test_unreadable_file(self):
        n = self.node(None, start_emulator=False)
        d = os.path.join(n.root, "a-directory.yaml")
        os.mkdir(d)
        r = run_cli(["check-config", d])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(d, r.stderr)
        self.assertIn("cannot read", r.stderr)
        missing = os.path.join(n.root, "missing.yaml")
        r = run_cli(["check-config", missing])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(missing, r.stderr)
        self.assertIn("No such file", r.stderr)
        if os.geteuid() != 0:
            p = n.write_config("version: v1\n", os.path.join(n.root, "mode000.yaml"))
            os.chmod(p, 0)
            r = run_cli(["check-config", p])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(p, r.stderr)

    def test_oversized_file(self):
        n = self.node(None, start_emulator=False)
        p = os.path.join(n.root, "big.yaml")
        with open(p, "w") as f:
            f.write("version: v1\n")
            f.write(("#" * 1023 + "\n") * 1024)  # 1 MiB of comments plus the first line
        self.assertGreater(os.path.getsize(p), 1 << 20)
        r = run_cli(["check-config", p])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(p, r.stderr)
        self.assertIn("larger than", r.stderr)
        # Exactly at the limit is fine.
        with open(p, "w") as f:
            f.write("version: v1\n" + "#" * ((1 << 20) - 13) + "\n")
        self.assertEqual(os.path.getsize(p), 1 << 20)
        r = run_cli(["check-config", p])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_warning_for_ignored_default(self):
        path = os.path.join(CFG, "warn-default.yaml")
        r = run_cli(["check-config", path])
        self.assertEqual(r.returncode, 0, r.stderr)
        line, col = position(path, "gdsEnabled: false", "false")
        self.assertIn(f"warning: {path}:{line}:{col}: flags.gdsEnabled:", r.stderr)
        self.assertIn("flags.plugin.cdiAnnotationPrefix", r.stderr)

    def test_prints_effective_config_round_trip(self):
        path = os.path.join(CFG, "precedence.yaml")
        r = run_cli(["check-config", path])
        self.assertEqual(r.returncode, 0, r.stderr)
        eff = parse_dump(r.stdout)
        self.assertEqual(eff["flags.plugin.deviceListStrategy"], ["volume-mounts"])
        self.assertEqual(eff["flags.plugin.deviceIDStrategy"], "index")
        self.assertEqual(eff["flags.plugin.passDeviceSpecs"], "true")
        self.assertEqual(eff["edgegpu.health.recoveryQuietPeriod"], "5s")
        n = self.node(None, start_emulator=False)
        again = n.write_config(r.stdout, os.path.join(n.root, "dump.yaml"))
        r2 = run_cli(["check-config", again])
        self.assertEqual(r2.returncode, 0, r2.stderr)
        self.assertEqual(parse_dump(r2.stdout), eff)


class Precedence(NodeTest):
    def effective(self, env=None, flags=()):
        r = run_cli(["check-config", os.path.join(CFG, "precedence.yaml")] + list(flags),
                    env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return parse_dump(r.stdout)

    def test_flag_over_env_over_file(self):
        eff = self.effective()
        self.assertEqual((eff["flags.plugin.deviceListStrategy"],
                          eff["flags.plugin.deviceIDStrategy"],
                          eff["flags.plugin.passDeviceSpecs"]),
                         (["volume-mounts"], "index", "true"))
        env = {"DEVICE_LIST_STRATEGY": "cdi-cri,envvar", "DEVICE_ID_STRATEGY": "uuid",
               "PASS_DEVICE_SPECS": "false"}
        eff = self.effective(env)
        self.assertEqual(sorted(eff["flags.plugin.deviceListStrategy"]), ["cdi-cri", "envvar"])
        self.assertEqual(eff["flags.plugin.deviceIDStrategy"], "uuid")
        self.assertEqual(eff["flags.plugin.passDeviceSpecs"], "false")
        self.assertEqual(eff["edgegpu.health.recoveryQuietPeriod"], "5s", "file value kept")
        eff = self.effective(env, ["--device-list-strategy", "envvar", "--pass-device-specs"])
        self.assertEqual(eff["flags.plugin.deviceListStrategy"], ["envvar"])
        self.assertEqual(eff["flags.plugin.deviceIDStrategy"], "uuid")
        self.assertEqual(eff["flags.plugin.passDeviceSpecs"], "true")

    def test_bad_env_value_named(self):
        r = run_cli(["check-config", os.path.join(CFG, "precedence.yaml")],
                    env={"DEVICE_ID_STRATEGY": "serial"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("DEVICE_ID_STRATEGY", r.stderr)
        self.assertIn("serial", r.stderr)

    def test_serve_applies_precedence(self):
        n = self.node("two-gpus.conf")
        n.start_daemon(config=os.path.join(CFG, "precedence.yaml"),
                       env={"DEVICE_LIST_STRATEGY": "cdi-cri", "DEVICE_ID_STRATEGY": "uuid"},
                       flags=["--device-list-strategy", "envvar"])
        n.wait_register()
        n.wait_devices(healthy_count=2)
        ev = n.emu.admit("p", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        al = n.emu.allocations("p")[0]
        uuid = al["ids"][0]
        # envvar from the flag, uuid from the environment, passDeviceSpecs from the file.
        self.assertEqual(al["response"]["envs"], {"NVIDIA_VISIBLE_DEVICES": uuid})
        self.assertEqual(al["response"]["cdi_devices"], [])
        minor = load_fixture("two-gpus.conf")["gpus"][uuids("two-gpus.conf").index(uuid)]["minor"]
        self.assertIn(f"/dev/nvidia{minor}",
                      [x["container_path"] for x in al["response"]["devices"]])

    def test_config_file_from_env_and_flag_over_env(self):
        n = self.node("two-gpus.conf")
        bad = os.path.join(CFG, "syntax.yaml")
        d = n.start_daemon(config=None, env={"CONFIG_FILE": bad}, wait_control=False)
        self.assertNotEqual(d.wait(timeout=10), 0)
        self.assertIn(bad, d.text())
        n2 = self.node("two-gpus.conf")
        d2 = n2.start_daemon(config=os.path.join(CFG, "precedence.yaml"),
                             env={"CONFIG_FILE": bad})
        n2.wait_register()
        self.assertTrue(d2.alive())


class Serve(NodeTest):
    def test_every_error_kind_refused_by_serve(self):
        for name, line_text, token, key, msgs in ERRORS:
            with self.subTest(name):
                n = self.node("two-gpus.conf")
                path = os.path.join(CFG, name)
                d = n.start_daemon(config=path, wait_control=False)
                rc = d.wait(timeout=10)
                self.assertNotEqual(rc, 0)
                recs = d.find_logs("invalid config")
                self.assertTrue(recs, d.text())
                self.assertEqual(recs[0]["level"], "error")
                self.assertRegex(recs[0]["detail"], expected_prefix(path, line_text, token, key))
                for m in msgs:
                    self.assertIn(m, recs[0]["detail"])
                self.assertEqual(n.emu.find(lambda e: e.get("event") == "register_begin"), [])

    def test_unreadable_and_oversized_refused_by_serve(self):
        n = self.node("two-gpus.conf")
        big = os.path.join(n.root, "big.yaml")
        with open(big, "w") as f:
            f.write("#" * ((1 << 20) + 1))
        for path, text in ((n.root, "cannot read"), (big, "larger than")):
            with self.subTest(path):
                d = n.start_daemon(config=path, wait_control=False)
                self.assertNotEqual(d.wait(timeout=10), 0)
                recs = d.find_logs("invalid config")
                self.assertTrue(recs, d.text())
                self.assertIn(path, recs[0]["detail"])
                self.assertIn(text, recs[0]["detail"])


if __name__ == "__main__":
    main()
