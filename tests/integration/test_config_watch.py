#!/usr/bin/python3
"""The config file watch (issue 10): the daemon reloads as on SIGHUP, without a restart, when
the content of its --config-file changes: a ConfigMap volume updated the way the kubelet's
atomic writer does it, an editor's write-and-rename, a write in place (read only once it is
complete), the file deleted and restored (written, or linked back with link(2)), the directory
deleted and recreated, the directory a symlink swapped to another directory. Identical
content and unrelated files reload nothing; invalid content is logged (file:line:col: key)
and the running config stays. Observed through the kubelet emulator (the device lists) and
the daemon's log."""

import itertools
import os
import shutil

from common import RESOURCE, NodeTest, main

LOOP = itertools.count()


def ts_config(replicas):
    return ("version: v1\n"
            "sharing:\n"
            "  timeSlicing:\n"
            "    resources:\n"
            f"    - name: {RESOURCE}\n"
            f"      replicas: {replicas}\n")


class ConfigMapDir:
    """A ConfigMap volume as the kubelet lays it out: DIR/..<timestamp>/config.yaml, the
    symlink DIR/..data -> ..<timestamp>, and DIR/config.yaml -> ..data/config.yaml."""

    def __init__(self, path, text):
        self.path = path
        os.makedirs(path)
        self.current = None
        self.update(text)
        os.symlink(os.path.join("..data", "config.yaml"), self.file)

    @property
    def file(self):
        return os.path.join(self.path, "config.yaml")

    def update(self, text):
        """The atomic writer's steps: a new timestamped directory with the files, a new
        ..data_tmp symlink to it, renamed over ..data, then the old directory removed."""
        name = f"..2026_12_03_15_{next(LOOP):02d}_00.{os.getpid()}"
        new = os.path.join(self.path, name)
        os.makedirs(new)
        with open(os.path.join(new, "config.yaml"), "w") as f:
            f.write(text)
        tmp = os.path.join(self.path, "..data_tmp")
        os.symlink(name, tmp)
        os.rename(tmp, os.path.join(self.path, "..data"))
        if self.current:
            shutil.rmtree(os.path.join(self.path, self.current))
        self.current = name


class ConfigWatchTest(NodeTest):
    def start(self, path, healthy):
        n = self.node("two-gpus.conf")
        d = n.start_daemon(config=path)
        n.wait_register(timeout=10)
        n.wait_devices(healthy_count=healthy, timeout=10)
        d.wait_log("watching the config file for changes", path=path, timeout=10)
        return n, d

    def assertReloadedTo(self, n, d, since_ev, since_log, healthy):
        """The first device list after `since_ev` has `healthy` devices, the daemon reloaded
        once on its own (same process, no SIGHUP) and did not register again (the resource
        kept its name: the new list went out on the open stream)."""
        ev = n.wait_devices(since=since_ev, timeout=10)
        self.assertEqual(ev["healthy_count"], healthy, ev)
        self.assertTrue(d.alive())
        recs = d.find_logs("reloading", since=since_log)
        self.assertEqual([r.get("reason") for r in recs], ["config-file-changed"], d.text())
        self.assertEqual(n.registrations(since=since_ev, ok=None), [])

    def test_configmap_update(self):
        n = self.node("two-gpus.conf")
        cm = ConfigMapDir(os.path.join(n.root, "configmap"), ts_config(2))
        d = n.start_daemon(config=cm.file)
        n.wait_register(timeout=10)
        n.wait_devices(healthy_count=4, timeout=10)
        d.wait_log("watching the config file for changes", path=cm.file, timeout=10)
        pid = d.pid

        ev, lg = n.emu.mark(), d.mark()
        cm.update(ts_config(3))
        self.assertReloadedTo(n, d, ev, lg, 6)
        self.assertEqual(d.pid, pid)

        # The same content again: an update with nothing new reloads nothing.
        lg = d.mark()
        cm.update(ts_config(3))
        d.wait_log("config file content unchanged, not reloading", since=lg, timeout=10)
        self.assertEqual(d.find_logs("reloading", since=lg), [])

        # A file of its own in the directory is none of the watch's business.
        lg = d.mark()
        with open(os.path.join(cm.path, "notes.txt"), "w") as f:
            f.write("unrelated\n")
        cm.update(ts_config(3))  # the sentinel: its check comes after the file's events
        d.wait_log("config file content unchanged, not reloading", since=lg, timeout=10)
        self.assertEqual(d.find_logs("reloading", since=lg), [])
        self.assertEqual(d.find_logs("config file changed", since=lg), [])
        self.assertEqual(n.registrations(since=ev, ok=None), [])

    def test_invalid_content_keeps_running_config(self):
        n = self.node("two-gpus.conf")
        cm = ConfigMapDir(os.path.join(n.root, "configmap"), ts_config(2))
        d = n.start_daemon(config=cm.file)
        n.wait_devices(healthy_count=4, timeout=10)
        d.wait_log("watching the config file for changes", timeout=10)

        ev, lg = n.emu.mark(), d.mark()
        cm.update(ts_config(-1))
        rec = d.wait_log("invalid config, keeping the previous one", since=lg, timeout=10)
        self.assertEqual(rec["level"], "error")
        # file:line:col: key, as check-config prints it: the value on line 6, column 17.
        self.assertRegex(rec["detail"], "^" + cm.file.replace(".", r"\.") +
                         r":6:17: sharing\.timeSlicing\.resources\[0\]\.replicas: ")
        # The devices did not change: the next list is the one of the next valid config.
        cm.update(ts_config(3))
        ev2 = n.wait_devices(since=ev, timeout=10)
        self.assertEqual(ev2["healthy_count"], 6, ev2)
        self.assertEqual(n.registrations(since=ev, ok=None), [])
        self.assertEqual(len(d.find_logs("config file changed", since=lg)), 2)

    def test_editor_rename_and_write_in_place(self):
        n = self.node("two-gpus.conf")
        cdir = os.path.join(n.root, "etc")
        os.makedirs(cdir)
        path = os.path.join(cdir, "config.yaml")
        with open(path, "w") as f:
            f.write(ts_config(2))
        d = n.start_daemon(config=path)
        n.wait_devices(healthy_count=4, timeout=10)
        d.wait_log("watching the config file for changes", timeout=10)

        # An editor's save: a new file beside it, renamed over it.
        ev, lg = n.emu.mark(), d.mark()
        with open(path + ".swp", "w") as f:
            f.write(ts_config(3))
        os.rename(path + ".swp", path)
        self.assertReloadedTo(n, d, ev, lg, 6)

        # Written in place, in two parts: the first part alone is not a valid config (the
        # replicas have no value yet). Nothing is read until the writer closes the file.
        ev, lg = n.emu.mark(), d.mark()
        text = ts_config(4)
        cut = text.index("replicas: ") + len("replicas: ")
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text[:cut].encode())
            os.fsync(fd)
            os.write(fd, text[cut:].encode())
        finally:
            os.close(fd)
        self.assertReloadedTo(n, d, ev, lg, 8)
        self.assertEqual(d.find_logs("invalid config, keeping the previous one", since=lg), [])

    def watched_plain_file(self):
        """A daemon on ROOT/etc/config.yaml (a plain file, not a ConfigMap), 2 replicas per
        GPU, watching it: (node, daemon, the directory, the file)."""
        n = self.node("two-gpus.conf")
        cdir = os.path.join(n.root, "etc")
        os.makedirs(cdir)
        path = os.path.join(cdir, "config.yaml")
        n.write_config(ts_config(2), path)
        d = n.start_daemon(config=path)
        n.wait_devices(healthy_count=4, timeout=10)
        d.wait_log("watching the config file for changes", timeout=10)
        return n, d, cdir, path

    def test_file_deleted_and_restored(self):
        n, d, cdir, path = self.watched_plain_file()

        ev, lg = n.emu.mark(), d.mark()
        os.unlink(path)
        rec = d.wait_log("config file gone, keeping the running config", since=lg, timeout=10)
        self.assertEqual(rec["level"], "warn")
        self.assertTrue(d.alive())
        self.assertEqual(n.emu.find(lambda e: e.get("event") in ("devices", "stream_end"),
                                    ev), [])
        n.write_config(ts_config(3), path)
        d.wait_log("config file back", since=lg, timeout=10)
        self.assertReloadedTo(n, d, ev, lg, 6)
        self.assertEqual(len(d.find_logs("config file gone, keeping the running config",
                                         since=lg)), 1)

    def test_directory_deleted_and_recreated(self):
        n, d, cdir, path = self.watched_plain_file()

        ev, lg = n.emu.mark(), d.mark()
        shutil.rmtree(cdir)
        d.wait_log("config directory gone, keeping the running config", since=lg, timeout=10)
        os.makedirs(cdir)
        d.wait_log("config directory back, watching it again", since=lg, timeout=10)
        n.write_config(ts_config(3), path)
        self.assertReloadedTo(n, d, ev, lg, 6)
        self.assertEqual(n.registrations(since=ev, ok=None), [])

    def test_file_unlinked_and_linked_back(self):
        """link(2) makes the file appear whole, with no IN_CLOSE_WRITE to wait for: the
        restore is read at once, like a rename."""
        n, d, cdir, path = self.watched_plain_file()
        keep = os.path.join(n.root, "config-v3.yaml")
        with open(keep, "w") as f:
            f.write(ts_config(3))

        ev, lg = n.emu.mark(), d.mark()
        os.unlink(path)
        d.wait_log("config file gone, keeping the running config", since=lg, timeout=10)
        os.link(keep, path)
        d.wait_log("config file back", since=lg, timeout=10)
        self.assertReloadedTo(n, d, ev, lg, 6)

    def test_directory_symlink_swapped(self):
        """The directory is a symlink that a deploy tool points elsewhere by renaming a new
        symlink over it: the daemon follows it to the new directory, reloads its file, and
        from then on watches the new directory, not the old one."""
        n = self.node("two-gpus.conf")
        v1, v2 = os.path.join(n.root, "cfg-v1"), os.path.join(n.root, "cfg-v2")
        link = os.path.join(n.root, "etc")
        for v, replicas in ((v1, 2), (v2, 3)):
            os.makedirs(v)
            n.write_config(ts_config(replicas), os.path.join(v, "config.yaml"))
        os.symlink("cfg-v1", link)
        path = os.path.join(link, "config.yaml")
        d = n.start_daemon(config=path)
        n.wait_devices(healthy_count=4, timeout=10)
        d.wait_log("watching the config file for changes", timeout=10)

        ev, lg = n.emu.mark(), d.mark()
        os.symlink("cfg-v2", link + ".tmp")
        os.rename(link + ".tmp", link)
        self.assertReloadedTo(n, d, ev, lg, 6)
        d.wait_log("config directory replaced, watching the new one", since=lg, timeout=10)

        # The old directory is none of its business any more; the new one is watched. The
        # new one's change is the sentinel: the only reload is to its content.
        ev, lg = n.emu.mark(), d.mark()
        n.write_config(ts_config(1), os.path.join(v1, "config.yaml"))
        n.write_config(ts_config(4), os.path.join(v2, "config.yaml"))
        self.assertReloadedTo(n, d, ev, lg, 8)
        self.assertEqual(len(d.find_logs("config file changed", since=lg)), 1)
        self.assertEqual(d.find_logs("config directory gone, keeping the running config"), [])


if __name__ == "__main__":
    main()
