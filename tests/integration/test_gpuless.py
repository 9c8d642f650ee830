#!/usr/bin/python3
"""A GPU-less or driver-less node through a DaemonSet rollout (docs/failures.md, "Readiness").

The real daemon runs with the shipped ConfigMap (deployments/base/config.yaml) and is probed as
the kubelet runs the shipped readinessProbe (deployments/base/daemonset.yaml: an HTTP GET of its
path on the named port, Ready when the answer is 200-399 within timeoutSeconds). Each node kind:

- no NVML library on the search path (the DaemonSet's --container-driver-root), NVML that finds
  no GPU (zero-gpus.conf), a kernel module not loaded (init-fail.conf), a library lacking a
  function (the nosym fake), a driver whose first call hangs: Ready, /readyz says why, the
  metric edgegpu_gpu_discovery_state says which, nothing registered; when the library appears
  or the GPUs do, they are served (Register and the full list) without a restart;
- GPUs found but a resource not registered (no kubelet yet), or a config that cannot apply to
  the GPUs: NOT Ready, so a rollout stops there, as it must.

The rollout test walks such nodes in order with the DaemonSet's maxUnavailable: each next node
is started only once the probe says Ready on the previous one.
"""

import os
import urllib.error
import urllib.request

import yaml

from common import RESOURCE, NodeTest, main, uuids, wait_until
from edgegpu import binary, parse_exposition

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = os.path.join(SRC, "deployments", "base")
STATES = ("gpus", "pending", "no-gpu", "gpus-skipped", "no-library", "library-unusable",
          "driver-not-loaded", "driver-mismatch", "no-permission", "driver-hung", "failed")
# The shipped config plus the one setting a test cannot wait a minute for (a flag, which wins
# over the file, as the DaemonSet's own flags do).
FAST = ["--rediscover-interval=1s"]


def shipped_config():
    with open(os.path.join(BASE, "config.yaml")) as f:
        return f.read()


class ReadinessProbe:
    """The DaemonSet's readinessProbe, run as the kubelet runs an httpGet probe (pkg/probe/http:
    success is a status in [200, 400) within timeoutSeconds; no answer is a failure)."""

    def __init__(self):
        with open(os.path.join(BASE, "daemonset.yaml")) as f:
            ds = yaml.safe_load(f)
        spec = ds["spec"]
        c = spec["template"]["spec"]["containers"][0]
        probe = c["readinessProbe"]
        get = probe["httpGet"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.path = get["path"]
        self.port = ports.get(get["port"], get["port"])
        self.timeout = probe.get("timeoutSeconds", 1)
        self.success_threshold = probe.get("successThreshold", 1)
        self.max_unavailable = spec["updateStrategy"]["rollingUpdate"]["maxUnavailable"]
        # The probe asks the port the daemon is told to serve its metrics on.
        assert f"--metrics-address=:{self.port}" in c["args"], c["args"]
        assert self.path == "/readyz", self.path

    def run(self, daemon):
        """(ready, status, body) for `daemon`, whose metrics port stands in for the pod's."""
        url = f"http://127.0.0.1:{daemon.metrics_port()}{self.path}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as r:
                status, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        except OSError as e:  # refused, reset, timed out: a failed probe
            return False, None, str(e).encode()
        return 200 <= status < 400, status, body.decode()

    def wait_ready(self, daemon, timeout=30):
        """Waits until the probe succeeds successThreshold times in a row (the pod's Ready
        condition); returns the last body."""
        last = {}

        def ok():
            for _ in range(self.success_threshold):
                ready, status, body = self.run(daemon)
                last["r"] = (status, body)
                if not ready:
                    return False
            return True
        wait_until(ok, timeout, lambda: f"Ready by the readinessProbe; last answer {last}")
        return last["r"][1]


def discovery_state(d):
    """The state edgegpu_gpu_discovery_state marks 1; asserts it is exactly one of STATES."""
    expo = d.scrape()
    got = {dict(labels)["state"]: v for (name, labels), v in expo.items()
           if name == "edgegpu_gpu_discovery_state"}
    assert sorted(got) == sorted(STATES), f"states {sorted(got)}"
    on = [s for s, v in got.items() if v == 1]
    assert len(on) == 1 and sum(got.values()) == 1, got
    return on[0], expo


def ready_metric(expo):
    return expo[("edgegpu_ready", frozenset())]


class GpulessNode(NodeTest):
    probe = ReadinessProbe()

    def no_registration(self, n):
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "register_begin"), [])

    def assert_gpuless_ready(self, n, d, state, why):
        """Ready by the DaemonSet's probe, /readyz saying `state` and `why`, the metric saying
        `state`, edgegpu_ready 1, nothing registered, the daemon still running."""
        body = self.probe.wait_ready(d)
        self.assertTrue(body.startswith("ready\n"), body)
        self.assertIn(f"no GPU to serve ({state}): ", body)
        self.assertIn(why, body)
        got, expo = discovery_state(d)
        self.assertEqual(got, state)
        self.assertEqual(ready_metric(expo), 1)
        self.no_registration(n)
        self.assertTrue(d.alive())
        return body

    def assert_served(self, n, d, fixture="two-gpus.conf", since=0):
        """The GPUs that appeared are served without a restart: Register, the full list, Ready,
        state gpus."""
        pid = d.pid
        n.wait_register(since=since, timeout=20)
        ev = n.wait_devices(since=since, healthy_count=len(uuids(fixture)), timeout=20)
        self.assertEqual(sorted(ev["healthy"]), sorted(uuids(fixture)))
        n.emu.assert_no_empty_list(RESOURCE)
        self.assertEqual(self.probe.wait_ready(d), "ready\n")
        self.assertEqual(discovery_state(d)[0], "gpus")
        self.assertEqual(d.pid, pid)
        self.assertTrue(d.alive())

    def test_no_library_then_it_appears(self):
        # The DaemonSet's way: no --nvml-lib, the driver root searched (its usr/lib64 here).
        n = self.node()
        root = os.path.join(n.root, "driver-root")
        lib = os.path.join(root, "usr", "lib64", "libnvidia-ml.so.1")
        os.makedirs(os.path.dirname(lib))
        d = n.start_daemon(config=shipped_config(), nvml_lib=False, wait_control=False,
                           flags=FAST + [f"--container-driver-root={root}"])
        rec = d.wait_log("GPU discovery failed, registering nothing, retrying", timeout=15)
        if "not found" not in rec["reason"]:
            self.skipTest(f"this machine's loader finds an NVML library: {rec['reason']}")
        body = self.assert_gpuless_ready(n, d, "no-library", "libnvidia-ml.so.1 not found")
        self.assertIn(lib, body, "the body does not name where the library was looked for")
        self.assertIn("looking again every 1s", body)
        # The driver is installed: the library appears where the search looks.
        since = n.emu.mark()
        os.symlink(binary("FAKE_NVML"), lib)
        self.assert_served(n, d, since=since)

    def test_zero_gpus_then_two(self):
        n = self.node("zero-gpus.conf")
        d = n.start_daemon(config=shipped_config(), flags=FAST)
        d.wait_log("no devices found, retrying", timeout=15)
        self.assert_gpuless_ready(n, d, "no-gpu", "NVML works and finds no GPU")
        since = n.emu.mark()
        self.assertEqual(n.nvml.load("two-gpus.conf"), "gpus=2")
        self.assert_served(n, d, since=since)

    def test_driver_not_loaded_then_loaded(self):
        n = self.node("init-fail.conf")
        d = n.start_daemon(config=shipped_config(), flags=FAST, wait_control=False)
        d.wait_log("GPU discovery failed, registering nothing, retrying", timeout=15)
        self.assert_gpuless_ready(n, d, "driver-not-loaded",
                                  "the NVIDIA kernel module is not loaded")
        # The module gets loaded: the next look (NVML loaded again) finds the GPUs.
        since = n.emu.mark()
        n.replace_fixture("two-gpus.conf")
        self.assert_served(n, d, since=since)

    def test_library_lacking_a_function(self):
        n = self.node()
        d = n.start_daemon(config=shipped_config(), flags=FAST, wait_control=False,
                           nvml_lib=binary("FAKE_NVML_NOSYM"))
        d.wait_log("GPU discovery failed, registering nothing, retrying", timeout=15)
        self.assert_gpuless_ready(n, d, "library-unusable", "nvmlDeviceGetMinorNumber")

    def test_driver_hung_at_start(self):
        # The first NVML call never returns: once it is reported hung the node is Ready (a
        # rollout does not wait for a driver); when it returns, the GPUs are served.
        n = self.node(fixture=None)
        with open(n.fixture, "w") as f:
            f.write("block = nvmlInit_v2\n[gpu]\n[gpu]\n")
        d = n.start_daemon(config=shipped_config() + "  health:\n    callTimeout: 500ms\n",
                           flags=FAST)
        # Before the call counts as hung, the first discovery is still running: not Ready.
        wait_until(lambda: n.nvml.blocked("nvmlInit_v2") == 1, 15, "nvmlInit_v2 blocked")
        ready, status, body = self.probe.run(d)
        self.assertTrue((not ready and body == "GPU discovery has not finished\n") or
                        (ready and "(driver-hung)" in body), (ready, body))
        d.wait_log("nvml call hung, its gpus are unhealthy until it returns, serving on",
                   timeout=15)
        self.assert_gpuless_ready(n, d, "driver-hung", "an NVML call has not returned")
        since = n.emu.mark()
        n.nvml.release("nvmlInit_v2")
        self.assert_served(n, d, fixture=n.fixture, since=since)


class NotReady(NodeTest):
    """Where readiness must hold a rollout back: the node's GPUs are not served."""

    probe = ReadinessProbe()

    def test_gpus_found_but_not_registered(self):
        n = self.node(start_emulator=False)
        d = n.start_daemon(config=shipped_config(), flags=FAST)
        d.wait_log("advertising resource", timeout=15, resource=RESOURCE)
        ready, status, body = self.probe.run(d)
        self.assertFalse(ready, body)
        self.assertEqual(status, 503)
        self.assertIn(f"{RESOURCE}: not registered with the kubelet", body)
        state, expo = discovery_state(d)
        self.assertEqual((state, ready_metric(expo)), ("gpus", 0))
        # The kubelet comes: registered, Ready.
        n.emu.start()
        n.wait_register(timeout=20)
        self.assertEqual(self.probe.wait_ready(d), "ready\n")

    def test_config_that_cannot_apply_to_the_gpus(self):
        # A rollout of a config naming a GPU the node lacks stops at the first node.
        n = self.node()
        cfg = shipped_config() + ("sharing:\n  timeSlicing:\n    resources:\n"
                                  "      - name: nvidia.com/gpu\n        replicas: 2\n"
                                  "        devices: [5]\n")
        d = n.start_daemon(config=cfg, flags=FAST)
        d.wait_log("invalid config", timeout=15)
        d.wait_log("GPU discovery done", timeout=15)
        ready, status, body = self.probe.run(d)
        self.assertFalse(ready, body)
        self.assertIn("no resource advertised: the config cannot be applied to the 2 GPUs found",
                      body)
        self.assertEqual(discovery_state(d)[0], "gpus")
        self.assertTrue(d.alive())


class Rollout(NodeTest):
    """A DaemonSet rollout (RollingUpdate, the shipped maxUnavailable) over five nodes: a GPU
    node, one without the driver library, one whose NVML finds no GPU, one whose kernel module
    is not loaded, and one whose kubelet is not up yet. The controller replaces one pod at a
    time and moves on only when the new pod is Ready by the readinessProbe."""

    probe = ReadinessProbe()

    def start_node(self, kind):
        if kind == "gpus":
            n = self.node("two-gpus.conf")
            return n, n.start_daemon(config=shipped_config(), flags=FAST)
        if kind == "no-library":
            n = self.node()
            root = os.path.join(n.root, "driver-root")
            os.makedirs(root)
            return n, n.start_daemon(config=shipped_config(), nvml_lib=False,
                                     wait_control=False,
                                     flags=FAST + [f"--container-driver-root={root}"])
        if kind == "no-gpu":
            n = self.node("zero-gpus.conf")
            return n, n.start_daemon(config=shipped_config(), flags=FAST)
        if kind == "driver-not-loaded":
            n = self.node("init-fail.conf")
            return n, n.start_daemon(config=shipped_config(), flags=FAST, wait_control=False)
        n = self.node("two-gpus.conf", start_emulator=False)
        return n, n.start_daemon(config=shipped_config(), flags=FAST)

    def test_rollout_through_gpuless_nodes(self):
        kinds = ["gpus", "no-library", "no-gpu", "driver-not-loaded", "kubelet-down"]
        # The controller's count: a percentage of the nodes, rounded up (at least 1).
        mu = self.probe.max_unavailable
        if isinstance(mu, str) and mu.endswith("%"):
            mu = max(1, -(-int(mu[:-1]) * len(kinds) // 100))
        self.assertEqual(mu, 1, f"{self.probe.max_unavailable} of {len(kinds)} nodes")
        updated = []
        for kind in kinds:
            n, d = self.start_node(kind)
            if kind == "kubelet-down":
                # The GPUs are found and advertised, the kubelet is not there to register
                # with: not Ready, so the rollout waits here.
                d.wait_log("advertising resource", timeout=15, resource=RESOURCE)
                ready, status, body = self.probe.run(d)
                self.assertFalse(ready, f"{kind}: Ready before registering: {body}")
                self.assertEqual(updated, kinds[:-1])
                n.emu.start()
            self.probe.wait_ready(d)
            updated.append(kind)
            # The old pod of the next node goes only now; this one stays Ready meanwhile.
            if kind in ("no-library", "no-gpu", "driver-not-loaded"):
                self.assertEqual(discovery_state(d)[0], kind)
            else:
                n.wait_register(timeout=20)
                self.assertEqual(discovery_state(d)[0], "gpus")
        self.assertEqual(updated, kinds)


if __name__ == "__main__":
    main()
