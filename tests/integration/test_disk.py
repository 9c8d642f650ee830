#!/usr/bin/python3
"""The daemon and the files it keeps on disk (issue 16 item 4 and the items found by reading):
the CDI spec directory swapped to another directory through its symlink, or a tmpfs mounted
over it (the spec is written again where the runtime looks); two daemons with different
strategies writing one spec directory (they back off and say so once, Allocate is not refused);
a CDI spec write that never returns (a frozen filesystem: registration goes on, Allocate says
why it refuses, the spec lands when the disk thaws); the NFD labels write stuck on a frozen
filesystem (Allocate keeps answering: the write is off the loop).

The mounts (tmpfs, a loop-mounted ext4 image frozen with fsfreeze) need root: the file runs
itself again in a private mount namespace (unshare -m), so nothing it mounts outlives it or is
seen outside. Without root those tests are skipped, and say so."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from common import NodeTest, load_fixture, main, uuids, wait_until
from edgegpu import PluginClient

MOUNTNS_ENV = "EDGEGPU_TEST_MOUNTNS"
CDI_KIND = "k8s.device-plugin.nvidia.com/gpu"
CDI_FILE = "k8s.device-plugin.nvidia.com-gpu.json"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
TWO = uuids("two-gpus.conf")


def reexec_in_mount_namespace():
    """Runs this file again under `unshare -m --propagation private` (root only)."""
    if os.environ.get(MOUNTNS_ENV) or os.geteuid() != 0 or not shutil.which("unshare"):
        return
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        return
    env = dict(os.environ, **{MOUNTNS_ENV: "1"})
    argv = ["unshare", "-m", "--propagation", "private", sys.executable,
            os.path.abspath(sys.argv[0])] + sys.argv[1:]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe("unshare", argv, env)


CAN_MOUNT = bool(os.environ.get(MOUNTNS_ENV))
needs_mounts = unittest.skipUnless(CAN_MOUNT, "needs root and a private mount namespace")


def sh(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: rc={r.returncode} {r.stdout}{r.stderr}")
    return r


def cdi_config(id_strategy="uuid"):
    return ("version: v1\nflags:\n  plugin:\n"
            "    deviceListStrategy: cdi-annotations\n"
            f"    deviceIDStrategy: {id_strategy}\n")


def cdi_names(resp):
    """The CDI device names an OK Allocate gave the first container (annotations)."""
    ann = resp.responses[0]["annotations"]
    return [n for v in ann.values() for n in v.split(",") if n.startswith(CDI_KIND + "=")]


class Frozen:
    """A 16 MiB ext4 image loop-mounted at a fresh directory; freeze() makes every write,
    fsync and rename on it block until thaw(). Make it before the node and freeze it after:
    the cleanups run last first, so the disk is thawed before the node stops its daemons (one
    with a thread stuck on a frozen disk cannot exit), and unmounted after (a daemon still
    running would write its spec again in the directory underneath)."""

    def __init__(self, test):
        self.dir = tempfile.mkdtemp(prefix="edgegpu-frozen-")
        self.image = self.dir + ".img"
        self.mounted = self.frozen = False
        test.addCleanup(self.close)
        with open(self.image, "wb") as f:
            f.truncate(16 << 20)
        sh("mkfs.ext4", "-q", "-F", self.image)
        sh("mount", "-o", "loop", self.image, self.dir)
        self.mounted = True

    def freeze(self, test):
        sh("fsfreeze", "-f", self.dir)
        self.frozen = True
        test.addCleanup(self.thaw)

    def thaw(self):
        if self.frozen:
            sh("fsfreeze", "-u", self.dir)
            self.frozen = False

    def close(self):
        self.thaw()
        if self.mounted:
            sh("umount", self.dir)
            self.mounted = False
        os.rmdir(self.dir)
        os.unlink(self.image)


class DiskTest(NodeTest):
    def driver_flags(self, n):
        """A fake driver tree under the node's root; the flags that point the daemon at it."""
        driver = os.path.join(n.root, "driver")
        devroot = os.path.join(n.root, "devroot")
        ver = load_fixture("two-gpus.conf")["global"]["driver_version"]
        os.makedirs(driver + LIBDIR)
        for lib in ("libcuda.so.", "libnvidia-ml.so."):
            open(os.path.join(driver + LIBDIR, lib + ver), "w").close()
        os.makedirs(devroot + "/dev")
        for node in ("nvidiactl", "nvidia0", "nvidia1"):
            open(os.path.join(devroot, "dev", node), "w").close()
        return ["--driver-root", driver, "--dev-root", devroot]

    def client(self, n):
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        return c

    def cdi_daemon(self, spec_dir=None, id_strategy="uuid", wait=True, n=None):
        """A node (`n`, or a new one) whose daemon serves cdi-annotations with its spec in
        `spec_dir` (default: the node's own)."""
        n = n or self.node()
        flags = self.driver_flags(n)
        if spec_dir:
            flags += ["--cdi-spec-dir", spec_dir]
        d = n.start_daemon(config=cdi_config(id_strategy), flags=flags)
        if wait:
            n.wait_register(timeout=10)
            d.wait_log(pred=lambda r: r.get("msg") in ("cdi spec written",
                                                        "cdi spec already on disk"),
                       timeout=10)
        return n, d

    def assertAllocatesCdi(self, n, name=TWO[0]):
        r = self.client(n).allocate([name])
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(cdi_names(r), [f"{CDI_KIND}={name}"])

    # --- the spec directory replaced ---

    def test_spec_dir_symlink_swapped(self):
        """The spec directory is a symlink, pointed at another directory by renaming a new
        symlink over it: the spec is written again in the new directory, which is watched
        from then on."""
        base = tempfile.mkdtemp(prefix="edgegpu-cdi-")
        self.addCleanup(shutil.rmtree, base, True)
        a, b, link = (os.path.join(base, x) for x in ("a", "b", "cdi"))
        os.makedirs(a)
        os.makedirs(b)
        os.symlink("a", link)
        n, d = self.cdi_daemon(spec_dir=link)
        with open(os.path.join(a, CDI_FILE), "rb") as f:
            want = f.read()

        lg = d.mark()
        os.symlink("b", link + ".tmp")
        os.rename(link + ".tmp", link)
        rec = d.wait_log("cdi spec removed or changed, writing it again", since=lg,
                         timeout=10)
        self.assertEqual(rec["reason"], "directory replaced")
        self.assertTrue(wait_until(lambda: os.path.exists(os.path.join(b, CDI_FILE)), 10),
                        f"no spec in the new directory: {os.listdir(b)}")
        d.wait_log("cdi spec written", since=lg, timeout=10)
        with open(os.path.join(b, CDI_FILE), "rb") as f:
            self.assertEqual(f.read(), want)
        self.assertAllocatesCdi(n)

        # The new directory is the one watched: its spec removed is written again.
        lg = d.mark()
        os.unlink(os.path.join(b, CDI_FILE))
        d.wait_log("cdi spec written", since=lg, timeout=10)
        self.assertTrue(os.path.exists(os.path.join(b, CDI_FILE)))

    @needs_mounts
    def test_tmpfs_mounted_over_spec_dir(self):
        """A tmpfs mounted over the spec directory hides the spec from the runtime: it is
        written again on the tmpfs; unmounted, the one underneath is ours and stays."""
        n, d = self.cdi_daemon()
        path = os.path.join(n.cdi_dir, CDI_FILE)
        with open(path, "rb") as f:
            want = f.read()

        lg = d.mark()
        sh("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", n.cdi_dir)
        self.addCleanup(subprocess.run, ["umount", n.cdi_dir], capture_output=True)
        self.assertTrue(wait_until(lambda: os.path.exists(path), 10),
                        "spec not written on the tmpfs mounted over its directory")
        d.wait_log("cdi spec written", since=lg, timeout=10)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), want)
        self.assertAllocatesCdi(n)

        lg = d.mark()
        sh("umount", n.cdi_dir)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), want)
        self.assertAllocatesCdi(n)
        self.assertTrue(d.alive())

    # --- two writers ---

    def test_two_daemons_one_spec_dir(self):
        """Two daemons write the same spec file with different device names (uuid, index):
        each sees its spec replaced. They back off and say so once each; the spec is not
        rewritten hundreds of times a second, and Allocate is not refused meanwhile."""
        na, da = self.cdi_daemon(id_strategy="uuid")
        nb, db = self.cdi_daemon(spec_dir=na.cdi_dir, id_strategy="index", wait=False)
        nb.wait_register(timeout=15)
        for d in (da, db):
            rec = d.wait_log("cdi spec rewritten by another writer, backing off", timeout=30)
            self.assertEqual(rec["level"], "warn")
        la, lb = da.mark(), db.mark()
        ca, cb = self.client(na), self.client(nb)
        refused = []
        for i in range(40):
            for c in (ca, cb):
                name = TWO[i % 2]
                r = c.allocate([name])
                if r.code != "OK" or not cdi_names(r):
                    refused.append(r)
        self.assertEqual(refused, [])
        # A back-off from 1 s doubling: a handful of writes each, however long the Allocates
        # took (under 10 minutes: 10 doublings), where a fight without one makes hundreds a
        # second.
        writes = [len(d.find_logs("cdi spec written", since=m)) for d, m in ((da, la), (db, lb))]
        self.assertLessEqual(sum(writes), 20, writes)
        for d in (da, db):
            self.assertEqual(len(d.find_logs("cdi spec rewritten by another writer, "
                                             "backing off")), 1)
            # Before backing off: a few rewrites, said once each.
            self.assertLessEqual(len(d.find_logs("cdi spec removed or changed, writing it "
                                                 "again")), 5, d.tail())
            self.assertTrue(d.alive())
        with open(os.path.join(na.cdi_dir, CDI_FILE)) as f:
            spec = json.load(f)
        self.assertEqual(spec["kind"], CDI_KIND)

    def test_fast_foreign_writer(self):
        """Another writer replaces the spec every few milliseconds, faster than the first
        back-off (1 s): the daemon backs off once and stays backed off (the quiet that ends a
        contest is counted from its start), it does not fight at once again and say so each
        time; stopped, the spec is ours again."""
        n, d = self.cdi_daemon()
        path = os.path.join(n.cdi_dir, CDI_FILE)
        with open(path, "rb") as f:
            want = f.read()
        lg = d.mark()
        stop = threading.Event()

        def rewrite():
            tmp = path + ".other"
            i = 0
            while not stop.is_set():
                with open(tmp, "wb") as f:
                    f.write(b'{"other": %d}\n' % i)
                os.rename(tmp, path)
                i += 1
                time.sleep(0.005)

        t = threading.Thread(target=rewrite, daemon=True)
        t.start()
        try:
            d.wait_log("cdi spec rewritten by another writer, backing off", since=lg,
                       timeout=10)
            time.sleep(4)
        finally:
            stop.set()
            t.join()
        self.assertEqual(len(d.find_logs("cdi spec rewritten by another writer, backing off",
                                         since=lg)), 1, d.tail())
        self.assertEqual(d.find_logs("cdi spec no longer rewritten by another writer",
                                     since=lg), [])
        # Three replacements make a contest; then writes after 1, 2, 4 s: a handful.
        self.assertLessEqual(len(d.find_logs("cdi spec removed or changed, writing it again",
                                             since=lg)), 5, d.tail())
        def ours():
            with open(path, "rb") as f:
                return f.read() == want

        self.assertTrue(wait_until(ours, 15),
                        "the spec is not ours again after the other writer stopped")
        self.assertTrue(d.alive())

    # --- a write that never returns ---

    @needs_mounts
    def test_cdi_write_stuck(self):
        """The spec directory on a frozen filesystem: the first write never returns. After a
        few seconds the daemon says so and registers anyway; Allocate answers at once, refusing
        with the reason, until the disk thaws and the spec is written."""
        fz = Frozen(self)
        n = self.node()
        spec_dir = os.path.join(fz.dir, "cdi")
        os.makedirs(spec_dir)
        fz.freeze(self)
        n, d = self.cdi_daemon(spec_dir=spec_dir, wait=False, n=n)
        rec = d.wait_log("cdi spec write not finished, not waiting for it to register",
                         timeout=30)
        self.assertEqual(rec["level"], "warn")
        self.assertEqual(rec["first"], "yes")
        n.wait_register(timeout=10)
        r = self.client(n).allocate([TWO[0]], timeout=10)
        self.assertEqual(r.code, "FAILED_PRECONDITION", r)
        self.assertIn("has not finished", r.details)

        lg = d.mark()
        fz.thaw()
        d.wait_log("cdi spec written", since=lg, timeout=30)
        self.assertTrue(os.path.exists(os.path.join(spec_dir, CDI_FILE)))
        self.assertAllocatesCdi(n)

    @needs_mounts
    def test_labels_write_stuck(self):
        """The NFD labels file on a frozen filesystem: a reload (the config file changed)
        changes the labels, and their write blocks. The loop does not: the new device list goes out and Allocate answers;
        the write is reported, and lands when the disk thaws."""
        fz = Frozen(self)
        n = self.node()
        labels = os.path.join(fz.dir, "features.d", "edgegpu")
        os.makedirs(os.path.dirname(labels))
        cfg = n.write_config("version: v1\n")
        d = n.start_daemon(config=cfg, flags=["--labels-file", labels])
        n.wait_register(timeout=10)
        n.wait_devices(healthy_count=2, timeout=10)
        self.assertTrue(wait_until(lambda: os.path.exists(labels), 10))
        with open(labels) as f:
            self.assertIn("nvidia.com/gpu.replicas=1\n", f.read())

        fz.freeze(self)
        ev, lg = n.emu.mark(), d.mark()
        n.write_config("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                       "    - name: nvidia.com/gpu\n      replicas: 2\n", cfg)
        n.wait_devices(since=ev, healthy_count=4, timeout=10)
        d.wait_log("labels file write not finished, serving on, writing again when it "
                   "returns", since=lg, timeout=30)
        r = self.client(n).allocate([TWO[0] + "::0"], timeout=5)
        self.assertEqual(r.code, "OK", r)

        fz.thaw()
        d.wait_log("labels file written", since=lg, timeout=30)
        with open(labels) as f:
            self.assertIn("nvidia.com/gpu.replicas=2\n", f.read())


if __name__ == "__main__":
    reexec_in_mount_namespace()
    main()
