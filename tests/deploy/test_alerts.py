"""The alert rules in a real Prometheus server, through tests/lib/prometheus.py.

A Prometheus loads deployments/prometheus/edgegpu-rules.yaml and scrapes fixtures/sample.prom
(served by an http.server thread) with XID 79's timestamp set to now. Then:
- every rule evaluates without error on a full exposition (no many-to-many match, no bad
  function use: /api/v1/rules reports health "ok" for each);
- GPUCriticalXid fires for GPU 1 and XID 79 only (XID 13 is an application error), with
  its summary naming the GPU; /api/v1/alerts shows it;
- the fixture's PodOverGPUMemSlice candidate (ml/infer-a uses 3 GiB of a 4 GiB slice) and the
  other rules stay silent: no alert other than GPUCriticalXid goes pending.

Exits 77 (skipped) when Debian's prometheus package is not installed.
"""

import datetime
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from prometheus import PROMETHEUS, Prometheus  # noqa: E402
from test_dashboard import FIXTURE, Exposition  # noqa: E402

RULES = os.path.join(SRC, "deployments", "prometheus", "edgegpu-rules.yaml")


def epoch(rfc3339):
    """Prometheus's RFC 3339 time (nanoseconds, Z) as Unix seconds; 0 for none."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$", rfc3339 or "")
    if not m:
        return 0.0
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() + frac


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print(f"SKIP: {PROMETHEUS} not installed (apt-get install prometheus)")
        return 77
    with open(FIXTURE) as f:
        text = f.read()
    now = int(time.time())
    text, n = re.subn(r'^(edgegpu_xid_last_timestamp_seconds\{[^}]*xid="79"\}) \d+$',
                      rf"\g<1> {now}", text, flags=re.M)
    assert n == 1, "the fixture has no XID 79 timestamp"
    expo = Exposition(text)
    try:
        with Prometheus({"edgegpu": [expo.addr]}, rule_files=[RULES]) as prom:
            prom.wait_target_up("edgegpu")
            got = prom.wait_for('ALERTS{alertname="GPUCriticalXid", alertstate="firing"}',
                                timeout=30)
            labels = [a["metric"] for a in got]
            assert [(x["gpu"], x["xid"]) for x in labels] == [("1", "79")], labels

            alerts = prom.alerts()
            names = sorted({a["labels"]["alertname"] for a in alerts})
            assert names == ["GPUCriticalXid"], f"unexpected alerts: {alerts}"
            xid = alerts[0]
            assert xid["state"] == "firing" and xid["labels"]["severity"] == "critical", xid
            assert xid["annotations"]["summary"] == \
                f"GPU 1 on {expo.addr} reported critical XID 79", xid["annotations"]

            # Every rule evaluated again after the alert fired, so on the scraped data.
            since = time.time()

            def evaluated(groups):
                rules = [r for g in groups for r in g["rules"]]
                return len(rules) == 10 and all(epoch(r.get("lastEvaluation")) > since
                                                for r in rules)
            groups = prom.rules()
            deadline = time.monotonic() + 30
            while not evaluated(groups):
                assert time.monotonic() < deadline, f"rules never all evaluated: {groups}"
                time.sleep(0.1)
                groups = prom.rules()
            bad = [(r["name"], r["health"], r.get("lastError")) for g in groups
                   for r in g["rules"] if r["health"] != "ok"]
            assert not bad, f"rules failing on the fixture: {bad}"
    finally:
        expo.close()
    print("ok: rules load and evaluate in a real Prometheus; only GPUCriticalXid fires")
    return 0


if __name__ == "__main__":
    sys.exit(main())
