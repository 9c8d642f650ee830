#!/usr/bin/python3
"""Hostile and broken clients on the plugin socket (issue 7, items 2, 7 and 8): a stray
ListAndWatch watcher across kubelet restarts, connections that never finish the HTTP/2
preface, idle strays filling the connection cap, malformed header fields, device IDs with a
NUL byte, and watchers that never read while the device list flaps."""

import threading

from common import RESOURCE, NodeTest, main, uuids
from edgegpu import (H2_GOAWAY, H2_HEADERS, H2_RST_STREAM, H2_SETTINGS, PluginClient, RawH2)

TWO = uuids("two-gpus.conf")
GPUMEM = "nvidia.com/gpumem"


def gpumem_config(unit_mib=1):
    """gpumem on both GPUs, and health that recovers fast (for flapping)."""
    return ("version: v1\nedgegpu:\n  health:\n    recoveryQuietPeriod: 200ms\n"
            "    pollInterval: 100ms\n  sharing:\n    memory:\n      devices: [0, 1]\n"
            f"      unitMiB: {unit_mib}\n      placement: preferred\n")


class Hostile(NodeTest):
    def test_stray_watcher_does_not_stop_reregistration(self):
        """A ListAndWatch client that is not the kubelet (grpcurl, a monitoring agent) held
        open across kubelet restarts: edgegpu registers with each new kubelet all the same.
        Needs the daemon to tell the kubelet's stream apart (plugin_expect_kubelet)."""
        n, d = self.up("two-gpus.conf")
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        stream = c.list_and_watch()
        self.addCleanup(stream.cancel)
        first = next(stream)
        self.assertGreater(len(first), 0)
        for i in range(2):
            since = n.emu.mark()
            n.emu.restart()
            reg = n.wait_register(since=since, timeout=10)
            ev = n.wait_devices(since=since, reg=reg["reg"], timeout=10)
            self.assertEqual(sorted(ev["healthy"]), sorted(TWO), f"restart {i}")
        # The stray is still served.
        self.assertTrue(stream.is_active())
        n.emu.assert_no_empty_list()

    def test_no_preface_is_closed(self):
        """A client that connects and says nothing, or half a preface, is closed (10 s)."""
        n, d = self.up("two-gpus.conf")
        quiet = RawH2(n.socket(), preface=False)
        self.addCleanup(quiet.close)
        half = RawH2(n.socket(), preface=False)
        self.addCleanup(half.close)
        half.send(b"PRI * HTTP/2.0\r\n")
        frames = quiet.wait_eof(timeout=30)
        self.assertTrue(quiet.eof)
        self.assertEqual(frames[0][0], H2_SETTINGS)
        goaway = [f for f in frames if f[0] == H2_GOAWAY]
        self.assertEqual(len(goaway), 1)
        self.assertEqual(int.from_bytes(goaway[0][3][4:8], "big"), 0)  # NO_ERROR
        half.wait_eof(timeout=30)
        self.assertTrue(half.eof)
        d.wait_log("connection closed: no HTTP/2 preface in time", timeout=10)
        # The kubelet's own connection is untouched.
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)

    def test_idle_strays_make_room_for_dial_back(self):
        """The connection cap full of idle strays (preface done, no stream) when the kubelet
        restarts: its dial-back closes the stray idle the longest instead of being refused."""
        n, d = self.up("two-gpus.conf")
        strays = []

        def stray():
            s = RawH2(n.socket())
            strays.append(s)
            self.addCleanup(s.close)
            s.frames_until(lambda f: f[0] == H2_SETTINGS and not f[1] & 1)

        # With the kubelet's connection, 64: the cap.
        for _ in range(63):
            stray()
        since = n.emu.mark()
        mark = d.mark()
        t = threading.Thread(target=n.emu.restart, kwargs={"downtime": "2s"})
        t.start()
        self.addCleanup(t.join)
        # The old kubelet's connection is gone: strays take its place first.
        d.wait_log("ListAndWatch stream ended by the kubelet", since=mark, timeout=10)
        stray()
        stray()
        reg = n.wait_register(since=since, timeout=15)
        ev = n.wait_devices(since=since, reg=reg["reg"], timeout=10)
        self.assertEqual(sorted(ev["healthy"]), sorted(TWO))
        d.wait_log("connection closed: idle at the connection limit, making room", since=mark)
        ev = n.emu.admit("p1", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)

    def test_malformed_header_field_resets_stream(self):
        """RFC 9113 8.2.1: NUL, CR or LF in a field: RST_STREAM(PROTOCOL_ERROR), and the
        connection goes on serving."""
        n, d = self.up("two-gpus.conf")
        for name, value in ((b"x-probe", b"a\r\nb"), (b"x-probe", b"a\0b"), (b"x\npr", b"ab")):
            h = RawH2(n.socket())
            self.addCleanup(h.close)
            sid = h.request("/v1beta1.DevicePlugin/ListAndWatch", extra=[(name, value)])
            frames = h.frames_until(lambda f, s=sid: f[2] == s and f[0] in (H2_RST_STREAM,
                                                                             H2_HEADERS))
            last = frames[-1]
            self.assertEqual(last[0], H2_RST_STREAM, f"{name!r}: {value!r}: {frames}")
            self.assertEqual(int.from_bytes(last[3], "big"), 1)  # PROTOCOL_ERROR
            self.assertFalse([f for f in frames if f[0] == H2_GOAWAY])
        self.assertTrue(d.alive())
        n.emu.assert_no_empty_list()

    def test_allocate_device_id_with_nul(self):
        """"GPU-...\\0junk" is not GPU-...: INVALID_ARGUMENT naming it."""
        n, d = self.up("two-gpus.conf")
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        r = c.allocate([TWO[0] + "\0junk"])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn("NUL", r.details)
        self.assertIn(TWO[0], r.details)
        r = c.allocate([TWO[0]])
        self.assertEqual(r.code, "OK", r)

    def test_non_reading_watchers_stay_bounded(self):
        """Watchers that never read while a big gpumem list flaps: each holds at most the
        list being written and the newest one, so none reaches the per-connection buffer cap
        (today each grew to it and was cut: "too many buffered bytes")."""
        n = self.node("two-gpus.conf")
        d = n.start_daemon(config=gpumem_config())
        n.wait_register(resource=GPUMEM, timeout=10)
        n.wait_devices(resource=GPUMEM, timeout=10)
        size = n.emu.last_devices(GPUMEM)["size"]
        watchers = []
        for _ in range(4):
            w = RawH2(n.socket("nvidia-gpumem.sock"), rcvbuf=4096)
            self.addCleanup(w.close)
            w.list_and_watch()
            watchers.append(w)
        mark = d.mark()
        # Enough lists that a log of them would pass the 20 MiB buffer cap of each watcher.
        flaps = (24 << 20) // (2 * max(size, 1)) + 2
        for i in range(flaps):
            since = n.emu.mark()
            n.nvml.lost(i % 2)
            n.wait_devices(resource=GPUMEM, since=since, timeout=10,
                           pred=lambda e: e.get("unhealthy_count", 0) > 0)
            since = n.emu.mark()
            n.nvml.back(i % 2)
            n.wait_devices(resource=GPUMEM, since=since, timeout=10,
                           pred=lambda e: e.get("unhealthy_count", 0) == 0)
        self.assertEqual(d.find_logs("connection closed: too many buffered bytes", since=mark),
                         [])
        self.assertTrue(d.alive())


if __name__ == "__main__":
    main()
