#!/usr/bin/python3
"""`edgegpu doctor --host-root DIR` on a hostile host root (issue 16, item 5).

DIR is the node's filesystem, and whoever writes it may be hostile. The doctor must resolve
every path inside DIR as if chroot(2)ed there, and never reach outside it:

- links out, absolute (this machine's path of a file outside DIR) and relative ("../" past
  DIR's top), for each kind of thing the doctor uses: files it reads, the NVML library it
  dlopens, directories it lists (systemd units, the device-plugins directory, CDI specs) and
  unix sockets it connects to (kubelet, plugins, pod-resources, Docker, containerd). What lies
  outside carries a marker that must not show in the report, and every socket outside has a
  listener that must see no connection;
- an absolute link the host itself uses (/var/lib/kubelet -> /data/kubelet, /var/run -> /run)
  followed inside DIR;
- a FIFO in place of every file the doctor reads: the doctor finishes and names the file as
  not read;
- invalid UTF-8 in every string that reaches --json: the output decodes as strict UTF-8 (no
  surrogates either) and parses;
- a 100,000-key JSON file: read, and the key after them found (tests/unit/test-ytree.c
  asserts the growth is linear).

The doctor runs to completion within a bound generous for a loaded machine under ASan: that
it finishes at all is the behaviour (it hung forever on a FIFO). Runs as root (mknod).
Environment (tests/doctor/meson.build): EDGEGPU, FAKE_NVML.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lib"))
sys.path.insert(0, HERE)
from edgegpu import base_env, sanitizer_report  # noqa: E402
from fixes import assert_documented  # noqa: E402
from hostroot import LIB_DIR, HostRoot, kmod_text  # noqa: E402

MARK = "999.77.55"  # in everything outside DIR: must never show in a report
RUN_TIMEOUT = 120   # seconds; the doctor's own bound is --timeout-ms per NVML call or socket
NOT_READ = "not a regular file"


class Report:
    """A finished doctor run: rc, raw stdout bytes, the parsed document (--json)."""

    def __init__(self, proc):
        self.rc = proc.returncode
        self.raw = proc.stdout
        self.stderr = proc.stderr.decode("utf-8", "replace")
        self.doc = json.loads(self.raw.decode("utf-8")) if self.raw.strip() else None
        if self.doc:
            assert_documented(self.doc)

    def check(self, cid):
        for c in self.doc["checks"]:
            if c["id"] == cid:
                return c
        raise AssertionError(f"no check {cid}")

    def lines(self):
        """Every summary and evidence line, with its check id."""
        for c in self.doc["checks"]:
            yield c["id"], c["summary"]
            for e in c["evidence"]:
                yield c["id"], e

    def text(self):
        return self.raw.decode("utf-8", "replace")

    def __repr__(self):
        return f"<doctor rc={self.rc}\n{self.text()}\n{self.stderr}>"


def run_doctor(h, *args):
    """`edgegpu doctor --host-root DIR --json ARGS` as bytes, to completion."""
    argv = [os.environ["EDGEGPU"], "doctor", "--host-root", h.root, "--json",
            "--timeout-ms", "3000", "--metrics-address", "127.0.0.1:1"] + list(args)
    p = subprocess.run(argv, env=base_env({"EDGEGPU_FAKE_NVML_FIXTURE": h.nvml_fixture}),
                       capture_output=True, timeout=RUN_TIMEOUT)
    rep = sanitizer_report(p.stderr.decode("utf-8", "replace"))
    if rep:
        raise AssertionError(f"edgegpu doctor (rc={p.returncode}): {rep}")
    return Report(p)


class Listener:
    """A unix socket that listens and never accepts: after the doctor ran, a connection
    waiting in its backlog says the doctor reached it. Waits for nothing."""

    def __init__(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.bind(path)
        self.s.listen(16)
        self.s.setblocking(False)

    def connected(self):
        try:
            c, _ = self.s.accept()
        except BlockingIOError:
            return False
        c.close()
        return True

    def close(self):
        self.s.close()


class Hostile(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="doctor-hostile-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.outside)
        self.n = 0

    def host(self, **kw):
        self.n += 1
        h = HostRoot(os.path.join(self.tmp, f"h{self.n}")).healthy(gpus=1, **kw)
        h.containerd_nvidia()
        return h

    def listener(self, path):
        s = Listener(path)
        self.addCleanup(s.close)
        return s

    def out_file(self, name, text, mode=0o644):
        p = os.path.join(self.outside, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.chmod(p, mode)
        return p

    @staticmethod
    def link_out(h, host_path, target, how):
        """`host_path` in DIR -> `target` outside DIR: "abs" with this machine's absolute
        path of it, "rel" with enough ../ to climb out of DIR."""
        full = h.path(host_path)
        h.remove(host_path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target if how == "abs" else os.path.relpath(target, os.path.dirname(full)),
                   full)
        return h

    def assertNoMark(self, r):
        self.assertNotIn(MARK, r.text(), r)
        self.assertNotIn(self.outside, r.text(), r)

    def assertLine(self, r, *parts):
        hits = [(cid, ln) for cid, ln in r.lines() if all(p in ln for p in parts)]
        self.assertTrue(hits, f"no line with {parts}: {r}")
        return hits

    def assertValidUtf8Json(self, r):
        r.raw.decode("utf-8")  # strict: also refuses encoded surrogates (ED A0 80)
        self.assertNotRegex(r.raw, rb"\\u[dD][89abAB]", "a lone surrogate escape")
        self.assertIsNotNone(r.doc)


class LinksOut(Hostile):
    def test_files_read(self):
        """Each file read through a link out finds nothing outside."""
        ver = self.out_file("version", kmod_text(MARK))
        rel = self.out_file("nv_tegra_release", f"# R99 (release), REVISION: {MARK}\n")
        osrel = self.out_file("osrelease", f"{MARK}-outside\n")
        pid = self.out_file("pid", "4243\n")
        daemon = self.out_file("daemon.json", json.dumps(
            {"runtimes": {"nvidia": {"path": f"/{MARK}/nvidia-container-runtime"}}}))
        arch = self.out_file("arch", f"{MARK}\n")
        for how in ("abs", "rel"):
            with self.subTest(how=how):
                h = self.host()
                h.gpus(1, extra="mismatch = on\n")  # NVML reads the module version too
                self.link_out(h, "/proc/driver/nvidia/version", ver, how)
                self.link_out(h, "/etc/nv_tegra_release", rel, how)
                self.link_out(h, "/proc/sys/kernel/osrelease", osrel, how)
                self.link_out(h, "/run/nvidia-persistenced/nvidia-persistenced.pid", pid, how)
                self.link_out(h, "/etc/docker/daemon.json", daemon, how)
                self.link_out(h, "/proc/sys/kernel/arch", arch, how)
                r = run_doctor(h)
                self.assertNoMark(r)
                self.assertLine(r, "kernel module: unknown (/proc/driver/nvidia/version, missing)")
                self.assertEqual(r.check("driver.tegra")["status"], "skip", r)
                self.assertLine(r, "kernel release: unknown (/proc/sys/kernel/osrelease: missing)")
                self.assertEqual(r.check("driver.persistence")["status"], "warn", r)
                self.assertEqual(r.check("runtime.docker")["status"], "skip", r)

    def test_nvml_library(self):
        """The library dlopen'ed is never one outside: the link, or the directory, leads out."""
        lib = os.path.join(self.outside, "lib", f"libnvidia-ml.so.{MARK}")
        os.makedirs(os.path.dirname(lib))
        shutil.copyfile(os.environ["FAKE_NVML"], lib)
        os.symlink(os.path.basename(lib), os.path.join(self.outside, "lib", "libnvidia-ml.so.1"))
        for what in ("file", "dir"):
            for how in ("abs", "rel"):
                with self.subTest(what=what, how=how):
                    h = self.host()
                    if what == "file":
                        self.link_out(h, f"{LIB_DIR}/libnvidia-ml.so.1", lib, how)
                    else:
                        self.link_out(h, LIB_DIR, os.path.dirname(lib), how)
                    r = run_doctor(h)
                    self.assertNoMark(r)
                    c = r.check("driver.nvml")
                    self.assertEqual(c["status"], "fail", r)
                    self.assertRegex(c["summary"], "^NVML not found")

    def test_nvml_library_found_inside_is_named(self):
        """The library found inside DIR through an absolute link is loaded and named by its
        host path (not the /proc/self/fd/N it was opened through)."""
        h = self.host()
        h.symlink(f"{LIB_DIR}/libnvidia-ml.so.1", "/opt/nvidia/libnvidia-ml.so.1")
        h.symlink("/opt/nvidia/libnvidia-ml.so.1", "/usr/lib/libnvidia-ml.so.550.54.15")
        shutil.move(h.path(f"{LIB_DIR}/libnvidia-ml.so.550.54.15"),
                    h.path("/usr/lib/libnvidia-ml.so.550.54.15"))
        r = run_doctor(h)
        c = r.check("driver.nvml")
        self.assertEqual(c["status"], "pass", r)
        self.assertIn("library: /usr/lib/libnvidia-ml.so.550.54.15", c["evidence"])
        self.assertNotIn("/proc/self/fd", r.text())
        self.assertEqual(r.check("driver.versions")["status"], "pass", r)

    def test_directories_listed(self):
        """systemd units, the device-plugins directory and the CDI specs: a directory that
        is a link out is not listed."""
        units = os.path.join(self.outside, "systemd")
        os.makedirs(os.path.join(units, "multi-user.target.wants"))
        self.out_file("systemd/edgecore.service", "[Unit]\n")
        os.symlink(os.path.join(units, "edgecore.service"),
                   os.path.join(units, "multi-user.target.wants", "edgecore.service"))
        plugins = os.path.join(self.outside, "device-plugins")
        os.makedirs(plugins)
        self.out_file(f"device-plugins/{MARK}.sock", "")
        cdi = os.path.join(self.outside, "cdi")
        os.makedirs(cdi)
        self.out_file("cdi/outside.yaml", f"cdiVersion: 0.5.0\nkind: outside.example/m{MARK}\n"
                      "devices:\n- name: x\n  containerEdits: {}\n")
        for how in ("abs", "rel"):
            with self.subTest(how=how):
                h = self.host()
                # The unit link itself inside DIR, its .wants directory a link out.
                h.remove("/etc/systemd/system")
                h.unit("edgecore.service")
                self.link_out(h, "/etc/systemd/system", units, how)
                h.dir("/var/lib/kubelet")
                self.link_out(h, "/var/lib/kubelet/device-plugins", plugins, how)
                self.link_out(h, "/etc/cdi", cdi, how)
                r = run_doctor(h)
                self.assertNoMark(r)
                self.assertLine(r, "edgecore.service: installed, not enabled")
                self.assertEqual(r.check("plugin.dir")["status"], "fail", r)
                self.assertLine(r, "/etc/cdi: ")

    def test_sockets(self):
        """kubelet.sock, a plugin socket, pod-resources, Docker's and containerd's sockets:
        each a link out to a listener, which must see no connection."""
        names = {
            "kubelet": "/var/lib/kubelet/device-plugins/kubelet.sock",
            "plugin": "/var/lib/kubelet/device-plugins/nvidia-gpu.sock",
            "podres": "/var/lib/kubelet/pod-resources/kubelet.sock",
            "docker": "/var/run/docker.sock",
            "containerd": "/run/containerd/containerd.sock",
        }
        for how in ("abs", "rel"):
            with self.subTest(how=how):
                h = self.host()
                h.dir("/var/lib/kubelet/device-plugins")
                ls = {}
                for k, p in names.items():
                    ls[k] = self.listener(os.path.join(self.outside, how, k + ".sock"))
                    self.link_out(h, p, ls[k].path, how)
                r = run_doctor(h, "--image", "docker.io/library/busybox:1")
                self.assertEqual({k: s.connected() for k, s in ls.items()},
                                 {k: False for k in ls}, r)
                self.assertNoMark(r)
                self.assertEqual(r.check("plugin.kubelet-socket")["status"], "fail", r)
                self.assertRegex(r.check("plugin.kubelet-socket")["summary"], "missing")

    def test_socket_dir_link_out(self):
        """The whole device-plugins directory a link out, to a kubelet that listens there."""
        for how in ("abs", "rel"):
            with self.subTest(how=how):
                h = self.host()
                out = os.path.join(self.outside, "dp-" + how)
                k = self.listener(os.path.join(out, "kubelet.sock"))
                h.dir("/var/lib/kubelet")
                self.link_out(h, "/var/lib/kubelet/device-plugins", out, how)
                r = run_doctor(h)
                self.assertFalse(k.connected(), r)
                self.assertEqual(r.check("plugin.dir")["status"], "fail", r)

    def test_root_and_dot_dot_links_stay_inside(self):
        """A link to this machine's "/" and one of "../" beyond count: both are DIR."""
        h = self.host()
        h.remove("/proc/driver/nvidia/version")
        h.symlink("/proc/driver/nvidia/version", "/" + "../" * 40 + "proc/driver/nvidia/v2")
        h.file("/proc/driver/nvidia/v2", kmod_text("550.54.15"))
        h.symlink("/etc/docker", "/")  # /etc/docker/daemon.json is DIR/daemon.json
        h.file("/daemon.json", json.dumps({"runtimes": {"nvidia": {
            "path": "/usr/bin/nvidia-container-runtime"}}, "default-runtime": "nvidia"}))
        r = run_doctor(h)
        self.assertLine(r, "kernel module: 550.54.15")
        self.assertEqual(r.check("runtime.docker")["status"], "pass", r)


class HostLinks(Hostile):
    """Absolute links the host itself has are followed inside DIR."""

    def test_var_lib_kubelet_on_another_disk(self):
        h = self.host()
        h.dir("/data/kubelet/device-plugins")
        h.symlink("/var/lib/kubelet", "/data/kubelet")
        k = self.listener(h.path("/data/kubelet/device-plugins/kubelet.sock"))
        p = self.listener(h.path("/data/kubelet/pod-resources/kubelet.sock"))
        r = run_doctor(h)
        self.assertEqual(r.check("plugin.dir")["status"], "pass", r)
        self.assertIn("/var/lib/kubelet/device-plugins: a directory",
                      r.check("plugin.dir")["evidence"])
        self.assertEqual(r.check("plugin.kubelet-socket")["status"], "pass", r)
        self.assertTrue(k.connected(), r)
        self.assertTrue(p.connected(), r)  # pod-resources was dialled (it does not answer)

    def test_var_run_to_run(self):
        h = self.host()
        h.dir("/run")
        h.symlink("/var/run", "/run")
        d = self.listener(h.path("/run/docker.sock"))
        r = run_doctor(h, "--image", "docker.io/library/busybox:1")
        self.assertTrue(d.connected(), r)
        self.assertLine(r, "docker at ", "/var/run/docker.sock")
        self.assertNotIn("/proc/self/fd", r.text())


class Fifos(Hostile):
    """A FIFO in place of each file the doctor reads: it finishes and says the file was not
    read. (A FIFO's open blocks until a writer comes: it used to hang the doctor forever.) Other
    things that are not regular files are named for what they are."""

    def fifo(self, h, p):
        h.remove(p)
        os.makedirs(os.path.dirname(h.path(p)), exist_ok=True)
        os.mkfifo(h.path(p))
        return h

    def test_each_file(self):
        def pidfile2(h):
            h.remove("/run/nvidia-persistenced")
            return h

        cases = [
            ("/proc/driver/nvidia/version", None),
            ("/etc/nv_tegra_release", None),
            ("/proc/device-tree/compatible", None),
            ("/proc/device-tree/model", None),
            ("/sys/devices/soc0/family", None),
            ("/run/nvidia-persistenced/nvidia-persistenced.pid", None),
            ("/var/run/nvidia-persistenced/nvidia-persistenced.pid", pidfile2),
            ("/proc/4242/comm", None),
            ("/proc/sys/kernel/osrelease", None),
            ("/etc/kubeedge/config/edgecore.yaml", None),
            ("/etc/containerd/config.toml", None),
            ("/etc/nvidia-container-runtime/config.toml", None),
            ("/etc/cdi/nvidia.yaml", None),
            ("/etc/docker/daemon.json", None),
            ("/proc/sys/kernel/arch", None),
            (f"{LIB_DIR}/libnvidia-ml.so.1", None),
        ]
        for p, prep in cases:
            with self.subTest(path=p):
                h = self.host()
                if prep:
                    prep(h)
                self.fifo(h, p)
                r = run_doctor(h)
                self.assertIsNotNone(r.doc, r)
                self.assertLine(r, p, NOT_READ)

    def test_library_is_a_directory(self):
        """A directory in place of the NVML library is called one, not a FIFO or a device."""
        h = self.host()
        p = f"{LIB_DIR}/libnvidia-ml.so.1"
        h.remove(p)
        os.makedirs(h.path(p))
        r = run_doctor(h)
        self.assertLine(r, p, "Is a directory")

    def test_module_version_when_nvml_mismatches(self):
        """NVML's own read of the module version (for its mismatch message) does not block."""
        h = self.host()
        h.gpus(1, extra="mismatch = on\n")
        self.fifo(h, "/proc/driver/nvidia/version")
        r = run_doctor(h)
        c = r.check("driver.nvml")
        self.assertRegex(c["summary"], "version mismatch", r)
        self.assertLine(r, "/proc/driver/nvidia/version", NOT_READ)


class Utf8(Hostile):
    """Invalid UTF-8 in what the host's files say: the JSON report stays valid UTF-8."""

    BAD = [b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"]

    def tree(self, bad, tegra):
        bs = bad.decode("utf-8", "surrogateescape")
        self.n += 1
        # The host root's own name: hostRoot and every path shown.
        h = HostRoot(os.path.join(self.tmp, f"h{self.n}" + bs)).healthy(gpus=1)
        h.containerd_nvidia()
        h.file("/proc/driver/nvidia/version",
               kmod_text("550.54.15").encode().replace(b"Tue Mar", bad))
        if tegra:
            h.tegra()
            h.file("/etc/nv_tegra_release",
                   b"# R36 (release), REVISION: 4.3" + bad + b", GCID: 1\n")
            h.file("/sys/firmware/devicetree/base/model", b"Jetson " + bad + b"\0")
        with open(h.path("/etc/containerd/config.toml"), "rb") as f:
            toml = f.read()
        h.file("/etc/containerd/config.toml", toml.replace(
            b'"/usr/bin/nvidia-container-runtime"', b'"/usr/bin/nvidia-container-runtime' +
            bad + b'"'))
        # libyaml refuses invalid UTF-8 inside a file: the name carries it instead.
        h.file("/etc/cdi/a" + bs + ".yaml", b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n"
               b"devices:\n- name: n" + bad + b"\n  containerEdits: {}\n")
        h.file("/etc/docker/daemon.json", b'{"runtimes": {"nvidia": {"path": "/x' + bad +
               b'"}}}')
        h.file("/var/lib/kubelet/device-plugins/p" + bs + ".sock", "")
        h.file("/proc/sys/kernel/osrelease", b"6.1" + bad + b"\n")
        h.file("/proc/sys/kernel/arch", b"x86" + bad + b"\n")
        return h

    def run_with_readyz(self, h, bad):
        """The doctor, with /readyz answering 503 and invalid UTF-8 in its reasons."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        self.addCleanup(srv.close)

        def answer():
            try:
                c, _ = srv.accept()
            except OSError:  # shut down: the doctor did not come
                return
            c.recv(4096)
            body = b"resource nvidia.com/gpu: not served " + bad + b"\n"
            c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: " +
                      str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            c.close()

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        try:
            return run_doctor(h, "--metrics-address", f"127.0.0.1:{srv.getsockname()[1]}")
        finally:
            srv.shutdown(socket.SHUT_RDWR)  # wakes the accept() when nobody came
            t.join()

    def test_every_string(self):
        bad = b"<" + b"|".join(self.BAD) + b">"
        common = ["driver.versions", "runtime.containerd-nvidia", "runtime.cdi", "plugin.dir",
                  "plugin.registered", "compat.arch"]
        for tegra, where in ((False, common + ["driver.boot"]),
                             (True, common + ["driver.tegra"])):
            with self.subTest(tegra=tegra):
                h = self.tree(bad, tegra)
                r = self.run_with_readyz(h, bad)
                self.assertValidUtf8Json(r)
                # Each maximal ill-formed subpart is one U+FFFD, as Python decodes it.
                self.assertEqual(r.doc["hostRoot"], h.root.encode("utf-8", "surrogateescape")
                                 .decode("utf-8", "replace"))
                for cid in where:
                    c = json.dumps(r.check(cid), ensure_ascii=False)
                    self.assertIn("\ufffd", c, f"{cid}: the bad bytes did not reach it: {c}")


class Big(Hostile):
    def test_100000_keys(self):
        """A 100,000-key daemon.json (JSON) and CDI spec (YAML) are read to the end, where
        what the doctor looks for is."""
        h = self.host()
        keys = ", ".join(f'"k{i}": {i}' for i in range(100000))
        h.file("/etc/docker/daemon.json", "{" + keys + ', "runtimes": {"nvidia": {"path": '
               '"/usr/bin/nvidia-container-runtime"}}, "default-runtime": "nvidia"}')
        h.file("/etc/cdi/big.yaml", "".join(f"k{i}: {i}\n" for i in range(100000)) +
               "cdiVersion: 0.5.0\nkind: example.com/big\ndevices:\n- name: last\n")
        r = run_doctor(h)
        self.assertEqual(r.check("runtime.docker")["status"], "pass", r)
        self.assertLine(r, "/etc/cdi/big.yaml: cdiVersion 0.5.0, kind example.com/big, "
                        "1 device(s)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
