"""A hostile host for per-pod attribution (issue 16): the host's /proc with 512 GPU processes
(64 per GPU of eight) whose cgroup files are 64 KiB, a FIFO in place of a cgroup file, a pid
directory and a cgroup file that link out of the tree; /var/log/containers with 100,000 links
beside the real ones; /var/log/pods entries that link out of the tree (to a directory whose one
subdirectory would become a container label, and to a 100,000-entry directory), a real pod
directory with more entries than the daemon lists, and a pod that no log names. Used by tests/integration/test_attribution.py
and bench/run."""

import os

MIB = 1 << 20
GPUS = 8
PER_GPU = 64                      # GPU_SAMPLE_PROCS_MAX: what one sample lists per GPU
CGROUP_BYTES = 64 * 1024          # each cgroup file; the daemon reads the first 16 KiB
SECRET = "secret-label"           # the subdirectory behind a pods/ link: never a label
NAMESPACE = "team"
HOSTILE = 7                       # the last processes of the last GPU, one per kind below


def cid(n):
    return f"{n:064x}"


def uid(n):
    return f"{n:08x}-1111-4222-8333-{n:012x}"


def padded(first, last="", size=CGROUP_BYTES):
    """A cgroup file of about `size` bytes: `first`, host lines as padding, then `last`."""
    body, n, i = [first], len(first) + len(last), 0
    while True:
        line = f"9:cpu,cpuacct:/system.slice/padding-{i:08d}.service\n"
        if n + len(line) > size:
            break
        body.append(line)
        n += len(line)
        i += 1
    body.append(last)
    return "".join(body)


def pod_line(u, c=""):
    return f"0::/kubepods/burstable/pod{u}" + (f"/{c}" if c else "") + "\n"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class HostileHost:
    """Builds the trees under `proc_dir`, `log_dir` (its containers/ and pods/) and `outside`
    (a directory that is not below either root). After build():
      processes[gpu]   the fake NVML's "processes" value for that GPU
      pods             {(pod, container): bytes} that the daemon must attribute
      unattributed     {pid: reason} for the hostile processes
    """

    def __init__(self, proc_dir, log_dir, outside, links=100_000, big_dir=100_000,
                 wide_dir=2_000):
        self.proc_dir = proc_dir
        self.log_dir = log_dir
        self.outside = outside
        self.links = links
        self.big_dir = big_dir
        self.wide_dir = wide_dir
        self.processes = {}
        self.pods = {}
        self.unattributed = {}

    def proc(self, pid, text):
        d = os.path.join(self.proc_dir, str(pid))
        os.makedirs(d, exist_ok=True)
        write(os.path.join(d, "cgroup"), text)

    def build(self):
        os.makedirs(self.outside, exist_ok=True)
        containers = os.path.join(self.log_dir, "containers")
        pods = os.path.join(self.log_dir, "pods")
        for g in range(GPUS):
            entries = []
            for j in range(PER_GPU):
                pid = 10000 + g * PER_GPU + j
                mem = (j + 1) * MIB
                entries.append(f"{pid}:{mem}")
                if g == GPUS - 1 and j >= PER_GPU - HOSTILE:
                    self.hostile(pid, mem, PER_GPU - 1 - j, pods)
                    continue
                self.proc(pid, padded(pod_line(uid(100 + g), cid(100 + g))))
                key = (f"infer-{g}", "main")
                self.pods[key] = self.pods.get(key, 0) + mem
            self.processes[g] = ",".join(entries)
        for g in range(GPUS):
            os.symlink(f"/var/log/pods/{NAMESPACE}_infer-{g}_{uid(100 + g)}/main/0.log",
                       os.path.join(containers, f"infer-{g}_{NAMESPACE}_main-{cid(100 + g)}.log"))
        for i in range(self.links):
            self.junk_link(i)
        return self

    def junk_link(self, i):
        """One more valid-looking container link (a container that is not on a GPU)."""
        os.symlink("/var/log/pods/x/0.log",
                   os.path.join(self.log_dir, "containers",
                                f"junk-{i}_default_c-{cid(10_000_000 + i)}.log"))

    def hostile(self, pid, mem, k, pods):
        if k == 0:    # a FIFO: a plain open() would block the reader forever
            os.makedirs(os.path.join(self.proc_dir, str(pid)))
            os.mkfifo(os.path.join(self.proc_dir, str(pid), "cgroup"))
            self.unattributed[pid] = "skipped"
        elif k == 1:  # the pid directory links out of the tree, to a valid pod cgroup
            d = os.path.join(self.outside, f"proc-{pid}")
            os.makedirs(d)
            write(os.path.join(d, "cgroup"), pod_line(uid(100), cid(100)))
            os.symlink(d, os.path.join(self.proc_dir, str(pid)))
            self.unattributed[pid] = "skipped"
        elif k == 2:  # the pod is named only past the bytes read
            self.proc(pid, padded("0::/system.slice/a.service\n", pod_line(uid(100), cid(100))))
            self.unattributed[pid] = "skipped"
        elif k == 3:  # a pods/ entry linking out of the tree, to one "container" directory
            d = os.path.join(self.outside, "leak")
            os.makedirs(os.path.join(d, SECRET))
            os.symlink(d, os.path.join(pods, f"{NAMESPACE}_leak_{uid(900)}"))
            self.proc(pid, padded(pod_line(uid(900))))
            self.unattributed[pid] = "unknown-pod"
        elif k == 4:  # a pods/ entry linking to a 100,000-entry directory
            d = os.path.join(self.outside, "big")
            os.makedirs(d)
            for i in range(self.big_dir):
                os.close(os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY, 0o644))
            os.mkdir(os.path.join(d, "only-dir"))
            os.symlink(d, os.path.join(pods, f"{NAMESPACE}_big_{uid(901)}"))
            self.proc(pid, padded(pod_line(uid(901))))
            self.unattributed[pid] = "unknown-pod"
        elif k == 5:  # a pod no log names any more (rotated away): each batch misses it
            self.proc(pid, padded(pod_line(uid(903), cid(903))))
            self.unattributed[pid] = "unknown-pod"
        else:         # a real pod directory with more entries than are listed: pod, no container
            d = os.path.join(pods, f"{NAMESPACE}_wide_{uid(902)}")
            os.makedirs(os.path.join(d, "main"))
            for i in range(self.wide_dir):
                os.close(os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY, 0o644))
            self.proc(pid, padded(pod_line(uid(902))))
            self.pods[("wide", "")] = mem
