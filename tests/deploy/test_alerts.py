"""The alert rules in a real Prometheus server, through tests/lib/prometheus.py.

A Prometheus loads deployments/prometheus/edgegpu-rules.yaml and scrapes fixtures/sample.prom
(served by an http.server thread) with XID 79's timestamp set to now. Then:
- every rule evaluates without error on a full exposition (no many-to-many match, no bad
  function use: /api/v1/rules reports health "ok" for each);
- GPUCriticalXid fires for GPU 1 and XID 79 only (XID 13 is an application error), with
  the `node` label the target carries (as the ServiceMonitor's relabeling sets it), its summary
  naming the GPU and the node, and its runbook_url; /api/v1/alerts shows it;
- the fixture's PodOverGPUMemSlice candidate (ml/infer-a uses 3 GiB of a 4 GiB slice) and the
  other rules stay silent: no alert other than GPUCriticalXid goes pending;
- edgegpu restarts in a new pod (another target: another instance; the old target goes down),
  and the new daemon has forgotten the XID (no series for it): once Prometheus has marked the
  old series stale, GPUCriticalXid still fires, the same alert (its activeAt unchanged); when
  the new pod sees XID 79 again, it is still that one alert, not a second.

Then a GPU-less node for real: the real daemon ($EDGEGPU) with the shipped ConfigMap
(deployments/base/config.yaml) on a node without the NVML library, scraped by a real
Prometheus with the shipped rules, less EdgegpuNoGPU's `for:` (10 minutes; promtool's tests
cover it): EdgegpuNoGPU fires with state no-library, the node, and its annotations rendered
(cause and fix), and EdgegpuNotReady stays silent (the node is Ready). The dashboard, with
that node picked: the node variable lists it, and its Ready, Process RSS and GPU-discovery
panels return data, and only those (the GPU panels and Sample age, the age of GPU samples,
have none: the node has no GPU).

Then, with the fake NVML (tests/fakes/nvml), two more real daemons under one Prometheus: one
whose NVML finds no GPU (EdgegpuNoGPU fires, state no-gpu) and a healthy one with two GPUs
(EdgegpuNoGPU never fires for it, not even pending).

Exits 77 (skipped) when Debian's prometheus package is not installed.
"""

import datetime
import os
import re
import shutil
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from edgegpu import Daemon, base_env  # noqa: E402
from prometheus import PROMETHEUS, Prometheus  # noqa: E402
from test_dashboard import (DASHBOARD, FIXTURE, NODE_PANELS, Exposition, run_tool,  # noqa: E402
                            without_family)

RULES = os.path.join(SRC, "deployments", "prometheus", "edgegpu-rules.yaml")
BASE_CONFIG = os.path.join(SRC, "deployments", "base", "config.yaml")
# The node names the targets carry (the ServiceMonitor relabels the pod's node into `node`).
NODE = "edge-1"
GPULESS_NODE = "edge-nogpu"
EMPTY_NODE = "edge-empty"


def n_rules():
    with open(RULES) as f:
        return sum(len(g["rules"]) for g in yaml.safe_load(f)["groups"])


def epoch(rfc3339):
    """Prometheus's RFC 3339 time (nanoseconds, Z) as Unix seconds; 0 for none."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$", rfc3339 or "")
    if not m:
        return 0.0
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() + frac


def evaluated_since(prom, since):
    """Waits until every rule has been evaluated after `since` (Unix seconds); its groups."""
    def evaluated(groups):
        rules = [r for g in groups for r in g["rules"]]
        return len(rules) == n_rules() and all(epoch(r.get("lastEvaluation")) > since
                                               for r in rules)
    groups = prom.rules()
    deadline = time.monotonic() + 30
    while not evaluated(groups):
        assert time.monotonic() < deadline, f"rules never all evaluated: {groups}"
        time.sleep(0.1)
        groups = prom.rules()
    return groups


def with_xid79_at(text, t):
    """The fixture with XID 79's last time set to `t` (Unix seconds)."""
    text, n = re.subn(r'^(edgegpu_xid_last_timestamp_seconds\{[^}]*xid="79"\}) \d+$',
                      rf"\g<1> {t}", text, flags=re.M)
    assert n == 1, "the fixture has no XID 79 timestamp"
    return text


def xid_alerts(prom):
    return [a for a in prom.alerts() if a["labels"]["alertname"] == "GPUCriticalXid"]


def assert_still_the_xid_alert(prom, xid, when):
    """After a fresh evaluation, GPUCriticalXid is exactly the firing alert `xid` (the same
    activeAt): not resolved and not a second one. `when` names the moment in the message."""
    evaluated_since(prom, time.time())
    now = xid_alerts(prom)
    assert len(now) == 1 and now[0]["state"] == "firing" and \
        now[0]["activeAt"] == xid["activeAt"], f"GPUCriticalXid {when}: {now}, before: {xid}"


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print(f"SKIP: {PROMETHEUS} not installed (apt-get install prometheus)")
        return 77
    with open(FIXTURE) as f:
        fixture = f.read()
    text = with_xid79_at(fixture, int(time.time()))
    # The edgegpu pod, and the one that replaces it (another pod IP, so another instance): it
    # serves nothing until the restart.
    expo, successor = Exposition(text), Exposition("")
    try:
        target = {"targets": [expo.addr, successor.addr], "labels": {"node": NODE}}
        with Prometheus({"edgegpu": target}, rule_files=[RULES]) as prom:
            prom.wait_target_up("edgegpu")
            got = prom.wait_for('ALERTS{alertname="GPUCriticalXid", alertstate="firing"}',
                                timeout=30)
            labels = [a["metric"] for a in got]
            assert [(x["gpu"], x["xid"], x["node"]) for x in labels] == [("1", "79", NODE)], \
                labels

            alerts = prom.alerts()
            names = sorted({a["labels"]["alertname"] for a in alerts})
            assert names == ["GPUCriticalXid"], f"unexpected alerts: {alerts}"
            xid = alerts[0]
            assert xid["state"] == "firing" and xid["labels"]["severity"] == "critical", xid
            assert "instance" not in xid["labels"], xid
            assert xid["annotations"]["summary"] == \
                f"GPU 1 on {NODE} reported critical XID 79", xid["annotations"]
            assert xid["annotations"]["runbook_url"].endswith(
                "docs/troubleshooting.md#gpucriticalxid"), xid["annotations"]

            # Every rule evaluated again after the alert fired, so on the scraped data.
            groups = evaluated_since(prom, time.time())
            bad = [(r["name"], r["health"], r.get("lastError")) for g in groups
                   for r in g["rules"] if r["health"] != "ok"]
            assert not bad, f"rules failing on the fixture: {bad}"

            # edgegpu restarts in a new pod: the old one is gone (its target down, its series
            # stale) and the new one has forgotten the XID (no series for it).
            expo.close()
            successor.body = without_family(text, "edgegpu_xid_last_timestamp_seconds").encode()
            prom.wait_for(f'up{{instance="{expo.addr}"}} == 0', timeout=30)
            prom.wait_for(f'DCGM_FI_DEV_GPU_TEMP{{instance="{successor.addr}"}}', timeout=30)
            prom.wait_for("edgegpu_xid_last_timestamp_seconds", lambda res: res == [],
                          timeout=30)
            # Evaluated again after the series went stale: still the one firing alert.
            assert_still_the_xid_alert(prom, xid, "after the restart")

            # The same XID again, seen by the new pod: the same alert, not a second one.
            successor.body = with_xid79_at(fixture, int(time.time())).encode()
            prom.wait_for(f'edgegpu_xid_last_timestamp_seconds{{instance="{successor.addr}"}}',
                          timeout=30)
            assert_still_the_xid_alert(prom, xid, "once the new pod saw XID 79 again")
    finally:
        expo.close()
        successor.close()
    gpuless_node()
    if os.environ.get("FAKE_NVML") and os.environ.get("KUBELET_EMULATOR"):
        nvml_nodes()
    else:
        print("note: no fake NVML built: the no-GPU and healthy daemons are not run")
    print("ok: rules load and evaluate in a real Prometheus; only GPUCriticalXid fires, and "
          "outlives a restart in a new pod as one alert; EdgegpuNoGPU fires on real daemons "
          "without NVML and without GPUs, not on a healthy one")
    return 0


def rules_nogpu_now(tmp):
    """The shipped rules, less EdgegpuNoGPU's `for:`, written into `tmp`; their path."""
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    now = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "EdgegpuNoGPU"]
    assert len(now) == 1, "the rules have no EdgegpuNoGPU"
    now[0]["for"] = "0s"
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(rules, f)
    return path


def nvml_nodes():
    """Two real daemons on the fake NVML, scraped by one real Prometheus with the shipped rules
    (EdgegpuNoGPU's `for:` 0s): a node whose NVML finds no GPU (zero-gpus.conf) and a healthy
    one (two-gpus.conf, registered with the kubelet). EdgegpuNoGPU fires for the first, with
    state no-gpu, and never for the healthy one, not even pending."""
    from edgegpu import Node  # needs $FAKE_NVML and $KUBELET_EMULATOR
    tmp = tempfile.mkdtemp(prefix="edgegpu-alerts-")
    try:
        rules_now = rules_nogpu_now(tmp)
        with Node(fixture="zero-gpus.conf") as empty, Node(fixture="two-gpus.conf") as healthy:
            de = empty.start_daemon(config=BASE_CONFIG, wait_control=False)
            dh = healthy.start_daemon(config=BASE_CONFIG)
            healthy.wait_register()
            targets = {
                "edgegpu-empty": {"targets": [f"127.0.0.1:{de.metrics_port()}"],
                                  "labels": {"node": EMPTY_NODE}},
                "edgegpu-healthy": {"targets": [f"127.0.0.1:{dh.metrics_port()}"],
                                    "labels": {"node": NODE}},
            }
            with Prometheus(targets, rule_files=[rules_now]) as prom:
                prom.wait_target_up("edgegpu-empty")
                prom.wait_target_up("edgegpu-healthy")
                prom.wait_for('ALERTS{alertname="EdgegpuNoGPU", alertstate="firing"}',
                              timeout=30)
                prom.wait_for(f'edgegpu_gpu_discovery_state{{node="{NODE}", state="gpus"}} == 1',
                              timeout=30)
                # Every rule evaluated on both nodes' data: still only the empty node.
                evaluated_since(prom, time.time())
                got = [(a["labels"]["state"], a["labels"]["node"], a["state"])
                       for a in prom.alerts() if a["labels"]["alertname"] == "EdgegpuNoGPU"]
                assert got == [("no-gpu", EMPTY_NODE, "firing")], got
                a = [a for a in prom.alerts() if a["labels"]["alertname"] == "EdgegpuNoGPU"][0]
                assert "NVML finds no GPU" in a["annotations"]["description"], a["annotations"]
            for d in (de, dh):
                assert d.alive(), d.tail()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def gpuless_node():
    """The real daemon, the shipped config, no NVML library: EdgegpuNoGPU fires for real."""
    edgegpu = os.environ.get("EDGEGPU")
    assert edgegpu and os.access(edgegpu, os.X_OK), "$EDGEGPU is not set (run through meson)"
    tmp = tempfile.mkdtemp(prefix="edgegpu-alerts-")
    daemon = None
    try:
        rules_now = rules_nogpu_now(tmp)
        config = os.path.join(tmp, "config.yaml")
        shutil.copyfile(BASE_CONFIG, config)
        dp = os.path.join(tmp, "device-plugins")
        for d in (dp, os.path.join(tmp, "proc"), os.path.join(tmp, "log")):
            os.makedirs(d)
        lib = os.path.join(tmp, "no-driver", "libnvidia-ml.so.1")
        daemon = Daemon([edgegpu, "serve", "--config-file", config,
                         "--device-plugin-path", dp,
                         "--kubelet-socket", os.path.join(dp, "kubelet.sock"),
                         "--pod-resources-socket", os.path.join(tmp, "podres.sock"),
                         "--cdi-spec-dir", os.path.join(tmp, "cdi"),
                         "--labels-file", os.path.join(tmp, "features.d", "edgegpu"),
                         "--host-proc", os.path.join(tmp, "proc"),
                         "--pod-log-dir", os.path.join(tmp, "log"),
                         "--nvml-lib", lib, "--metrics-address", "127.0.0.1:0"],
                        base_env()).start()
        daemon.wait_log("GPU discovery failed, registering nothing, retrying", timeout=15)
        addr = f"127.0.0.1:{daemon.metrics_port()}"
        target = {"targets": [addr], "labels": {"node": GPULESS_NODE}}
        with Prometheus({"edgegpu": target}, rule_files=[rules_now]) as prom:
            prom.wait_target_up("edgegpu")
            got = prom.wait_for('ALERTS{alertname="EdgegpuNoGPU", alertstate="firing"}',
                                timeout=30)
            assert [(a["metric"]["state"], a["metric"]["node"]) for a in got] == \
                [("no-library", GPULESS_NODE)], got
            alerts = prom.alerts()
            names = sorted({a["labels"]["alertname"] for a in alerts})
            assert names == ["EdgegpuNoGPU"], f"unexpected alerts: {alerts}"
            a = alerts[0]
            assert a["labels"]["severity"] == "warning", a
            assert a["annotations"]["summary"] == \
                f"edgegpu on {GPULESS_NODE} serves no GPU: no-library", a["annotations"]
            assert a["annotations"]["description"].startswith(
                f"edgegpu on {GPULESS_NODE} has served no GPU for 10 minutes (no-library): the "
                "NVIDIA driver's NVML library is not found, on the node or in the pod; install "
                "the driver, or check the DaemonSet's driver-root mount. It stays Ready"), \
                a["annotations"]
            assert a["annotations"]["runbook_url"].endswith(
                "docs/troubleshooting.md#edgegpunogpu"), a["annotations"]
            ready = prom.value(f'edgegpu_ready{{instance="{addr}"}}')
            assert ready == 1, f"edgegpu_ready {ready}: the GPU-less node is not Ready"
            gpuless_dashboard(prom)
        assert daemon.alive(), daemon.tail()
    finally:
        if daemon:
            daemon.stop()
            rep = daemon.sanitizer_report()
            assert not rep, rep
        shutil.rmtree(tmp, ignore_errors=True)


def gpuless_dashboard(prom):
    """Every panel query of the shipped dashboard with the GPU-less node picked."""
    prom.wait_for(f'process_resident_memory_bytes{{node="{GPULESS_NODE}"}}', timeout=30)
    r = run_tool("--var", f"node={GPULESS_NODE}", DASHBOARD, prom.url)
    ok, bad = set(), set()
    for line in r.stdout.splitlines():
        m = re.match(r"^(ok|FAIL) +(?:panel '(.*)' \(id \d+\) target \w+|variable \$(\w+)):",
                     line)
        if m:
            (ok if m.group(1) == "ok" else bad).add(m.group(2) or "$" + m.group(3))
    # Exactly these: Sample age is the age of the GPU samples (docs/metrics.md), and a node
    # without GPUs has none; Allocate latency needs a served resource. The panels no longer
    # need a GPU series (test_dashboard checks the queries), so a node that has them shows.
    want = {"$node"} | {t for t in NODE_PANELS if t != "Sample age"}
    assert ok == want and not ok & bad, \
        f"the GPU-less node shows in {sorted(ok)}, want {sorted(want)}\n{r.stdout}"
    print(f"the GPU-less node's panels with data: {sorted(ok)}; without (no GPU): {sorted(bad)}")


if __name__ == "__main__":
    sys.exit(main())
