#!/usr/bin/python3
"""Conformance tests of the kubelet emulator against kubelet-contract.md §2 and §4.

    conformance.py CASE        (KUBELET_EMULATOR and TESTPLUGIN name the binaries)

Each case starts the emulator (tests/lib/emulator.py) in a temp dir and one or more instances
of the test plugin (testplugin/), and checks what the real kubelet would do: its error texts,
its timing, which RPCs reach the plugin and with what.
"""

import os
import socket
import stat
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from emulator import Emulator, EmulatorError, JsonLineProcess  # noqa: E402

TESTPLUGIN = os.environ.get("TESTPLUGIN", "")
RES = "example.com/dev"
MIB4 = 4 * 1024 * 1024


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(got, want, what):
    if got != want:
        raise Failure(f"{what}: got {got!r}, want {want!r}")


class Plugin(JsonLineProcess):
    def __init__(self, emu, *args, name="plugin"):
        argv = [TESTPLUGIN, "--dir", emu.dir] + list(args)
        super().__init__(argv, name=name, stderr_path=os.path.join(emu.root, name + ".stderr"))
        self.start()
        self.wait_event("serving", timeout=10)

    def cmd(self, line, timeout=30):
        since = self.mark()
        self.send(line)
        return self.wait_event("done", timeout=timeout, since=since, cmd=line)

    def register(self, args="", timeout=20):
        """Runs `register ARGS` and returns the plugin's register event."""
        since = self.mark()
        self.cmd(("register " + args).strip(), timeout=timeout)
        return self.find(lambda e: e.get("event") == "register", since)[-1]

    def calls(self, method, since=0):
        """The RPCs of `method` the plugin received. A ping round trip first: the plugin logs a
        call before answering it, so every call the emulator has seen answered is in."""
        self.cmd("ping")
        return self.find(lambda e: e.get("event") == "call" and e.get("method") == method, since)


def emu_register(emu, since=0, **match):
    return emu.wait_event("register", timeout=20, since=since, **match)


# ---------------------------------------------------------------------------------------------

def case_bad_version(emu):
    p = Plugin(emu, "--version", "v1alpha1", "--devices", "d0")
    r = p.wait_event("register", timeout=15)
    want = ('requested API version "v1alpha1" is not supported by kubelet. '
            'Supported version is ["v1beta1"]')
    check(not r["ok"], f"Register with v1alpha1 accepted: {r}")
    eq(r["code"], "Unknown", "gRPC code")
    eq(r["error"], want, "Register error")
    eq(emu_register(emu)["error"], want, "emulator's register event")
    for v in ["V1beta1", "v1beta2", "v1"]:
        r = p.register(f"{RES} {v}")
        eq(r["error"], f'requested API version "{v}" is not supported by kubelet. '
           'Supported version is ["v1beta1"]', f"Register error for {v}")
    # Validation comes first: no dial-back for a rejected version.
    eq(p.calls("GetDevicePluginOptions"), [], "dial-back calls for rejected versions")
    r = p.register(f"{RES} v1beta1")
    check(r["ok"], f"Register with v1beta1 failed: {r}")
    eq(len(p.calls("GetDevicePluginOptions")), 1, "GetDevicePluginOptions calls")


def case_bad_name(emu):
    p = Plugin(emu, "--no-register", "--devices", "d0")
    bad = ["gpu", "kubernetes.io/gpu", "foo.kubernetes.io/gpu", "requests.example.com/gpu",
           "Example.com/gpu", "example..com/gpu", "-example.com/gpu", "example.com/-gpu",
           "example.com/gpu-", "example.com/", "/gpu", "example.com/a/b", "example.com/g%u",
           "example.com/" + "a" * 64, "a" * 245 + "/x"]
    good = ["example.com/gpu", "nvidia.com/gpu", "example.com/GPU_x.y-z", "e/x",
            "example.com/" + "a" * 63, "a" * 244 + "/x"]
    for name in bad:
        r = p.register(name)
        check(not r["ok"], f"resource name {name!r} accepted")
        eq(r["code"], "Unknown", f"gRPC code for {name!r}")
        eq(r["error"], f'the ResourceName "{name}" is invalid', f"error for {name!r}")
    eq(p.calls("GetDevicePluginOptions"), [], "dial-back calls for invalid names")
    for name in good:
        r = p.register(name)
        check(r["ok"], f"valid resource name {name!r} rejected: {r.get('error')}")
    eq(len(p.calls("GetDevicePluginOptions")), len(good), "dial-backs for valid names")


def case_dial_timeout(emu):
    """A plugin that never serves its socket fails Register after the kubelet's 10 s; a
    deadline on the plugin's own Register bounds the dial-back; a socket that appears late
    within the window is found (grpc-go's dial retries)."""
    t0 = time.monotonic()
    none = Plugin(emu, "--serve", "none", "--socket", "missing.sock",
                  "--resource", "example.com/none", name="none")
    silent = Plugin(emu, "--serve", "silent", "--socket", "silent.sock",
                    "--resource", "example.com/silent", name="silent")
    bounded = Plugin(emu, "--serve", "none", "--socket", "missing2.sock",
                     "--resource", "example.com/bounded", "--register-timeout", "3s",
                     name="bounded")
    late = Plugin(emu, "--serve-delay", "2s", "--socket", "late.sock",
                  "--resource", "example.com/late", name="late")
    want = "failed to dial device plugin: context deadline exceeded"

    r = bounded.wait_event("register", timeout=15)
    # The plugin's deadline and the kubelet's dial-back context expire together: either the
    # plugin's own DEADLINE_EXCEEDED or the kubelet's answer arrives first.
    check(r["code"] == "DeadlineExceeded" or (r["code"], r["error"]) == ("Unknown", want),
          f"bounded Register: {r}")
    check(2.5e3 <= r["dur_ms"] <= 4.5e3, f"bounded Register took {r['dur_ms']} ms, want ~3 s")
    e = emu_register(emu, resource="example.com/bounded")
    # Likewise the kubelet's context ends by its own deadline or by the plugin's cancel.
    check(e["error"] in (want, "failed to dial device plugin: context canceled"),
          f"emulator error for the bounded Register: {e['error']}")
    check(2.5e6 <= e["dur_us"] <= 4.5e6, f"bounded dial-back took {e['dur_us']} us, want ~3 s")
    b = emu.find(lambda x: x.get("event") == "register_begin"
                 and x.get("resource") == "example.com/bounded")[0]
    check(b["deadline_us"] is not None and 2e6 < b["deadline_us"] <= 3e6,
          f"Register deadline not seen by the emulator: {b}")

    r = late.wait_event("register", timeout=15)
    check(r["ok"], f"late-serving plugin not registered: {r}")
    e = emu_register(emu, resource="example.com/late")
    check(e["ok"] and 1.9e6 <= e["dur_us"] <= 8e6, f"late plugin registration: {e}")

    for p, res in [(none, "example.com/none"), (silent, "example.com/silent")]:
        r = p.wait_event("register", timeout=20)
        eq(r["code"], "Unknown", f"{res} Register code")
        eq(r["error"], want, f"{res} Register error")
        e = emu_register(emu, resource=res)
        eq(e["error"], want, f"{res} emulator error")
        check(9.9e6 <= e["dur_us"] <= 11.5e6, f"{res}: dial-back gave up after {e['dur_us']} us")
    eq(silent.calls("GetDevicePluginOptions"), [], "silent plugin calls")
    check(time.monotonic() - t0 < 14, "dial-backs did not run in parallel")


def case_oversize(emu):
    p = Plugin(emu, "--devices", "d0,d1")
    emu.wait_registered(RES)
    emu.wait_devices(RES, 2)
    # Exactly 4 MiB is accepted (grpc-go rejects only length > limit) ...
    since = emu.mark()
    eq(p.cmd(f"big {MIB4}")["size"], MIB4, "test plugin message size")
    d = emu.wait_event("devices", since=since, timeout=20)
    eq(d["size"], MIB4, "received message size")
    n = d["count"]
    emu.wait_devices(RES, n)
    # ... one byte more ends the registration.
    since = emu.mark()
    p.cmd(f"big {MIB4 + 1}")
    e = emu.wait_event("stream_end", since=since, timeout=20)
    eq(e["code"], "ResourceExhausted", "stream end code")
    eq(e["error"], "rpc error: code = ResourceExhausted desc = grpc: received message larger "
       f"than max ({MIB4 + 1} vs. {MIB4})", "stream end error")
    eq(emu.find(lambda x: x.get("event") == "devices", since), [], "oversized list applied")
    emu.wait_unregistered(RES)
    st = emu.state()["resources"][RES]
    eq(st["healthy"], [], "healthy devices after the stream ended")
    eq(len(st["unhealthy"]), n, "devices kept as unhealthy (capacity) after the stream ended")
    a = emu.admit("pod1", f"c1:{RES}=1")
    eq(a["error"], f"no healthy devices present; cannot allocate unhealthy devices {RES}",
       "admission after the stream ended")
    eq(p.calls("Allocate"), [], "Allocate calls")
    p.wait_event("stream_closed", timeout=10)
    # Only a new Register recovers.
    r = p.register()
    check(r["ok"], f"re-register failed: {r}")
    emu.wait_devices(RES, 2)


def case_preferred(emu):
    plain = Plugin(emu, "--resource", "example.com/plain", "--socket", "plain.sock",
                   "--devices", "a0,a1,a2,a3", name="plain")
    pref = Plugin(emu, "--resource", "example.com/pref", "--socket", "pref.sock", "--preferred",
                  "--prestart", "--prefer", "b3,b1,bogus", "--devices", "b0,b1,b2,b3,b4=Unhealthy",
                  name="pref")
    emu.wait_devices("example.com/plain", 4)
    emu.wait_devices("example.com/pref", 4)

    a = emu.admit("pod1", "c1:example.com/plain=2")
    check(a["ok"], f"admit pod1: {a}")
    eq(plain.calls("GetPreferredAllocation"), [], "GetPreferredAllocation without the option")
    eq(emu.find(lambda e: e.get("event") == "preferred"), [], "emulator preferred events")
    allocs = plain.calls("Allocate")
    eq(len(allocs), 1, "Allocate calls to the plain plugin")
    eq(len(allocs[0]["requests"]), 1, "ContainerAllocateRequests per Allocate")
    eq(len(allocs[0]["requests"][0]), 2, "devices in the Allocate request")
    eq(allocs[0]["deadline_us"], None, "Allocate deadline")
    eq(plain.calls("PreStartContainer"), [], "PreStartContainer without the option")

    a = emu.admit("pod2", "c1:example.com/pref=2")
    check(a["ok"], f"admit pod2: {a}")
    calls = pref.calls("GetPreferredAllocation")
    eq(len(calls), 1, "GetPreferredAllocation calls")
    eq(len(calls[0]["requests"]), 1, "ContainerPreferredAllocationRequests")
    req = calls[0]["requests"][0]
    eq(req["available"], ["b0", "b1", "b2", "b3"], "available_deviceIDs (healthy, free)")
    eq(req["must_include"] or [], [], "must_include_deviceIDs")
    eq(req["size"], 2, "allocation_size")
    eq(calls[0]["deadline_us"], None, "GetPreferredAllocation deadline")
    allocs = pref.calls("Allocate")
    eq(sorted(allocs[-1]["requests"][0]), ["b1", "b3"], "devices chosen from the preference")
    ps = pref.calls("PreStartContainer")
    eq(len(ps), 1, "PreStartContainer calls")
    eq(sorted(ps[0]["ids"]), ["b1", "b3"], "PreStartContainer devices")
    check(ps[0]["deadline_us"] is not None and 29e6 < ps[0]["deadline_us"] <= 30e6,
          f"PreStartContainer deadline {ps[0]['deadline_us']} us, want 30 s")

    # Preferred IDs already taken or unknown are dropped, the rest filled by the kubelet.
    a = emu.admit("pod3", "c1:example.com/pref=2")
    check(a["ok"], f"admit pod3: {a}")
    req = pref.calls("GetPreferredAllocation")[-1]["requests"][0]
    eq(req["available"], ["b0", "b2"], "available_deviceIDs after pod2")
    eq(sorted(pref.calls("Allocate")[-1]["requests"][0]), ["b0", "b2"], "devices filled in")


def case_admission(emu):
    p = Plugin(emu, "--preferred", "--devices", "d0,d1,d2=Unhealthy")
    emu.wait_devices(RES, 2)

    a = emu.admit("big", f"c1:{RES}=3")
    eq(a["ok"], False, "admission of 3 with 2 healthy")
    eq(a["error"], f"requested number of devices unavailable for {RES}. Requested: 3, Available: 2",
       "admission error")
    eq(a["message"], f"Allocate failed due to requested number of devices unavailable for {RES}. "
       "Requested: 3, Available: 2, which is unexpected", "pod message")
    eq(p.calls("Allocate"), [], "Allocate calls after a refused admission")
    eq(p.calls("GetPreferredAllocation"), [], "GetPreferredAllocation calls after a refusal")

    # The second container fails: the first got its Allocate, the pod fails, devices are freed.
    a = emu.admit("p1", f"c1:{RES}=1", f"c2:{RES}=2")
    eq(a["error"], f"requested number of devices unavailable for {RES}. Requested: 2, Available: 1",
       "second container's admission error")
    eq(len(p.calls("Allocate")), 1, "Allocate calls for the failed pod")
    a = emu.admit("p2", f"c1:{RES}=2")
    check(a["ok"], f"devices of the failed pod not freed: {a}")
    alloc = emu.allocations("p2")[-1]
    eq(sorted(alloc["ids"]), ["d0", "d1"], "allocated devices")
    eq(alloc["response"]["envs"], {"TEST_DEVICES": "d0,d1"}, "Allocate response envs")
    eq(alloc["response"]["cdi_devices"], ["example.com/dev=d0_d1"], "Allocate response CDI")
    eq(alloc["response"]["mounts"],
       [{"container_path": "/test", "host_path": "/tmp", "read_only": True}], "mounts")
    eq(alloc["response"]["devices"],
       [{"container_path": "/dev/null", "host_path": "/dev/null", "permissions": "rw"}], "devices")
    eq(alloc["response"]["annotations"], {"test/annotation": "1"}, "annotations")
    n = len(p.calls("Allocate"))
    a = emu.admit("p3", f"c1:{RES}=1")
    eq(a["error"], f"requested number of devices unavailable for {RES}. Requested: 1, Available: 0",
       "admission with everything allocated")
    eq(len(p.calls("Allocate")), n, "Allocate calls")
    emu.delete("p2")
    check(emu.admit("p3", f"c1:{RES}=1")["ok"], "delete did not free the devices")

    # Health is "Healthy" exactly; anything else is unhealthy.
    since = emu.mark()
    p.cmd("devices d0=healthy,d1=Unhealthy,d2=")
    d = emu.wait_event("devices", since=since)
    eq(d["healthy_count"], 0, "healthy count for non-exact health strings")
    eq(d["nonstandard_health"], {"healthy": 1, "": 1}, "non-standard health strings")
    a = emu.admit("p4", f"c1:{RES}=1")
    eq(a["error"], f"no healthy devices present; cannot allocate unhealthy devices {RES}",
       "admission with no healthy device")

    empty = Plugin(emu, "--resource", "example.com/empty", "--socket", "empty.sock",
                   "--allocate-empty", name="empty")
    emu.wait_devices("example.com/empty", 2)
    a = emu.admit("p5", "c1:example.com/empty=1")
    check(a["error"].startswith("no containers return in allocation response"),
          f"empty Allocate response accepted: {a}")
    failing = Plugin(emu, "--resource", "example.com/fail", "--socket", "fail.sock",
                     "--allocate-error", "boom", name="fail")
    emu.wait_devices("example.com/fail", 2)
    a = emu.admit("p6", "c1:example.com/fail=1")
    eq(a["error"], "rpc error: code = InvalidArgument desc = boom", "Allocate error passed through")
    a = emu.admit("p7", "c1:example.com/unknown=1")
    eq(a["error"], "cannot allocate unregistered device example.com/unknown", "unknown resource")


def bind_stale_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()  # the file stays: a stale socket


def case_restart(emu):
    """Start-up cleanup and restart: every socket in the directory goes, nothing else."""
    os.makedirs(os.path.join(emu.dir, "sub"))
    bind_stale_socket(os.path.join(emu.dir, "stale.sock"))
    bind_stale_socket(os.path.join(emu.dir, "sub", "inner.sock"))
    with open(os.path.join(emu.dir, "keep.txt"), "w") as f:
        f.write("regular file\n")
    emu.start()
    c = emu.wait_event("cleanup")
    eq(c["removed"], ["stale.sock"], "sockets removed at start")
    for keep in ["keep.txt", "sub", "sub/inner.sock", "kubelet_internal_checkpoint"]:
        check(os.path.exists(os.path.join(emu.dir, keep)), f"{keep} deleted at start")

    p = Plugin(emu, "--devices", "d0,d1")
    emu.wait_devices(RES, 2)
    check(emu.admit("pod1", f"c1:{RES}=1")["ok"], "admit pod1")
    held = emu.allocations("pod1")[-1]["ids"]
    plugin_sock = os.path.join(emu.dir, "testplugin.sock")
    check(os.path.exists(plugin_sock), "plugin socket missing before the restart")

    since = emu.mark()
    emu.restart()
    check(not os.path.exists(plugin_sock), "plugin socket survived the restart")
    emu.wait_event("restart", since=since)
    emu.wait_event("serving", since=since)
    check(stat.S_ISSOCK(os.stat(emu.kubelet_socket).st_mode), "no kubelet.sock after restart")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(emu.kubelet_socket)
    s.close()
    for keep in ["keep.txt", "sub", "sub/inner.sock", "kubelet_internal_checkpoint"]:
        check(os.path.exists(os.path.join(emu.dir, keep)), f"{keep} deleted by the restart")
    st = emu.state()
    eq(st["resources"][RES]["healthy"], [], "healthy devices right after the restart")
    eq(st["resources"][RES]["allocated"], held, "allocations kept over the restart")
    p.wait_event("stream_closed", timeout=10)
    a = emu.admit("pod2", f"c1:{RES}=1")
    eq(a["error"], f"no healthy devices present; cannot allocate unhealthy devices {RES}",
       "admission before the plugin re-registered")

    # The plugin re-creates its socket and registers again.
    p.cmd("stop")
    p.cmd("serve")
    check(p.register()["ok"], "re-registration after the restart")
    emu.wait_devices(RES, 2)
    n = len(p.calls("Allocate"))
    check(emu.admit("pod1", f"c1:{RES}=1")["ok"], "re-admission of a pod holding devices")
    eq(len(p.calls("Allocate")), n, "Allocate calls for a container that has its devices")
    check(emu.admit("pod2", f"c1:{RES}=1")["ok"], "admit pod2 after re-registration")
    eq(emu.allocations("pod2")[-1]["ids"], sorted(set(["d0", "d1"]) - set(held)),
       "pod2 got the device pod1 does not hold")
    a = emu.admit("pod1", f"c1:{RES}=2")
    eq(a["error"], f'pod "pod1" container "c1" changed request for resource "{RES}" '
       'from 1 to 2', "changed request")
    p.stop()


def case_podresources(emu):
    p = Plugin(emu, "--preferred", "--prefer", "n0,n1,n2,n3",
               "--devices", "n0@0,n1@1,n2,n3@0+1,n4@empty,n5=Unhealthy@0")
    emu.wait_devices(RES, 5)
    d = emu.last_devices(RES)
    eq(d["empty_topology"], 1, "devices with an empty TopologyInfo")
    check(emu.admit("pod1", f"c1:{RES}=4")["ok"], "admit pod1")
    lst = emu.podres_list()
    check(lst["ok"], f"List failed: {lst}")
    eq(len(lst["pods"]), 1, "pods listed")
    pod = lst["pods"][0]
    eq((pod["name"], pod["namespace"]), ("pod1", "default"), "pod name, namespace")
    devs = pod["containers"][0]["devices"]
    for e in devs:
        eq(len(e["device_ids"]), 1, "device_ids per ContainerDevices")
        eq(e["resource_name"], RES, "resource_name")
    got = sorted((e["device_ids"][0], tuple(e.get("topology", ()))) for e in devs)
    eq(got, [("n0", (0,)), ("n1", (1,)), ("n2", ()), ("n3", (0,)), ("n3", (1,))],
       "List: one ContainerDevices per (device, NUMA node)")
    for e in devs:
        if e["device_ids"][0] == "n2":
            check("topology" not in e, "device without NUMA info listed with a topology")
    # The kubelet builds List from Go maps: a new order on (almost) every call.
    orders = set()
    for _ in range(12):
        time.sleep(0.02)  # under the kubelet's rate limit (100 qps, burst 10)
        again = emu.podres_list()["pods"][0]["containers"][0]["devices"]
        orders.add(tuple((e["device_ids"][0], tuple(e.get("topology", ()))) for e in again))
    check(len(orders) > 1, "List answers all in one order: not shuffled like the kubelet's")
    eq({tuple(sorted(o)) for o in orders}, {tuple(got)}, "shuffled List: the same devices")

    al = emu.podres_allocatable()
    got = sorted((e["device_ids"][0], tuple(e.get("topology", ()))) for e in al["devices"])
    eq(got, [("n0", (0,)), ("n1", (1,)), ("n2", ()), ("n3", (0,)), ("n3", (1,))],
       "GetAllocatableResources (healthy only; empty TopologyInfo omitted)")

    pad = emu.podres_pad(100000)
    check(pad["size"] > MIB4, f"padding too small: {pad}")
    small = emu.podres_list(MIB4)
    eq(small["ok"], False, "List over 4 MiB with a 4 MiB client")
    eq(small["code"], "ResourceExhausted", "List over 4 MiB code")
    big = emu.podres_list(16 << 20)
    check(big["ok"], f"List with a 16 MiB client: {big}")
    eq(big["pad"], 100000, "padding pods listed")
    eq(big["size"], pad["size"], "List size")


def case_duplicate(emu):
    p = Plugin(emu, "--socket", "a.sock", "--devices", "d0,d1")
    emu.wait_registered(RES)
    emu.wait_devices(RES, 2)
    n = len(p.calls("GetDevicePluginOptions"))
    r = p.register()
    sock = os.path.join(emu.dir, "a.sock")
    want = (f'device plugin endpoint for resource "{RES}" at socket path "{sock}" is still '
            'connected: a registration at the same socket path is rejected until its '
            'ListAndWatch stream ends')
    check(not r["ok"], "same-socket re-registration accepted while the stream is live")
    eq(r["error"], want, "duplicate registration error")
    eq(r["code"], "Unknown", "duplicate registration code")
    eq(len(p.calls("GetDevicePluginOptions")), n + 1, "dial-back before the duplicate check")
    # The old registration is untouched.
    p.cmd("devices d0,d1,d2")
    emu.wait_devices(RES, 3)
    # Once its stream ends, the same socket registers again.
    since = emu.mark()
    p.cmd("end")
    e = emu.wait_event("stream_end", since=since)
    eq((e["error"], e["current"]), ("EOF", True), "stream end on a clean end")
    emu.wait_devices(RES, 0)
    check(p.register()["ok"], "re-registration after the stream ended")
    emu.wait_devices(RES, 3)

    # Another socket for the same resource replaces the endpoint (newest wins).
    q = Plugin(emu, "--socket", "b.sock", "--devices", "e0", name="b")
    q.wait_event("register", timeout=15)
    emu.wait_event("superseded", resource=RES)
    emu.wait_devices(RES, 1)
    since = emu.mark()
    p.cmd("devices d0,d1,d2,d3")
    emu.wait_event("devices_ignored", since=since)
    since = emu.mark()
    p.cmd("end")
    e = emu.wait_event("stream_end", since=since)
    eq(e["current"], False, "superseded endpoint's stream end marked current")
    st = emu.state()["resources"][RES]
    eq(st["healthy"], ["e0"], "devices after the superseded stream ended")
    eq(st["endpoint"], "b.sock", "current endpoint")


CASES = {
    "bad-version": case_bad_version,
    "bad-name": case_bad_name,
    "dial-timeout": case_dial_timeout,
    "oversize": case_oversize,
    "preferred": case_preferred,
    "admission": case_admission,
    "restart": case_restart,
    "podresources": case_podresources,
    "duplicate": case_duplicate,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: {sys.argv[0]} {{{'|'.join(CASES)}}}", file=sys.stderr)
        return 2
    if not TESTPLUGIN or not os.environ.get("KUBELET_EMULATOR"):
        print("KUBELET_EMULATOR and TESTPLUGIN must name the binaries", file=sys.stderr)
        return 2
    name = sys.argv[1]
    t0 = time.monotonic()
    procs = []
    orig_start = JsonLineProcess.start

    def tracking_start(self):
        procs.append(self)
        return orig_start(self)
    JsonLineProcess.start = tracking_start
    emu = None
    try:
        # restart prepares the directory before the emulator starts.
        emu = Emulator(keep=True, start=(name != "restart"))
        CASES[name](emu)
        # The emulator itself must have run cleanly: exit 0, no panic, no race report.
        for p in reversed(procs):
            rc = p.stop(timeout=5)
            if isinstance(p, Emulator):
                check(rc == 0, f"emulator exited with {rc}")
                for bad in ("panic:", "DATA RACE", "fatal error:"):
                    check(bad not in p.stderr_text, f"emulator stderr: {p.stderr_text[:2000]}")
    except Exception as e:  # noqa: BLE001 - any error fails the case, with its text
        if not isinstance(e, (Failure, EmulatorError)):
            import traceback
            traceback.print_exc()
        print(f"FAIL {name}: {e}", file=sys.stderr)
        if emu is not None:
            print(f"(files kept in {emu.root})", file=sys.stderr)
        return 1
    finally:
        for p in reversed(procs):
            if p is not emu:
                p.stop(timeout=2)
        if emu is not None:
            emu.stop()
    if emu is not None:
        import shutil
        shutil.rmtree(emu.root, ignore_errors=True)
    print(f"ok {name} ({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
