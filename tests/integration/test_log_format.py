#!/usr/bin/python3
"""--log-format=json (issue 21): the real daemon on the fake NVML writes one JSON object per
line, every line of its stderr, each with the logfmt line's fields (ts, level, module, msg and
the tail's keys, all strings); edgegpu.logFormat in the config file does the same, and a
reload that changes it switches the format of the lines that follow."""

import json
import os
import signal

from common import NodeTest, main
from edgegpu import wait_until


def parse_json_lines(lines):
    recs = []
    for line in lines:
        rec = json.loads(line)  # raises on anything that is not one JSON value
        assert isinstance(rec, dict), line
        for k in ("ts", "level", "msg"):
            assert isinstance(rec.get(k), str), f"{k} missing: {line}"
        assert all(isinstance(v, str) for v in rec.values()), line
        recs.append(rec)
    return recs


class LogFormatTest(NodeTest):
    def test_json_flag(self):
        n, d = self.up(flags=["--log-format=json"])
        # An XID: a warning with a tail (device=, gpu=, reason=) from the monitor's thread.
        ev = n.emu.mark()
        n.nvml.xid(0, 79)
        n.wait_devices(unhealthy_count=1, since=ev, timeout=10)
        wait_until(lambda: any("critical xid 79" in line for line in d.lines), timeout=10,
                   what="the XID's log line")
        lines = list(d.lines)
        recs = parse_json_lines(lines)
        self.assertGreater(len(recs), 3)
        xid = [r for r in recs if r["msg"] == "gpu unhealthy"]
        self.assertTrue(xid, "\n".join(lines))
        # the tail's keys are members with their values unquoted, not part of msg
        self.assertEqual({k: xid[0][k] for k in ("level", "module", "gpu", "reason")},
                         {"level": "warn", "module": "gpu", "gpu": "0",
                          "reason": "critical xid 79"})

    def test_config_and_reload(self):
        n = self.node()
        path = os.path.join(n.root, "config.yaml")
        n.write_config("version: v1\nedgegpu:\n  logFormat: json\n", path)
        d = n.start_daemon(config=path)
        n.wait_register(timeout=10)
        n.wait_devices(healthy_count=2, timeout=10)
        wait_until(lambda: len(d.lines) > 2, timeout=10, what="log lines")
        before = len(d.lines)
        parse_json_lines(d.lines[:before])

        n.write_config("version: v1\nedgegpu:\n  logFormat: logfmt\n", path)
        os.kill(d.pid, signal.SIGHUP)
        wait_until(lambda: any(line.startswith("ts=") for line in d.lines[before:]),
                   timeout=10, what="a logfmt line after the reload")
        # From the first logfmt line on, none is JSON again.
        after = d.lines[before:]
        first = next(i for i, line in enumerate(after) if line.startswith("ts="))
        self.assertFalse([line for line in after[first:] if line.startswith("{")], after)


if __name__ == "__main__":
    main()
