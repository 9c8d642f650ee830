"""Drive the edgegpu daemon and the fake NVML from Python integration tests.

Standard library only, plus Debian's python3-grpcio for PluginClient (imported lazily). Run with
Debian's /usr/bin/python3. Typical use:

    from edgegpu import Node
    with Node(fixture="two-gpus.conf") as node:     # temp root, kubelet emulator started
        d = node.start_daemon(config="edgegpu:\\n  health:\\n    recoveryQuietPeriod: 1s\\n")
        node.emu.wait_registered("nvidia.com/gpu")
        node.nvml.xid(1, 79)                         # through the fake's control socket
        ev = node.wait_devices(unhealthy=1)
        d.wait_log("gpu unhealthy", gpu="1")

Binaries come from the environment (tests/integration/meson.build sets them):
EDGEGPU, KUBELET_EMULATOR, FAKE_NVML (the fake libnvidia-ml.so.1), FAKENVML_CTL, and optionally
FAKE_NVML_NOSYM (the fake lacking a required symbol) and CDI_VALIDATE.

The daemon's stderr is logfmt; every line is kept (Daemon.lines) and parsed (Daemon.logs, dicts
with "msg", "level", "module" and the other fields as strings).

Fake host (fake_host=True): the daemon and `discover` read NUMA nodes from /sys/bus/pci/devices
and the kernel module version from /proc/driver/nvidia/version, and offer no flag to read them
elsewhere. The fake NVML writes both from its fixture when the variables EDGEGPU_FAKE_NVML_SYSFS
and EDGEGPU_FAKE_NVML_PROCFS name a root, so the process runs in a private mount namespace
(unshare -m, plus -r when not root) where tmpfs hides the real /sys/bus/pci/devices and
/proc/driver, and the fake writes its files there. Nothing outside the namespace changes.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulator import Emulator, EmulatorError, mono_us  # noqa: E402

__all__ = ["Node", "Daemon", "FakeNvml", "FakeNvmlError", "PluginClient", "RawH2", "run_cli",
           "wait_until", "parse_logfmt", "load_fixture", "fixture_path", "fake_host_argv", "mono_us",
           "Emulator", "EmulatorError", "SRC", "RESOURCE", "APP_XIDS", "sanitizer_report"]

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
FAKE_FIXTURES = os.path.join(SRC, "tests", "fakes", "nvml", "fixtures")
INTEG_FIXTURES = os.path.join(SRC, "tests", "integration", "fixtures")
RESOURCE = "nvidia.com/gpu"
APP_XIDS = (13, 31, 43, 45, 68, 109)


def wait_until(pred, timeout=10.0, what=None, step=0.02):
    """Polls pred() until it is true; returns its value. Raises AssertionError after `timeout`
    seconds (generous: a slow machine only makes the wait longer, never the test fail), naming
    `what`. For state that no event announces (a file appearing, a counter of the fake NVML)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError(f"timeout after {timeout}s waiting for {what or pred}")
        time.sleep(step)


def binary(name, required=True):
    p = os.environ.get(name)
    if required and not p:
        raise RuntimeError(f"${name} is not set (run through meson test, or export it)")
    if required and not os.path.exists(p):
        raise RuntimeError(f"${name}={p} does not exist (build it first)")
    return p


def fixture_path(name):
    """A fixture by file name: tests/integration/fixtures first, then the fake's own."""
    if os.path.isabs(name):
        return name
    for d in (INTEG_FIXTURES, FAKE_FIXTURES):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"no fixture {name} in {INTEG_FIXTURES} or {FAKE_FIXTURES}")


def load_fixture(name):
    """Parses a fake-NVML fixture file into {"global": {...}, "gpus": [{...}, ...]} (raw strings,
    as written). The identity keys a GPU section leaves out get the fake's defaults
    (fake_gpu_defaults in tests/fakes/nvml/fake-fixture.c); other missing keys are absent."""
    out = {"global": {}, "gpus": []}
    with open(fixture_path(name)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line == "[gpu]":
                i = len(out["gpus"])
                out["gpus"].append({"name": "NVIDIA Fake GPU",
                                    "uuid": f"GPU-00000000-0000-4000-8000-{i:012x}",
                                    "pci_bus_id": f"00000000:{i + 1:02X}:00.0",
                                    "minor": str(i)})
                continue
            k, _, v = line.partition("=")
            (out["gpus"][-1] if out["gpus"] else out["global"])[k.strip()] = v.strip()
    return out


# --- logfmt ---

_LOGFMT = re.compile(r'([A-Za-z0-9_.\-/]+)=("(?:[^"\\]|\\.)*"|[^ ]*)')


def _unquote(v):
    if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        v = v[1:-1]
        return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)
    return v


def parse_logfmt(line):
    """One logfmt line -> dict of strings ({} when the line is not logfmt)."""
    return {k: _unquote(v) for k, v in _LOGFMT.findall(line)}


# --- the fake host (NUMA in sysfs, kernel module version in /proc) ---

def fake_host_argv(argv):
    """argv wrapped to run in a private mount namespace with a fake /sys/bus/pci/devices and
    /proc/driver (see the module docstring). The process keeps its PID (unshare and sh exec)."""
    pre = ["unshare", "-m", "--propagation", "private"]
    if os.geteuid() != 0:
        pre.append("-r")
    script = ("mount -t tmpfs tmpfs /sys/bus/pci/devices && "
              "{ [ ! -d /proc/driver ] || mount -t tmpfs tmpfs /proc/driver; } && exec \"$@\"")
    return pre + ["/bin/sh", "-c", script, "sh"] + list(argv)


FAKE_HOST_ENV = {"EDGEGPU_FAKE_NVML_SYSFS": "/sys", "EDGEGPU_FAKE_NVML_PROCFS": "/proc"}


# Sanitizer settings pass through to every process the tests start (.ci/run sets them).
SANITIZER_VARS = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS")
# The first line of a sanitizer report: ASan/LSan "==PID==ERROR: ...Sanitizer", TSan
# "WARNING: ThreadSanitizer", UBSan "file:line:col: runtime error:".
_SANITIZER_LINE = re.compile(r"(^==\d+==ERROR: \w+Sanitizer|^WARNING: ThreadSanitizer|"
                             r": runtime error: )")


def sanitizer_report(text_or_lines, context=40):
    """The first sanitizer report in a process's stderr (a string or a list of lines) with up
    to `context` lines after it, or None when there is none."""
    lines = (text_or_lines.splitlines() if isinstance(text_or_lines, str)
             else list(text_or_lines))
    for i, line in enumerate(lines):
        if _SANITIZER_LINE.search(line):
            return "\n".join(lines[i:i + context])
    return None


def base_env(extra=None):
    """A clean environment: no CONFIG_FILE, DEVICE_LIST_STRATEGY, ... leaks in from outside."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    env.update({k: os.environ[k] for k in SANITIZER_VARS if k in os.environ})
    if extra:
        env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


def run_cli(args, fixture=None, env=None, fake_host=False, nvml_lib=None, timeout=20):
    """Runs `edgegpu ARGS` to completion (discover, check-config, version). --nvml-lib is added
    for discover unless nvml_lib is False. Returns the CompletedProcess (text)."""
    argv = [binary("EDGEGPU")] + list(args)
    if args and args[0] == "discover" and nvml_lib is not False:
        argv += ["--nvml-lib", nvml_lib or binary("FAKE_NVML")]
    e = {}
    if fixture:
        e["EDGEGPU_FAKE_NVML_FIXTURE"] = fixture_path(fixture)
    if fake_host:
        e.update(FAKE_HOST_ENV)
        argv = fake_host_argv(argv)
    e.update(env or {})
    r = subprocess.run(argv, env=base_env(e), capture_output=True, text=True,
                       timeout=timeout)
    rep = sanitizer_report(r.stderr)
    if rep:
        raise AssertionError(f"edgegpu {' '.join(args)} (rc={r.returncode}): {rep}")
    return r


# --- the fake NVML's control socket ---

class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """The control socket of the fake NVML loaded in a process: one text command per line,
    answered by "ok[ payload]" or "error <why>" (tests/fakes/nvml/fake-control.c). The socket
    only exists once the process has loaded the library, and the fake serves one connection
    at a time, so this keeps one connection and reconnects when it breaks."""

    def __init__(self, path):
        self.path = path
        self._sock = None
        self._buf = b""
        self._lock = threading.Lock()

    def _connect(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path)
                s.settimeout(30)
                self._sock, self._buf = s, b""
                return
            except OSError as e:
                s.close()
                if time.monotonic() >= deadline:
                    raise FakeNvmlError(f"fake NVML control socket {self.path}: {e}") from e
                time.sleep(0.01)

    def close(self):
        with self._lock:
            if self._sock:
                self._sock.close()
                self._sock = None

    def cmd(self, line, timeout=10.0):
        """Sends one command; returns the payload of an "ok" reply, raises FakeNvmlError on
        "error"."""
        with self._lock:
            for attempt in (0, 1):
                if self._sock is None:
                    self._connect(timeout)
                try:
                    self._sock.sendall(line.encode() + b"\n")
                    while b"\n" not in self._buf:
                        chunk = self._sock.recv(65536)
                        if not chunk:
                            raise ConnectionResetError("EOF")
                        self._buf += chunk
                    break
                except OSError:
                    self._sock.close()
                    self._sock = None
                    if attempt:
                        raise
            reply, _, self._buf = self._buf.partition(b"\n")
        reply = reply.decode()
        if reply == "ok":
            return ""
        if reply.startswith("ok "):
            return reply[3:]
        raise FakeNvmlError(f"{line!r}: {reply}")

    def wait_ready(self, timeout=10.0):
        with self._lock:
            if self._sock is None:
                self._connect(timeout)
        return self.cmd("ping")

    # Commands (README.md of the fake / its "help").
    def xid(self, gpu, xid, count=1):
        return int(self.cmd(f"xid {gpu} {xid} {count}").split("=")[1])

    def ecc(self, gpu, kind, count=1):
        return int(self.cmd(f"ecc {gpu} {kind} {count}").split("=")[1])

    def lost(self, gpu):
        return self.cmd(f"lost {gpu}")

    def back(self, gpu):
        return self.cmd(f"back {gpu}")

    def mismatch(self, on):
        return self.cmd("mismatch " + ("on" if on else "off"))

    def reload(self, fixture=None):
        return self.cmd("reload" + (" " + fixture_path(fixture) if fixture else ""))

    def load(self, fixture):
        return self.cmd("load " + fixture_path(fixture))

    def fail(self, func, code, nth=None):
        return self.cmd(f"fail {func} {code}" + (f" {nth}" if nth else ""))

    def set(self, gpu, key, value):
        return self.cmd(f"set {gpu} {key} {value}")

    def counts(self):
        return json.loads(self.cmd("counts"))

    def count(self, func):
        return int(self.cmd(f"count {func}"))

    def waiters(self):
        return int(self.cmd("waiters"))

    def block(self, func, gpu=None):
        """Every later call of @func (about GPU @gpu only, if given) waits inside the fake (a
        hung driver) until release()."""
        return self.cmd(f"block {func}" + ("" if gpu is None else f" {gpu}"))

    def release(self, func, gpu=None):
        """Ends block(); without @gpu, for every GPU."""
        return self.cmd(f"release {func}" + ("" if gpu is None else f" {gpu}"))

    def blocked(self, func):
        """How many threads wait inside @func now."""
        return int(self.cmd(f"blocked {func}"))

    def sets(self):
        return int(self.cmd("sets"))


# --- the daemon ---

class Daemon:
    """One edgegpu process. stderr is read by a thread into `lines` / `logs`."""

    def __init__(self, argv, env, name="edgegpu", log_path=None):
        self.argv = list(argv)
        self.env = env
        self.name = name
        self.log_path = log_path
        self.lines = []
        self.logs = []
        self.proc = None
        self.started = None
        self._cv = threading.Condition()
        self._eof = False
        self._reader = None
        self._log = None

    def start(self):
        if self.log_path:
            self._log = open(self.log_path, "a")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read, name=self.name + "-stderr",
                                        daemon=True)
        self._reader.start()
        return self

    def _read(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if self._log:
                self._log.write(line + "\n")
                self._log.flush()
            with self._cv:
                self.lines.append(line)
                rec = parse_logfmt(line)
                rec["_line"] = line
                rec["_t"] = time.monotonic()
                self.logs.append(rec)
                self._cv.notify_all()
        self.proc.stderr.close()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    @property
    def returncode(self):
        return None if self.proc is None else self.proc.poll()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def mark(self):
        with self._cv:
            return len(self.logs)

    def text(self, since=0):
        with self._cv:
            return "\n".join(self.lines[since:])

    @staticmethod
    def _match(rec, msg, fields):
        if msg is not None and rec.get("msg") != msg:
            return False
        return all(rec.get(k) == (v if isinstance(v, str) else str(v))
                   for k, v in fields.items())

    def find_logs(self, msg=None, since=0, pred=None, **fields):
        """Log records (from index `since`) whose msg equals `msg` and whose fields equal
        `fields` (values compared as strings), and for which pred(rec) holds."""
        with self._cv:
            return [r for r in self.logs[since:]
                    if self._match(r, msg, fields) and (pred is None or pred(r))]

    def wait_log(self, msg=None, timeout=10.0, since=0, pred=None, **fields):
        """The first matching record at or after `since`; AssertionError on timeout or exit."""
        deadline = time.monotonic() + timeout
        i = since
        with self._cv:
            while True:
                while i < len(self.logs):
                    r = self.logs[i]
                    i += 1
                    if self._match(r, msg, fields) and (pred is None or pred(r)):
                        return r
                if self._eof:
                    raise AssertionError(f"{self.name} exited (rc={self.proc.poll()}) before "
                                         f"logging msg={msg!r} {fields}; log:\n{self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no log msg={msg!r} {fields} within "
                                         f"{timeout}s; log:\n{self.tail()}")
                self._cv.wait(left)

    def tail(self, n=40):
        with self._cv:
            return "\n".join(self.lines[-n:])

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=10.0):
        """Waits for the exit; returns the exit code (negative: killed by that signal)."""
        rc = self.proc.wait(timeout)
        if self._reader:
            self._reader.join(5)
        return rc

    def stop(self, sig=signal.SIGTERM, timeout=5.0):
        """Signals and waits; returns (returncode, seconds it took). Kills after timeout."""
        if self.proc is None:
            return None, 0.0
        t0 = time.monotonic()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        took = time.monotonic() - t0
        if self._reader:
            self._reader.join(5)
        if self._log:
            self._log.close()
            self._log = None
        return self.proc.returncode, took

    def kill(self):
        return self.stop(signal.SIGKILL)

    def sanitizer_report(self):
        with self._cv:
            return sanitizer_report(self.lines)

    # /proc views of the process.
    def fd_count(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def fds(self):
        out = {}
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                out[int(fd)] = os.readlink(f"/proc/{self.pid}/fd/{fd}")
            except OSError:
                pass
        return out

    def status(self, key):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].strip()
        return None

    def metrics_port(self, timeout=10.0):
        """The metrics server's port, from its "metrics server listening" log line."""
        rec = self.wait_log("metrics server listening", timeout=timeout)
        return int(rec["port"])

    def http(self, path, headers=None, timeout=10.0):
        """GET http://127.0.0.1:<metrics port><path>: (status, headers dict, body bytes)."""
        import urllib.error
        import urllib.request
        req = urllib.request.Request(f"http://127.0.0.1:{self.metrics_port()}{path}",
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def scrape(self, timeout=10.0):
        """/metrics parsed: {(name, frozenset(labels.items())): value}; asserts a 200."""
        end = time.monotonic() + timeout
        status, headers, body = self.http("/metrics", timeout=timeout)
        while status == 429 and time.monotonic() < end:  # a test polling faster than allowed
            time.sleep(float(headers.get("Retry-After", "1")) / 4)
            status, headers, body = self.http("/metrics", timeout=timeout)
        if status != 200:
            raise AssertionError(f"/metrics answered {status}: {body[:200]!r}")
        return parse_exposition(body.decode())

    def rss_kib(self):
        return int(self.status("VmRSS").split()[0])

    def threads(self):
        return int(self.status("Threads"))


# --- a node: emulator + fake NVML + daemon in one temp root ---

class Node:
    """A simulated node in a temp root: ROOT/device-plugins (the emulator's dir, kubelet.sock),
    ROOT/pod-resources, ROOT/cdi (--cdi-spec-dir), ROOT/nvml.ctl (the fake's control socket),
    ROOT/fixture.conf (a copy of the fixture, which tests may rewrite), ROOT/config.yaml."""

    def __init__(self, fixture="two-gpus.conf", start_emulator=True, emulator_args=()):
        self.root = tempfile.mkdtemp(prefix="edgegpu-it-")
        self.cdi_dir = os.path.join(self.root, "cdi")
        os.makedirs(self.cdi_dir)
        self.ctl_path = os.path.join(self.root, "nvml.ctl")
        self.fixture = os.path.join(self.root, "fixture.conf")
        self.config_path = os.path.join(self.root, "config.yaml")
        self.proc_dir = os.path.join(self.root, "proc")
        self.log_dir = os.path.join(self.root, "log")
        self.labels_file = os.path.join(self.root, "features.d", "edgegpu")
        for p in (self.proc_dir, os.path.join(self.log_dir, "containers"),
                  os.path.join(self.log_dir, "pods"), os.path.dirname(self.labels_file)):
            os.makedirs(p)
        if fixture:
            shutil.copyfile(fixture_path(fixture), self.fixture)
        self.fixture_name = fixture
        self.emu = Emulator(root=self.root, args=emulator_args, start=start_emulator)
        self.dir = self.emu.dir
        self.kubelet_socket = self.emu.kubelet_socket
        self.nvml = FakeNvml(self.ctl_path)
        self.daemons = []
        self.daemon = None

    def replace_fixture(self, name):
        """Atomically replaces ROOT/fixture.conf, which the fake reads each time a process
        loads it (a daemon that unloads NVML after a failed init loads it again)."""
        tmp = self.fixture + ".tmp"
        shutil.copyfile(fixture_path(name), tmp)
        os.replace(tmp, self.fixture)

    def socket(self, name="nvidia-gpu.sock"):
        return os.path.join(self.dir, name)

    def write_config(self, text, path=None):
        path = path or self.config_path
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        return path

    def daemon_argv(self, config=None, nvml_lib=None, flags=(), kubelet_socket=True):
        # The metrics server on a free loopback port (tests run in parallel), the host's /proc
        # and the kubelet's logs and NFD's features.d inside the node's root.
        argv = [binary("EDGEGPU"), "serve",
                "--device-plugin-path", self.dir,
                "--cdi-spec-dir", self.cdi_dir,
                "--pod-resources-socket", self.emu.podres_socket,
                "--metrics-address", "127.0.0.1:0",
                "--host-proc", self.proc_dir,
                "--pod-log-dir", self.log_dir,
                "--labels-file", self.labels_file]
        if nvml_lib is not False:
            argv += ["--nvml-lib", nvml_lib or binary("FAKE_NVML")]
        if kubelet_socket is True:
            argv += ["--kubelet-socket", self.kubelet_socket]
        elif kubelet_socket is not None:
            argv += ["--kubelet-socket", kubelet_socket]
        if config is not None:
            if "\n" in config or not os.path.exists(config):
                config = self.write_config(config)
            argv += ["--config-file", config]
        return argv + list(flags)

    def start_daemon(self, config=None, flags=(), env=None, nvml_lib=None, fake_host=False,
                     wait_control=True, kubelet_socket=True):
        """Starts edgegpu serve on this node. `config` is YAML text (written to config.yaml) or
        a path. Waits until the fake NVML's control socket answers unless wait_control is
        False (NVML missing, init failures)."""
        argv = self.daemon_argv(config, nvml_lib, flags, kubelet_socket)
        # gpumem enforcement's host files stay in the node's directory (never the machine's
        # /var/lib/edgegpu); no interposer library unless a test gives one (accounting).
        e = {"EDGEGPU_FAKE_NVML_FIXTURE": self.fixture,
             "EDGEGPU_FAKE_NVML_CONTROL": self.ctl_path,
             "EDGEGPU_GPUMEM_STATE_DIR": os.path.join(self.root, "gpumem-state"),
             "EDGEGPU_INTERPOSER_LIB": os.path.join(self.root, "no-interposer.so")}
        if fake_host:
            e.update(FAKE_HOST_ENV)
            argv = fake_host_argv(argv)
        e.update(env or {})
        n = len(self.daemons)
        d = Daemon(argv, base_env(e), name=f"edgegpu#{n}",
                   log_path=os.path.join(self.root, f"edgegpu.{n}.log"))
        self.nvml.close()
        d.start()
        self.daemons.append(d)
        self.daemon = d
        if wait_control:
            try:
                self.nvml.wait_ready(timeout=10)
            except FakeNvmlError as e:
                raise AssertionError(f"{e}; daemon log:\n{d.tail()}") from e
        return d

    # Emulator helpers.
    def wait_devices(self, resource=RESOURCE, since=0, timeout=10.0, pred=None, **match):
        """The first `devices` event of `resource` at or after event index `since` for which
        every keyword equals the event's field (e.g. unhealthy_count=1) and pred(ev) holds."""
        def p(e):
            return (e.get("event") == "devices" and e.get("resource") == resource
                    and all(e.get(k) == v for k, v in match.items())
                    and (pred is None or pred(e)))
        return self.emu.wait_for(p, timeout=timeout, since=since,
                                 what=f"devices {resource} {match}")

    def registrations(self, resource=RESOURCE, since=0, ok=True):
        return self.emu.find(lambda e: e.get("event") == "register" and
                             e.get("resource") == resource and
                             (ok is None or e.get("ok") == ok), since)

    def wait_register(self, resource=RESOURCE, since=0, timeout=10.0, first=False):
        """The first successful `register` of `resource` at or after `since`. With first=True
        the first register event at all must be the successful one."""
        ev = self.emu.wait_for(lambda e: e.get("event") == "register" and
                               e.get("resource") == resource and (first or e.get("ok")),
                               timeout=timeout, since=since, what=f"register {resource}")
        if not ev.get("ok"):
            raise AssertionError(f"register refused: {ev.get('error')}")
        return ev

    def dump(self, out=sys.stderr):
        """Daemon logs and the emulator's last events, for a failing test."""
        for d in self.daemons:
            print(f"--- {d.name} argv: {' '.join(d.argv)}", file=out)
            print(d.tail(80), file=out)
        print("--- emulator events (last 30)", file=out)
        for e in self.emu.events[-30:]:
            print(json.dumps(e)[:400], file=out)

    def close(self):
        """Stops everything; AssertionError when a daemon's stderr holds a sanitizer report
        (use-after-free, leak at exit, data race, undefined behaviour)."""
        self.nvml.close()
        for d in self.daemons:
            d.stop(signal.SIGTERM, timeout=3)
        try:
            self.emu.stop()
            if self.emu.proc and self.emu.proc.stdout:
                self.emu.proc.stdout.close()
        except Exception:  # noqa: BLE001 - teardown must go on
            pass
        shutil.rmtree(self.root, ignore_errors=True)
        reports = [f"{d.name} (rc={d.returncode}): {r}" for d in self.daemons
                   if (r := d.sanitizer_report())]
        if reports:
            raise AssertionError("sanitizer report:\n" + "\n".join(reports))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- a direct DevicePlugin client, for requests the emulator never sends ---

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse_exposition(text):
    """Text format 0.0.4 into {(name, frozenset of (label, value)): float}. Strict enough for
    the tests: a line that does not parse raises."""
    out = {}
    for line in text.split("\n"):
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError(f"bad exposition line: {line!r}")
        labels = {}
        rest = m.group(2) or ""
        pos = 0
        while pos < len(rest):
            lm = _LABEL.match(rest, pos)
            if not lm:
                raise ValueError(f"bad labels in {line!r}")
            v = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1),
                       lm.group(2))
            labels[lm.group(1)] = v
            pos = lm.end()
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def gfd_sanitise(name):
    """GFD's product value: [A-Za-z0-9-_. ] kept, space-separated fields joined by '-'."""
    kept = "".join(c for c in name if c.isalnum() or c in "-_. ")
    return "-".join(kept.split())


def samples(expo, name, **match):
    """The samples of `name` whose labels include `match`: [(labels dict, value)]."""
    res = []
    for (n, labels), v in expo.items():
        d = dict(labels)
        if n == name and all(d.get(k) == str(val) for k, val in match.items()):
            res.append((d, v))
    return res


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(num, data):
    if isinstance(data, str):
        data = data.encode()
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _fields(buf):
    """Decodes one protobuf message level: [(field number, value)], bytes for wire type 2."""
    i, out = 0, []
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            n, i = _read_varint(buf, i)
            v, i = bytes(buf[i:i + n]), i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.append((num, v))
    return out


def _read_varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def _map(entries):
    out = {}
    for e in entries:
        f = dict(_fields(e))
        out[f.get(1, b"").decode()] = f.get(2, b"").decode()
    return out


def decode_container_allocate_response(buf):
    envs, mounts, devices, annotations, cdi = [], [], [], [], []
    for num, v in _fields(buf):
        {1: envs, 2: mounts, 3: devices, 4: annotations, 5: cdi}.get(num, []).append(v)

    def strs(msg, names):
        f = _fields(msg)
        d = {n: "" for n in names.values()}
        for num, v in f:
            if num in names:
                d[names[num]] = v.decode() if isinstance(v, bytes) else bool(v)
        return d
    return {"envs": _map(envs),
            "mounts": [strs(m, {1: "container_path", 2: "host_path", 3: "read_only"})
                       for m in mounts],
            "devices": [strs(m, {1: "container_path", 2: "host_path", 3: "permissions"})
                        for m in devices],
            "annotations": _map(annotations),
            "cdi_devices": [dict(_fields(c)).get(1, b"").decode() for c in cdi]}


class RpcResult:
    def __init__(self, code, details, body):
        self.code, self.details, self.body = code, details, body

    def __repr__(self):
        return f"RpcResult({self.code}, {self.details!r}, {len(self.body or b'')} bytes)"


class PluginClient:
    """grpcio client for one plugin socket, with hand-encoded messages (no generated code)."""

    def __init__(self, socket_path):
        import grpc  # Debian's python3-grpcio
        self._grpc = grpc
        self.channel = grpc.insecure_channel("unix://" + socket_path)

    def close(self):
        self.channel.close()

    def call(self, method, body=b"", timeout=5.0):
        fn = self.channel.unary_unary("/v1beta1.DevicePlugin/" + method)
        try:
            return RpcResult("OK", "", fn(body, timeout=timeout))
        except self._grpc.RpcError as e:
            return RpcResult(e.code().name, e.details(), None)

    def allocate(self, *containers, timeout=5.0):
        """allocate(["id1"], ["id2", "id3"]): one ContainerAllocateRequest per list. The result
        has .responses (decoded ContainerAllocateResponses) when OK."""
        body = b"".join(_ld(1, b"".join(_ld(1, i) for i in ids)) for ids in containers)
        r = self.call("Allocate", body, timeout)
        r.responses = ([decode_container_allocate_response(v)
                        for n, v in _fields(r.body) if n == 1] if r.code == "OK" else None)
        return r

    def preferred(self, available, must_include, size, timeout=5.0):
        """One ContainerPreferredAllocationRequest; .ids is the first answer's device IDs."""
        req = (b"".join(_ld(1, i) for i in available) +
               b"".join(_ld(2, i) for i in must_include) +
               _varint(3 << 3) + _varint(size))
        r = self.call("GetPreferredAllocation", _ld(1, req), timeout)
        r.ids = None
        if r.code == "OK":
            resp = [v for n, v in _fields(r.body) if n == 1]
            r.ids = [v.decode() for n, v in _fields(resp[0]) if n == 1] if resp else []
        return r

    def options(self, timeout=5.0):
        r = self.call("GetDevicePluginOptions", b"", timeout)
        r.options = dict(_fields(r.body)) if r.code == "OK" else None
        return r

    def list_and_watch(self, timeout=None):
        """Opens a ListAndWatch stream: an iterator of raw ListAndWatchResponse bytes (call
        .cancel() on it to end the stream)."""
        fn = self.channel.unary_stream("/v1beta1.DevicePlugin/ListAndWatch")
        return fn(b"", timeout=timeout)


# --- raw HTTP/2, for clients that misbehave on purpose ---

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_DATA, H2_HEADERS, H2_RST_STREAM, H2_SETTINGS, H2_GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x7


def h2_frame(ftype, flags, stream, payload=b""):
    return (len(payload).to_bytes(3, "big") + bytes([ftype, flags]) +
            stream.to_bytes(4, "big") + payload)


def _hpack_literal(name, value):
    """A literal header field without indexing, new name, no Huffman (lengths under 127)."""
    name = name.encode() if isinstance(name, str) else name
    value = value.encode() if isinstance(value, str) else value
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


class RawH2:
    """A hand-driven HTTP/2 client on a unix socket: it says exactly what a test makes it say
    (a partial preface, nothing at all, malformed headers) and reads only when asked, so it
    can also be a peer that never reads."""

    def __init__(self, path, preface=True, timeout=10.0, rcvbuf=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.eof = False
        self.next_id = 1
        if preface:
            self.sock.sendall(H2_PREFACE + h2_frame(H2_SETTINGS, 0, 0))

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def request(self, path, extra=(), body=b"\0\0\0\0\0", end=True):
        """Sends a gRPC request (HEADERS, then DATA with @body) on a new stream; returns its
        id. @extra: more (name, value) fields, bytes allowed (any byte goes in)."""
        sid = self.next_id
        self.next_id += 2
        block = (b"\x83\x86" + _hpack_literal(":path", path) +
                 _hpack_literal(":authority", "localhost") +
                 _hpack_literal("content-type", "application/grpc") +
                 _hpack_literal("te", "trailers") +
                 b"".join(_hpack_literal(n, v) for n, v in extra))
        self.send(h2_frame(H2_HEADERS, 0x4, sid, block) +
                  h2_frame(H2_DATA, 0x1 if end else 0, sid, body))
        return sid

    def list_and_watch(self):
        return self.request("/v1beta1.DevicePlugin/ListAndWatch")

    def _fill(self, timeout):
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk

    def frame(self, timeout=10.0):
        """The next frame as (type, flags, stream, payload), or None at EOF."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + n:
                    f = (self.buf[3], self.buf[4],
                         int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF,
                         self.buf[9:9 + n])
                    self.buf = self.buf[9 + n:]
                    return f
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no frame")
            self._fill(left)

    def frames_until(self, pred, timeout=10.0):
        """Frames read until one matches pred (returned last), or until EOF."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            f = self.frame(max(0.0, deadline - time.monotonic()))
            if f is None:
                return out
            out.append(f)
            if pred(f):
                return out

    def wait_eof(self, timeout=30.0):
        """Reads until the server closes; returns every frame that came."""
        return self.frames_until(lambda f: False, timeout)
