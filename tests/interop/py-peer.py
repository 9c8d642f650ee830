#!/usr/bin/python3
"""py-peer: the grpcio 1.51.1 (Debian python3-grpcio) side of the interop suite.

    py-peer.py server SOCK          serve edgegpu.interop.Test on the unix socket SOCK
    py-peer.py client SOCK CHECK    run one client check; prints "ok: ..." or why it failed

Run it with Debian's /usr/bin/python3 (the pyenv python3 has no grpc). interop_pb2 is
generated with protoc into a private temporary directory, or taken from $INTEROP_PB2_DIR.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))


def load_pb2():
    d = os.environ.get("INTEROP_PB2_DIR")
    if not d:
        d = tempfile.mkdtemp(prefix="interop-pb2-")
        subprocess.run(["protoc", "--proto_path=" + os.path.join(HERE, "proto"),
                        "--python_out=" + d, "interop.proto"], check=True)
        import atexit
        atexit.register(shutil.rmtree, d, True)
    sys.path.insert(0, d)
    import interop_pb2
    return interop_pb2


pb = load_pb2()
import grpc  # noqa: E402

SERVICE = "edgegpu.interop.Test"
ERR_MSG = "bad r\u00e9sum\u00e9: 100% done\t[x]"
BIG = 3 << 20
TAG_OPEN = -2
CODES = {c.value[0]: c for c in grpc.StatusCode}


def scale(sec):
    try:
        f = float(os.environ.get("INTEROP_TIMEOUT_SCALE", "1"))
    except ValueError:
        f = 1.0
    return sec * max(f, 1.0)


def pattern(n):
    return bytes(i % 251 for i in range(251)) * (n // 251) + bytes(i % 251 for i in range(n % 251))


def is_pattern(b):
    return b == pattern(len(b))


class Failed(Exception):
    pass


# --- server ---

class TestServicer:
    def __init__(self):
        self.lock = threading.Lock()
        self.open = 0
        self.peak = 0
        self.calls = 0
        self.tags = {}

    def begin(self, tag):
        with self.lock:
            self.open += 1
            self.calls += 1
            self.peak = max(self.peak, self.open)
            if tag:
                self.tags[tag] = TAG_OPEN

    def end(self, tag, code):
        with self.lock:
            self.open -= 1
            if tag:
                self.tags[tag] = code

    @staticmethod
    def waiter(context):
        ev = threading.Event()
        context.add_callback(ev.set)
        return ev

    @staticmethod
    def ended_code(context):
        rem = context.time_remaining()
        if rem is not None and rem <= 0:
            return grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
        return grpc.StatusCode.CANCELLED.value[0]

    def unary(self, req, context):
        code = 0
        self.begin(req.tag)
        try:
            ev = self.waiter(context)
            if req.sleep_ms and ev.wait(req.sleep_ms / 1000.0):
                code = self.ended_code(context)
                return pb.UnaryResponse()
            if req.status_code:
                code = req.status_code
                context.abort(CODES[req.status_code], req.status_message)
            return pb.UnaryResponse(payload=pattern(req.response_size),
                                    received=len(req.payload),
                                    received_ok=is_pattern(req.payload))
        finally:
            self.end(req.tag, code)

    def stream(self, req, context):
        code = 0
        self.begin(req.tag)
        try:
            ev = self.waiter(context)
            for i in range(req.count):
                if i and ev.wait(req.interval_ms / 1000.0):
                    code = self.ended_code(context)
                    return
                yield pb.StreamResponse(seq=i, payload=pattern(req.size))
            if req.hold_open:
                ev.wait()
                code = self.ended_code(context)
        except GeneratorExit:
            # grpcio closes the generator when the call is cancelled while it waits in yield.
            code = self.ended_code(context)
            raise
        finally:
            self.end(req.tag, code)

    def stats(self, req, context):
        self.begin("")
        try:
            with self.lock:
                r = pb.StatsResponse(streams=self.open, streams_peak=self.peak,
                                     calls=self.calls, tag_status=-1)
                if req.tag in self.tags:
                    r.tag_status = self.tags[req.tag]
                return r
        finally:
            self.end("", 0)


def run_server(sock):
    try:
        os.unlink(sock)
    except FileNotFoundError:
        pass
    svc = TestServicer()
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(
            svc.unary, request_deserializer=pb.UnaryRequest.FromString,
            response_serializer=pb.UnaryResponse.SerializeToString),
        "Stream": grpc.unary_stream_rpc_method_handler(
            svc.stream, request_deserializer=pb.StreamRequest.FromString,
            response_serializer=pb.StreamResponse.SerializeToString),
        "Stats": grpc.unary_unary_rpc_method_handler(
            svc.stats, request_deserializer=pb.StatsRequest.FromString,
            response_serializer=pb.StatsResponse.SerializeToString),
    }
    # 100 sleeping unary calls beside an open stream need a thread each.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=256))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_insecure_port("unix:" + sock)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print("grpcio server listening on", sock, flush=True)
    while not done.wait(1):
        pass
    server.stop(0)
    return 0


# --- client ---

class Client:
    def __init__(self, sock):
        self.ch = grpc.insecure_channel("unix:" + sock)
        grpc.channel_ready_future(self.ch).result(timeout=scale(10))
        self.unary = self.ch.unary_unary(
            "/%s/Unary" % SERVICE, request_serializer=pb.UnaryRequest.SerializeToString,
            response_deserializer=pb.UnaryResponse.FromString)
        self.stream = self.ch.unary_stream(
            "/%s/Stream" % SERVICE, request_serializer=pb.StreamRequest.SerializeToString,
            response_deserializer=pb.StreamResponse.FromString)
        self.stats = self.ch.unary_unary(
            "/%s/Stats" % SERVICE, request_serializer=pb.StatsRequest.SerializeToString,
            response_deserializer=pb.StatsResponse.FromString)

    def wait_tag(self, tag, *want):
        end = time.monotonic() + scale(5)
        last = -1
        while time.monotonic() < end:
            last = self.stats(pb.StatsRequest(tag=tag), timeout=scale(10)).tag_status
            if last in want:
                return last
            if last >= 0:
                raise Failed("server closed the call with status %d, want %s" % (last, want))
            time.sleep(0.05)
        raise Failed("server never closed the call (tag status %d)" % last)


def new_tag(check):
    return "py-%s-%d-%d" % (check, os.getpid(), random.getrandbits(48))


def verify_unary(r, sent, want):
    if len(r.payload) != want or not is_pattern(r.payload):
        raise Failed("response payload: %d bytes, want %d" % (len(r.payload), want))
    if r.received != sent or not r.received_ok:
        raise Failed("server received %d bytes (pattern ok %s), sent %d"
                     % (r.received, r.received_ok, sent))


def check_unary(c):
    t0 = time.monotonic()
    verify_unary(c.unary(pb.UnaryRequest(payload=pattern(1000), response_size=1000),
                         timeout=scale(10)), 1000, 1000)
    return "1000 bytes each way in %.1f ms" % ((time.monotonic() - t0) * 1000)


def check_error(c):
    try:
        c.unary(pb.UnaryRequest(status_code=3, status_message=ERR_MSG), timeout=scale(10))
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.INVALID_ARGUMENT and e.details() == ERR_MSG:
            return "code=%s message=%r" % (e.code(), e.details())
        raise Failed("got code=%s message=%r, want INVALID_ARGUMENT %r"
                     % (e.code(), e.details(), ERR_MSG))
    raise Failed("the call succeeded")


def check_big(c):
    t0 = time.monotonic()
    verify_unary(c.unary(pb.UnaryRequest(payload=pattern(BIG), response_size=BIG),
                         timeout=scale(20)), BIG, BIG)
    return "3 MiB each way in %.1f ms" % ((time.monotonic() - t0) * 1000)


def check_stream(c):
    t0 = time.monotonic()
    at = []
    for m in c.stream(pb.StreamRequest(count=3, interval_ms=1000, size=64), timeout=scale(20)):
        if m.seq != len(at) or len(m.payload) != 64 or not is_pattern(m.payload):
            raise Failed("message %d: seq %d, %d bytes" % (len(at), m.seq, len(m.payload)))
        at.append(time.monotonic() - t0)
    if len(at) != 3:
        raise Failed("got %d messages, want 3" % len(at))
    for i in (1, 2):
        if at[i] - at[i - 1] < 0.9:
            raise Failed("messages %d and %d only %.3f s apart" % (i - 1, i, at[i] - at[i - 1]))
    return "3 messages at %s s, then OK" % ", ".join("%.3f" % t for t in at)


def check_cancel(c):
    tag = new_tag("cancel")
    call = c.stream(pb.StreamRequest(count=1000000, interval_ms=50, size=16, hold_open=True,
                                     tag=tag))
    next(call)
    next(call)
    call.cancel()
    try:
        next(call)
        raise Failed("stream went on after cancel")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.CANCELLED:
            raise Failed("after cancel: %s" % e.code())
    return "server closed the stream with status %d" % c.wait_tag(tag, 1)


def check_concurrent(c):
    s0 = c.stats(pb.StatsRequest(), timeout=scale(10))
    if s0.streams_peak >= 101:
        raise Failed("server not fresh: peak already %d" % s0.streams_peak)
    tag = new_tag("concurrent")
    call = c.stream(pb.StreamRequest(count=1000000, interval_ms=100, size=16, hold_open=True,
                                     tag=tag))
    next(call)
    futs = [c.unary.future(pb.UnaryRequest(payload=pattern(10), response_size=10, sleep_ms=500),
                           timeout=scale(20)) for _ in range(100)]
    errs = []
    for f in futs:
        try:
            verify_unary(f.result(), 10, 10)
        except (grpc.RpcError, Failed) as e:
            errs.append(e)
    if errs:
        raise Failed("%d of 100 unary calls failed, first: %s" % (len(errs), errs[0]))
    next(call)
    s1 = c.stats(pb.StatsRequest(), timeout=scale(10))
    if s1.streams_peak < 101:
        raise Failed("server peak of open streams %d, want >= 101" % s1.streams_peak)
    call.cancel()
    c.wait_tag(tag, 1)
    return "100 unary ok beside an open stream; peak %d -> %d" % (s0.streams_peak,
                                                                    s1.streams_peak)


def check_deadline(c):
    tag = new_tag("deadline")
    t0 = time.monotonic()
    try:
        c.unary(pb.UnaryRequest(sleep_ms=3000, tag=tag), timeout=0.3)
        raise Failed("the call succeeded")
    except grpc.RpcError as e:
        el = time.monotonic() - t0
        if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
            raise Failed("got %s, want DEADLINE_EXCEEDED" % e.code())
    if el > scale(2):
        raise Failed("DEADLINE_EXCEEDED only after %.3f s" % el)
    code = c.wait_tag(tag, 1, 4)
    return "DEADLINE_EXCEEDED after %.3f s; server closed the call with %d" % (el, code)


CHECKS = {
    "unary": check_unary, "error": check_error, "big": check_big, "stream": check_stream,
    "cancel": check_cancel, "concurrent": check_concurrent, "deadline": check_deadline,
}


def run_client(sock, name):
    fn = CHECKS.get(name)
    if fn is None:
        print("unknown check %r" % name)
        return 2
    try:
        c = Client(sock)
        try:
            print("ok:", fn(c))
        finally:
            c.ch.close()
        return 0
    except (Failed, grpc.RpcError, grpc.FutureTimeoutError, StopIteration) as e:
        if isinstance(e, grpc.RpcError):
            print("rpc error: %s %r" % (e.code(), e.details()))
        elif isinstance(e, grpc.FutureTimeoutError):
            print("channel never became ready")
        else:
            print(e or type(e).__name__)
        return 1


def main():
    a = sys.argv
    if len(a) >= 3 and a[1] == "server":
        return run_server(a[2])
    if len(a) >= 4 and a[1] == "client":
        return run_client(a[2], a[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
