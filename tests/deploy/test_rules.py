"""The alerting rules in deployments/prometheus/, checked by Debian's promtool.

1. `promtool check rules` on the plain rules file, and on the PrometheusRule's spec (promtool
   reads plain rule files only, so the spec's groups go to a temp file first);
2. `promtool test rules` on every file in deployments/prometheus/tests/;
3. the two files carry the same groups (parsed with python3-yaml and compared as data);
4. every alert of the rules file has `for:`, a severity, a summary and a description, and has
   a test that expects it to fire and one that expects it silent;
5. every alert names the node: its summary and description print `{{ $labels.node }}`, and
   every alert a promtool test expects carries a `node` label;
6. every alert's runbook_url is RUNBOOK_BASE plus the GitHub anchor of a section of
   docs/troubleshooting.md's "Alerts" chapter titled with the alert's name, and that chapter has
   no section for an alert the rules lack;
7. EdgegpuNoGPU's description has a branch for every state the daemon names in
   src/daemon/daemon-metrics.c (other than `gpus` and `pending`), and its section of
   docs/troubleshooting.md has a row for each.

Exits 77 (skipped) when promtool is not installed; CI installs it (scripts/deps).
"""

import glob
import os
import re
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
TROUBLESHOOTING = os.path.join(SRC, "docs", "troubleshooting.md")
DAEMON_STATES = os.path.join(SRC, "src", "daemon", "daemon-metrics.c")
# The project's docs as GitHub renders them (the image is ghcr.io/edgegpu/edgegpu).
RUNBOOK_BASE = "https://github.com/edgegpu/edgegpu/blob/main/docs/troubleshooting.md"
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
                if "{{ $labels.node }}" not in ann.get(k, ""):
                    fail(f"alert {name}: annotation {k} does not name the node")
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
                for a in case.get("exp_alerts") or []:
                    if not (a.get("exp_labels") or {}).get("node"):
                        fail(f"{os.path.basename(path)}, {t.get('name')!r}: an expected "
                             f"{case.get('alertname')} has no node label")
    for a in alerts:
        if a not in fires:
            fail(f"alert {a}: no promtool test expects it to fire")
        if a not in silent:
            fail(f"alert {a}: no promtool test expects it silent")
    unknown = (fires | silent) - set(alerts)
    if unknown:
        fail(f"promtool tests name alerts the rules do not have: {sorted(unknown)}")


def github_anchor(heading):
    """The anchor GitHub gives a Markdown heading: its text as rendered (a link's text, not its
    target; code and emphasis marks dropped), lower case, punctuation other than `-` and `_`
    dropped, each space a `-` (repeats get -1, -2, ...: counted by the caller)."""
    a = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def sections_of(lines):
    """(every anchor of a Markdown page, {anchor: title} of its "Alerts" chapter). Lines in
    fenced code blocks are not headings (a shell comment is not a section)."""
    anchors, alerts, chapter, seen, fence = set(), {}, None, {}, None
    for line in lines:
        f = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if f:
            if fence is None:
                fence = f.group(1)
            elif f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        m = re.match(r"^(#{1,6}) (.+?)(?:\s+#+)?\s*$", line)
        if not m:
            continue
        a = github_anchor(m.group(2))
        n = seen.get(a, 0)
        seen[a] = n + 1
        if n:
            a = f"{a}-{n}"
        anchors.add(a)
        if len(m.group(1)) == 2:
            chapter = m.group(2)
        elif len(m.group(1)) == 3 and chapter == "Alerts":
            alerts[a] = m.group(2)
    return anchors, alerts


def check_anchor_rules():
    """sections_of() on a page whose anchors GitHub is known to make."""
    page = ["# Title", "## The driver", "```sh", "# not a heading", "## nor this", "```",
            "## Alerts", "### GPUCriticalXid", "### `EdgegpuNoGPU` ##", "### The driver",
            "~~~", "### Fake", "~~~", "### See [the docs](other.md#x): now!"]
    anchors, alerts = sections_of(page)
    want = {"title", "the-driver", "alerts", "gpucriticalxid", "edgegpunogpu", "the-driver-1",
            "see-the-docs-now"}
    if anchors != want:
        fail(f"anchors of the sample page: {sorted(anchors)}, want {sorted(want)}")
    if set(alerts) != want - {"title", "the-driver", "alerts"}:
        fail(f"Alerts sections of the sample page: {alerts}")


def doc_sections():
    """(every anchor of docs/troubleshooting.md, {anchor: title} of the Alerts chapter)."""
    with open(TROUBLESHOOTING) as f:
        return sections_of(f.read().splitlines())


def check_runbooks(rules):
    anchors, sections = doc_sections()
    if not sections:
        fail(f"{TROUBLESHOOTING}: no \"## Alerts\" chapter with a section per alert")
    urls = {}
    for g in rules.get("groups", []):
        for r in g.get("rules", []):
            name = r.get("alert")
            if not name:
                continue
            url = (r.get("annotations") or {}).get("runbook_url", "")
            urls[name] = url
            base, _, anchor = url.partition("#")
            if base != RUNBOOK_BASE or not anchor:
                fail(f"alert {name}: runbook_url {url!r} is not {RUNBOOK_BASE}#<section>")
            elif sections.get(anchor) != name:
                fail(f"alert {name}: runbook_url's #{anchor} is not a section titled {name} in "
                     f"the Alerts chapter of {TROUBLESHOOTING} (sections: {sorted(sections)})")
    if len(set(urls.values())) != len(urls):
        fail(f"two alerts share a runbook_url: {urls}")
    stale = set(sections.values()) - set(urls)
    if stale:
        fail(f"{TROUBLESHOOTING} has Alerts sections for alerts the rules lack: {sorted(stale)}")
    # The links within the page that point at an alert's section resolve.
    with open(TROUBLESHOOTING) as f:
        for target in re.findall(r"\]\(#([^)]+)\)", f.read()):
            if target not in anchors:
                fail(f"{TROUBLESHOOTING}: a link to #{target}, which no heading makes")


def check_no_gpu_states(rules):
    with open(DAEMON_STATES) as f:
        states = re.findall(r'\[DAEMON_GPU_\w+\] = "([a-z-]+)"', f.read())
    if len(states) < 5:
        fail(f"only {states} read from {DAEMON_STATES}")
    why = [s for s in states if s not in ("gpus", "pending")]
    rule = [r for g in rules.get("groups", []) for r in g.get("rules", [])
            if r.get("alert") == "EdgegpuNoGPU"]
    if len(rule) != 1:
        fail("no EdgegpuNoGPU alert")
        return
    desc = (rule[0].get("annotations") or {}).get("description", "")
    with open(TROUBLESHOOTING) as f:
        doc = f.read()
    section = doc.partition("### EdgegpuNoGPU")[2].partition("\n### ")[0]
    for st in why:
        # "failed" is the template's last, catch-all branch.
        if st != "failed" and f'eq $labels.state "{st}"' not in desc:
            fail(f"EdgegpuNoGPU's description has no branch for state {st}")
        if f"| `{st}` |" not in section:
            fail(f"{TROUBLESHOOTING}, EdgegpuNoGPU: no row for state {st}")


def main():
    if shutil.which("promtool") is None:
        print("SKIP: promtool not installed (apt-get install prometheus)")
        return 77
    rules, pr = check_rules_files()
    check_identical(rules, pr)
    alerts = check_rule_shape(rules)
    check_unit_tests(alerts)
    check_anchor_rules()
    check_runbooks(rules)
    check_no_gpu_states(rules)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"ok: {len(alerts)} alerts checked, tested, identical in both files, each naming "
          "the node and with its runbook section")
    return 0


if __name__ == "__main__":
    sys.exit(main())
