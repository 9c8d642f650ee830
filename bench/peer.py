"""Side by side: edgegpu and another device-plugin binary (the peer) in the same scenarios, on the
same fake NVML (tests/fakes/nvml, loaded as libnvidia-ml.so.1 through LD_LIBRARY_PATH) and the
same kubelet emulator, rounds interleaved, medians printed in one table.

    PEER=/path/to/nvidia-device-plugin bench/run BUILD_DIR      (make bench PEER=...)

bench/run calls main() when PEER is set; docs/benchmarks.md describes the method. Environment:

    PEER          the peer's binary (required)
    PEER_KIND     edgegpu | nvidia | generic; detected when unset: nvidia for a file name with
                  nvidia-device-plugin in it, else by `PEER --version` ("edgegpu ..." or a line
                  naming NVIDIA), else generic
    PEER_ARGS     the peer's arguments, split like a shell line, {placeholders} expanded (below);
                  replaces the kind's own list; required for generic
    PEER_RESOURCE the resource the peer registers (nvidia.com/gpu)
    PEER_NS       1: both binaries start inside a private mount namespace where the emulator's
                  directory is /var/lib/kubelet/device-plugins; 0: neither; default: 1 for a peer
                  of kind nvidia (its socket path is fixed), else 0
    PEER_STRICT   1: every figure must exist for the peer too (CI), not only for edgegpu
    BENCH_EDGEGPU edgegpu's binary (default: the release build bench/run makes)
    BENCH_SHORT   1: 3 rounds, short idle window and loops (CI)
    BENCH_ROUNDS  rounds per binary (default 5, BENCH_SHORT 3; at least 3)
    BENCH_IDLE_S  the idle window of each round (default 20 s, BENCH_SHORT 3 s)
    BENCH_VERBOSE 1: every round's figures too, not only the medians

Placeholders: {dir} (device-plugin directory as the plugin sees it), {kubelet_socket}, {fake}
(the fake libnvidia-ml.so.1), {fake_dir}, {root} (the round's scratch directory), {podres}
(pod-resources socket).
"""
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time

from emulator import Emulator, EmulatorError, mono_us  # noqa: E402 (bench/run sets the path)
from procstat import cpu_ms, ctx_switches, pss_kib, status_field  # noqa: E402

NS_DIR = "/var/lib/kubelet/device-plugins"  # pluginapi.DevicePluginPath, fixed in NVIDIA's plugin
SHORT = os.environ.get("BENCH_SHORT") == "1"
ROUNDS = max(3, int(os.environ.get("BENCH_ROUNDS", "3" if SHORT else "5")))
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "3" if SHORT else "20"))
CALLS = 300 if SHORT else 2000
START_TIMEOUT = 20.0

EDGEGPU_ARGS = ("serve --nvml-lib {fake} --device-plugin-path {dir} --kubelet-socket {kubelet_socket} "
                "--cdi-spec-dir {root}/cdi --pod-resources-socket {podres} "
                "--labels-file {root}/features.d/edgegpu --metrics-address 127.0.0.1:0")
# NVIDIA's plugin (v0.17.x): its socket is /var/lib/kubelet/device-plugins/nvidia-gpu.sock whatever
# the flags, it registers with that directory's kubelet.sock, finds libnvidia-ml.so.1 by its bare
# name (LD_LIBRARY_PATH) when none is under --driver-root-ctr-path, and reads the rest from its
# environment.
NVIDIA_ARGS = ""
NVIDIA_ENV = {"FAIL_ON_INIT_ERROR": "true", "MIG_STRATEGY": "none", "DEVICE_LIST_STRATEGY": "envvar",
              "DEVICE_ID_STRATEGY": "uuid", "PASS_DEVICE_SPECS": "false"}

# (key, label, unit). Lower is better for every one: the ratio is edgegpu / peer.
FIGURES = [
    ("start_reg", "start to Registered", "ms"),
    ("start_list", "start to the first ListAndWatch list (2 GPUs)", "ms"),
    ("rss", "VmRSS idle, 2 GPUs, fake NVML loaded", "KiB"),
    ("pss", "Pss idle (shared pages split)", "KiB"),
    ("threads", "threads, idle", ""),
    ("idle_cpu", "idle CPU per minute", "ms"),
    ("wakeups", "idle wake-ups per minute, every thread", ""),
    ("list_bytes", "ListAndWatch message, 2 GPUs", "bytes"),
    ("opts_p50", "GetDevicePluginOptions p50", "us"),
    ("alloc_p50", "Allocate p50", "us"),
    ("alloc_p99", "Allocate p99", "us"),
    ("pref_p50", "GetPreferredAllocation p50", "us"),
    ("pref_p99", "GetPreferredAllocation p99", "us"),
    ("hwm", "VmHWM after the calls", "KiB"),
    ("xid", "XID 79 to Unhealthy seen", "ms"),
    ("sigterm", "SIGTERM to exit", "ms"),
]


class Side:
    """One binary of the comparison: how to start it and what it registers."""

    def __init__(self, name, binary, kind, args, env, resource):
        self.name, self.binary, self.kind = name, os.path.abspath(binary), kind
        self.args, self.env, self.resource = args, env, resource
        self.version = version_of(self.binary, kind)
        self.rounds = []  # one dict of figures per round
        self.registered = 0  # rounds in which this very binary registered
        self.notes = []


def run_flag(binary, flag):
    """First line of `binary flag`, "" when it fails."""
    try:
        out = subprocess.run([binary, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0][:80] if out.returncode == 0 and lines else ""


def version_of(binary, kind):
    # Only flags the kind is known to answer: NVIDIA's plugin takes `version` for a stray argument
    # and starts serving, at the host's /var/lib/kubelet/device-plugins.
    flags = {"edgegpu": ("version", "--version"), "nvidia": ("--version",)}.get(kind, ())
    for flag in flags:
        v = run_flag(binary, flag)
        if v:
            return v
    return "not asked" if kind == "generic" else "unknown"


def detect_kind(binary):
    name = os.path.basename(binary)
    if "nvidia-device-plugin" in name:
        return "nvidia"
    v = run_flag(binary, "--version")
    if v.startswith("edgegpu "):
        return "edgegpu"
    if "nvidia" in v.lower():
        return "nvidia"
    if name.startswith("edgegpu") and run_flag(binary, "version").startswith("edgegpu "):
        return "edgegpu"
    return "generic"


def fake_control(path, line):
    """One command on the fake NVML's control socket; returns the send time (mono_us)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(5)
        s.connect(path)
        t = mono_us()
        s.sendall((line + "\n").encode())
        reply = s.makefile().readline().strip()
    finally:
        s.close()
    if reply.startswith("error"):
        raise RuntimeError(f"fake NVML: {line!r}: {reply}")
    return t


def launch(side, emu, fake, fixture, ns):
    """Starts side's binary for one round; returns (proc, t0_us, ctl, log_path)."""
    ctl = os.path.join(emu.root, "fake-nvml.sock")
    os.makedirs(os.path.join(emu.root, "features.d"), exist_ok=True)
    plugin_dir = NS_DIR if ns else emu.dir
    subst = {"dir": plugin_dir, "kubelet_socket": os.path.join(plugin_dir, "kubelet.sock"), "fake": fake,
             "fake_dir": os.path.dirname(fake), "root": emu.root, "podres": emu.podres_socket}
    argv = [side.binary] + [a.format(**subst) for a in shlex.split(side.args)]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(fake), EDGEGPU_FAKE_NVML_FIXTURE=fixture,
               EDGEGPU_FAKE_NVML_CONTROL=ctl, **side.env)
    # A shell execs the plugin once told to: the clock starts then, after any namespace set-up, so
    # both binaries are timed from the same point whatever the wrapper costs.
    gate = 'echo ready; read -r _; exec "$@" </dev/null >&2'
    if ns:
        # A private mount namespace: a tmpfs over /var/lib, the emulator's directory bound at the
        # kubelet's. unshare and sh exec, so the pid is the plugin's.
        env["BENCH_NS_DIR"] = emu.dir
        gate = ('d=$BENCH_NS_DIR; unset BENCH_NS_DIR; mount -t tmpfs bench-ns /var/lib && '
                f'mkdir -p {NS_DIR} && mount --bind "$d" {NS_DIR} && {gate}')
    argv = ["sh", "-c", gate, "sh"] + argv
    if ns:
        argv = ["unshare", "-m" if os.geteuid() == 0 else "-rm", "--propagation", "private"] + argv
    log_path = os.path.join(emu.root, "plugin.log")
    log = open(log_path, "w")
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    log.close()
    ready = proc.stdout.readline()
    proc.stdout.close()  # the plugin's stdout goes to the log (>&2)
    if ready != b"ready\n":
        proc.wait()
        raise RuntimeError(f"the launcher did not get ready (exit {proc.returncode}): {tail(log_path)}")
    t0 = mono_us()
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    return proc, t0, ctl, log_path


def tail(path, n=3):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(line.strip() for line in f.readlines()[-n:])[:300]
    except OSError:
        return ""


def stop(proc):
    """SIGTERM; ms to the exit, None when it had to be killed (10 s)."""
    if proc.poll() is not None:
        return None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    return (time.monotonic() - t0) * 1000.0


def wait_alive(emu, proc, pred, what, since=0):
    """emu.wait_for(pred), failing at once when the plugin has exited."""
    end = time.monotonic() + START_TIMEOUT
    while True:
        try:
            return emu.wait_for(pred, timeout=0.2, since=since, what=what)
        except EmulatorError:
            if proc.poll() is not None:
                raise RuntimeError(f"exited {proc.returncode} before {what}") from None
            if time.monotonic() > end:
                raise RuntimeError(f"no {what} within {START_TIMEOUT:g} s") from None


def one_round(side, emu_bin, fake, fixture, ns):
    """Every scenario on a fresh emulator and a fresh process of side's binary. A figure that
    cannot be taken is left out (n/a), the first reason kept in side.notes."""
    fig = {}
    with Emulator(emu_bin) as emu:
        proc, t0, ctl, log_path = launch(side, emu, fake, fixture, ns)
        res = side.resource

        def step(keys, fn):
            try:
                fn()
            except Exception as e:  # the figure is n/a; say why once
                note = f"{side.name}: {', '.join(keys)}: {str(e)[:160]}"
                if proc.poll() is not None:
                    note += f" (exited {proc.returncode}: {tail(log_path)})"
                if not any(n.split(":")[:2] == note.split(":")[:2] for n in side.notes):
                    side.notes.append(note)

        def start():
            reg = wait_alive(emu, proc, lambda e: e.get("event") == "register" and e.get("ok")
                             and e.get("resource") == res, f"{res} registered")
            # The process measured is side's own binary (not a wrapper, not the other side's).
            exe = os.path.realpath(f"/proc/{proc.pid}/exe")
            if exe != os.path.realpath(side.binary):
                raise RuntimeError(f"pid {proc.pid} runs {exe}, not {side.binary}")
            fig["start_reg"] = (reg["t_us"] - t0) / 1000.0
            side.registered += 1
            lst = wait_alive(emu, proc, lambda e: e.get("event") == "devices" and e.get("resource") == res
                             and e.get("healthy_count") == 2, f"{res} with 2 healthy devices")
            fig["start_list"] = (lst["recv_us"] - t0) / 1000.0
            fig["list_bytes"] = lst["size"]
        step(["start_reg", "start_list", "list_bytes"], start)
        if "start_reg" not in fig:
            stop(proc)
            return fig
        time.sleep(1.0)  # start-up work done

        def idle():
            fig["rss"] = status_field(proc.pid, "VmRSS")
            fig["pss"] = pss_kib(proc.pid)
            fig["threads"] = status_field(proc.pid, "Threads")
            c0, w0 = cpu_ms(proc.pid), ctx_switches(proc.pid)
            time.sleep(IDLE_S)
            c1, w1 = cpu_ms(proc.pid), ctx_switches(proc.pid)
            fig["idle_cpu"] = (c1 - c0) * 60.0 / IDLE_S
            fig["wakeups"] = (w1 - w0) * 60.0 / IDLE_S
        step(["rss", "pss", "threads", "idle_cpu", "wakeups"], idle)

        def load(method, keys):
            ev = emu.load(res, method, CALLS, 1)
            if ev.get("errors"):
                raise RuntimeError(f"{ev['errors']} of {CALLS} {method} calls failed")
            for k, src in keys:
                fig[k] = ev[src]
        step(["opts_p50"], lambda: load("options", [("opts_p50", "p50_us")]))
        step(["alloc_p50", "alloc_p99"],
             lambda: load("allocate", [("alloc_p50", "p50_us"), ("alloc_p99", "p99_us")]))
        step(["pref_p50", "pref_p99"],
             lambda: load("preferred", [("pref_p50", "p50_us"), ("pref_p99", "p99_us")]))

        def hwm():
            fig["hwm"] = status_field(proc.pid, "VmHWM")
        step(["hwm"], hwm)

        def xid():
            since = emu.mark()
            t = fake_control(ctl, "xid 0 79")
            ev = emu.wait_for(lambda e: e.get("event") == "devices" and e.get("resource") == res
                              and e.get("unhealthy_count", 0) >= 1, since=since, timeout=10, what="Unhealthy")
            fig["xid"] = (ev["recv_us"] - t) / 1000.0
        step(["xid"], xid)

        def term():
            dt = stop(proc)
            if dt is None:
                raise RuntimeError("no exit within 10 s of SIGTERM (killed)")
            fig["sigterm"] = dt
        step(["sigterm"], term)
        stop(proc)
    return fig


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, float) and v < 100:
        return f"{v:.2f}" if v < 10 else f"{v:.1f}"
    return f"{v:.0f}"


def median_of(side, key):
    vals = [r[key] for r in side.rounds if key in r]
    if not vals:
        return None, 0
    return statistics.median(vals), len(vals)


def table(ours, peer):
    print(f"| scenario (median of {ROUNDS} rounds) | edgegpu | peer | ratio |")
    print("|---|---:|---:|---:|")
    for key, label, unit in FIGURES:
        if key == "idle_cpu":
            label += f" (over {IDLE_S:g} s)"
        if key.endswith(("_p50", "_p99")):
            label += f" ({CALLS} calls, 1 conn)"
        cells = []
        vals = []
        for s in (ours, peer):
            v, n = median_of(s, key)
            vals.append(v)
            cells.append(fmt(v) + (f" ({n}/{ROUNDS})" if 0 < n < ROUNDS else ""))
        a, b = vals
        ratio = f"{a / b:.2f}x" if a is not None and b else "n/a"
        print(f"| {label}{' (' + unit + ')' if unit else ''} | {cells[0]} | {cells[1]} | {ratio} |")


def main(edgegpu, emu_bin, fake, fixture):
    peer_bin = os.environ.get("PEER", "")
    if not peer_bin or not os.access(peer_bin, os.X_OK):
        print(f"bench: PEER={peer_bin!r} is not an executable file", file=sys.stderr)
        return 2
    kind = os.environ.get("PEER_KIND") or detect_kind(peer_bin)
    if kind not in ("edgegpu", "nvidia", "generic"):
        print(f"bench: PEER_KIND={kind!r}: edgegpu, nvidia or generic", file=sys.stderr)
        return 2
    args = os.environ.get("PEER_ARGS")
    if args is None:
        if kind == "generic":
            print("bench: a peer of kind generic needs PEER_ARGS", file=sys.stderr)
            return 2
        args = EDGEGPU_ARGS if kind == "edgegpu" else NVIDIA_ARGS
    resource = os.environ.get("PEER_RESOURCE", "nvidia.com/gpu")
    ns = os.environ.get("PEER_NS", "1" if kind == "nvidia" else "0") == "1"
    ours = Side("edgegpu", edgegpu, "edgegpu", EDGEGPU_ARGS, {}, "nvidia.com/gpu")
    peer = Side("peer", peer_bin, kind, args, NVIDIA_ENV if kind == "nvidia" else {}, resource)
    print(f"edgegpu: {ours.binary} ({ours.version})")
    print(f"peer:    {peer.binary} ({peer.version}; kind {kind}; args {' '.join(shlex.split(args)) or '(none)'})")
    print(f"rounds:  {ROUNDS} each, interleaved edgegpu, peer, ...; idle window {IDLE_S:g} s; "
          f"{CALLS} calls per load; mount namespace: {'yes' if ns else 'no'}")
    order = []
    for _ in range(ROUNDS):
        for side in (ours, peer):
            order.append(side.name)
            try:
                side.rounds.append(one_round(side, emu_bin, fake, fixture, ns))
            except Exception as e:  # a round that could not start: every figure n/a
                side.rounds.append({})
                side.notes.append(f"{side.name}: round failed: {str(e)[:200]}")
    print(f"order:   {', '.join(order)}")
    if os.environ.get("BENCH_VERBOSE") == "1":
        for side in (ours, peer):
            for i, r in enumerate(side.rounds):
                print(f"round {i + 1} {side.name}: " + " ".join(f"{k}={fmt(v)}" for k, v in r.items()))
    print(f"registered: edgegpu in {ours.registered} of {ROUNDS} rounds, peer in {peer.registered} of {ROUNDS} "
          "(each round a fresh emulator; the registering pid's executable checked)")
    print()
    table(ours, peer)
    for n in ours.notes + peer.notes:
        print(f"n/a: {n}")
    rc = 0
    strict = os.environ.get("PEER_STRICT") == "1"
    for side, required in ((ours, True), (peer, strict)):
        missing = [k for k, _, _ in FIGURES if any(k not in r for r in side.rounds)]
        if required and missing:
            print(f"bench: {side.name}: figures missing in some round: {', '.join(missing)}", file=sys.stderr)
            rc = 1
    if peer.registered == 0:
        print("bench: the peer never registered: the peer path is broken", file=sys.stderr)
        rc = 1
    return rc
