#!/usr/bin/python3
"""`edgegpu doctor`, device-plugin layer (plugin.*), against real peers: the Go kubelet
emulator (kubelet.sock, pod-resources List and GetAllocatableResources) and the real edgegpu
daemon on the fake NVML (tests/lib/edgegpu.py), with the doctor given the daemon's own flags.

Covers: every plugin.* check passing on a healthy node; allocatable / allocated / free counts
and holders after the emulator admits pods, checked against what was admitted and what the
emulator advertises; every free device taken (warn); the kubelet gone (stale kubelet.sock,
/readyz 503 with the daemon's reasons, pod-resources refused); the daemon gone (stale plugin
socket, then none, /readyz refused); and host-root fixtures: no device-plugins directory,
metrics off, and the MicroK8s kubelet directory used when the default one is missing."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from edgegpu import (RESOURCE, Emulator, Node, base_env, binary, fixture_path,  # noqa: E402
                     load_fixture, sanitizer_report, wait_until)
from fixes import assert_documented  # noqa: E402

GPUMEM = "nvidia.com/gpumem"
MICROK8S = "var/snap/microk8s/common/var/lib/kubelet"

# The fix texts the code gives (src/doctor/doctor-plugin.c, src/doctor/doctor-alloc.c): their first words.
FIX_DIR = "Start the kubelet, or point edgegpu at the directory the kubelet uses"
FIX_KUBELET = "Start (or restart) the kubelet"
FIX_SOCKETS = "edgegpu's device plugin is not serving on this node"
FIX_METRICS_OFF = "Registration cannot be checked while the daemon's metrics server is off"
FIX_METRICS_DOWN = "Nothing answers /readyz at the daemon's metrics address"
FIX_NOT_READY = "The daemon runs but is not ready"
FIX_FULL = "Every device of the resource is taken"
FIX_NONE = "The kubelet has no healthy device of the resource"
FIX_PODRES_MISSING = "The kubelet's pod-resources socket is missing"
FIX_PODRES_ERROR = "The kubelet's pod-resources API did not answer"

PLUGIN_IDS = ["plugin.dir", "plugin.kubelet-socket", "plugin.sockets", "plugin.registered",
              "plugin.allocations"]


def run_doctor(args, env=None, host_root=None, timeout=30):
    """`edgegpu doctor --json ARGS`: (exit code, {id: check}, the whole report)."""
    argv = [binary("EDGEGPU"), "doctor", "--json", "--timeout-ms", "3000"]
    if host_root:
        argv += ["--host-root", host_root]
    r = subprocess.run(argv + list(args), env=base_env(env), capture_output=True, text=True,
                       timeout=timeout)
    rep = sanitizer_report(r.stderr)
    if rep:
        raise AssertionError(f"edgegpu doctor: {rep}")
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        raise AssertionError(f"doctor rc={r.returncode}: not JSON: {r.stdout[:500]!r} "
                             f"stderr={r.stderr[:500]!r}") from e
    assert_documented(doc)
    checks = {c["id"]: c for c in doc["checks"] if c["id"].startswith("plugin.")}
    return r.returncode, checks, doc


def node_args(n, port, extra=()):
    """The doctor's flags for a node: the same paths the daemon was given."""
    return ["--device-plugin-path", n.dir, "--kubelet-socket", n.kubelet_socket,
            "--pod-resources-socket", n.emu.podres_socket,
            "--metrics-address", f"127.0.0.1:{port}",
            "--nvml-lib", binary("FAKE_NVML")] + list(extra)


def free_port():
    """A loopback port nobody listens on (bound, then released)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(num, data):
    data = data.encode() if isinstance(data, str) else data
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _cd(resource, ids, topology=b""):
    """A ContainerDevices message."""
    return _ld(1, resource) + b"".join(_ld(2, i) for i in ids) + topology


def _pod(ns, name, containers):
    """A ListPodResourcesResponse.pod_resources entry: containers = [(name, [devices])]."""
    body = _ld(1, name) + _ld(2, ns)
    for cname, devs in containers:
        body += _ld(3, _ld(1, cname) + b"".join(_ld(2, d) for d in devs))
    return _ld(1, body)


class DoctorPlugin(unittest.TestCase):
    maxDiff = None

    def node(self, fixture="two-gpus.conf"):
        n = Node(fixture=fixture)
        self.addCleanup(n.close)
        return n

    def doctor(self, n, port, extra=()):
        env = {"EDGEGPU_FAKE_NVML_FIXTURE": n.fixture}
        return run_doctor(node_args(n, port, extra), env=env)

    def up(self, n, config=None, resources=((RESOURCE, 2),)):
        """Starts the daemon, waits until each resource is registered with its healthy device
        count and /readyz says 200; returns (daemon, metrics port)."""
        d = n.start_daemon(config=config)
        for res, count in resources:
            n.wait_register(res, timeout=15)
            n.wait_devices(res, healthy_count=count, timeout=15)
        port = d.metrics_port()
        wait_until(lambda: d.http("/readyz")[0] == 200, timeout=15, what="/readyz 200")
        return d, port

    def status(self, checks):
        return {i: checks[i]["status"] for i in PLUGIN_IDS if i in checks}

    def evidence(self, check):
        return "\n".join(check["evidence"])

    def assertFix(self, check, prefix):
        self.assertTrue(check.get("fix", "").startswith(prefix),
                        f"{check['id']}: fix {check.get('fix')!r} does not start with {prefix!r}")

    # --- a healthy node, then pods taking devices ---

    def test_healthy_then_allocations_counted_then_full(self):
        n = self.node()
        uuids = [g["uuid"] for g in load_fixture("two-gpus.conf")["gpus"]]
        d, port = self.up(n)
        rc, checks, doc = self.doctor(n, port)
        self.assertEqual(self.status(checks), {i: "pass" for i in PLUGIN_IDS},
                         json.dumps(checks, indent=1))
        self.assertIn(f"{n.dir}: a directory", checks["plugin.dir"]["evidence"])
        self.assertIn(f"{n.kubelet_socket}: a socket; connect: accepted",
                      checks["plugin.kubelet-socket"]["evidence"])
        self.assertIn(f"{RESOURCE}: {n.socket()}: accepts connections",
                      checks["plugin.sockets"]["evidence"])
        self.assertIn(f"GET http://127.0.0.1:{port}/readyz: 200",
                      checks["plugin.registered"]["evidence"])
        self.assertIn(f"{RESOURCE}: 2 allocatable, 0 allocated, 2 free",
                      checks["plugin.allocations"]["evidence"])
        self.assertNotIn("fix", checks["plugin.allocations"])

        ev = n.emu.admit("web-1", f"c1:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        rc, checks, _ = self.doctor(n, port)
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "pass", a)
        self.assertIn(f"{RESOURCE}: 2 allocatable, 1 allocated, 1 free", a["evidence"])
        self.assertIn(f"{RESOURCE}: 1 held by default/web-1/c1", a["evidence"])

        # The last free GPU goes to a second pod: the next one stays Pending.
        ev_train = ev = n.emu.admit("train", f"a:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        rc, checks, doc = self.doctor(n, port)
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "warn", a)
        self.assertEqual(a["summary"], f"no free {RESOURCE}: a new pod asking for it stays Pending")
        # A warning alone fails nothing: no plugin check failed, and the exit status follows the
        # other layers (this machine's driver layer fails: it has no GPU).
        self.assertEqual([c for c in checks.values() if c["status"] == "fail"], [])
        self.assertEqual(rc, 1 if any(c["status"] == "fail" for c in doc["checks"]) else 0)
        self.assertIn(f"{RESOURCE}: 2 allocatable, 2 allocated, 0 free", a["evidence"])
        self.assertIn(f"{RESOURCE}: 1 held by default/train/a", a["evidence"])
        self.assertIn(f"a new pod asking for {RESOURCE} will stay Pending: 2 of 2 allocated to "
                      "default/train/a, default/web-1/c1", a["evidence"])
        self.assertFix(a, FIX_FULL)
        # The emulator agrees: a third pod is refused for lack of the resource.
        ev = n.emu.admit("late", f"c1:{RESOURCE}=1")
        self.assertFalse(ev["ok"], ev)
        self.assertIn("Requested: 1, Available: 0", ev["error"])

        n.emu.delete("web-1")
        rc, checks, _ = self.doctor(n, port)
        self.assertIn(f"{RESOURCE}: 2 allocatable, 1 allocated, 1 free",
                      checks["plugin.allocations"]["evidence"])

        # The GPU "train" holds falls off the bus: it stays allocated but is no longer
        # allocatable, and the other GPU is still free.
        held = ev_train["containers"][0]["devices"][RESOURCE]
        gpu = uuids.index(held[0])
        n.nvml.xid(gpu, 79)
        n.wait_devices(RESOURCE, unhealthy_count=1, timeout=15)
        rc, checks, _ = self.doctor(n, port)
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "pass", a)
        self.assertIn(f"{RESOURCE}: 1 allocatable, 1 allocated, 1 free", a["evidence"])
        self.assertIn(f"{RESOURCE}: 1 of the allocated devices are not allocatable any more "
                      "(unhealthy or gone)", a["evidence"])

    def test_two_resources_counted_apart(self):
        """nvidia.com/gpu (GPU 0) and nvidia.com/gpumem (GPU 1's memory): each resource's
        counts against what the emulator was sent and what it admitted."""
        n = self.node()
        cfg = ("version: v1\nedgegpu:\n  sharing:\n    memory:\n      devices: [1]\n"
               "      unitMiB: 1024\n      reserveMiB: 0\n")
        d = n.start_daemon(config=cfg)
        n.wait_register(RESOURCE, timeout=15)
        n.wait_register(GPUMEM, timeout=15)
        units = n.wait_devices(GPUMEM, pred=lambda e: e["healthy_count"] > 0)["healthy_count"]
        self.assertEqual(units, 23034 // 1024)  # the fixture's GPU 1, reserve 0
        n.wait_devices(RESOURCE, healthy_count=1)
        port = d.metrics_port()
        wait_until(lambda: d.http("/readyz")[0] == 200, timeout=15, what="/readyz 200")

        ev = n.emu.admit("infer", f"c1:{GPUMEM}=4")
        self.assertTrue(ev["ok"], ev)
        # Without the daemon's config the doctor does not know of nvidia.com/gpumem.
        rc, checks, _ = self.doctor(n, port)
        self.assertNotIn(GPUMEM, self.evidence(checks["plugin.allocations"]))
        rc, checks, _ = self.doctor(n, port, ["--config-file", n.config_path])
        self.assertEqual(self.status(checks), {i: "pass" for i in PLUGIN_IDS},
                         json.dumps(checks, indent=1))
        a = checks["plugin.allocations"]["evidence"]
        self.assertIn(f"{RESOURCE}: 1 allocatable, 0 allocated, 1 free", a)
        self.assertIn(f"{GPUMEM}: {units} allocatable, 4 allocated, {units - 4} free", a)
        self.assertIn(f"{GPUMEM}: 4 held by default/infer/c1", a)
        s = checks["plugin.sockets"]["evidence"]
        self.assertIn(f"{GPUMEM}: {n.socket('nvidia-gpumem.sock')}: accepts connections", s)
        self.assertEqual(checks["plugin.sockets"]["summary"], "edgegpu serves 2 plugin sockets")

        ev = n.emu.admit("solo", f"c1:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        rc, checks, _ = self.doctor(n, port, ["--config-file", n.config_path])
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "warn", a)
        self.assertIn(f"a new pod asking for {RESOURCE} will stay Pending: 1 of 1 allocated to "
                      "default/solo/c1", a["evidence"])
        self.assertIn(f"{GPUMEM}: {units} allocatable, 4 allocated, {units - 4} free",
                      a["evidence"])
        self.assertFalse(any(f"asking for {GPUMEM}" in e for e in a["evidence"]), a)

    # --- the kubelet gone: stale kubelet.sock, /readyz 503, pod-resources refused ---

    def test_kubelet_killed(self):
        n = self.node()
        d, port = self.up(n)
        n.emu.proc.send_signal(signal.SIGKILL)  # its sockets stay behind, nobody listening
        n.emu.proc.wait(10)
        self.assertTrue(os.path.exists(n.kubelet_socket))
        wait_until(lambda: d.http("/readyz")[0] == 503, timeout=15, what="/readyz 503")
        rc, checks, _ = self.doctor(n, port)
        self.assertEqual(rc, 1)
        self.assertEqual(self.status(checks), {
            "plugin.dir": "pass", "plugin.kubelet-socket": "fail", "plugin.sockets": "pass",
            "plugin.registered": "fail", "plugin.allocations": "warn"},
            json.dumps(checks, indent=1))
        k = checks["plugin.kubelet-socket"]
        self.assertIn("kubelet not running", k["summary"])
        self.assertIn(f"{n.kubelet_socket}: a socket; connect: Connection refused", k["evidence"])
        self.assertFix(k, FIX_KUBELET)
        reg = checks["plugin.registered"]
        self.assertIn(f"GET http://127.0.0.1:{port}/readyz: 503", reg["evidence"])
        # The daemon's own reason, line for line as /readyz gives it.
        body = d.http("/readyz")[2].decode()
        self.assertIn(f"{RESOURCE}: not registered with the kubelet", body)
        lines = [e for e in reg["evidence"] if e.startswith("not ready: ")]
        self.assertTrue(any(f"{RESOURCE}: not registered with the kubelet (" in e
                            for e in lines), reg)
        self.assertFix(reg, FIX_NOT_READY)
        a = checks["plugin.allocations"]
        self.assertIn("did not answer", a["summary"])
        self.assertTrue(any("GetAllocatableResources" in e for e in a["evidence"]), a)
        self.assertFix(a, FIX_PODRES_ERROR)

    # --- the daemon gone: a stale socket, then none; /readyz refused ---

    def test_daemon_killed_then_cleaned_up(self):
        n = self.node()
        d, port = self.up(n)
        d.kill()
        self.assertTrue(os.path.exists(n.socket()))
        rc, checks, _ = self.doctor(n, port)
        self.assertEqual(rc, 1)
        s = checks["plugin.sockets"]
        self.assertEqual(s["status"], "fail", s)
        self.assertIn(f"{RESOURCE}: {n.socket()}: stale: nobody listens on it (the plugin died)",
                      s["evidence"])
        self.assertFix(s, FIX_SOCKETS)
        self.assertEqual(checks["plugin.kubelet-socket"]["status"], "pass")
        reg = checks["plugin.registered"]
        self.assertEqual(reg["status"], "warn", reg)
        self.assertIn("Connection refused", self.evidence(reg))
        self.assertFix(reg, FIX_METRICS_DOWN)
        # The kubelet still lists the devices (unhealthy after the stream ended): none free.
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "warn", a)
        self.assertIn(f"{RESOURCE}: 0 allocatable, 0 allocated, 0 free", a["evidence"])
        self.assertFix(a, FIX_NONE)

        # The kubelet's restart removes every socket: now there is none at all.
        n.emu.restart()
        wait_until(lambda: not os.path.exists(n.socket()), what="plugin socket removed")
        rc, checks, _ = self.doctor(n, free_port())
        s = checks["plugin.sockets"]
        self.assertEqual(s["status"], "fail", s)
        self.assertIn("the daemon is not running on this node", s["summary"])
        self.assertIn(f"{RESOURCE}: {n.socket()}: missing", s["evidence"])
        self.assertEqual(checks["plugin.registered"]["status"], "warn")

    # --- hung peers: listening, never answering ---

    def test_hung_peers_are_bounded(self):
        """A metrics server and a pod-resources socket that accept connections (the kernel
        does, from the backlog) but never answer: the doctor gives up after --timeout-ms and
        says so, instead of hanging."""
        import socket
        import time
        root = tempfile.mkdtemp(prefix="dp-")
        self.addCleanup(shutil.rmtree, root, True)
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(8)
        self.addCleanup(tcp.close)
        podres = os.path.join(root, "podres.sock")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(podres)
        unix.listen(8)
        self.addCleanup(unix.close)
        os.makedirs(os.path.join(root, "dp"))
        t0 = time.monotonic()
        argv = [binary("EDGEGPU"), "doctor", "--json", "--timeout-ms", "400",
                "--device-plugin-path", os.path.join(root, "dp"),
                "--pod-resources-socket", podres,
                "--metrics-address", f"127.0.0.1:{tcp.getsockname()[1]}"]
        r = subprocess.run(argv, env=base_env(), capture_output=True, text=True, timeout=30)
        took = time.monotonic() - t0
        doc = json.loads(r.stdout)
        assert_documented(doc)
        checks = {c["id"]: c for c in doc["checks"]}
        reg = checks["plugin.registered"]
        self.assertEqual(reg["status"], "fail", reg)
        self.assertIn("the daemon hangs", reg["summary"])
        self.assertIn("no complete answer within the timeout (400 ms)", self.evidence(reg))
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "warn", a)
        self.assertIn(f"{podres} GetAllocatableResources: no answer within 400 ms "
                      "(deadline passed)", a["evidence"])
        self.assertFix(a, FIX_PODRES_ERROR)
        # Two bounded waits of 0.4 s, nothing unbounded (generous for a loaded machine).
        self.assertGreaterEqual(took, 0.8)
        self.assertLess(took, 10)

    # --- an older kubelet (no GetAllocatableResources), and a kubelet that says no ---

    def test_podres_peer_without_allocatable_and_with_errors(self):
        """A pod-resources server on python3-grpcio that serves only List (as kubelets before
        1.23 do): allocations are still counted, from List, with the missing method said. A
        device listed once per NUMA node counts once, other resources are left out. Then the
        same server refusing List: its gRPC status is in the evidence."""
        import grpc
        from concurrent import futures
        root = tempfile.mkdtemp(prefix="dp-")
        self.addCleanup(shutil.rmtree, root, True)
        sock = os.path.join(root, "podres.sock")
        numa = [_ld(3, _ld(1, _varint(1 << 3) + _varint(n))) for n in (0, 1)]
        answer = (_pod("default", "a", [("c", [_cd(RESOURCE, ["GPU-1"], numa[0]),
                                              _cd(RESOURCE, ["GPU-1"], numa[1])])]) +
                  _pod("ml", "b", [("main", [_cd("example.com/fpga", ["F0"]),
                                             _cd(RESOURCE, ["GPU-2"])])]))
        refuse = []

        def list_(req, ctx):
            if refuse:
                ctx.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "rejected by rate limit")
            return answer
        handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(list_)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port("unix:" + sock)
        server.start()
        self.addCleanup(server.stop, None)
        args = ["--device-plugin-path", root, "--pod-resources-socket", sock,
                "--metrics-address", ""]
        rc, checks, _ = run_doctor(args)
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "pass", a)
        self.assertTrue(a["evidence"][0].startswith(
            "GetAllocatableResources: UNIMPLEMENTED ("), a)
        self.assertIn(f"{RESOURCE}: 2 allocated (allocatable unknown)", a["evidence"])
        self.assertIn(f"{RESOURCE}: 1 held by default/a/c", a["evidence"])
        self.assertIn(f"{RESOURCE}: 1 held by ml/b/main", a["evidence"])
        self.assertNotIn("fpga", self.evidence(a))

        refuse.append(True)
        rc, checks, _ = run_doctor(args)
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "warn", a)
        self.assertIn(f"{sock} List: gRPC status RESOURCE_EXHAUSTED: rejected by rate limit",
                      a["evidence"])
        self.assertFix(a, FIX_PODRES_ERROR)

    # --- host-root fixtures ---

    def test_host_root_without_device_plugins_dir(self):
        root = tempfile.mkdtemp(prefix="doctor-plugin-")
        self.addCleanup(shutil.rmtree, root, True)
        os.makedirs(os.path.join(root, "var/lib/kubelet"))  # the kubelet dir, nothing in it
        rc, checks, doc = run_doctor(["--metrics-address", ""], host_root=root)
        self.assertEqual(doc["hostRoot"], root)
        self.assertEqual(rc, 1)
        self.assertEqual(self.status(checks), {
            "plugin.dir": "fail", "plugin.kubelet-socket": "skip", "plugin.sockets": "skip",
            "plugin.registered": "warn", "plugin.allocations": "warn"},
            json.dumps(checks, indent=1))
        self.assertIn("/var/lib/kubelet/device-plugins: No such file or directory",
                      checks["plugin.dir"]["evidence"])
        self.assertFix(checks["plugin.dir"], FIX_DIR)
        self.assertFix(checks["plugin.registered"], FIX_METRICS_OFF)
        self.assertIn("/var/lib/kubelet/pod-resources/kubelet.sock: No such file or directory",
                      checks["plugin.allocations"]["evidence"])
        self.assertFix(checks["plugin.allocations"], FIX_PODRES_MISSING)

        # A plain file where the directory should be.
        with open(os.path.join(root, "var/lib/kubelet/device-plugins"), "w"):
            pass
        rc, checks, _ = run_doctor(["--metrics-address", ""], host_root=root)
        self.assertEqual(checks["plugin.dir"]["status"], "fail")
        self.assertIn("not a directory", checks["plugin.dir"]["summary"])

    def test_host_root_kubeedge_without_pod_resources(self):
        """A KubeEdge node (edgecore.yaml) whose edgecore serves no pod-resources socket:
        skipped, and the summary names the feature gate that turns the socket on, not a
        missing API."""
        root = tempfile.mkdtemp(prefix="doctor-plugin-")
        self.addCleanup(shutil.rmtree, root, True)
        os.makedirs(os.path.join(root, "var/lib/kubelet/device-plugins"))
        os.makedirs(os.path.join(root, "etc/kubeedge/config"))
        with open(os.path.join(root, "etc/kubeedge/config/edgecore.yaml"), "w") as f:
            f.write("apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\n"
                    "modules:\n  edged:\n    enable: true\n")
        rc, checks, doc = run_doctor(["--metrics-address", ""], host_root=root)
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "skip", a)
        self.assertEqual(a["summary"], "no pod-resources socket: edgecore serves one only with "
                         "its KubeletPodResources feature gate on")
        self.assertIn("/var/lib/kubelet/pod-resources/kubelet.sock: missing", a["evidence"])
        self.assertNotIn("fix", a)

    def test_host_root_microk8s_kubelet_dir(self):
        """No /var/lib/kubelet, a live kubelet (the emulator) under MicroK8s's root dir: the
        doctor finds it there with the default paths, and says so."""
        root = tempfile.mkdtemp(prefix="dp-")
        self.addCleanup(shutil.rmtree, root, True)
        kroot = os.path.join(root, MICROK8S)
        os.makedirs(kroot)
        emu = Emulator(root=kroot)
        self.addCleanup(lambda: (emu.stop(), emu.proc.stdout.close()))
        rc, checks, _ = run_doctor(["--metrics-address", ""], host_root=root)
        d = checks["plugin.dir"]
        self.assertEqual(d["status"], "pass", d)
        self.assertIn("MicroK8s: /var/lib/kubelet/device-plugins is missing; using "
                      f"/{MICROK8S}/device-plugins (the MicroK8s kubelet's root dir)",
                      d["evidence"])
        k = checks["plugin.kubelet-socket"]
        self.assertEqual(k["status"], "pass", k)
        self.assertIn(f"/{MICROK8S}/device-plugins/kubelet.sock: a socket; connect: accepted",
                      k["evidence"])
        s = checks["plugin.sockets"]
        self.assertEqual(s["status"], "fail", s)
        self.assertIn(f"{RESOURCE}: /{MICROK8S}/device-plugins/nvidia-gpu.sock: missing",
                      s["evidence"])
        a = checks["plugin.allocations"]
        self.assertEqual(a["status"], "warn", a)
        self.assertIn("MicroK8s: /var/lib/kubelet/pod-resources/kubelet.sock is missing; using "
                      f"/{MICROK8S}/pod-resources/kubelet.sock", a["evidence"])
        self.assertIn(f"{RESOURCE}: 0 allocatable, 0 allocated, 0 free", a["evidence"])
        self.assertFix(a, FIX_NONE)

    def test_backstop_policy_and_whether_it_can_act(self):
        """plugin.backstop: off by default (skip); on without gpumem devices (warn); on in the
        host's PID namespace (pass, with the policy); on without it (fail, with the fix)."""
        root = tempfile.mkdtemp(prefix="dp-")
        self.addCleanup(shutil.rmtree, root, True)
        proc = os.path.join(root, "proc")
        os.makedirs(os.path.join(proc, "1", "ns"))
        gpumem = "  sharing:\n    memory:\n      devices: [0]\n"
        on = ("    memory:\n      enforcement:\n        backstop:\n          enabled: true\n"
              "          tolerancePercent: 120\n          after: 45s\n")

        def backstop(cfg):
            path = os.path.join(root, "config.yaml")
            with open(path, "w") as f:
                f.write("version: v1\nedgegpu:\n" + cfg)
            _, checks, _ = run_doctor(["--metrics-address", "", "--config-file", path,
                                       "--host-proc", proc], host_root=root)
            return checks["plugin.backstop"]

        c = backstop(gpumem)
        self.assertEqual(c["status"], "skip", c)
        c = backstop("  sharing:\n" + on)
        self.assertEqual(c["status"], "warn", c)
        both = "  sharing:\n    memory:\n      devices: [0]\n" + on.split("\n", 1)[1]
        c = backstop(both)  # no <host-proc>/1/ns/pid: cannot tell, so it cannot act
        self.assertEqual(c["status"], "fail", c)
        self.assertFix(c, "deploy with deployments/overlays/backstop (hostPID: true)")
        # The doctor's own PID namespace stands for the host's: it can act.
        os.symlink("/proc/self/ns/pid", os.path.join(proc, "1", "ns", "pid"))
        c = backstop(both)
        self.assertEqual(c["status"], "pass", c)
        self.assertIn("limit x 120% for 45 s", c["summary"])
        self.assertNotIn("fix", c)


if __name__ == "__main__":
    fixture_path("two-gpus.conf")  # fails early when the fake's fixtures are not there
    unittest.main(verbosity=2)
