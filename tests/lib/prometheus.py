"""Run a real Prometheus server (Debian's /usr/bin/prometheus) from Python tests.

Standard library only (Debian's /usr/bin/python3). Typical use:

    from prometheus import Prometheus
    with Prometheus({"edgegpu": ["127.0.0.1:9400"]}, rule_files=[RULES]) as prom:
        prom.wait_target_up("edgegpu")
        r = prom.wait_for('DCGM_FI_DEV_GPU_TEMP{gpu="0"}', lambda r: r and r[0]["value"][1] == "45")
        assert any(a["labels"]["alertname"] == "GPUUnhealthy" for a in prom.alerts())

Every server is the test's own: 127.0.0.1 on a free port, storage in a temp dir, a generated
config (scrape_interval and evaluation_interval 1s), its log in <dir>/prometheus.log. Nothing
talks to a system instance. Failures raise PrometheusError with the tail of that log.

targets: {job: [addr, ...]} or {job: {"targets": [addr, ...], "metrics_path": "/metrics",
"scheme": "http", "params": {...}, "labels": {"node": ...}}} (labels: target labels, on every
series of the job). rule_files: paths, copied into the config as absolute paths.
"""

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Prometheus", "PrometheusError", "PROMETHEUS", "PROMTOOL", "free_port",
           "check_metrics"]

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"


class PrometheusError(Exception):
    pass


def free_port():
    """A TCP port on 127.0.0.1 that nobody listens on now (it can be taken before it is used:
    Prometheus.start() retries on "address already in use")."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_CAMEL = "label names should be written in 'snake_case' not 'camelCase'"
_NO_TOTAL = 'counter metrics should have "_total" suffix'
_TYPE_IN_NAME = "metric name should not include type 'counter'"


def check_metrics(text, promtool=None):
    """Runs `promtool check metrics` on an exposition (str or bytes). Raises PrometheusError
    when promtool cannot parse it; returns the lint findings left once those that
    DCGM-exporter's contract causes by design are taken out (docs/metrics.md keeps its names):
    the camelCase `modelName` label, on the families that carry it, and DCGM's counters
    without `_total` (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, the ECC totals), and the counter
    DCGM_FI_DEV_PCIE_REPLAY_COUNTER whose name says "counter". [] is clean."""
    if isinstance(text, str):
        text = text.encode()
    tool = promtool or os.environ.get("PROMTOOL", PROMTOOL)
    if not os.access(tool, os.X_OK):
        raise PrometheusError(f"{tool} is not installed (apt-get install prometheus)")
    r = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True,
                       timeout=60)
    out = (r.stdout + r.stderr).decode("utf-8", "replace")
    if r.returncode not in (0, 3):
        raise PrometheusError(f"promtool check metrics: rc={r.returncode}: {out.strip()}")
    camel = set(re.findall(rb"^([A-Za-z_:][A-Za-z0-9_:]*)\{[^\n]*\bmodelName=", text, re.M))
    left = []
    for line in out.splitlines():
        name, _, finding = line.strip().partition(" ")
        if not line.strip():
            continue
        if finding == _CAMEL and name.encode() in camel:
            continue
        if finding == _NO_TOTAL and name.startswith("DCGM_FI_"):
            continue
        if finding == _TYPE_IN_NAME and name == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER":
            continue
        left.append(line.strip())
    return left


def _die_with_parent():
    # PR_SET_PDEATHSIG: a test killed by meson's timeout takes its Prometheus with it. The
    # signal follows the thread that started the process, so start it from the test's own.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def _yaml_str(s):
    # JSON strings are valid YAML flow scalars: no hand-quoting of paths or label values.
    return json.dumps(str(s))


class Prometheus:
    """One prometheus process. Not thread-safe; one test drives it."""

    def __init__(self, targets=None, rule_files=(), binary=None, workdir=None,
                 scrape_interval="1s", evaluation_interval="1s", extra_args=()):
        self.targets = dict(targets or {})
        self.rule_files = [os.path.abspath(p) for p in rule_files]
        self.binary = binary or os.environ.get("PROMETHEUS", PROMETHEUS)
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.extra_args = list(extra_args)
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="edgegpu-prom-")
        self.config_path = os.path.join(self.dir, "prometheus.yml")
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self.storage = os.path.join(self.dir, "data")
        self.port = None
        self.proc = None
        self._log = None

    # --- lifecycle ---

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    @property
    def url(self):
        if self.port is None:
            raise PrometheusError("prometheus is not started")
        return f"http://127.0.0.1:{self.port}"

    def config(self):
        """The prometheus.yml text this server runs with."""
        lines = ["global:",
                 f"  scrape_interval: {self.scrape_interval}",
                 f"  scrape_timeout: {self.scrape_interval}",
                 f"  evaluation_interval: {self.evaluation_interval}"]
        if self.rule_files:
            lines.append("rule_files:")
            lines += [f"  - {_yaml_str(p)}" for p in self.rule_files]
        lines.append("scrape_configs:")
        for job, spec in self.targets.items():
            if not isinstance(spec, dict):
                spec = {"targets": list(spec)}
            if not spec.get("targets"):
                raise PrometheusError(f"job {job!r}: no targets")
            lines.append(f"  - job_name: {_yaml_str(job)}")
            if spec.get("metrics_path"):
                lines.append(f"    metrics_path: {_yaml_str(spec['metrics_path'])}")
            if spec.get("scheme"):
                lines.append(f"    scheme: {_yaml_str(spec['scheme'])}")
            if spec.get("params"):
                lines.append("    params:")
                lines += [f"      {_yaml_str(k)}: [{_yaml_str(v)}]"
                          for k, v in spec["params"].items()]
            lines.append("    static_configs:")
            lines.append("      - targets: [" +
                         ", ".join(_yaml_str(t) for t in spec["targets"]) + "]")
            if spec.get("labels"):
                # Target labels, as a ServiceMonitor's relabeling adds them (`node`).
                lines.append("        labels:")
                lines += [f"          {_yaml_str(k)}: {_yaml_str(v)}"
                          for k, v in spec["labels"].items()]
        return "\n".join(lines) + "\n"

    def start(self, timeout=30.0):
        """Writes the config, starts prometheus and waits until it is ready. A port taken between
        free_port() and the bind is retried with another."""
        if self.proc is not None:
            raise PrometheusError("prometheus already started")
        if not os.access(self.binary, os.X_OK):
            raise PrometheusError(f"{self.binary} is not installed (apt-get install prometheus)")
        with open(self.config_path, "w") as f:
            f.write(self.config())
        for attempt in range(5):
            self.port = free_port()
            self._log = open(self.log_path, "ab")
            argv = [self.binary,
                    f"--config.file={self.config_path}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    f"--storage.tsdb.path={self.storage}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=info"] + self.extra_args
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, cwd=self.dir,
                                         preexec_fn=_die_with_parent)
            try:
                self.wait_ready(timeout)
                return self
            except PrometheusError:
                rc = self.proc.poll()
                busy = rc is not None and "address already in use" in self.log_tail(20)
                self._reap()
                if not busy or attempt == 4:
                    raise
        return self

    def _reap(self, timeout=10.0):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log:
            self._log.close()
            self._log = None
        rc = None if self.proc is None else self.proc.returncode
        self.proc = None
        return rc

    def stop(self):
        """Stops prometheus (SIGTERM, then SIGKILL) and removes its temp dir (the log too, unless
        KEEP_PROMETHEUS_DIR is set). Returns its exit status."""
        rc = self._reap()
        if self._own_dir and not os.environ.get("KEEP_PROMETHEUS_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def _error(self, msg):
        state = "running" if self.alive() else \
            f"exited rc={None if self.proc is None else self.proc.poll()}"
        return PrometheusError(f"{msg} (prometheus {state}, log {self.log_path}):\n"
                               f"{self.log_tail()}")

    # --- HTTP ---

    def _http(self, path, params=None, timeout=10.0):
        """GET path; returns (status, body bytes). Connection errors give status None."""
        url = self.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
            return None, str(e).encode()

    def api(self, path, params=None):
        """GET /api/v1/<path>; returns "data" of a success answer, raises PrometheusError with
        Prometheus's errorType and error otherwise."""
        status, body = self._http("/api/v1/" + path, params)
        if status is None:
            raise self._error(f"GET /api/v1/{path}: {body.decode()}")
        try:
            doc = json.loads(body)
        except ValueError:
            raise self._error(f"GET /api/v1/{path}: HTTP {status}, not JSON: {body[:200]!r}")
        if doc.get("status") != "success":
            raise PrometheusError(f"GET /api/v1/{path} {params or ''}: HTTP {status} "
                                  f"{doc.get('errorType')}: {doc.get('error')}")
        return doc.get("data")

    def _poll(self, what, pred, timeout, step=0.1):
        """Calls pred() until it returns something true, which is returned; raises
        PrometheusError naming `what` after `timeout` seconds or when prometheus exits."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise self._error(f"prometheus exited while waiting for {what}")
            try:
                v = pred()
                if v:
                    return v
                last = v
            except PrometheusError as e:
                last = e
            if time.monotonic() >= deadline:
                raise self._error(f"timeout after {timeout}s waiting for {what}; last: {last}")
            time.sleep(step)

    def wait_ready(self, timeout=30.0):
        """Waits until /-/ready answers 200 (the TSDB is open and the rules loaded)."""
        return self._poll("/-/ready", lambda: self._http("/-/ready", timeout=2)[0] == 200,
                          timeout)

    def targets_status(self):
        """The active targets as /api/v1/targets gives them."""
        return self.api("targets", {"state": "active"})["activeTargets"]

    def wait_target_up(self, job, timeout=30.0):
        """Waits until every target of `job` has been scraped successfully; returns them. The
        error names the job's targets with their lastError."""
        def up():
            ts = [t for t in self.targets_status() if t["labels"].get("job") == job]
            if ts and all(t["health"] == "up" for t in ts):
                return ts
            self._last_targets = [(t["scrapeUrl"], t["health"], t.get("lastError"))
                                  for t in ts]
            return None
        self._last_targets = []
        try:
            return self._poll(f"job {job!r} up", up, timeout)
        except PrometheusError as e:
            raise PrometheusError(f"{e}\ntargets of {job!r}: {self._last_targets}") from None

    def query(self, expr, at=None):
        """An instant query; returns the result list ([{"metric": {...}, "value": [t, "v"]}]
        for a vector; a scalar or string result comes back as Prometheus gives it)."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", params)
        return data["result"]

    def value(self, expr, at=None):
        """The single value of `expr` as a float, or None when it returns no series; raises
        when it returns more than one."""
        r = self.query(expr, at)
        if not r:
            return None
        if len(r) > 1:
            raise PrometheusError(f"{expr}: {len(r)} series, expected one: {r}")
        return float(r[0]["value"][1])

    def wait_for(self, expr, predicate=bool, timeout=30.0):
        """Runs the instant query `expr` until predicate(result list) is true; returns that
        result. A query error is raised at once (a typo never turns into a timeout)."""
        last = []

        def check():
            r = self.query(expr)
            last[:] = [r]
            return (r,) if predicate(r) else None
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise self._error(f"prometheus exited while waiting for {expr}")
            v = check()
            if v:
                return v[0]
            if time.monotonic() >= deadline:
                raise self._error(f"timeout after {timeout}s waiting for {expr} to satisfy "
                                  f"{getattr(predicate, '__name__', predicate)}; last result: "
                                  f"{json.dumps(last[0] if last else None)[:2000]}")
            time.sleep(0.1)

    def alerts(self):
        """The alerts of /api/v1/alerts (pending and firing): [{"labels", "annotations",
        "state", "activeAt", "value"}]."""
        return self.api("alerts")["alerts"]

    def firing(self, alertname=None):
        """The firing alerts, optionally only those named `alertname`."""
        return [a for a in self.alerts() if a["state"] == "firing" and
                (alertname is None or a["labels"].get("alertname") == alertname)]

    def rules(self):
        """The rule groups of /api/v1/rules (each rule with its health and lastError)."""
        return self.api("rules")["groups"]
