"""What bench/run and bench/peer.py read of a process in /proc: one copy for both.

Each reader raises when the field is missing (a process that is gone, or a kernel without the
file), so a figure is never made up; the per-thread sums skip a thread that exits meanwhile.
"""
import os


def status_field(pid, key):
    """An integer field of /proc/PID/status (VmRSS, VmHWM in KiB; Threads)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/{pid}/status")


def threads(pid):
    return status_field(pid, "Threads")


def pss_kib(pid):
    """Pss of /proc/PID/smaps_rollup: shared pages split between the processes mapping them."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError(f"no Pss in /proc/{pid}/smaps_rollup")


def cpu_ms(pid):
    """CPU time of every thread in ms, from schedstat (ns, unlike the 10 ms ticks of stat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total / 1e6


def ctx_switches(pid):
    """Context switches of every thread: each one is a wake-up (or a preemption)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total
