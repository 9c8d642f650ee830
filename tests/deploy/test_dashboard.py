"""The Grafana dashboard (deployments/grafana/edgegpu.json) and tests/deploy/dashboard-queries.

1. The dashboard's shape: schemaVersion 39, a `datasource` variable of type prometheus, the
   `node` and `gpu` variables from label_values(), every target on ${datasource}, unique
   panel ids, and only metric names that docs/metrics.md defines; the panels the issue asks
   for are there (each family below appears in some target). A node without GPUs must show:
   `node` comes from edgegpu_ready (every edgegpu has it), and the edgegpu row's panels name
   no GPU family (no join on edgegpu_gpu_healthy, which such a node lacks).
2. fixtures/sample.prom has every family of docs/metrics.md and passes `promtool check metrics`
   (less the findings DCGM-exporter's names cause by design: prometheus.check_metrics).
3. A real Prometheus (tests/lib/prometheus.py) scrapes the fixture from an http.server thread;
   dashboard-queries passes against it, for every node and for the fixture's node (the target
   carries `node`, as the ServiceMonitor's relabeling sets it). Then the fixture loses one
   family: once Prometheus has marked it stale, dashboard-queries fails and names the one panel
   that uses it. A broken expr fails naming its panel; an unknown variable and a dead URL are bad input (exit 2).

Exits 77 (skipped) when Debian's prometheus package is not installed.
"""

import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from prometheus import (PROMETHEUS, PROMTOOL, Prometheus, check_metrics,  # noqa: E402
                        free_port)

DASHBOARD = os.path.join(SRC, "deployments", "grafana", "edgegpu.json")
TOOL = os.path.join(HERE, "dashboard-queries")
FIXTURE = os.path.join(HERE, "fixtures", "sample.prom")
METRICS_DOC = os.path.join(SRC, "docs", "metrics.md")

# Each must appear in some panel target: the panels issue 9 asks for.
REQUIRED = [
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_SLOWDOWN_TEMP", "DCGM_FI_DEV_SHUTDOWN_TEMP",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_SM_CLOCK", "edgegpu_gpu_healthy", "edgegpu_xid_errors_total",
    "edgegpu_pod_gpumem_limit_bytes", "edgegpu_pod_gpu_memory_used_bytes", "edgegpu_gpumem_units",
    "edgegpu_allocate_duration_seconds_bucket", "edgegpu_metrics_sample_age_seconds",
    "process_resident_memory_bytes",
]
# The family the fixture loses, and the panel (title, refId) that must be named.
DROPPED = "edgegpu_pod_gpu_memory_used_bytes"
DROPPED_PANEL = ("GPU memory per pod: gpumem slice against usage", "B")
# The panels that must show a node whatever its GPUs: nothing of theirs may need a GPU series.
NODE_PANELS = ["Ready", "Sample age", "Process RSS", "GPU discovery, every node"]
# Families with GPU labels (a GPU-less node has none of them).
GPU_FAMILY_RE = re.compile(r"\b(DCGM_FI_\w+|edgegpu_gpu_\w+|edgegpu_xid_\w+|edgegpu_pod_\w+|"
                           r"edgegpu_gpumem_units)\b")
# The target label the ServiceMonitor sets; the fixture's node.
NODE = "edge-1"

NAME_RE = re.compile(r"\b((?:DCGM_FI_|edgegpu_|process_)[A-Za-z0-9_]+)")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def doc_families():
    """Metric names from the first column of docs/metrics.md's tables."""
    names = set()
    with open(METRICS_DOC) as f:
        for line in f:
            if line.startswith("|") and not line.startswith("|--"):
                first = line.split("|")[1]
                names.update(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", first))
    return {n for n in names if NAME_RE.fullmatch(n)}


def panels_of(items):
    for p in items or []:
        yield p
        yield from panels_of(p.get("panels"))


def check_shape(dash, families):
    if dash.get("schemaVersion") != 39:
        fail(f"schemaVersion {dash.get('schemaVersion')}, want 39")
    var = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = var.get("datasource") or {}
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        fail(f"no datasource variable of type prometheus: {ds}")
    for name in ("node", "gpu"):
        v = var.get(name) or {}
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") != "query" or not re.match(rf"label_values\(.*,\s*{name}\)$", q or ""):
            fail(f"variable {name}: want a label_values(..., {name}) query, got {v}")
        if (v.get("datasource") or {}).get("uid") != "${datasource}":
            fail(f"variable {name}: not on ${{datasource}}")
    ids, exprs = [], []
    for p in panels_of(dash.get("panels")):
        ids.append(p.get("id"))
        if p.get("type") == "row":
            continue
        if not p.get("targets"):
            fail(f"panel {p.get('title')!r} has no targets")
        for t in p.get("targets", []):
            if (t.get("datasource") or {}).get("uid") != "${datasource}":
                fail(f"panel {p.get('title')!r} {t.get('refId')}: not on ${{datasource}}")
            exprs.append(t.get("expr", ""))
            for n in NAME_RE.findall(t.get("expr", "")):
                base = re.sub(r"_(bucket|sum|count)$", "", n)
                if n not in families and base not in families:
                    fail(f"panel {p.get('title')!r}: {n} is not in docs/metrics.md")
    if len(ids) != len(set(ids)):
        fail(f"panel ids repeat: {ids}")
    node_q = ((var.get("node") or {}).get("query") or {})
    node_q = node_q.get("query") if isinstance(node_q, dict) else node_q
    if node_q != "label_values(edgegpu_ready, node)":
        fail(f"variable node: {node_q!r}, want label_values(edgegpu_ready, node) (every edgegpu "
             "has it, a node without GPUs too)")
    titles = {p.get("title"): p for p in panels_of(dash.get("panels"))}
    for title in NODE_PANELS:
        p = titles.get(title)
        if not p:
            fail(f"no panel {title!r}")
            continue
        for t in p.get("targets", []):
            # edgegpu_gpu_discovery_state has no GPU labels: the regex's edgegpu_gpu_ prefix
            # is about the GPU families.
            used = [n for n in GPU_FAMILY_RE.findall(t.get("expr", ""))
                    if n != "edgegpu_gpu_discovery_state"]
            if used:
                fail(f"panel {title!r} {t.get('refId')} needs GPU series {used}: a node without "
                     "GPUs would vanish from it")
    joined = "\n".join(exprs)
    for n in REQUIRED:
        if not re.search(rf"\b{n}\b", joined):
            fail(f"no panel shows {n}")
    if "histogram_quantile(0.99" not in joined:
        fail("no Allocate p99 (histogram_quantile(0.99, ...))")
    health = [p for p in panels_of(dash.get("panels")) if p.get("type") == "state-timeline" and
              any("edgegpu_gpu_healthy" in t.get("expr", "") for t in p.get("targets", []))]
    if not health:
        fail("no state timeline of edgegpu_gpu_healthy")


def check_fixture(text, families):
    exposed = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    missing = families - exposed
    if missing:
        fail(f"{FIXTURE} lacks families of docs/metrics.md: {sorted(missing)}")
    left = check_metrics(text)
    if left:
        fail(f"promtool check metrics {FIXTURE}: {left}")


def without_family(text, name):
    """The exposition less every line of family `name` (its HELP, TYPE and samples)."""
    keep = []
    for line in text.splitlines(keepends=True):
        if re.match(rf"(# (HELP|TYPE) )?{name}(\{{| )", line):
            continue
        keep.append(line)
    out = "".join(keep)
    if out == text:
        raise AssertionError(f"{name} is not in the fixture")
    return out


class Exposition:
    """Serves the current `body` on every GET, from a thread (the fake edgegpu)."""

    def __init__(self, body):
        self.body = body.encode()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = owner.body
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run_tool(*args):
    r = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True,
                       timeout=120)
    print(f"$ dashboard-queries {' '.join(args)} -> {r.returncode}\n{r.stdout}{r.stderr}",
          flush=True)
    return r


def check_against_prometheus(text):
    expo = Exposition(text)
    try:
        with Prometheus({"edgegpu": {"targets": [expo.addr], "labels": {"node": NODE}}}) as prom:
            prom.wait_target_up("edgegpu")
            # rate() in the latency panel needs two scrapes of the histogram.
            prom.wait_for("rate(edgegpu_allocate_duration_seconds_bucket[1m])", timeout=30)
            r = run_tool(DASHBOARD, prom.url)
            if r.returncode != 0 or "FAIL" in r.stdout:
                fail(f"dashboard-queries against the full fixture: rc={r.returncode}")
            nq = len(re.findall(r"^ok ", r.stdout, re.M))
            if nq < len(REQUIRED):
                fail(f"only {nq} queries ran")

            with tempfile.TemporaryDirectory() as d:
                broken = json.load(open(DASHBOARD))
                target = broken["panels"][1]["targets"][0]
                title = broken["panels"][1]["title"]
                target["expr"] = "rate(" + target["expr"]
                p = os.path.join(d, "broken.json")
                with open(p, "w") as f:
                    json.dump(broken, f)
                r = run_tool(p, prom.url)
                if r.returncode != 1 or f"FAIL panel {title!r}" not in r.stdout or \
                        "query error" not in r.stdout:
                    fail(f"a broken expr in {title!r}: rc={r.returncode}, not named")
                broken["panels"][1]["targets"][0]["expr"] = "up{job=~\"$nosuchvar\"}"
                with open(p, "w") as f:
                    json.dump(broken, f)
                r = run_tool(p, prom.url)
                if r.returncode != 2 or "$nosuchvar" not in r.stderr:
                    fail(f"an unknown variable: rc={r.returncode}, want 2 naming it")

            # A node picked by --var still finds every panel's series (the fixture's one node).
            r = run_tool("--var", f"node={NODE}", "--var", "gpu=0|1", DASHBOARD, prom.url)
            if r.returncode != 0:
                fail(f"--var node={NODE}: rc={r.returncode}")
            r = run_tool("--var", "node=edge-9", DASHBOARD, prom.url)
            if r.returncode != 1:
                fail(f"--var node=edge-9 (no such node): rc={r.returncode}, want 1")

            expo.body = without_family(text, DROPPED).encode()
            prom.wait_for(DROPPED, lambda res: res == [], timeout=30)
            r = run_tool(DASHBOARD, prom.url)
            title, ref = DROPPED_PANEL
            fails = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
            if r.returncode != 1:
                fail(f"without {DROPPED}: rc={r.returncode}, want 1")
            if len(fails) != 1 or not fails[0].startswith(f"FAIL panel {title!r}") or \
                    f"target {ref}: no series" not in fails[0]:
                fail(f"without {DROPPED}: want exactly panel {title!r} target {ref} named, "
                     f"got {fails}")
    finally:
        expo.close()
    dead = f"http://127.0.0.1:{free_port()}"
    r = run_tool(DASHBOARD, dead)
    if r.returncode != 2 or "does not answer" not in r.stderr:
        fail(f"a dead PROM_URL: rc={r.returncode}, want 2")


def main():
    for tool in (PROMETHEUS, PROMTOOL):
        if not os.access(tool, os.X_OK):
            print(f"SKIP: {tool} not installed (apt-get install prometheus)")
            return 77
    families = doc_families()
    if len(families) < 40:
        fail(f"only {len(families)} families read from {METRICS_DOC}")
    with open(DASHBOARD) as f:
        dash = json.load(f)
    check_shape(dash, families)
    with open(FIXTURE) as f:
        text = f.read()
    check_fixture(text, families)
    check_against_prometheus(text)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("ok: dashboard shape, fixture and every query against a real Prometheus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
