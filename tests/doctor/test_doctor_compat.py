#!/usr/bin/python3
"""The doctor's compat layer against real image stores: a private Docker engine
(scripts/docker-engine) and the containerd it runs, loaded with tiny images of both
architectures built here without network (an OCI layout: one layer, a config naming the
architecture, a manifest, an index), and host-root trees whose /proc/sys/kernel/arch says
aarch64 or x86_64. Also --cuda-version against the fake NVML's driver.

Needs dockerd, ctr and skopeo (scripts/deps installs them; CI has them): without them the test
fails, it does not skip.
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from edgegpu import SRC, base_env, binary, fixture_path  # noqa: E402
from fixes import assert_documented  # noqa: E402

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar"
DOCKER = "/usr/bin/docker"
FIX_ARCH_WORDS = "exec format error"
FIX_ABSENT_START = "Pull the image on this node first"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


# --- a tiny OCI image, built by hand ---

def put_blob(layout, data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(layout, "blobs", "sha256", d), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + d, "size": len(data)}


def image_manifest(layout, arch, env=None):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = f"built for {arch}\n".encode()
        ti = tarfile.TarInfo("hello.txt")
        ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
        t.addfile(ti, io.BytesIO(data))
    layer = buf.getvalue()
    ldesc = dict(mediaType=MT_LAYER, **put_blob(layout, layer))
    config = {"architecture": arch, "os": "linux",
              "config": dict({"Cmd": ["/hello"]}, **({"Env": env} if env else {})),
              "rootfs": {"type": "layers", "diff_ids": [ldesc["digest"]]}}
    cdesc = dict(mediaType=MT_CONFIG, **put_blob(layout, json.dumps(config).encode()))
    manifest = {"schemaVersion": 2, "mediaType": MT_MANIFEST, "config": cdesc,
                "layers": [ldesc]}
    return dict(mediaType=MT_MANIFEST, **put_blob(layout, json.dumps(manifest).encode()),
                platform={"architecture": arch, "os": "linux"})


def make_archive(work, name, archs, env=None):
    """An oci-archive holding image `name` (full containerd name, tag included) for `archs`:
    one manifest for one architecture, an index of manifests for several; `env` the config's
    Env (NVIDIA's CUDA images set CUDA_VERSION there)."""
    layout = os.path.join(work, "layout-" + name.replace("/", "_").replace(":", "_"))
    os.makedirs(os.path.join(layout, "blobs", "sha256"))
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    descs = [image_manifest(layout, a, env) for a in archs]
    if len(descs) == 1:
        top = descs[0]
    else:
        index = {"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": descs}
        top = dict(mediaType=MT_INDEX, **put_blob(layout, json.dumps(index).encode()))
    top = dict(top, annotations={"io.containerd.image.name": name,
                                 "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]})
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "mediaType": MT_INDEX, "manifests": [top]}, f)
    archive = layout + ".tar"
    with tarfile.open(archive, "w") as t:
        for e in sorted(os.listdir(layout)):
            t.add(os.path.join(layout, e), arcname=e)
    return archive


# --- the doctor ---

def doctor(root, *args, env=None):
    argv = [binary("EDGEGPU"), "doctor", "--host-root", root, "--json", "--timeout-ms", "5000"]
    r = subprocess.run(argv + list(args), env=base_env(env), capture_output=True, text=True,
                       timeout=30)
    try:
        doc = json.loads(r.stdout) if r.stdout else None
    except json.JSONDecodeError:
        raise AssertionError(f"doctor {args}: not JSON (rc={r.returncode}):\n{r.stdout}{r.stderr}")
    if doc:
        assert_documented(doc)
    return r, doc


def find(doc, cid):
    for c in doc["checks"]:
        if c["id"] == cid:
            return c
    raise AssertionError(f"no check {cid} in {json.dumps(doc, indent=1)}")


def host_root(work, name, machine, docker_sock, containerd_sock):
    root = os.path.join(work, name)
    os.makedirs(os.path.join(root, "proc/sys/kernel"))
    with open(os.path.join(root, "proc/sys/kernel/arch"), "w") as f:
        f.write(machine + "\n")
    # Hard links: the same listening sockets, inside the tree (the doctor follows no link out
    # of its host root); /var/run -> /run as on a host, an absolute link taken inside the tree.
    os.makedirs(os.path.join(root, "run"))
    os.makedirs(os.path.join(root, "var"))
    os.symlink("/run", os.path.join(root, "var/run"))
    if docker_sock:
        os.link(docker_sock, os.path.join(root, "run/docker.sock"))
    if containerd_sock:
        os.makedirs(os.path.join(root, "run/containerd"))
        os.link(containerd_sock, os.path.join(root, "run/containerd/containerd.sock"))
    return root


def expect_image(root, ref, status, store=None, arch=None):
    r, doc = doctor(root, "--image", ref)
    c = find(doc, "compat.image")
    ev = "\n".join(c["evidence"])
    what = f"--image {ref} on {os.path.basename(root)}"
    check(c["status"] == status, f"{what}: status {c['status']}, want {status}: {c}")
    # The other layers fail on this bare tree: the exit status follows every check's status.
    any_fail = any(x["status"] == "fail" for x in doc["checks"])
    check(r.returncode == (1 if any_fail else 0) and doc["ok"] == (not any_fail),
          f"{what}: exit {r.returncode}, ok {doc['ok']} with any_fail={any_fail}")
    if arch:
        check(f"node architecture: linux/{arch}" in ev, f"{what}: node arch not in evidence: {ev}")
    if store:
        check(any(line.startswith(store) and ": has " in line for line in c["evidence"]),
              f"{what}: {store} not named as holding it: {ev}")
    if status == "fail":
        check(FIX_ARCH_WORDS in c.get("fix", "") and FIX_ARCH_WORDS in ev,
              f"{what}: no '{FIX_ARCH_WORDS}' in fix/evidence: {c}")
    if status == "warn":
        check(c.get("fix", "").startswith(FIX_ABSENT_START), f"{what}: fix {c.get('fix')}")
    return c


def image_tests(work, dk_sock, cd_sock):
    arm = host_root(work, "arm", "aarch64", dk_sock, cd_sock)
    amd = host_root(work, "amd", "x86_64", dk_sock, cd_sock)
    bare = host_root(work, "bare", "aarch64", None, None)

    c = find(doctor(arm)[1], "compat.arch")
    check(c["status"] == "pass" and "linux/arm64" in c["summary"]
          and any("aarch64" in e for e in c["evidence"]), f"compat.arch on arm: {c}")
    c = find(doctor(amd)[1], "compat.arch")
    check(c["status"] == "pass" and "linux/amd64" in c["summary"], f"compat.arch on amd: {c}")
    check(find(doctor(arm)[1], "compat.image")["status"] == "skip", "no --image: skip")

    # Docker's store holds the :1 tags, containerd's k8s.io namespace the :2 tags.
    expect_image(arm, "edgegpu-compat-arm64:1", "pass", "docker", "arm64")
    expect_image(arm, "edgegpu-compat-amd64:1", "fail", "docker", "arm64")
    expect_image(amd, "edgegpu-compat-amd64:1", "pass", "docker", "amd64")
    expect_image(amd, "edgegpu-compat-arm64:1", "fail", "docker", "amd64")
    expect_image(arm, "edgegpu-compat-arm64:2", "pass", "containerd", "arm64")
    expect_image(arm, "docker.io/library/edgegpu-compat-amd64:2", "fail", "containerd")
    expect_image(amd, "edgegpu-compat-amd64:2", "pass", "containerd")
    expect_image(amd, "edgegpu-compat-arm64:2", "fail", "containerd")
    c = expect_image(arm, "edgegpu-compat-multi:2", "pass", "containerd")
    ev = "\n".join(c["evidence"])
    check("linux/amd64" in ev and "linux/arm64" in ev and MT_INDEX in ev,
          f"multi-arch index platforms not listed: {ev}")
    expect_image(amd, "edgegpu-compat-multi:2", "pass", "containerd")
    c = expect_image(arm, "edgegpu-compat-none:1", "warn")
    ev = "\n".join(c["evidence"])
    check("docker at" in ev and "no image edgegpu-compat-none:1" in ev
          and "no image docker.io/library/edgegpu-compat-none:1" in ev,
          f"absent image: both stores should say so: {ev}")
    c = expect_image(bare, "edgegpu-compat-arm64:1", "warn")
    check(sum("could not ask" in e for e in c["evidence"]) == 2,
          f"no stores: both should be 'could not ask': {c['evidence']}")
    r, doc = doctor(arm, "--image", "Not A Ref")
    check(r.returncode == 2 and doc is None and "--image wants an image reference" in r.stderr,
          f"bad ref: a usage error (exit 2), got {r.returncode}: {r.stderr}")


CUDA12_ENV = ["PATH=/usr/local/cuda/bin:/usr/bin:/bin", "CUDA_VERSION=12.2.0",
              "NVIDIA_REQUIRE_CUDA=cuda>=12.2"]


def board_root(work, name, docker_sock, containerd_sock):
    """A copy of the Jetson fixture board `name` (make-board) with the engine's sockets in it;
    no /proc/sys/kernel/arch there: the doctor knows a Jetson is arm64 by its board."""
    root = os.path.join(work, "board-" + name)
    shutil.copytree(os.path.join(os.environ["TEGRA_BOARDS"], name), root, symlinks=True)
    os.makedirs(os.path.join(root, "run/containerd"), exist_ok=True)
    if not os.path.lexists(os.path.join(root, "var/run")):
        os.makedirs(os.path.join(root, "var"), exist_ok=True)
        os.symlink("/run", os.path.join(root, "var/run"))
    os.link(docker_sock, os.path.join(root, "run/docker.sock"))
    os.link(containerd_sock, os.path.join(root, "run/containerd/containerd.sock"))
    return root


def tegra_tests(work, dk_sock, cd_sock):
    """The seed's edge failures on Jetson boards: an amd64-only image (exec format error, a
    crash loop) and a CUDA 12 image on an L4T R32 board."""
    if not os.environ.get("TEGRA_BOARDS"):
        check(False, "TEGRA_BOARDS is not set: the Jetson boards were not built")
        return
    nano = board_root(work, "nano-r32", dk_sock, cd_sock)
    orin = board_root(work, "orin-nano-r36", dk_sock, cd_sock)
    c = find(doctor(nano)[1], "compat.arch")
    check(c["status"] == "pass" and c["summary"].endswith("linux/arm64")
          and any("Jetson/Tegra board" in e for e in c["evidence"]), f"compat.arch on nano: {c}")
    c = expect_image(nano, "edgegpu-compat-amd64:1", "fail", "docker", "arm64")
    check(any("CrashLoopBackOff" in e for e in c["evidence"]), f"no crash loop words: {c}")
    expect_image(nano, "edgegpu-compat-amd64:2", "fail", "containerd", "arm64")
    # The classic one: arm64 (so compat.image passes), CUDA 12.2, on L4T R32 (CUDA 10.2).
    for ref, store in (("edgegpu-compat-cuda12:1", "docker"),
                       ("edgegpu-compat-cuda12:2", "containerd")):
        expect_image(nano, ref, "pass", store, "arm64")
        doc = doctor(nano, "--image", ref)[1]
        c = find(doc, "compat.image-cuda")
        ev = "\n".join(c["evidence"])
        check(c["status"] == "fail" and "newer than this L4T release supports (CUDA 10.2)"
              in c["summary"], f"{ref} on nano: {c}")
        check("CUDA_VERSION=12.2.0" in ev and store in ev and "R32 (release)" in ev,
              f"{ref} on nano: evidence {ev}")
        check(c.get("fix", "").startswith("On Jetson the CUDA driver comes with the L4T "
                                          "release"), f"{ref} on nano: fix {c.get('fix')}")
        c = find(doctor(orin, "--image", ref)[1], "compat.image-cuda")
        check(c["status"] == "pass" and "ships CUDA 12.6" in c["summary"], f"{ref} on orin: {c}")
    # No CUDA_VERSION in the config: nothing to judge.
    c = find(doctor(orin, "--image", "edgegpu-compat-arm64:1")[1], "compat.image-cuda")
    check(c["status"] == "skip" and "CUDA_VERSION" in c["summary"], f"no CUDA image: {c}")


def cuda_tests(work):
    root = host_root(work, "cuda", "x86_64", None, None)
    env = {"EDGEGPU_FAKE_NVML_FIXTURE": fixture_path("two-gpus.conf")}  # 550.54.15, 12040
    nvml = ["--nvml-lib", binary("FAKE_NVML")]

    r, doc = doctor(root, "--cuda-version", "12.4", *nvml, env=env)
    driver_known = any(c["id"].startswith("driver.") for c in doc["checks"])
    c = find(doc, "compat.cuda")
    if not driver_known:
        # The driver layer fills the driver facts; until it runs there is nothing to judge.
        check(c["status"] == "skip" and "unknown" in c["summary"], f"no driver facts: {c}")
    else:
        want = {"12.4": "pass", "11.8": "pass", "10.2": "pass", "12.8": "warn", "12.9": "warn",
                "13.0": "fail", "13.1": "fail"}
        for v, st in want.items():
            r, doc = doctor(root, "--cuda-version", v, *nvml, env=env)
            c = find(doc, "compat.cuda")
            ev = "\n".join(c["evidence"])
            check(c["status"] == st, f"--cuda-version {v}: {c['status']}, want {st}: {c}")
            check("550.54.15" in ev and "12040" in ev, f"--cuda-version {v}: evidence {ev}")
            if st == "fail":
                check("insufficient for CUDA runtime version" in ev and "cuda-compat" in ev
                      and "driver" in c.get("fix", ""), f"--cuda-version {v}: {c}")
            if st == "warn":
                check("minor version compatibility" in c["summary"], f"{v}: {c}")
    for bad in ("12", "abc", "12.x", "12.4.1", "-1.0", " 12.4"):
        r, doc = doctor(root, "--cuda-version", bad, *nvml, env=env)
        check(r.returncode == 2 and doc is None and "MAJOR.MINOR" in r.stderr,
              f"--cuda-version {bad!r}: a usage error (exit 2), got {r.returncode}: {r.stderr}")
    r, doc = doctor(root)
    check(find(doc, "compat.cuda")["status"] == "skip", "no --cuda-version: skip")


def main():
    for tool in ("dockerd", "ctr", "skopeo"):
        if not shutil.which(tool):
            print(f"FAIL: {tool} not found: install it (scripts/deps); this test needs a real "
                  "Docker engine and containerd", flush=True)
            return 1
    work = tempfile.mkdtemp(prefix="dcompat-", dir="/tmp")
    dk = os.path.join(work, "dk")
    engine = os.path.join(SRC, "scripts", "docker-engine")
    try:
        r = subprocess.run([engine, "start", dk], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            print(f"FAIL: the Docker engine did not start:\n{r.stdout}{r.stderr}", flush=True)
            return 1
        dk_sock = os.path.join(dk, "docker.sock")
        cd_sock = os.path.join(dk, "exec", "containerd", "containerd.sock")
        for arch in ("amd64", "arm64"):
            a = make_archive(work, f"docker.io/library/edgegpu-compat-{arch}:1", [arch])
            run(["skopeo", "copy", "--quiet", f"oci-archive:{a}",
                 f"docker-daemon:edgegpu-compat-{arch}:1", "--dest-daemon-host",
                 "unix://" + dk_sock])
        a = make_archive(work, "docker.io/library/edgegpu-compat-cuda12:1", ["arm64"],
                         CUDA12_ENV)
        run(["skopeo", "copy", "--quiet", f"oci-archive:{a}",
             "docker-daemon:edgegpu-compat-cuda12:1", "--dest-daemon-host", "unix://" + dk_sock])
        for name, archs, env in (("amd64", ["amd64"], None), ("arm64", ["arm64"], None),
                                 ("multi", ["amd64", "arm64"], None),
                                 ("cuda12", ["arm64"], CUDA12_ENV)):
            a = make_archive(work, f"docker.io/library/edgegpu-compat-{name}:2", archs, env)
            run(["ctr", "--address", cd_sock, "-n", "k8s.io", "images", "import",
                 "--all-platforms", "--no-unpack", a])
        image_tests(work, dk_sock, cd_sock)
        tegra_tests(work, dk_sock, cd_sock)
        cuda_tests(work)
    finally:
        subprocess.run([engine, "stop", dk], capture_output=True, timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        return 1
    print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
