"""NVIDIA's own DCGM-exporter dashboard on edgegpu's metrics, in a real Prometheus.

The dashboard is NVIDIA's "NVIDIA DCGM Exporter Dashboard" (grafana.com 12239; NVIDIA/dcgm-exporter
grafana/dcgm-exporter-dashboard.json, the revision for Grafana 9.1.5 with the Hostname and gpu
variables). PANELS below is our own list of its eight panels and the one query each runs, as
the dashboard writes them (variables included); VARIABLES its two query variables. The test
writes them into a minimal dashboard and runs tests/deploy/dashboard-queries against:

- the real daemon ($EDGEGPU serve, the shipped ConfigMap) on a simulated node (tests/lib/edgegpu.py
  Node: the Go kubelet emulator, the fake NVML $FAKE_NVML with tests/fakes/nvml/fixtures/gpm.conf:
  GPU 0 has GPM (Hopper), GPU 1 has not (Ada)), registered with the kubelet, scraped every
  second by a real Prometheus (tests/lib/prometheus.py): what the dashboard reads is edgegpu's
  own exposition.

Then:
1. the variables' queries and every panel return data for GPU 0 (--var gpu=0), and the GPU
   Utilization and Tensor Core panels show GPM's ratios (0-1, the dashboard's percentunit);
2. the PCIe rates (DCGM_FI_PROF_PCIE_TX/RX_BYTES, in no panel) are there for both GPUs: GPM's
   on GPU 0, nvmlDeviceGetPcieThroughput's on GPU 1;
3. for GPU 1 (no GPM) exactly the panels that need GPM (NEEDS_GPM: those reading a
   DCGM_FI_PROF_ family, which DCGM-exporter fills from DCGM's profiler and edgegpu from
   NVML GPM) return no series, and every other panel has data.

Exits 77 (skipped) when Debian's prometheus package is not installed.
"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from edgegpu import Node  # noqa: E402
from prometheus import PROMETHEUS, Prometheus  # noqa: E402

TOOL = os.path.join(HERE, "dashboard-queries")
BASE_CONFIG = os.path.join(SRC, "deployments", "base", "config.yaml")

_SEL = '{Hostname=~"$Hostname", gpu=~"$gpu"}'
# (panel id, title, expr): NVIDIA's dashboard, panel by panel, in its order.
PANELS = [
    (12, "GPU Temperature", f"max(DCGM_FI_DEV_GPU_TEMP{_SEL}) by (Hostname, gpu, uuid)"),
    (14, "GPU Avg. Temp", f"avg(DCGM_FI_DEV_GPU_TEMP{_SEL})"),
    (10, "GPU Power Usage", f"max(DCGM_FI_DEV_POWER_USAGE{_SEL}) by (Hostname, gpu, uuid)"),
    (16, "GPU Power Total", f"sum(max(DCGM_FI_DEV_POWER_USAGE{_SEL}) by (gpu))"),
    (2, "GPU SM Clocks", f"max(DCGM_FI_DEV_SM_CLOCK{_SEL} * 1000000) by (Hostname, UUID, gpu)"),
    (6, "GPU Utilization",
     f"max(DCGM_FI_PROF_GR_ENGINE_ACTIVE{_SEL}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"),
    (4, "Tensor Core Utilization",
     f"max(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{_SEL}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"),
    (18, "GPU Framebuffer Mem Used",
     f"max(DCGM_FI_DEV_FB_USED{_SEL}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"),
]
# (name, label_values() query): the dashboard's query variables.
VARIABLES = [
    ("Hostname", "label_values(DCGM_FI_DEV_FB_FREE, Hostname)"),
    ("gpu", 'label_values(DCGM_FI_DEV_FB_FREE{Hostname=~"$Hostname"}, gpu)'),
]
# The panels a GPU without GPM leaves empty, and what GPM gives for GPU 0 (gpm.conf's percent).
NEEDS_GPM = {"GPU Utilization": 0.625, "Tensor Core Utilization": 0.40}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def dashboard():
    """PANELS and VARIABLES as the minimal dashboard JSON dashboard-queries reads."""
    templating = [{"name": "datasource", "type": "datasource", "query": "prometheus"}]
    for name, q in VARIABLES:
        templating.append({"name": name, "type": "query", "includeAll": True,
                           "datasource": {"type": "prometheus", "uid": "$datasource"},
                           "query": {"query": q, "refId": "StandardVariableQuery"}})
    panels = [{"id": pid, "title": title, "type": "timeseries",
               "targets": [{"datasource": {"uid": "$datasource"}, "expr": expr, "refId": "A"}]}
              for pid, title, expr in PANELS]
    return {"title": "NVIDIA DCGM Exporter Dashboard (queries)", "panels": panels,
            "templating": {"list": templating}}


def run_tool(path, prom, gpu):
    r = subprocess.run([sys.executable, TOOL, "--var", f"gpu={gpu}", path, prom.url],
                       capture_output=True, text=True, timeout=120)
    print(f"$ dashboard-queries --var gpu={gpu} -> {r.returncode}\n{r.stdout}{r.stderr}",
          flush=True)
    return r


def empty_panels(out):
    """Titles of the panels dashboard-queries reports without series."""
    return {m.group(1) for m in re.finditer(r"^FAIL panel '([^']+)' \(id \d+\) target A: "
                                            r"no series$", out, re.M)}


def check_list():
    """NEEDS_GPM is exactly the panels reading a profiling (DCGM_FI_PROF_) family."""
    prof = {title for _, title, expr in PANELS if "DCGM_FI_PROF_" in expr}
    if prof != set(NEEDS_GPM):
        fail(f"panels on DCGM_FI_PROF_ families {sorted(prof)} != NEEDS_GPM {sorted(NEEDS_GPM)}")
    if len(PANELS) != 8 or len({p[0] for p in PANELS}) != 8:
        fail("NVIDIA's dashboard has eight panels, each its own id")


def check(prom, path):
    # GPM needs two samples: wait until the ratios of GPU 0 are in Prometheus.
    prom.wait_for('DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0"}', timeout=30)
    prom.wait_for('DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0"}', timeout=30)

    r = run_tool(path, prom, "0")
    if r.returncode != 0 or "FAIL" in r.stdout:
        fail(f"GPU 0 (GPM): rc={r.returncode}, panels without data: "
             f"{sorted(empty_panels(r.stdout))}")
    nq = len(re.findall(r"^ok ", r.stdout, re.M))
    if nq != len(PANELS) + len(VARIABLES):
        fail(f"GPU 0: {nq} queries returned data, want {len(PANELS) + len(VARIABLES)}")
    for title, want in NEEDS_GPM.items():
        expr = next(e for _, t, e in PANELS if t == title)
        expr = expr.replace('"$Hostname"', '".*"').replace('"$gpu"', '"0"')
        got = prom.value(expr)
        if got is None or abs(got - want) > 1e-9:
            fail(f"{title!r} on GPU 0: {got}, want GPM's {want} (a 0-1 ratio)")

    # The PCIe rates (no panel of NVIDIA's shows them): GPM's MiB/s on GPU 0, and on GPU 1,
    # without GPM, nvmlDeviceGetPcieThroughput's KB/s; both in bytes per second.
    for gpu, tx, rx in (("0", 1024 * 1048576, 512 * 1048576), ("1", 2000 * 1024, 1000 * 1024)):
        for fam, want in (("DCGM_FI_PROF_PCIE_TX_BYTES", tx), ("DCGM_FI_PROF_PCIE_RX_BYTES", rx)):
            got = prom.value(f'{fam}{{gpu="{gpu}"}}')
            if got != want:
                fail(f"{fam} of GPU {gpu}: {got}, want {want}")

    r = run_tool(path, prom, "1")
    empty = empty_panels(r.stdout)
    if empty != set(NEEDS_GPM):
        fail(f"GPU 1 (no GPM): empty panels {sorted(empty)}, want exactly {sorted(NEEDS_GPM)}")
    if r.returncode != 1 or len(re.findall(r"^FAIL ", r.stdout, re.M)) != len(NEEDS_GPM):
        fail(f"GPU 1: rc={r.returncode}, want 1 with {len(NEEDS_GPM)} failures")


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print(f"SKIP: {PROMETHEUS} not installed (apt-get install prometheus)")
        return 77
    check_list()
    with Node(fixture="gpm.conf") as node:
        path = os.path.join(node.root, "nvidia-dashboard.json")
        with open(path, "w") as f:
            json.dump(dashboard(), f)
        daemon = node.start_daemon(config=BASE_CONFIG)
        node.wait_register()
        with Prometheus({"edgegpu": [f"127.0.0.1:{daemon.metrics_port()}"]}) as prom:
            prom.wait_target_up("edgegpu")
            check(prom, path)
        if not daemon.alive():
            fail(f"edgegpu exited: {daemon.tail()}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"ok: NVIDIA's dashboard: all {len(PANELS)} panels have data on a GPM GPU; without "
          f"GPM exactly {sorted(NEEDS_GPM)} are empty")
    return 0


if __name__ == "__main__":
    sys.exit(main())
