"""The alerting rules in deployments/prometheus/, checked by Debian's promtool.

1. `promtool check rules` on the plain rules file, and on the PrometheusRule's spec (promtool
   reads plain rule files only, so the spec's groups go to a temp file first);
2. `promtool test rules` on every file in deployments/prometheus/tests/;
3. the two files carry the same groups (parsed with python3-yaml and compared as data);
4. every alert of the rules file has `for:`, a severity, a summary and a description, and has
   a test that expects it to fire and one that expects it silent.

Exits 77 (skipped) when promtool is not installed; CI installs it (scripts/deps).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
PROM_DIR = os.path.join(SRC, "deployments", "prometheus")
RULES = os.path.join(PROM_DIR, "edgegpu-rules.yaml")
OPERATOR = os.path.join(PROM_DIR, "prometheusrule.yaml")
SEVERITIES = ("info", "warning", "critical")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def promtool(*args):
    r = subprocess.run(["promtool"] + list(args), capture_output=True, text=True, timeout=120)
    out = (r.stdout + r.stderr).strip()
    print(f"$ promtool {' '.join(args)} -> {r.returncode}\n{out}\n", flush=True)
    return r.returncode, out


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def check_rules_files():
    rc, out = promtool("check", "rules", RULES)
    if rc != 0:
        fail(f"promtool check rules {RULES}: {out}")
    pr = load(OPERATOR)
    if pr.get("apiVersion") != "monitoring.coreos.com/v1" or pr.get("kind") != "PrometheusRule":
        fail(f"{OPERATOR}: not a monitoring.coreos.com/v1 PrometheusRule")
    if not (pr.get("metadata") or {}).get("name"):
        fail(f"{OPERATOR}: metadata.name missing")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="prometheusrule-spec-") as t:
        yaml.safe_dump({"groups": (pr.get("spec") or {}).get("groups")}, t)
        t.flush()
        rc, out = promtool("check", "rules", t.name)
        if rc != 0:
            fail(f"promtool check rules on the spec of {OPERATOR}: {out}")
    return load(RULES), pr


def check_identical(rules, pr):
    a = rules.get("groups")
    b = (pr.get("spec") or {}).get("groups")
    if a == b:
        return
    names_a = [g.get("name") for g in a or []]
    names_b = [g.get("name") for g in b or []]
    if names_a != names_b:
        fail(f"groups differ: {RULES} has {names_a}, {OPERATOR} has {names_b}")
        return
    for ga, gb in zip(a, b):
        if ga == gb:
            continue
        for i, (ra, rb) in enumerate(zip(ga.get("rules", []), gb.get("rules", []))):
            if ra != rb:
                fail(f"group {ga['name']} rule {i} ({ra.get('alert') or ra.get('record')}) "
                     f"differs: {RULES} {ra!r} vs {OPERATOR} {rb!r}")
        if len(ga.get("rules", [])) != len(gb.get("rules", [])):
            fail(f"group {ga['name']}: {len(ga.get('rules', []))} rules in {RULES}, "
                 f"{len(gb.get('rules', []))} in {OPERATOR}")


def check_rule_shape(rules):
    alerts = []
    for g in rules.get("groups", []):
        for r in g.get("rules", []):
            name = r.get("alert")
            if not name:
                continue
            alerts.append(name)
            if "for" not in r:
                fail(f"alert {name}: no for:")
            if (r.get("labels") or {}).get("severity") not in SEVERITIES:
                fail(f"alert {name}: severity label not one of {SEVERITIES}")
            ann = r.get("annotations") or {}
            for k in ("summary", "description"):
                if "{{ $labels." not in ann.get(k, ""):
                    fail(f"alert {name}: annotation {k} missing or names nothing from labels")
    if len(alerts) != len(set(alerts)):
        fail(f"alert names repeat: {alerts}")
    return alerts


def check_unit_tests(alerts):
    files = sorted(glob.glob(os.path.join(PROM_DIR, "tests", "*.yaml")))
    if not files:
        fail("no promtool tests in deployments/prometheus/tests/")
        return
    rc, out = promtool("test", "rules", *files)
    if rc != 0:
        fail(f"promtool test rules: {out}")
    # Every alert needs a case where it fires and one where it is expected silent.
    fires, silent = set(), set()
    for path in files:
        for t in load(path).get("tests") or []:
            for case in t.get("alert_rule_test") or []:
                (fires if case.get("exp_alerts") else silent).add(case.get("alertname"))
    for a in alerts:
        if a not in fires:
            fail(f"alert {a}: no promtool test expects it to fire")
        if a not in silent:
            fail(f"alert {a}: no promtool test expects it silent")
    unknown = (fires | silent) - set(alerts)
    if unknown:
        fail(f"promtool tests name alerts the rules do not have: {sorted(unknown)}")


def main():
    if shutil.which("promtool") is None:
        print("SKIP: promtool not installed (apt-get install prometheus)")
        return 77
    rules, pr = check_rules_files()
    check_identical(rules, pr)
    alerts = check_rule_shape(rules)
    check_unit_tests(alerts)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"ok: {len(alerts)} alerts checked, tested and identical in both files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
