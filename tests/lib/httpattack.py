"""Hostile HTTP clients against the metrics port, and the kubelet's liveness probe (issue 16,
item 1). Each attack is one of the five ways that once held every connection slot, so that
/healthz went unanswered and a livenessProbe restarted a healthy plugin:

  drip        16 clients sending a request header one byte every 2 s (an idle timeout never
              fires), reconnecting when cut
  drip-many   the same from 16 source addresses (127.0.0.2-17), past any per-address limit
  pipeline    16 clients pipelining 40 GET /metrics each and never reading an answer
  tarpit      16 clients in a loop, a fresh connection per GET /metrics, waiting for the
              answer: past the scrape budget each waits in the 429 tarpit
  keepalive   16 keep-alive scrapers in a loop, GET /metrics after GET /metrics

Used by tests/integration/test_http.py (the probes must all be answered) and bench/run
(Allocate p99 while they run). Python stdlib only.
"""

import socket
import threading
import time

PATTERNS = ("drip", "drip-many", "pipeline", "tarpit", "keepalive")

# The patterns that hold their connections open (ready() drops a client while it reconnects);
# the others loop, and a client is ready once it has seen an answer.
HOLDING = ("drip", "drip-many", "pipeline")

TCP_ESTABLISHED = 1  # tcpi_state, the first byte of struct tcp_info

METRICS = b"GET /metrics HTTP/1.1\r\nHost: attacker\r\n\r\n"
# The kubelet's HTTP prober: a fresh connection per probe, keep-alives off.
PROBE = (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kube-probe/1.30\r\n"
         b"Accept: */*\r\nConnection: close\r\n\r\n")


def probe(port, timeout):
    """One liveness probe as the kubelet sends it: the status code, or the error as a string
    (refused, reset, timed out) when no answer came within @timeout seconds."""
    end = time.monotonic() + timeout
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(PROBE)
            data = b""
            while b"\r\n" not in data:
                left = end - time.monotonic()
                if left <= 0:
                    return "timed out"
                s.settimeout(left)
                chunk = s.recv(4096)
                if not chunk:
                    return f"closed after {len(data)} bytes"
                data += chunk
            return int(data.split(b" ", 2)[1])
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def read_answer(f):
    """Reads one HTTP answer off the buffered reader @f: its status, or None at EOF."""
    line = f.readline()
    if not line:
        return None
    status = int(line.split()[1])
    length = 0
    while True:
        line = f.readline()
        if not line:
            return None
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        if line in (b"\r\n", b"\n"):
            break
    if len(f.read(length)) < length:
        return None
    return status


class Attack:
    """@n clients of @pattern against 127.0.0.1:@port, each on its own thread until stop().
    ready() is true once every client is in place (connected and at work; for the looping
    patterns, once it has seen an answer: for tarpit, a 429); closed counts the attack
    connections that ended (by the server, or by the client after its answer)."""

    def __init__(self, port, pattern, n=16):
        if pattern not in PATTERNS:
            raise ValueError(pattern)
        self.port, self.pattern, self.n = port, pattern, n
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ready = set()
        self.closed = 0
        self.answers = {}
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True)
                         for i in range(n)]

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        for t in self._threads:
            t.start()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def ready(self):
        with self._lock:
            return len(self._ready) == self.n

    def _mark(self, i, ready):
        with self._lock:
            if ready:
                self._ready.add(i)
            else:
                self._ready.discard(i)

    def _answer(self, status):
        with self._lock:
            self.answers[status] = self.answers.get(status, 0) + 1

    def _connect(self, i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self.pattern == "drip-many":
            s.bind((f"127.0.0.{2 + i}", 0))
        s.settimeout(5)
        s.connect(("127.0.0.1", self.port))
        return s

    def _client(self, i):
        while not self._stop.is_set():
            s = None
            try:
                s = self._connect(i)
                getattr(self, "_" + self.pattern.replace("-many", ""))(i, s)
            except OSError:
                pass
            finally:
                if self.pattern in HOLDING:
                    self._mark(i, False)
                if s is not None:
                    s.close()
                    with self._lock:
                        self.closed += 1
            # A refused connection is retried at once, as an attacker would; a breath lets
            # the thread see stop().
            self._stop.wait(0.01)

    def _wait_closed(self, s, seconds):
        """Waits @seconds (less on stop()) without reading a byte; True as soon as the server
        has ended @s (its FIN or reset seen: the TCP state is no longer ESTABLISHED)."""
        end = time.monotonic() + seconds
        while not self._stop.is_set():
            try:
                if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] != TCP_ESTABLISHED:
                    return True
            except OSError:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            self._stop.wait(min(left, 0.05))
        return True

    def _drip(self, i, s):
        header = b"GET /metrics HTTP/1.1\r\nHost: attacker\r\nX-Drip: " + b"a" * 8000
        sent = 0
        while not self._stop.is_set() and sent < len(header):
            s.sendall(header[sent:sent + 1])
            sent += 1
            self._mark(i, True)
            if self._wait_closed(s, 2):
                return

    def _pipeline(self, i, s):
        s.sendall(METRICS * 40)
        self._mark(i, True)
        # Never reads an answer; only notices the end of the connection.
        while not self._wait_closed(s, 1):
            pass

    def _tarpit(self, i, s):
        # One request per connection; the caller connects again at once.
        s.settimeout(10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: attacker\r\nConnection: close\r\n\r\n")
        status = read_answer(s.makefile("rb"))
        if status is not None:
            self._answer(status)
            if status == 429:
                self._mark(i, True)

    def _keepalive(self, i, s):
        s.settimeout(10)
        f = s.makefile("rb")
        while not self._stop.is_set():
            s.sendall(METRICS)
            status = read_answer(f)
            if status is None:
                return
            self._answer(status)
            self._mark(i, True)
