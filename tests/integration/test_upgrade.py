#!/usr/bin/python3
"""Upgrades without flicker (issue 10): two real edgegpu processes on one device-plugin
directory and the real kubelet emulator, whose `healthy` events give the resource's healthy
device count (the node's Allocatable) over time.

- rolling update as a DaemonSet with maxSurge 0 does it (SIGTERM the old, wait for its exit,
  start the new): the time with zero healthy devices is the restart's, the new instance's first
  list is complete, it registers exactly once, and the old exits 0;
- overlap (maxSurge > 0, or someone starting a second one): the new instance serves beside the
  old one and takes the resource over, the count never drops to zero, the old does not
  register again, exits 0 on SIGTERM and leaves the new one's socket alone;
- the rolling update again and again;
- another program taking the old instance's socket path: it stands down (no new socket, no
  Register) and serves again once the path is free, also when that program dies without
  removing its socket;
- an upgrade that goes wrong (issue 16): the new instance SIGKILLed at each step of its start
  (before binding, bound but not registered, Register in flight, registered, after its first
  list), the new instance stopped (a rollback), and two instances started at once with the
  first then stopped, 15 times. Each time the node must end up served: the kubelet sees zero
  devices only between the peer's going and the first full list of the re-registration that
  reacts to it.

The gaps are measured and printed (docs/upgrade.md quotes this output); the bounds are relative
to the measured restart, never fixed times."""

import os
import select
import signal
import socket
import sys

from common import RESOURCE, NodeTest, main, mono_us
from emulator import EmulatorError

GPUS = 2
SOCK = "nvidia-gpu.sock"
# The reader threads (the daemons' logs, the emulator's events) hold the GIL for up to the
# switch interval (5 ms) after a burst of lines: the moment a process exits would be read that
# much late. A short interval keeps the measurements in the tens of microseconds.
sys.setswitchinterval(0.0002)
# ThreadSanitizer sleeps a second at exit (atexit_sleep_ms) before it returns: a second no
# edgegpu build has, which the old instance's exit would add to every gap measured.
if "thread" in os.environ.get("EDGEGPU_SANITIZE", ""):
    os.environ["TSAN_OPTIONS"] = os.environ.get("TSAN_OPTIONS", "") + ":atexit_sleep_ms=0"


def healthy_events(n, since=0):
    return n.emu.find(lambda e: e.get("event") == "healthy" and e.get("resource") == RESOURCE,
                      since)


def wait_exit(d, timeout=10.0):
    """Waits for the process's exit through a pidfd, so the moment is exact (Popen.wait with a
    timeout polls at growing intervals, up to 50 ms late). Returns (exit code, mono_us)."""
    fd = os.pidfd_open(d.pid)
    try:
        p = select.poll()
        p.register(fd, select.POLLIN)
        if not p.poll(int(timeout * 1000)):
            raise AssertionError(f"{d.name} did not exit within {timeout}s:\n{d.tail()}")
        t = mono_us()
    finally:
        os.close(fd)
    return d.wait(timeout=5), t


# What the old instance logs when a peer that may have superseded it goes (docs/upgrade.md),
# and when one that registered before it goes (nothing to do).
TAKEOVER = "instance that may have superseded us is gone, registering again"
PEER_GONE = "another instance serving the resource is gone"
WATCHDOG = "registered, but the kubelet opened no ListAndWatch stream, registering again"


def report(label, **values):
    print(f"upgrade: {label} " + " ".join(f"{k}={v}" for k, v in values.items()),
          file=sys.stderr)


class UpgradeTest(NodeTest):
    def start_instance(self, n, i):
        """Instance i on node n. Each gets its own fake-NVML control socket (two can run at
        once); it is up when the emulator has its registration and first list."""
        since = n.emu.mark()
        d = n.start_daemon(env={"EDGEGPU_FAKE_NVML_CONTROL": os.path.join(n.root, f"nvml{i}.ctl")},
                           wait_control=False)
        reg = n.wait_register(since=since, timeout=15)
        first = n.wait_devices(since=since, timeout=10, reg=reg["reg"])
        return d, reg, first

    def roll(self, n, old, i):
        """One maxSurge-0 step: SIGTERM the old, wait for its exit, start the new. Returns the
        new daemon and the measurements (microseconds)."""
        ev = n.emu.mark()
        t_term = mono_us()
        old.send_signal(signal.SIGTERM)
        rc, t_exit = wait_exit(old)
        self.assertEqual(rc, 0, old.tail())
        new, reg, first = self.start_instance(n, i)

        # What the kubelet saw: down to zero when the old stream ended, back with the new list.
        hs = healthy_events(n, ev)
        self.assertEqual([(h["healthy"], h["cause"]) for h in hs],
                         [(0, "stream_end"), (GPUS, "list")], hs)
        z0, z1 = hs[0]["t_us"], hs[1]["t_us"]
        self.assertEqual(hs[1]["reg"], reg["reg"])
        # The new instance's first list is complete: every device, all healthy.
        self.assertEqual((first["count"], first["healthy_count"]), (GPUS, GPUS), first)
        self.assertEqual(first["seq"], 1)
        # Exactly one registration from the new instance, at the configured socket (free).
        begins = n.emu.find(lambda e: e.get("event") == "register_begin", ev)
        self.assertEqual([b["reg"] for b in begins], [reg["reg"]], begins)
        self.assertEqual(reg["endpoint"], SOCK)

        m = {"gap_us": z1 - z0, "window_us": z1 - t_term, "restart_us": reg["t_us"] - t_exit,
             "term_to_zero_us": z0 - t_term, "old_exit_us": t_exit - z0,
             "first_list_us": z1 - reg["t_us"]}
        # The zero lies inside the restart as the kubelet lives it, and is its only zero: it
        # begins after the old instance is told to stop and ends with the new instance's
        # first list, right after its registration. Order, not durations: a loaded CI machine
        # stretches every interval alike, so the measured figures are printed (report()) and
        # docs/upgrade.md quotes them.
        self.assertGreaterEqual(z0, t_term, m)
        # The old instance ended its stream itself, before it exited: the kubelet read a
        # clean end (io.EOF after an OK status), not a connection the kernel closed at exit
        # (UNAVAILABLE). This, not the two clocks of t_exit and z0, is the order: the
        # emulator may read that end after this process has seen the exit.
        end = n.emu.find(lambda e: e.get("event") == "stream_end" and
                         e.get("reg") == hs[0]["reg"], ev)
        self.assertEqual([(e["code"], e["error"]) for e in end], [("", "EOF")], end)
        self.assertGreaterEqual(z1, reg["t_us"], m)
        self.assertLessEqual(m["gap_us"], m["window_us"], m)
        return new, m

    def test_rolling_update_max_surge_0(self):
        n = self.node("two-gpus.conf")
        old, _, first = self.start_instance(n, 0)
        self.assertEqual(first["healthy_count"], GPUS)
        new, m = self.roll(n, old, 1)
        report("rolling maxSurge=0", **m)
        n.emu.assert_no_empty_list(RESOURCE)
        ev = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)

    def test_rolling_update_repeated(self):
        n = self.node("two-gpus.conf")
        d, _, _ = self.start_instance(n, 0)
        gaps = []
        for i in range(1, 6):
            d, m = self.roll(n, d, i)
            gaps.append(m)
        for i, m in enumerate(gaps, 1):
            report(f"rolling #{i}", **m)
        report("rolling summary", runs=len(gaps),
               max_gap_us=max(m["gap_us"] for m in gaps),
               max_restart_us=max(m["restart_us"] for m in gaps),
               max_first_list_us=max(m["first_list_us"] for m in gaps),
               max_old_exit_us=max(m["old_exit_us"] for m in gaps))
        n.emu.assert_no_empty_list(RESOURCE)
        # One live registration at the end, the last instance's.
        st = n.emu.state()["resources"][RESOURCE]
        self.assertTrue(st["live"])
        self.assertEqual(len(st["healthy"]), GPUS)

    def test_overlap(self):
        n = self.node("two-gpus.conf")
        old, reg_old, _ = self.start_instance(n, 0)
        self.assertEqual(reg_old["endpoint"], SOCK)
        ev = n.emu.mark()
        t0 = mono_us()
        new, reg_new, first = self.start_instance(n, 1)
        took = reg_new["t_us"] - t0
        # It serves beside the old one and says so; the kubelet takes the newer registration.
        alt = reg_new["endpoint"]
        self.assertNotEqual(alt, SOCK)
        new.wait_log("socket path served by another instance, using another",
                     resource=RESOURCE, timeout=5)
        n.emu.wait_event("superseded", since=ev, reg=reg_old["reg"], by=reg_new["reg"])
        self.assertEqual((first["count"], first["healthy_count"]), (GPUS, GPUS), first)

        ev_term = n.emu.mark()
        old.send_signal(signal.SIGTERM)
        self.assertEqual(old.wait(timeout=10), 0, old.tail())
        end = n.emu.wait_event("stream_end", since=ev_term, reg=reg_old["reg"], timeout=10)
        self.assertFalse(end["current"], end)
        report("overlap", new_start_to_register_us=took,
               healthy_min=min([h["healthy"] for h in healthy_events(n, ev)] or [GPUS]))

        # Never zero: the count only ever changed to the new instance's full list.
        self.assertEqual([h["healthy"] for h in healthy_events(n, ev)], [], "the count changed")
        # One registration, the new one's; the old did not register again.
        begins = n.emu.find(lambda e: e.get("event") == "register_begin", ev)
        self.assertEqual([(b["reg"], b["endpoint"]) for b in begins], [(reg_new["reg"], alt)])
        # The old removed its own socket only: the new one's is there and answers.
        self.assertFalse(os.path.exists(n.socket(SOCK)))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(n.socket(alt))
        s.close()
        st = n.emu.state()["resources"][RESOURCE]
        self.assertEqual((st["endpoint"], st["live"], len(st["healthy"])), (alt, True, GPUS))
        ev = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        self.assertTrue(new.alive())

    def peer_takes(self, n, d, path, since):
        """A live peer renamed over @path (atomic: no instant leaves the path empty); waits for
        the daemon to stand down. Returns (the peer's listening socket, its inode)."""
        tmp = n.socket("peer.tmp")
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.bind(tmp)
        # It never accepts: the daemon's probes of the path and its connection watching the
        # peer wait in this backlog, and the test's own connect() after them must not block.
        peer.listen(64)
        os.rename(tmp, path)
        d.wait_log("socket path taken by another running instance, standing down until it is free",
                   since=since, resource=RESOURCE, timeout=10)
        return peer, os.stat(path).st_ino

    def test_peer_takes_the_path(self):
        """A program that puts its own listening socket at our path (renamed over ours, so
        that no instant leaves the path empty): the daemon does not fight back."""
        n = self.node("two-gpus.conf")
        d, reg, _ = self.start_instance(n, 0)
        path = n.socket(SOCK)
        ev, lg = n.emu.mark(), d.mark()
        peer, ino = self.peer_takes(n, d, path, lg)
        # The kubelet's stream from us is untouched; our path is the peer's.
        self.assertEqual(os.stat(path).st_ino, ino)

        # The path freed: served again, and with the kubelet still holding our stream, no
        # Register is needed. (Removed before it closes, as a stopping server does: closed
        # first, its file would be a stale socket, which the daemon replaces at once.)
        os.unlink(path)
        peer.close()
        d.wait_log("socket path free again, serving it", since=lg, resource=RESOURCE,
                   timeout=10)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.close()
        self.assertEqual(len(d.find_logs("socket path taken by another running instance, "
                                         "standing down until it is free", since=lg)), 1)
        self.assertEqual(d.find_logs("device plugin socket deleted, recreating", since=lg), [])
        self.assertEqual(n.emu.find(lambda e: e.get("event") in ("register_begin", "healthy",
                                                                 "stream_end"), ev), [])
        # Still the kubelet's plugin: an allocation goes through over the stream it kept.
        a = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(a["ok"], a)
        self.assertTrue(d.alive())

    def test_peer_at_our_path_killed(self):
        """A program holding our path dies without removing its socket (SIGKILL leaves the
        file): the daemon notices at once (its connection to the peer ends, and the path then
        refuses connections), removes the stale socket and serves again; the kubelet still
        holds our stream, so no Register is needed."""
        n = self.node("two-gpus.conf")
        d, _, _ = self.start_instance(n, 0)
        path = n.socket(SOCK)
        ev, lg = n.emu.mark(), d.mark()
        peer, _ = self.peer_takes(n, d, path, lg)
        peer.close()  # the file stays: a stale socket, as a killed process leaves it
        d.wait_log("socket path free again, serving it", since=lg, resource=RESOURCE,
                   timeout=10)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.close()
        self.assertEqual(n.emu.find(lambda e: e.get("event") in ("register_begin", "healthy",
                                                                 "stream_end"), ev), [])
        a = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(a["ok"], a)

    # --- an upgrade that goes wrong (issue 16) ---

    def assert_served_again(self, n, old, since, t_gone, lg):
        """The old instance took the resource back after the peer went at t_gone (mono us):
        it said so, registered again at its own socket, and its first list is complete. Every
        zero the kubelet saw since `since` lies between t_gone and that first list. Returns
        the measurements (microseconds)."""
        try:
            reg = n.emu.wait_for(lambda e: e.get("event") == "register" and e.get("ok") and
                                 e.get("endpoint") == SOCK and e.get("t_us", 0) > t_gone,
                                 timeout=10, since=since, what="the old instance's registration")
        except EmulatorError as e:
            raise AssertionError(f"{e}\nthe kubelet's view: {n.emu.state()['resources']}") from e
        took = old.wait_log(TAKEOVER, since=lg, resource=RESOURCE, timeout=10)
        first = n.wait_devices(since=since, timeout=10, reg=reg["reg"])
        self.assertEqual((first["seq"], first["count"], first["healthy_count"]),
                         (1, GPUS, GPUS), first)
        hs = healthy_events(n, since)
        zeros = [h for h in hs if h["healthy"] == 0]
        # Zero only after the peer went, and the count is whole again with our first list.
        self.assertTrue(all(h["t_us"] >= t_gone for h in zeros), (t_gone, hs))
        self.assertEqual(hs[-1]["healthy"] if hs else GPUS, GPUS, hs)
        if zeros:
            # (the healthy event is written just before the devices event of the same list)
            self.assertEqual((hs[-1]["reg"], hs[-1]["cause"]), (reg["reg"], "list"), hs)
        # In reaction to the peer's going: our registration began after it, announced by the
        # takeover line, and not by the stream watchdog or a retry. (Not necessarily after
        # the zero: the kubelet reads the peer's stream end and our Register on two
        # goroutines, in either order.)
        begin = n.emu.find(lambda e: e.get("event") == "register_begin" and
                           e.get("reg") == reg["reg"], since)[0]
        self.assertGreater(begin["t_us"], t_gone)
        self.assertIn(took["path"], [n.socket(f"nvidia-gpu-{i}.sock") for i in range(1, 8)])
        self.assertEqual(old.find_logs(WATCHDOG, since=lg), [])
        # Exactly one new registration from the old instance.
        ours = n.emu.find(lambda e: e.get("event") == "register_begin" and
                          e.get("endpoint") == SOCK, since)
        self.assertEqual([b["reg"] for b in ours], [reg["reg"]], ours)
        st = n.emu.state()["resources"][RESOURCE]
        self.assertEqual((st["endpoint"], st["live"], len(st["healthy"])), (SOCK, True, GPUS))
        z0 = zeros[0]["t_us"] if zeros else first["t_us"]
        return {"reg": reg["reg"], "gap_us": first["t_us"] - z0 if zeros else 0,
                "gone_to_register_us": begin["t_us"] - t_gone,
                "register_to_list_us": first["t_us"] - begin["t_us"],
                "gone_to_served_us": first["t_us"] - t_gone}

    def kill_new_at(self, at):
        """Starts the old instance, then a new one beside it, SIGKILLs the new one at step
        `at` of its start, and checks that the old one serves the node again."""
        n = self.node("two-gpus.conf")
        old, _, _ = self.start_instance(n, 0)
        ev, lg = n.emu.mark(), old.mark()
        env = {"EDGEGPU_FAKE_NVML_CONTROL": os.path.join(n.root, "nvml1.ctl")}
        mine = lambda e: e.get("endpoint") not in (None, SOCK)  # noqa: E731
        if at == "bound":
            # Bound, never registered: its kubelet.sock is elsewhere (a new instance killed
            # between its bind and its Register looks the same to the old one).
            new = n.start_daemon(env=env, wait_control=False,
                                 kubelet_socket=os.path.join(n.root, "elsewhere", "kubelet.sock"))
            new.wait_log("serving device plugin socket", resource=RESOURCE, timeout=15)
        else:
            new = n.start_daemon(env=env, wait_control=False)
        if at == "register_begin":
            n.emu.wait_for(lambda e: e.get("event") == "register_begin" and mine(e),
                           timeout=15, since=ev, what="the new instance's Register")
        elif at == "registered":
            n.emu.wait_for(lambda e: e.get("event") == "register" and e.get("ok") and mine(e),
                           timeout=15, since=ev, what="the new instance's registration")
        elif at == "first_list":
            n.emu.wait_for(lambda e: e.get("event") == "devices" and mine(e), timeout=15,
                           since=ev, what="the new instance's first list")
        if at != "spawn":
            # Past its bind: the old instance has seen its socket live (it watches it). One
            # that died before that was never used by the kubelet (its Register comes later).
            old.wait_log("another instance serves the resource, watching it", since=lg,
                         resource=RESOURCE, path=n.socket("nvidia-gpu-1.sock"), timeout=10)
        t_kill = mono_us()
        new.send_signal(signal.SIGKILL)
        rc, _ = wait_exit(new)
        self.assertEqual(rc, -signal.SIGKILL)
        bound = [f for f in os.listdir(n.dir) if f.startswith("nvidia-gpu-")]
        if at == "spawn" and bound:
            # It got as far as binding: did the old instance see it live? A request its loop
            # answers comes after the directory events that were already waiting.
            old.http("/healthz")
            if not old.find_logs("another instance serves the resource, watching it",
                                 since=lg, resource=RESOURCE):
                bound = []
        if not bound:
            # Killed before it bound (or before it listened): nothing changed for the kubelet
            # or the old instance.
            self.assertEqual(at, "spawn")
            self.assertEqual(healthy_events(n, ev), [])
            st = n.emu.state()["resources"][RESOURCE]
            self.assertEqual((st["endpoint"], st["live"], len(st["healthy"])),
                             (SOCK, True, GPUS))
            return {"bound": 0}
        m = self.assert_served_again(n, old, ev, t_kill, lg)
        a = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(a["ok"], a)
        self.assertTrue(old.alive())
        return dict(bound=1, **m)

    def test_new_killed_at_each_step(self):
        """SIGKILL of the new instance at each step of its start, which the test observes:
        just spawned, bound but not registered, its Register received by the kubelet, its
        registration accepted, its first list received. The old instance serves the node
        again each time it bound."""
        for at in ("spawn", "bound", "register_begin", "registered", "first_list"):
            with self.subTest(at=at):
                report(f"killed at={at}", **self.kill_new_at(at))

    def test_rollback(self):
        """The new instance is stopped (a rollback) after it took over: its stream ends (zero)
        and the old instance, which stood by, registers again at once."""
        n = self.node("two-gpus.conf")
        old, reg_old, _ = self.start_instance(n, 0)
        ev = n.emu.mark()
        new, reg_new, _ = self.start_instance(n, 1)
        n.emu.wait_event("superseded", since=ev, reg=reg_old["reg"], by=reg_new["reg"])
        ev, lg = n.emu.mark(), old.mark()
        t_term = mono_us()
        new.send_signal(signal.SIGTERM)
        rc, _ = wait_exit(new)
        self.assertEqual(rc, 0, new.tail())
        m = self.assert_served_again(n, old, ev, t_term, lg)
        hs = healthy_events(n, ev)
        # One zero, from the new instance's stream end, until our list; none at all when the
        # kubelet took our registration before it read that end (it supersedes the new one).
        self.assertIn([(h["healthy"], h["cause"], h["reg"]) for h in hs],
                      ([(0, "stream_end", reg_new["reg"]), (GPUS, "list", m["reg"])], []), hs)
        self.assertFalse(os.path.exists(n.socket(reg_new["endpoint"])))
        report("rollback", **m)
        a = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(a["ok"], a)

    def test_two_started_at_once(self):
        """Two instances started at once, then the first one stopped, 15 times: whichever the
        kubelet took last, the node ends up served by the second."""
        runs = []
        for run in range(15):
            with self.subTest(run=run):
                runs.append(self.two_at_once(run))
        for i, m in enumerate(runs):
            report(f"two at once #{i + 1}", **m)
        report("two at once summary", runs=len(runs),
               zeros=sum(1 for m in runs if m["gap_us"]),
               max_gap_us=max(m["gap_us"] for m in runs))

    def two_at_once(self, run):
        n = self.node("two-gpus.conf")
        a = n.start_daemon(env={"EDGEGPU_FAKE_NVML_CONTROL": os.path.join(n.root, "nvml0.ctl")},
                           wait_control=False)
        b = n.start_daemon(env={"EDGEGPU_FAKE_NVML_CONTROL": os.path.join(n.root, "nvml1.ctl")},
                           wait_control=False)
        ra = a.wait_log("registered with the kubelet", resource=RESOURCE, timeout=15)
        rb = b.wait_log("registered with the kubelet", resource=RESOURCE, timeout=15)
        self.assertNotEqual(ra["endpoint"], rb["endpoint"])
        reg_a = n.emu.wait_for(lambda e: e.get("event") == "register" and e.get("ok") and
                               e.get("endpoint") == ra["endpoint"], timeout=10,
                               what="the first's registration")
        ev, lg = n.emu.mark(), b.mark()
        t_term = mono_us()
        a.send_signal(signal.SIGTERM)
        rc, _ = wait_exit(a)
        self.assertEqual(rc, 0, a.tail())
        end = n.emu.wait_event("stream_end", since=ev, reg=reg_a["reg"], timeout=10)
        if end["current"]:
            # The kubelet was using the first: zero now, until the second registers again.
            try:
                n.emu.wait_for(lambda e: e.get("event") == "healthy" and e["healthy"] == GPUS,
                               timeout=10, since=ev, what="the devices back")
            except EmulatorError as e:
                raise AssertionError(f"run {run}: left at 0: {n.emu.state()['resources']}") from e
        gone = b.wait_log(pred=lambda r: r.get("msg") in (TAKEOVER, PEER_GONE), since=lg,
                          resource=RESOURCE, timeout=10)
        if gone["msg"] == TAKEOVER:
            reg = n.emu.wait_for(lambda e: e.get("event") == "register" and e.get("ok") and
                                 e.get("endpoint") == rb["endpoint"] and
                                 e.get("t_us", 0) > t_term,
                                 timeout=10, since=ev, what="the second's registration")
            n.wait_devices(since=ev, timeout=10, reg=reg["reg"], healthy_count=GPUS)
        hs = healthy_events(n, ev)
        zeros = [h for h in hs if h["healthy"] == 0]
        self.assertTrue(all(h["t_us"] >= t_term for h in zeros), hs)
        # A zero (the first was the kubelet's when stopped) is followed by the second's list.
        if zeros:
            self.assertEqual(gone["msg"], TAKEOVER, (end, hs))
            self.assertEqual((hs[-1]["healthy"], hs[-1]["cause"]), (GPUS, "list"), hs)
        st = n.emu.state()["resources"][RESOURCE]
        self.assertEqual((st["endpoint"], st["live"], len(st["healthy"])),
                         (rb["endpoint"], True, GPUS), (end, hs))
        self.assertTrue(b.alive())
        return {"first_current": int(end["current"]), "took_over": int(gone["msg"] == TAKEOVER),
                "gap_us": hs[-1]["t_us"] - zeros[0]["t_us"] if zeros else 0}

    def test_stop_leaves_the_peer_socket(self):
        """Stopped while a peer holds its path, the daemon exits 0 and removes nothing of the
        peer's: the file at the path is still the peer's socket, and it still answers."""
        n = self.node("two-gpus.conf")
        d, _, _ = self.start_instance(n, 0)
        path = n.socket(SOCK)
        lg = d.mark()
        peer, ino = self.peer_takes(n, d, path, lg)
        self.addCleanup(peer.close)
        d.send_signal(signal.SIGTERM)
        rc, _ = wait_exit(d)
        self.assertEqual(rc, 0, d.tail())
        self.assertEqual(os.stat(path).st_ino, ino)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        c.close()


if __name__ == "__main__":
    main()
