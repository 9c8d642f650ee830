"""Drive the kubelet emulator (tests/kubelet-emulator) from Python integration tests.

Standard library only (Debian's /usr/bin/python3). Typical use:

    from emulator import Emulator
    with Emulator() as emu:                       # temp dir with device-plugins/, pod-resources/
        start_daemon(device_plugin_path=emu.dir)
        emu.wait_registered("nvidia.com/gpu")
        emu.wait_devices("nvidia.com/gpu", 2)
        ev = emu.admit("pod1", "c1:nvidia.com/gpu=1")
        assert ev["ok"], ev["error"]
        emu.restart()
        ...
        emu.assert_no_empty_list("nvidia.com/gpu")

The binary comes from the constructor, else $KUBELET_EMULATOR. Every event is kept in
`events` (and every ListAndWatch snapshot in `devices`), so a test can look back at anything.
Times: each event has "t_us", CLOCK_MONOTONIC in microseconds, the clock of time.monotonic().
"""

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

__all__ = ["JsonLineProcess", "Emulator", "EmulatorError", "mono_us"]


def mono_us():
    """CLOCK_MONOTONIC in microseconds, comparable with the emulator's "t_us"."""
    return time.monotonic_ns() // 1000


class EmulatorError(Exception):
    pass


class JsonLineProcess:
    """A child process that prints one JSON object per line on stdout and reads commands on
    stdin. Non-JSON stdout lines are kept in `noise`; stderr goes to `stderr_path`."""

    def __init__(self, argv, name="proc", env=None, cwd=None, stderr_path=None):
        self.argv = list(argv)
        self.name = name
        self.env = env
        self.cwd = cwd
        self.stderr_path = stderr_path
        self.events = []
        self.noise = []
        self.proc = None
        self._cv = threading.Condition()
        self._eof = False
        self._reader = None
        self._stderr = None

    def start(self):
        if self.stderr_path:
            self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr or subprocess.DEVNULL,
                                     env=self.env, cwd=self.cwd)
        self._reader = threading.Thread(target=self._read, name=self.name + "-reader",
                                        daemon=True)
        self._reader.start()
        return self

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = None
            with self._cv:
                if isinstance(ev, dict):
                    self._on_event(ev)
                    self.events.append(ev)
                else:
                    self.noise.append(line)
                self._cv.notify_all()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    def _on_event(self, ev):
        """Hook for subclasses; called with the lock held, before the event is stored."""

    def send(self, line):
        if self.proc is None or self.proc.poll() is not None:
            raise EmulatorError(f"{self.name} is not running (rc={self.returncode})")
        self.proc.stdin.write((line.rstrip("\n") + "\n").encode())
        self.proc.stdin.flush()

    @property
    def returncode(self):
        return None if self.proc is None else self.proc.poll()

    def mark(self):
        """Index of the next event: pass it as `since` to wait for events after this point."""
        with self._cv:
            return len(self.events)

    def find(self, pred, since=0):
        """Events (from index `since`) for which pred(ev) is true."""
        with self._cv:
            return [e for e in self.events[since:] if pred(e)]

    def wait_for(self, pred, timeout=10.0, since=0, what=None):
        """The first event at or after index `since` matching pred; EmulatorError on timeout
        or if the process ends first."""
        deadline = time.monotonic() + timeout
        i = since
        with self._cv:
            while True:
                while i < len(self.events):
                    ev = self.events[i]
                    i += 1
                    if pred(ev):
                        return ev
                left = deadline - time.monotonic()
                if self._eof:
                    raise EmulatorError(f"{self.name} exited (rc={self.returncode}) while waiting "
                                        f"for {what or pred}; last events: {self._tail()}")
                if left <= 0:
                    raise EmulatorError(f"{self.name}: timeout after {timeout}s waiting for "
                                        f"{what or pred}; last events: {self._tail()}")
                self._cv.wait(left)

    def wait_event(self, name, timeout=10.0, since=0, **match):
        """The first event named `name` whose fields equal every keyword given."""
        def pred(e):
            return e.get("event") == name and all(e.get(k) == v for k, v in match.items())
        return self.wait_for(pred, timeout, since, what=f"{name} {match}")

    def _tail(self, n=8):
        return [json.dumps(e)[:300] for e in self.events[-n:]]

    def stop(self, timeout=5.0, quit_cmd="quit"):
        """Ask the process to quit, then terminate, then kill. Returns its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None and quit_cmd:
            try:
                self.send(quit_cmd)
            except (OSError, EmulatorError):
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self._reader:
            self._reader.join(timeout)
        if self._stderr:
            self._stderr.close()
            self._stderr = None
        return self.proc.returncode

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class Emulator(JsonLineProcess):
    """The kubelet emulator in a temp root: ROOT/device-plugins (`dir`, with kubelet.sock)
    and ROOT/pod-resources/kubelet.sock (`podres_socket`)."""

    def __init__(self, binary=None, root=None, args=(), keep=False, start=True):
        binary = binary or os.environ.get("KUBELET_EMULATOR")
        if not binary:
            raise EmulatorError("no emulator binary: pass binary= or set KUBELET_EMULATOR")
        self._own_root = root is None
        self.root = root or tempfile.mkdtemp(prefix="kubelet-emu-")
        self.keep = keep
        self.dir = os.path.join(self.root, "device-plugins")
        self.podres_socket = os.path.join(self.root, "pod-resources", "kubelet.sock")
        self.kubelet_socket = os.path.join(self.dir, "kubelet.sock")
        os.makedirs(self.dir, exist_ok=True)
        self.devices = []
        self.stderr_text = ""
        self._tag = 0
        argv = [binary, "--dir", self.dir, "--pod-resources-socket", self.podres_socket,
                "--exit-on-eof"] + list(args)
        super().__init__(argv, name="kubelet-emulator",
                         stderr_path=os.path.join(self.root, "emulator.stderr"))
        if start:
            self.start()

    def start(self):
        super().start()
        self.wait_event("serving", timeout=10)
        return self

    def _on_event(self, ev):
        if ev.get("event") == "devices":
            self.devices.append(ev)

    # Commands. Each returns the "done" event; raise_on_error raises if it failed.

    def cmd(self, line, timeout=30.0, raise_on_error=True):
        """Send one command and wait for its "done" event (matched by tag)."""
        with self._cv:
            self._tag += 1
            tag = f"py{self._tag}"
        self.send(f"@{tag} {line}")
        done = self.wait_event("done", timeout=timeout, tag=tag)
        if raise_on_error and not done.get("ok"):
            raise EmulatorError(f"{line!r} failed: {done.get('error')}")
        return done

    def _cmd_event(self, line, name, timeout):
        since = self.mark()
        done = self.cmd(line, timeout=timeout, raise_on_error=False)
        evs = self.find(lambda e: e.get("event") == name, since)
        ev = evs[-1] if evs else None
        return ev, done

    def admit(self, pod, *containers, timeout=60.0):
        """admit POD c1:res=N[,res=N] ...; returns the "admit" event (check ev["ok"])."""
        ev, done = self._cmd_event(" ".join(["admit", pod] + list(containers)), "admit", timeout)
        if ev is None:
            raise EmulatorError(f"admit {pod}: {done.get('error')}")
        return ev

    def allocations(self, pod, since=0):
        """The "allocate" events of a pod (one per container and resource)."""
        return self.find(lambda e: e.get("event") == "allocate" and e.get("pod") == pod, since)

    def delete(self, pod, timeout=10.0):
        return self.cmd(f"delete {pod}", timeout=timeout)

    def restart(self, downtime=None, timeout=30.0):
        return self.cmd("restart" + (f" {downtime}" if downtime is not None else ""),
                        timeout=timeout)

    def wait_registered(self, resource, timeout=10.0):
        return self.cmd(f"wait-registered {resource} {timeout}", timeout=timeout + 10)

    def wait_unregistered(self, resource, timeout=10.0):
        return self.cmd(f"wait-unregistered {resource} {timeout}", timeout=timeout + 10)

    def wait_devices(self, resource, healthy, timeout=10.0):
        return self.cmd(f"wait-devices {resource} {healthy} {timeout}", timeout=timeout + 10)

    def state(self):
        ev, _ = self._cmd_event("state", "state", 10)
        return ev

    def load(self, resource, method, n, c, k=1, timeout=300.0):
        """Returns the "load" event (p50_us, p90_us, p99_us, max_us, errors, ...)."""
        ev, done = self._cmd_event(f"load {resource} {method} {n} {c} {k}", "load", timeout)
        if ev is None:
            raise EmulatorError(f"load: {done.get('error')}")
        return ev

    def podres_pad(self, n):
        ev, _ = self._cmd_event(f"podres-pad {n}", "podres_pad", 60)
        return ev

    def podres_list(self, max_recv=16 << 20):
        ev, _ = self._cmd_event(f"podres-list {max_recv}", "podres_list", 30)
        return ev

    def podres_allocatable(self, max_recv=16 << 20):
        ev, _ = self._cmd_event(f"podres-allocatable {max_recv}", "podres_allocatable", 30)
        return ev

    # Recorded ListAndWatch snapshots.

    def devices_events(self, resource=None):
        with self._cv:
            return [e for e in self.devices if resource is None or e.get("resource") == resource]

    def last_devices(self, resource):
        evs = self.devices_events(resource)
        return evs[-1] if evs else None

    def assert_no_empty_list(self, resource=None):
        """Fail if any recorded snapshot of `resource` (all if None) had no devices."""
        bad = [e for e in self.devices_events(resource) if e.get("count", 0) == 0]
        if bad:
            raise AssertionError(f"empty device list seen: {json.dumps(bad[0])[:300]}")

    def stop(self, timeout=5.0, quit_cmd="quit"):
        """Quit the emulator; returns its exit code (0 after a clean quit). Its stderr (Go
        panics, race reports) is kept in `stderr_text`."""
        rc = super().stop(timeout, quit_cmd)
        try:
            with open(self.stderr_path, errors="replace") as f:
                self.stderr_text = f.read()
        except OSError:
            self.stderr_text = ""
        if self._own_root and not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        return rc
