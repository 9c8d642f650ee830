#!/usr/bin/python3
"""The interop suite: our gRPC layer (c-peer) against grpc-go, grpcio and grpc-js, both ways.

    run.py --c-peer PATH --go-peer PATH [--valgrind] [--only REGEX] [--keep] [-j N]

Starts servers on unix sockets in a private temporary directory, runs client checks against
them (one process per check) and prints one line per check, `PASS name` or `FAIL name: why`,
then `N passed, N failed`. Exits 1 on any failure. Nothing is skipped: a peer that cannot run
(no node_modules, no c-peer) fails its checks.

--valgrind runs every C server and C client under valgrind (leaks of kind definite or indirect
and every memory error fail) and stretches the timeouts; the checks that involve no C code
(the raw client against grpc-go) are left out there.

Only Debian's /usr/bin/python3 standard library is needed here.
"""

import argparse
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
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
PY_PEER = os.path.join(HERE, "py-peer.py")
JS_DIR = os.path.join(HERE, "js")
JS_PEER = os.path.join(JS_DIR, "peer.js")
PYTHON = "/usr/bin/python3"

# Real clients against a server: the same checks in every peer.
CLIENT_CHECKS = ["unary", "error", "big", "stream", "cancel", "concurrent", "deadline"]
# Our client (unary only) against a server.
C_CLIENT_CHECKS = ["unary", "error", "big", "deadline", "parallel", "cancel"]
STREAM_FAULTS = ["content-type", "unknown-path", "compressed", "oversized", "method",
                 "server-deadline", "authority-path"]
CONN_FAULTS = ["truncated-frame", "oversized-frame", "bad-preface"]
OUR_MAX_RECV = 16 << 20  # grpc_limits default
GO_MAX_RECV = 4 << 20    # grpc-go server default

VALGRIND = ["valgrind", "--error-exitcode=1", "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect", "--show-leak-kinds=definite,indirect",
            "--num-callers=30"]


class Suite:
    def __init__(self, args):
        self.args = args
        self.scale = 6.0 if args.valgrind else 1.0
        self.tmp = tempfile.mkdtemp(prefix="edgegpu-interop-")
        self.lock = threading.Lock()
        self.passed = 0
        self.failed = 0
        self.seq = 0
        self.only = re.compile(args.only) if args.only else None
        self.env = dict(os.environ, INTEROP_TIMEOUT_SCALE=str(self.scale),
                        INTEROP_PB2_DIR=os.path.join(self.tmp, "pb2"))
        os.makedirs(self.env["INTEROP_PB2_DIR"])
        subprocess.run(["protoc", "--proto_path=" + os.path.join(HERE, "proto"),
                        "--python_out=" + self.env["INTEROP_PB2_DIR"], "interop.proto"],
                       check=True)

    # --- bookkeeping ---

    def wanted(self, name):
        return self.only is None or self.only.search(name)

    def report(self, name, ok, why=""):
        with self.lock:
            if ok:
                self.passed += 1
                print("PASS %s%s" % (name, "  (%s)" % why if why and self.args.verbose else ""),
                      flush=True)
            else:
                self.failed += 1
                print("FAIL %s: %s" % (name, why), flush=True)

    def path(self, stem):
        with self.lock:
            self.seq += 1
            return os.path.join(self.tmp, "%s-%d" % (stem, self.seq))

    # --- commands ---

    def cmd(self, peer, *args):
        """The command line for @peer ("c", "go", "py", "js") with @args, and a valgrind log."""
        if peer == "c":
            if not self.args.c_peer or not os.access(self.args.c_peer, os.X_OK):
                return None, None, "c-peer not built (%s)" % self.args.c_peer
            if self.args.valgrind:
                log = self.path("valgrind") + ".log"
                return VALGRIND + ["--log-file=" + log, self.args.c_peer] + list(args), log, None
            return [self.args.c_peer] + list(args), None, None
        if peer == "go":
            if not self.args.go_peer or not os.access(self.args.go_peer, os.X_OK):
                return None, None, "go-peer not built (%s)" % self.args.go_peer
            return [self.args.go_peer] + list(args), None, None
        if peer == "py":
            return [PYTHON, PY_PEER] + list(args), None, None
        if peer == "js":
            if not os.path.isdir(os.path.join(JS_DIR, "node_modules", "@grpc", "grpc-js")):
                return None, None, "tests/interop/js/node_modules missing: run scripts/deps"
            return ["node", JS_PEER] + list(args), None, None
        raise ValueError(peer)

    @staticmethod
    def valgrind_errors(log):
        """None when the valgrind log is clean, else a short excerpt."""
        try:
            text = open(log, errors="replace").read()
        except OSError as e:
            return "no valgrind log: %s" % e
        m = re.search(r"ERROR SUMMARY: (\d+) errors", text)
        if m and m.group(1) == "0":
            return None
        lines = [ln.split(" ", 1)[-1] for ln in text.splitlines() if ln.startswith("==")]
        # Skip valgrind's banner (up to "Parent PID") and blank lines.
        start = next((i + 1 for i, ln in enumerate(lines) if ln.startswith("Parent PID")), 0)
        body = [ln for ln in lines[start:] if ln.strip()][:40]
        return "valgrind: %s; log %s:\n    %s" % (m.group(0) if m else "no summary", log,
                                                  "\n    ".join(body))

    def run_client(self, peer, args, timeout):
        """Runs one client process; returns (ok, detail)."""
        cmd, vlog, err = self.cmd(peer, *args)
        if err:
            return False, err
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout * self.scale, env=self.env, text=True,
                               errors="replace")
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"")
            return False, "timed out after %.0f s; output %r" % (timeout * self.scale, out[-300:])
        out = p.stdout.strip().splitlines()
        last = out[-1] if out else ""
        if vlog:
            v = self.valgrind_errors(vlog)
            if v:
                return False, "%s (check said %r)" % (v, last)
        if p.returncode != 0:
            tail = p.stderr.strip().splitlines()[-5:]
            return False, "%s (exit %d)%s" % (last or "no output", p.returncode,
                                             "; stderr: " + " | ".join(tail) if tail else "")
        return True, last

    # --- servers ---

    def start_server(self, peer, label):
        sock = self.path("%s.sock" % label)
        cmd, vlog, err = self.cmd(peer, "server", sock)
        if err:
            return None, err
        logf = open(sock + ".log", "w")
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=self.env,
                             start_new_session=True)
        srv = {"peer": peer, "proc": p, "sock": sock, "log": sock + ".log", "vlog": vlog,
               "logf": logf}
        end = time.monotonic() + 15 * self.scale
        while time.monotonic() < end:
            if p.poll() is not None:
                return None, "server exited (%d) at start: %s" % (p.returncode,
                                                                 self.tail(srv["log"]))
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                s.close()
                return srv, None
            except OSError:
                time.sleep(0.05)
        self.kill(srv)
        return None, "server not listening after %.0f s: %s" % (15 * self.scale,
                                                               self.tail(srv["log"]))

    @staticmethod
    def tail(path, n=8):
        try:
            lines = open(path, errors="replace").read().strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    @staticmethod
    def kill(srv):
        try:
            os.killpg(srv["proc"].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        srv["proc"].wait()
        srv["logf"].close()

    def stop_server(self, srv, name):
        """SIGTERM; our server must drain and exit 0 (and be clean under valgrind)."""
        p = srv["proc"]
        if p.poll() is not None:
            srv["logf"].close()
            if srv["peer"] == "c":
                self.report(name, False, "server died during the checks (exit %d): %s"
                            % (p.returncode, self.tail(srv["log"])))
            return
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=10 * self.scale)
        except subprocess.TimeoutExpired:
            self.kill(srv)
            if srv["peer"] == "c":
                self.report(name, False, "no exit within %.0f s of SIGTERM: %s"
                            % (10 * self.scale, self.tail(srv["log"])))
            return
        srv["logf"].close()
        if srv["peer"] != "c":
            return
        v = self.valgrind_errors(srv["vlog"]) if srv["vlog"] else None
        if v:
            self.report(name, False, v)
        elif rc != 0:
            self.report(name, False, "exit %d after SIGTERM: %s" % (rc, self.tail(srv["log"])))
        else:
            self.report(name, True, "exit 0 after SIGTERM")

    def server_dead(self, srv):
        if srv["proc"].poll() is None:
            return None
        return "server died (exit %d): %s" % (srv["proc"].returncode, self.tail(srv["log"]))

    # --- groups: one server, the checks run against it ---

    def group_clients(self, server, client, checks):
        """A fresh @server; @client runs @checks against it; then the server stops."""
        prefix = "%s-server/%s-client" % (server, client)
        names = ["%s %s" % (prefix, c) for c in checks]
        if not any(self.wanted(n) for n in names):
            return
        srv, err = self.start_server(server, "%s-%s" % (server, client))
        if err:
            for n in names:
                self.report(n, False, err)
            return
        try:
            for check, name in zip(checks, names):
                if not self.wanted(name):
                    continue
                dead = self.server_dead(srv)
                if dead:
                    self.report(name, False, dead)
                    continue
                ok, detail = self.run_client(client, ["client", srv["sock"], check], 60)
                if ok:
                    dead = self.server_dead(srv)
                    if dead:
                        ok, detail = False, dead
                self.report(name, ok, detail)
        finally:
            self.stop_server(srv, "%s shutdown" % prefix)

    def judge_stream_fault(self, server, check, rep):
        """Returns None when the raw report shows the right answer, else why not."""
        if rep.get("error"):
            return rep["error"]
        f = rep["fault"]
        got = "status=%s grpc-status=%s grpc-message=%r rst=%s" % (
            f.get("status") or "-", f.get("grpc_status") or "-", f.get("grpc_message"),
            f.get("rst") or "-")
        want = None
        if check == "content-type":
            if server == "go":  # grpc-go 1.33.3 resets the stream
                want = f.get("rst") == "PROTOCOL_ERROR", "RST_STREAM PROTOCOL_ERROR"
            else:
                want = (f.get("status") == "415" and f.get("grpc_status") == "3",
                        "HTTP 415 with grpc-status 3")
        elif check == "unknown-path":
            want = (f.get("status") == "200" and f.get("grpc_status") == "12",
                    "grpc-status 12 (UNIMPLEMENTED)")
        elif check == "compressed":
            want = (f.get("status") == "200" and f.get("grpc_status") == "13",
                    "grpc-status 13 (INTERNAL)")
        elif check == "oversized":
            want = (f.get("status") == "200" and f.get("grpc_status") == "8",
                    "grpc-status 8 (RESOURCE_EXHAUSTED)")
        elif check == "method":
            want = f.get("status") == "405", "HTTP 405"
        elif check == "server-deadline":
            ms = f.get("ms", 0)
            timely = 150 <= ms <= 1500 * self.scale
            want = ((f.get("grpc_status") == "4" or f.get("rst") == "CANCEL") and timely,
                    "grpc-status 4 or RST_STREAM CANCEL about 200 ms after the request "
                    "(got it after %d ms)" % ms)
        elif check == "authority-path":
            want = (f.get("status") == "200" and f.get("grpc_status") == "0"
                    and f.get("messages") == 1 and not f.get("rst"),
                    "a normal answer (grpc-status 0, one message) to :authority = socket path")
        if not want[0]:
            return "got %s, want %s" % (got, want[1])
        if f.get("messages") and check != "authority-path":
            return "got %s and %d response messages" % (got, f["messages"])
        if rep.get("sibling_before"):
            return "fault answered right, but the stream opened before it failed: %s" % (
                rep["sibling_before"])
        if rep.get("sibling_after"):
            return "fault answered right, but a call after it failed: %s" % rep["sibling_after"]
        return None

    def judge_conn_fault(self, server, check, rep):
        if rep.get("error"):
            return rep["error"]
        if rep.get("other_before"):
            return "the other connection failed before the fault: %s" % rep["other_before"]
        g = rep.get("goaway")
        want = "FRAME_SIZE_ERROR" if check in ("truncated-frame", "oversized-frame") \
            else "PROTOCOL_ERROR"
        if server != "go":  # grpc-go closes such connections without GOAWAY
            if not g:
                return "no GOAWAY (connection %s)" % (
                    "closed: " + rep.get("read_err", "") if rep.get("closed") else "left open")
            if g.get("code") != want:
                return "GOAWAY %s (debug %r), want %s" % (g.get("code"), g.get("debug"), want)
        if not rep.get("closed"):
            return "the server did not close the connection within 5 s"
        if rep.get("other_after"):
            return "a connection opened before the fault broke: %s" % rep["other_after"]
        return None

    def judge_conn_event(self, srv, pos, check):
        """Our server reports each connection fault once through its event callback."""
        want = 6 if check in ("truncated-frame", "oversized-frame") else 1
        end = time.monotonic() + 1 * self.scale
        while True:
            with open(srv["log"], errors="replace") as f:
                f.seek(pos)
                events = re.findall(r"event=(\w+) conn=\d+ h2_error=(\d+)", f.read())
            if events or time.monotonic() > end:
                break
            time.sleep(0.05)
        if events != [("protocol", str(want))]:
            return "GOAWAY right, but the server's event callback reported %s, want one " \
                "protocol event with h2_error=%d" % (events or "nothing", want)
        return None

    def group_raw(self, server, prefix):
        checks = STREAM_FAULTS + CONN_FAULTS
        names = ["%s/raw %s" % (prefix, c) for c in checks]
        if not any(self.wanted(n) for n in names):
            return
        srv, err = self.start_server(server, "%s-raw" % server)
        if err:
            for n in names:
                self.report(n, False, err)
            return
        try:
            for check, name in zip(checks, names):
                if not self.wanted(name):
                    continue
                if server == "go" and check == "method":
                    continue  # grpc-go 1.33.3 does not look at :method
                log_pos = os.path.getsize(srv["log"])
                args = ["raw", srv["sock"], check]
                if check == "oversized":
                    args.append(str(GO_MAX_RECV if server == "go" else OUR_MAX_RECV))
                ok, detail = self.run_client("go", args, 60)
                why = None
                try:
                    rep = json.loads(detail)
                    if check in CONN_FAULTS:
                        why = self.judge_conn_fault(server, check, rep)
                    else:
                        why = self.judge_stream_fault(server, check, rep)
                except ValueError:
                    why = "raw client: %s" % detail
                if why is None and server == "c" and check in CONN_FAULTS:
                    why = self.judge_conn_event(srv, log_pos, check)
                why = why or self.server_dead(srv)
                self.report(name, why is None, why or detail)
        finally:
            self.stop_server(srv, "%s/raw shutdown" % prefix)

    def group_c_transport(self):
        """Our client's errors when there is no server."""
        name = "c-client missing"
        if self.wanted(name):
            ok, detail = self.run_client("c", ["client", self.path("missing.sock"), "missing"], 30)
            self.report(name, ok, detail)
        name = "c-client refused"
        if self.wanted(name):
            dead = self.path("refused.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(dead)
            s.close()  # the file stays, nobody listens
            ok, detail = self.run_client("c", ["client", dead, "refused"], 30)
            self.report(name, ok, detail)

    def group_drain(self):
        """Graceful shutdown with grpc-go connected: SIGTERM while a stream is held open and a
        unary call is in flight; the stream must end OK, the call complete, the server exit 0."""
        name = "c-server/go-client drain"
        if not self.wanted(name):
            return
        srv, err = self.start_server("c", "c-drain")
        if err:
            self.report(name, False, err)
            return
        cmd, _, err = self.cmd("go", "client", srv["sock"], "drain")
        if err:
            self.report(name, False, err)
            self.stop_server(srv, name + " shutdown")
            return
        cl = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=self.env, text=True, errors="replace")
        lines = []
        timer = threading.Timer(20 * self.scale, cl.kill)
        timer.start()
        try:
            for ln in cl.stdout:
                lines.append(ln.strip())
                if ln.strip() == "ready":
                    srv["proc"].send_signal(signal.SIGTERM)
                    break
            rest = cl.stdout.read()
            lines += rest.strip().splitlines()
            rc = cl.wait()
        finally:
            timer.cancel()
        self.report(name, rc == 0 and "ready" in lines,
                    (lines[-1] if lines else "no output") + ("" if rc == 0 else " (exit %d)" % rc))
        try:
            src = srv["proc"].wait(timeout=10 * self.scale)
        except subprocess.TimeoutExpired:
            src = None
        if src is None:
            self.kill(srv)
            self.report(name + " shutdown", False, "server still running after the drain: %s"
                        % self.tail(srv["log"]))
            return
        srv["logf"].close()
        v = self.valgrind_errors(srv["vlog"]) if srv["vlog"] else None
        self.report(name + " shutdown", src == 0 and not v,
                    v or "exit %d after SIGTERM: %s" % (src, self.tail(srv["log"])))

    def run(self):
        groups = [self.group_drain]
        for client in ("go", "py", "js"):
            groups.append(lambda client=client: self.group_clients("c", client, CLIENT_CHECKS))
        for server in ("go", "py", "js", "c"):
            groups.append(lambda server=server: self.group_clients(server, "c", C_CLIENT_CHECKS))
        groups.append(lambda: self.group_raw("c", "c-server"))
        groups.append(self.group_c_transport)
        if not self.args.valgrind:
            # Calibration: the raw client against grpc-go, whose answers are known.
            groups.append(lambda: self.group_raw("go", "ref go-server"))
        if self.args.peers:
            # Development: the three peers against one another (no C involved).
            for server in ("go", "py", "js"):
                for client in ("go", "py", "js"):
                    groups.append(lambda s=server, c=client:
                                  self.group_clients(s, c, CLIENT_CHECKS))
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.args.jobs) as ex:
            for f in [ex.submit(g) for g in groups]:
                f.result()
        el = time.monotonic() - t0
        print("%d passed, %d failed (%.1f s%s)" % (self.passed, self.failed, el,
                                                   ", valgrind" if self.args.valgrind else ""))
        if self.args.keep or self.failed:
            print("logs kept in %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, True)
        return 1 if self.failed or (self.passed == 0) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c-peer", default=os.environ.get("INTEROP_C_PEER"))
    ap.add_argument("--go-peer", default=os.environ.get("INTEROP_GO_PEER"))
    ap.add_argument("--valgrind", action="store_true")
    ap.add_argument("--peers", action="store_true",
                    help="also run the peers against one another (no C involved)")
    ap.add_argument("--only", help="run only checks whose name matches this regex")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="server groups run at once")
    ap.add_argument("-v", "--verbose", action="store_true", help="show details of passes")
    args = ap.parse_args()
    for opt in ("c_peer", "go_peer"):
        if getattr(args, opt):
            setattr(args, opt, os.path.abspath(getattr(args, opt)))
    return Suite(args).run()


if __name__ == "__main__":
    sys.exit(main())
