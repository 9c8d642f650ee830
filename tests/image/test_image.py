"""The multi-arch image (scripts/image) in a real Docker engine.

Run by tests/image/run, which names everything in the environment:
  IMAGE_OUT          scripts/image's output: oci/ (the layout) and rootfs-<arch>/
  DOCKER_HOST        a running engine (scripts/docker-engine); its CLI is /usr/bin/docker
  KUBELET_EMULATOR   the Go kubelet emulator (host binary)
  FAKE_NVML_AMD64, FAKE_NVML_ARM64   the fake libnvidia-ml.so.1 built for each arch

For each arch (arm64 through qemu binfmt): the image as stored (only our files, the config's
platform, the CUDA interposer at /usr/lib/edgegpu/libedgegpu-cuda.so: a shared object of the
arch with the glibc floor, edgegpu's LICENSE, NOTICE and licenses/ under /usr/share/doc/edgegpu/
as in the source tree, the OCI labels version, revision and created as scripts/version says),
then the image loaded into Docker with skopeo and run as a DaemonSet would run it:
read-only root, every capability dropped, no-new-privileges, the device-plugins directory
bind-mounted and the fake NVML mounted under the driver root, where edgegpu's own search
(--container-driver-root, default /driver-root) finds it. The emulator on the host sees the
plugin register, list the fixture's GPUs Healthy and answer an Allocate; `docker stop` ends
it cleanly (exit 0, socket removed). The container runs with --network none, since unix
sockets on the bind mount are all it needs; /healthz and /readyz are checked in a second run
with --network host, as an image without a shell leaves no `docker exec` to reach a port in a
private network namespace. The arm64 image also runs on each Jetson fixture board
(tests/fixtures/tegra/make-board) mounted read-only at /host with --host-root /host, as the
jetson overlay runs it: registration, the board's GPUs, an Allocate, the GPU and board series.

Missing Docker or binfmt is a failure, not a skip: CI installs both.
"""

import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from emulator import Emulator  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKER = "/usr/bin/docker"  # Debian's CLI; another docker may come first on PATH
RESOURCE = "nvidia.com/gpu"
FIXTURE = os.path.join(TOP, "tests", "fakes", "nvml", "fixtures", "two-gpus.conf")
ARCH = {  # arch: (triplet, ELF e_machine, platform variant, program interpreter)
    "amd64": ("x86_64-linux-gnu", 62, None, "lib64/ld-linux-x86-64.so.2"),
    "arm64": ("aarch64-linux-gnu", 183, "v8", "lib/ld-linux-aarch64.so.1"),
}
# The glibc floor check of the interposer, and the objdump that reads each arch.
GLIBC_FLOOR = os.path.join(TOP, "tests", "interposer", "check-glibc-floor")
OBJDUMP = {"amd64": "objdump", "arm64": "aarch64-linux-gnu-objdump"}
# What NVIDIA's libnvidia-ml.so.1 needs beyond libc (scripts/image).
NVML_NEEDS = ("libdl.so.2", "libpthread.so.0", "librt.so.1", "libm.so.6")
# Our license and the third-party notices, as in the source tree (scripts/image).
DOC = "usr/share/doc/edgegpu"


def license_files():
    """{image path: content} of LICENSE, NOTICE and licenses/** from the source tree."""
    want = {}
    for f in ("LICENSE", "NOTICE"):
        with open(os.path.join(TOP, f), "rb") as fh:
            want[f"{DOC}/{f}"] = fh.read()
    for d, _, fs in os.walk(os.path.join(TOP, "licenses")):
        for f in fs:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                want[f"{DOC}/{os.path.relpath(p, TOP)}"] = fh.read()
    return want


def version(*args):
    return subprocess.run([os.path.join(TOP, "scripts", "version"), *args], capture_output=True,
                          text=True, check=True).stdout.strip()
GRACE_S = 10


def env(name):
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"${name} is not set: run tests/image/run")
    return v


def docker(*args, check=True, timeout=120):
    r = subprocess.run([DOCKER, "-H", env("DOCKER_HOST")] + list(args), capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:2])} failed: {r.stderr.strip()[-400:]}")
    return r.stdout.strip()


def fixture_uuids():
    with open(FIXTURE) as f:
        return sorted(line.split("=", 1)[1].strip() for line in f if line.startswith("uuid"))


class Layout:
    """The OCI layout read by hand (stdlib): index, per-arch manifest, config and layers."""

    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "index.json")) as f:
            top = json.load(f)
        refs = [m for m in top["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "latest"]
        if len(refs) != 1:
            raise AssertionError(f"no single 'latest' in {path}/index.json: {top}")
        self.index = self.blob_json(refs[0])

    def blob(self, desc):
        algo, hexd = desc["digest"].split(":", 1)
        with open(os.path.join(self.path, "blobs", algo, hexd), "rb") as f:
            data = f.read()
        if hashlib.new(algo, data).hexdigest() != hexd or len(data) != desc["size"]:
            raise AssertionError(f"blob {desc['digest']} does not match its descriptor")
        return data

    def blob_json(self, desc):
        return json.loads(self.blob(desc))

    def manifest(self, arch):
        ms = [m for m in self.index["manifests"] if m["platform"]["architecture"] == arch]
        if len(ms) != 1:
            raise AssertionError(f"{len(ms)} manifests for {arch} in the index")
        return ms[0], self.blob_json(ms[0])


def layer_files(layout, manifest):
    """{path: (type, bytes or link target)} of every layer, in order."""
    out = {}
    for desc in manifest["layers"]:
        data = layout.blob(desc)
        if desc["mediaType"].endswith("+gzip"):
            data = gzip.decompress(data)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                name = m.name.lstrip("./")
                if m.isfile():
                    out[name] = ("file", tar.extractfile(m).read())
                elif m.isdir():
                    out[name] = ("dir", None)
                else:
                    out[name] = ("other", m.linkname)
    return out


def elf_needed(data):
    """DT_NEEDED names of a 64-bit little-endian ELF (the two arches here), from its bytes."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dyn = [s for s in secs if s[1] == 6]  # SHT_DYNAMIC
    if not dyn:
        return []
    strtab = secs[dyn[0][6]]  # sh_link
    names, off = [], dyn[0][4]
    while off < dyn[0][4] + dyn[0][5]:
        tag, val = struct.unpack_from("<qQ", data, off)
        off += 16
        if tag == 0:
            break
        if tag == 1:
            start = strtab[4] + val
            names.append(data[start:data.index(b"\0", start)].decode())
    return names


def elf_interp(data):
    """PT_INTERP of a 64-bit little-endian ELF."""
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        ptype, _, off, _, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if ptype == 3:
            return data[off:off + filesz].rstrip(b"\0").decode()
    return None


class ImageContents(unittest.TestCase):
    """The index as stored: two platforms, and each image only what scripts/image staged."""

    @classmethod
    def setUpClass(cls):
        cls.out = env("IMAGE_OUT")
        cls.layout = Layout(os.path.join(cls.out, "oci"))

    def test_index_platforms(self):
        plats = sorted((m["platform"]["os"], m["platform"]["architecture"],
                        m["platform"].get("variant")) for m in self.layout.index["manifests"])
        self.assertEqual(plats, [("linux", "amd64", None), ("linux", "arm64", "v8")])
        self.assertEqual(self.layout.index["mediaType"], "application/vnd.oci.image.index.v1+json")
        # skopeo reads the same index.
        raw = json.loads(subprocess.run(["skopeo", "inspect", "--raw", f"oci:{self.layout.path}:latest"],
                                        capture_output=True, text=True, check=True).stdout)
        self.assertEqual(len(raw["manifests"]), 2)

    def check_arch(self, arch):
        triplet, machine, variant, interp = ARCH[arch]
        desc, man = self.layout.manifest(arch)
        cfg = self.layout.blob_json(man["config"])
        self.assertEqual((cfg["os"], cfg["architecture"], cfg.get("variant")), ("linux", arch, variant))
        self.assertEqual(desc["platform"].get("variant"), variant)
        self.assertEqual(cfg["config"]["Entrypoint"], ["/usr/bin/edgegpu"])
        self.assertEqual(cfg["config"]["Cmd"], ["serve"])
        labels = cfg["config"].get("Labels", {})
        for k in ("title", "version", "revision", "created", "licenses", "source"):
            self.assertTrue(labels.get(f"org.opencontainers.image.{k}"), f"label {k} missing: {labels}")
        self.assertEqual(labels["org.opencontainers.image.version"], version())
        self.assertEqual(labels["org.opencontainers.image.revision"], version("--revision"))
        self.assertEqual(labels["org.opencontainers.image.created"], version("--date"))
        self.assertEqual(labels["org.opencontainers.image.licenses"], "Apache-2.0")
        files = layer_files(self.layout, man)
        regular = {p: d for p, (t, d) in files.items() if t == "file"}
        self.assertEqual([p for p, (t, _) in files.items() if t == "other"], [], "links or devices")
        # Exactly what was staged, byte for byte.
        root = os.path.join(self.out, f"rootfs-{arch}")
        staged = {}
        for d, _, fs in os.walk(root):
            for f in fs:
                p = os.path.join(d, f)
                with open(p, "rb") as fh:
                    staged[os.path.relpath(p, root)] = fh.read()
        self.assertEqual(sorted(regular), sorted(staged))
        for p in staged:
            self.assertTrue(regular[p] == staged[p], f"{p} differs from the staged file")
        dirs = {p.rstrip("/") for p, (t, _) in files.items() if t == "dir"}
        ancestors = set()
        for p in regular:
            while "/" in p:
                p = os.path.dirname(p)
                ancestors.add(p)
        self.assertEqual(dirs - ancestors - {""}, set(), "directories holding none of our files")
        # The license files, byte for byte; nothing else under the doc directory.
        docs = {p: d for p, d in regular.items() if p.startswith(DOC + "/")}
        want = license_files()
        self.assertIn(f"{DOC}/licenses/libmicrohttpd/LGPL-2.1", want)
        self.assertEqual(sorted(docs), sorted(want))
        for p in want:
            self.assertTrue(docs[p] == want[p], f"{p} differs from the source tree's")
        regular = {p: d for p, d in regular.items() if p not in docs}
        # The files' own view: each is an ELF of this arch, the loader sits at the binary's
        # PT_INTERP path, every DT_NEEDED (ours and NVML's, transitively) is in the image.
        for p, data in regular.items():
            self.assertEqual(data[:4], b"\x7fELF", p)
            self.assertEqual(int.from_bytes(data[18:20], "little"), machine, f"{p}: wrong machine")
        self.assertIn("usr/bin/edgegpu", regular)
        self.assertEqual(elf_interp(regular["usr/bin/edgegpu"]), "/" + interp)
        self.assertIn(interp, regular)
        libdir = f"usr/lib/{triplet}"
        want = list(elf_needed(regular["usr/bin/edgegpu"])) + list(NVML_NEEDS)
        seen = set()
        while want:
            n = want.pop()
            if n in seen or n == os.path.basename(interp):
                continue
            seen.add(n)
            self.assertIn(f"{libdir}/{n}", regular, f"{n} is needed but not in the image")
            want += elf_needed(regular[f"{libdir}/{n}"])
        self.assertIn("libc.so.6", seen)
        # The CUDA interposer, for the daemon to install on the host: a shared object of this
        # arch (checked above with every file), with no glibc symbol newer than 2.17 after the
        # release build's LTO and strip (tests/interposer/check-glibc-floor).
        ipz = "usr/lib/edgegpu/libedgegpu-cuda.so"
        self.assertIn(ipz, regular)
        self.assertEqual(int.from_bytes(regular[ipz][16:18], "little"), 3, f"{ipz}: not ET_DYN")
        r = subprocess.run([GLIBC_FLOOR, os.path.join(root, ipz)], capture_output=True, text=True,
                           env=dict(os.environ, OBJDUMP=OBJDUMP[arch]))
        self.assertEqual(r.returncode, 0, f"{ipz}: {r.stdout}{r.stderr}")
        self.assertEqual(len(regular), len(seen) + 3, f"unneeded files: {sorted(regular)}")

    def test_amd64_contents(self):
        self.check_arch("amd64")

    def test_arm64_contents(self):
        self.check_arch("arm64")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url):
    """The body of a 200 answer as text, else None."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode() if r.status == 200 else None
    except OSError:
        return None


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class Run:
    """Mixed into one TestCase per arch."""
    arch = None

    @classmethod
    def setUpClass(cls):
        cls.tag = f"edgegpu-image-test:{cls.arch}"
        cls.fake = env(f"FAKE_NVML_{cls.arch.upper()}")
        docker("version", "--format", "{{.Server.Version}}")  # fails clearly without an engine
        if cls.arch != "amd64":
            r = subprocess.run([os.path.join(TOP, "scripts", "binfmt-arm64"), "check"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise AssertionError(r.stderr.strip() + ": run scripts/binfmt-arm64 register")
        layout = os.path.join(env("IMAGE_OUT"), "oci")
        r = subprocess.run(["skopeo", "copy", "-q", "--override-arch", cls.arch]
                           + (["--override-variant", ARCH[cls.arch][2]] if ARCH[cls.arch][2] else [])
                           + ["--dest-daemon-host", env("DOCKER_HOST"), f"oci:{layout}:latest",
                              f"docker-daemon:{cls.tag}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"skopeo copy of {cls.arch} failed: {r.stderr.strip()[-400:]}")
        got = docker("image", "inspect", "-f", "{{.Os}}/{{.Architecture}}", cls.tag)
        if got != f"linux/{cls.arch}":
            raise AssertionError(f"{cls.tag} loaded as {got}")

    def start(self, emu, network, *args):
        self.addCleanup(lambda: emu.proc.stdout.close())  # after the emulator has quit
        name = f"edgegpu-image-test-{self.arch}-{os.getpid()}-{network}"
        docker("rm", "-f", name, check=False)
        triplet = ARCH[self.arch][0]
        docker("run", "-d", "--name", name, "--platform", f"linux/{self.arch}", "--network", network,
               "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
               "-v", f"{emu.dir}:/var/lib/kubelet/device-plugins",
               "-v", f"{self.fake}:/driver-root/usr/lib/{triplet}/libnvidia-ml.so.1:ro",
               "-v", f"{FIXTURE}:/etc/edgegpu-test/gpus.conf:ro",
               "-e", "EDGEGPU_FAKE_NVML_FIXTURE=/etc/edgegpu-test/gpus.conf",
               self.tag, "serve", *args)
        self.addCleanup(docker, "rm", "-f", name, check=False)
        return name

    def logs(self, name):
        r = subprocess.run([DOCKER, "-H", env("DOCKER_HOST"), "logs", name], capture_output=True, text=True)
        return r.stdout + r.stderr

    def stop_clean(self, emu, name):
        t0 = time.monotonic()
        docker("stop", "-t", str(GRACE_S), name, timeout=GRACE_S + 30)
        dt = time.monotonic() - t0
        state = json.loads(docker("inspect", "-f", "{{json .State}}", name))
        self.assertEqual(state["ExitCode"], 0, f"exit code after SIGTERM: {state}\n{self.logs(name)[-2000:]}")
        self.assertFalse(state["OOMKilled"])
        self.assertLess(dt, GRACE_S, "the stop waited for the grace period (SIGKILL)")
        self.assertFalse(os.path.exists(os.path.join(emu.dir, "nvidia-gpu.sock")), "socket left behind")
        logs = self.logs(name)
        self.assertIn('msg="stopped"', logs)
        self.assertNotIn("level=error", logs)

    def test_register_allocate_stop(self):
        with Emulator(env("KUBELET_EMULATOR")) as emu:
            name = self.start(emu, "none")
            try:
                emu.wait_registered(RESOURCE, timeout=60)
                emu.wait_devices(RESOURCE, 2, timeout=60)
            except Exception as e:
                raise AssertionError(f"{e}\ncontainer log:\n{self.logs(name)[-2000:]}")
            ev = emu.last_devices(RESOURCE)
            self.assertEqual(ev["healthy"], fixture_uuids())
            self.assertEqual(ev["unhealthy_count"], 0)
            adm = emu.admit("pod1", f"c1:{RESOURCE}=1")
            self.assertTrue(adm["ok"], adm)
            al = emu.allocations("pod1")
            self.assertEqual(len(al), 1)
            self.assertTrue(al[0]["ok"], al[0])
            self.assertIn(al[0]["ids"][0], fixture_uuids())
            resp = al[0]["response"]
            self.assertEqual(resp["envs"], {"NVIDIA_VISIBLE_DEVICES": al[0]["ids"][0]})
            self.assertEqual(resp["devices"], [])
            self.assertEqual(resp["mounts"], [])
            self.stop_clean(emu, name)

    def test_healthz_readyz_host_network(self):
        port = free_port()
        with Emulator(env("KUBELET_EMULATOR")) as emu:
            name = self.start(emu, "host", "--metrics-address", f"127.0.0.1:{port}")
            emu.wait_registered(RESOURCE, timeout=60)
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while http_status(base + "/readyz") != 200:  # ready follows registration closely
                self.assertLess(time.monotonic(), deadline, f"/readyz not 200\n{self.logs(name)[-2000:]}")
                time.sleep(0.05)
            self.assertEqual(http_status(base + "/healthz"), 200)
            self.stop_clean(emu, name)


class RunAmd64(Run, unittest.TestCase):
    arch = "amd64"

    def test_doctor_from_the_image(self):
        """The README's other route to the doctor: the image with the host's / read-only at
        /host, --host-root /host, on the host's network, as the quick start writes it, less
        --privileged (which the README asks for NVML's /dev/nvidiactl, and which this machine's
        runc cannot grant: "unable to apply caps"). Every layer is checked; on this GPU-less
        machine the driver check fails with its fix and the exit status is 1 (0 only when
        nothing failed)."""
        r = subprocess.run([DOCKER, "-H", env("DOCKER_HOST"), "run", "--rm",
                            "--network", "host", "-v", "/:/host:ro", self.tag,
                            "doctor", "--host-root", "/host"],
                           capture_output=True, text=True, timeout=120)
        out = r.stdout
        for layer in ("[driver]", "[runtime]", "[plugin]", "[compat]"):
            self.assertIn(layer, out, f"doctor from the image: no {layer}\n{out[-2000:]}{r.stderr[-1000:]}")
        if r.returncode == 0:
            self.assertIn("0 fail", out)
            return
        self.assertEqual(r.returncode, 1, f"{out[-2000:]}{r.stderr[-1000:]}")
        self.assertRegex(out, r"(?m)^fail\s+driver\.nvml: ")
        self.assertIn("fix: ", out)
        # It looked for the host's driver under /host, not in the image.
        self.assertIn("tried /host/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", out)


class RunArm64(Run, unittest.TestCase):
    arch = "arm64"

    def start_board(self, emu, board, port):
        """The image on a Jetson fixture board mounted at /host (read-only) as the jetson
        overlay mounts the host, --host-root /host; the fake NVML under the driver root where
        the board has NVML. Host network: the emulator's sockets and the metrics port."""
        name = f"edgegpu-image-test-tegra-{os.path.basename(board)}-{os.getpid()}"
        docker("rm", "-f", name, check=False)
        args = ["run", "-d", "--name", name, "--platform", "linux/arm64", "--network", "host",
                "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "-v", f"{emu.dir}:/var/lib/kubelet/device-plugins", "-v", f"{board}:/host:ro"]
        if os.path.exists(os.path.join(board, "nvml.conf")):
            args += ["-v", f"{self.fake}:/driver-root/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1:ro",
                     "-e", "EDGEGPU_FAKE_NVML_FIXTURE=/host/nvml.conf"]
        docker(*args, self.tag, "serve", "--host-root", "/host",
               "--metrics-address", f"127.0.0.1:{port}")
        self.addCleanup(docker, "rm", "-f", name, check=False)
        return name

    def test_tegra_boards(self):
        """Each Jetson fixture board (tests/fixtures/tegra/make-board): registration, the
        board's GPUs Healthy (`tegra` for the iGPU), one Allocate (NVIDIA_VISIBLE_DEVICES), the
        GPU series and the board's on /metrics."""
        make = os.path.join(TOP, "tests", "fixtures", "tegra", "make-board")
        top = tempfile.mkdtemp(prefix="edgegpu-image-boards-")
        self.addCleanup(shutil.rmtree, top, ignore_errors=True)
        os.chmod(top, 0o755)  # the container's user reads the boards
        for b in ("nano-r32", "xavier-nx-r35", "orin-nano-r36", "agx-thor-r38", "thor-dgpu"):
            with self.subTest(board=b):
                board = os.path.join(top, b)
                subprocess.run([sys.executable, make, b, board], check=True)
                with open(os.path.join(board, "expect.json")) as f:
                    ids = sorted(g["id"] for g in json.load(f)["gpus"])
                port = free_port()
                with Emulator(env("KUBELET_EMULATOR")) as emu:
                    self.addCleanup(lambda e=emu: e.proc.stdout.close())
                    name = self.start_board(emu, board, port)
                    try:
                        emu.wait_registered(RESOURCE, timeout=60)
                        emu.wait_devices(RESOURCE, len(ids), timeout=60)
                    except Exception as e:
                        raise AssertionError(f"{b}: {e}\ncontainer log:\n{self.logs(name)[-2000:]}")
                    ev = emu.last_devices(RESOURCE)
                    self.assertEqual(sorted(ev["healthy"]), ids)
                    adm = emu.admit("pod1", f"c1:{RESOURCE}=1")
                    self.assertTrue(adm["ok"], adm)
                    al = emu.allocations("pod1")[0]
                    self.assertTrue(al["ok"], al)
                    self.assertIn(al["ids"][0], ids)
                    self.assertEqual(al["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"],
                                     al["ids"][0])
                    url = f"http://127.0.0.1:{port}/metrics"
                    deadline = time.monotonic() + 30
                    while True:
                        body = http_get(url)
                        if body and "DCGM_FI_DEV_GPU_TEMP{" in body and 'UUID="tegra"' in body \
                                and "edgegpu_board_info{" in body:
                            break
                        self.assertLess(time.monotonic(), deadline,
                                        f"{b}: no GPU series on /metrics\n{(body or '')[:1500]}")
                        time.sleep(0.1)
                    self.assertNotIn(" -256\n", body)
                    self.stop_clean(emu, name)


if __name__ == "__main__":
    class Result(unittest.TextTestResult):
        passed = 0

        def addSuccess(self, test):
            super().addSuccess(test)
            Result.passed += 1

    res = unittest.main(verbosity=2, exit=False,
                        testRunner=unittest.TextTestRunner(resultclass=Result, verbosity=2)).result
    # A failed setUpClass counts once; skips count as failures (nothing here may skip).
    failed = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses) + len(res.skipped)
    print(f"image tests: {Result.passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
