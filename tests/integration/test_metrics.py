#!/usr/bin/python3
"""Observability: /metrics, /healthz and /readyz of the real daemon on the fake NVML, read
directly and by a real Prometheus (Debian's), checked with promtool; per-pod attribution from
the emulator's pod-resources answer and fake /proc cgroup files; node labels."""

import gzip
import os
import shutil
import signal
import subprocess
import time

from common import RESOURCE, NodeTest, main, uuids, wait_until
from edgegpu import samples

TWO = uuids("two-gpus.conf")
GPUMEM = "nvidia.com/gpumem"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
RULES = os.path.join(REPO, "deployments", "prometheus", "edgegpu-rules.yaml")
DASHBOARD = os.path.join(REPO, "deployments", "grafana", "edgegpu.json")
MIB = 1 << 20

FAST = "version: v1\nedgegpu:\n  metrics:\n    minInterval: 100ms\n"


def promtool_check(text):
    """promtool check metrics on an exposition: (ok, findings). It must parse, and lint clean
    but for what DCGM-exporter's names cause by design (tests/lib/prometheus.py)."""
    from prometheus import check_metrics
    left = check_metrics(text)
    return not left, "\n".join(left)


def one(expo, name, **match):
    got = samples(expo, name, **match)
    if len(got) != 1:
        raise AssertionError(f"{name} {match}: {len(got)} samples: {got}")
    return got[0]


class Endpoints(NodeTest):
    def test_metrics_content_type_values_and_gzip(self):
        n, d = self.up("two-gpus.conf", config=FAST)
        status, headers, body = d.http("/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
        text = body.decode()
        ok, out = promtool_check(text)
        self.assertTrue(ok, out)
        expo = d.scrape()
        labels, v = one(expo, "DCGM_FI_DEV_GPU_TEMP", UUID=TWO[0])
        self.assertEqual(v, 41)
        self.assertEqual(labels["gpu"], "0")
        self.assertEqual(labels["modelName"], "NVIDIA A2")
        self.assertEqual(labels["device"], "nvidia0")
        self.assertEqual(labels["pci_bus_id"], "00000000:17:00.0")
        self.assertIn("Hostname", labels)
        self.assertEqual(one(expo, "DCGM_FI_DEV_POWER_USAGE", UUID=TWO[0])[1], 21.5)
        self.assertEqual(one(expo, "DCGM_FI_DEV_FB_TOTAL", UUID=TWO[1])[1], 23034)
        self.assertEqual(one(expo, "DCGM_FI_DEV_FB_USED", UUID=TWO[0])[1], 512)
        self.assertEqual(one(expo, "DCGM_FI_DEV_FB_FREE", UUID=TWO[0])[1], 15356 - 512)
        self.assertEqual(one(expo, "DCGM_FI_DEV_SM_CLOCK", UUID=TWO[1])[1], 2040)
        self.assertEqual(one(expo, "DCGM_FI_DEV_GPU_UTIL", UUID=TWO[0])[1], 35)
        self.assertEqual(one(expo, "DCGM_FI_DEV_SLOWDOWN_TEMP", UUID=TWO[1])[1], 92)
        self.assertEqual(one(expo, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", UUID=TWO[0])[1], 3)
        lab, v = one(expo, "DCGM_FI_DEV_XID_ERRORS", UUID=TWO[0])
        self.assertEqual((v, lab["err_code"], lab["err_msg"]), (0, "0", "No Error"))
        self.assertEqual(one(expo, "edgegpu_gpu_healthy", UUID=TWO[1])[1], 1)
        self.assertEqual(one(expo, "edgegpu_ready")[1], 1)
        self.assertEqual(one(expo, "edgegpu_plugin_registered", resource=RESOURCE)[1], 1)
        self.assertEqual(one(expo, "edgegpu_resource_devices", resource=RESOURCE,
                             health="Healthy")[1], 2)
        self.assertGreater(one(expo, "process_resident_memory_bytes")[1], 0)
        # The fixture's process 4242 is not in this node's /proc: reported, not dropped.
        self.assertEqual(one(expo, "edgegpu_unattributed_gpu_memory_used_bytes",
                             pid="4242")[0]["reason"], "no-proc")
        status, headers, zbody = d.http("/metrics", headers={"Accept-Encoding": "gzip"})
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Content-Encoding"), "gzip")
        self.assertIn(b"DCGM_FI_DEV_GPU_TEMP", gzip.decompress(zbody))

    def test_xid_err_code_and_err_msg(self):
        """DCGM-exporter's err_code/err_msg on DCGM_FI_DEV_XID_ERRORS: the XID and NVIDIA's
        name of it; device is nvidia<index>."""
        n, d = self.up("two-gpus.conf", config=FAST)
        n.nvml.xid(1, 79)
        expo = wait_until(lambda: (lambda e: e if one(e, "DCGM_FI_DEV_XID_ERRORS",
                                                         UUID=TWO[1])[1] == 79 else None)(
            d.scrape()), 10, "XID 79 served")
        lab, _ = one(expo, "DCGM_FI_DEV_XID_ERRORS", UUID=TWO[1])
        self.assertEqual((lab["err_code"], lab["err_msg"], lab["device"]),
                         ("79", "GPU has fallen off the bus", "nvidia1"))
        lab, _ = one(expo, "DCGM_FI_DEV_XID_ERRORS", UUID=TWO[0])
        self.assertEqual((lab["err_code"], lab["err_msg"]), ("0", "No Error"))

    def test_gpu_and_device_are_nvml_indexes_when_a_mig_gpu_is_skipped(self):
        """GPU 0 has MIG on and is not served: GPU 1 keeps NVML's index in `gpu` and `device`,
        as DCGM-exporter (its GPU id) and nvidia-smi number it, not its place among the
        served GPUs."""
        n, d = self.up("mig.conf", config=FAST, healthy=1)
        uuid = uuids("mig.conf")[1]
        expo = d.scrape()
        for fam in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"):
            lab, _ = one(expo, fam, UUID=uuid)
            self.assertEqual((lab["gpu"], lab["device"]), ("1", "nvidia1"), fam)
        self.assertEqual(one(expo, "edgegpu_gpu_healthy", UUID=uuid)[0]["gpu"], "1")
        self.assertEqual(one(expo, "edgegpu_device_healthy", UUID=uuid)[0]["gpu"], "1")
        self.assertEqual(samples(expo, "DCGM_FI_DEV_GPU_TEMP", gpu="0"), [])

    def test_a_scraping_loop_is_throttled(self):
        cfg = "version: v1\nedgegpu:\n  metrics:\n    maxConnections: 4\n"
        n, d = self.up("two-gpus.conf", config=cfg)
        t0 = time.monotonic()
        got = [d.http("/metrics") for _ in range(6)]
        took = time.monotonic() - t0
        ok = [g for g in got if g[0] == 200]
        slow = [g for g in got if g[0] == 429]
        self.assertEqual(len(ok) + len(slow), 6, [g[0] for g in got])
        self.assertGreaterEqual(len(ok), 4, "a burst of maxConnections is answered")
        self.assertLessEqual(len(ok), 4 + int(took * 4) + 1, "then maxConnections a second")
        self.assertTrue(slow, "the loop was throttled")
        self.assertGreaterEqual(took, 0.9 * len(slow), "each 429 comes a second late")
        self.assertEqual(slow[0][1]["Retry-After"], "1")
        self.assertIn(b"too many scrapes", slow[0][2])
        # /healthz is never throttled; the throttling is counted.
        self.assertEqual(d.http("/healthz")[0], 200)
        wait_until(lambda: one(d.scrape(), "edgegpu_metrics_scrapes_throttled_total")[1] >=
                   len(slow), 10, "the throttled scrapes counted (next rendering)")

    def test_healthz_readyz_and_unknown_paths(self):
        n, d = self.up("two-gpus.conf")
        self.assertEqual(d.http("/healthz")[0], 200)
        status, _, body = d.http("/readyz")
        self.assertEqual((status, body), (200, b"ready\n"))
        self.assertEqual(d.http("/nope")[0], 404)

    def test_readyz_names_the_socket_that_cannot_be_served(self):
        n = self.node()
        blocker = n.socket()
        os.makedirs(os.path.join(blocker, "sub"))
        d = n.start_daemon()
        d.wait_log("cannot serve the device plugin socket, retrying", timeout=10)
        wait_until(lambda: d.http("/readyz")[0] == 503, 10, "/readyz 503")
        status, _, body = d.http("/readyz")
        self.assertIn(f"{RESOURCE}: socket {blocker} is not served", body.decode())
        self.assertEqual(one(d.scrape(), "edgegpu_ready")[1], 0)
        shutil.rmtree(blocker)
        n.wait_register(timeout=15)
        wait_until(lambda: d.http("/readyz")[0] == 200, 10, "/readyz 200 once served")

    def test_connection_flood_and_slowloris_leave_the_kubelet_side_alone(self):
        import resource
        import socket
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, 4096)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        cfg = "version: v1\nedgegpu:\n  metrics:\n    maxConnections: 8\n" \
              "    connectionTimeout: 1s\n"
        n, d = self.up("two-gpus.conf", config=cfg)
        port = d.metrics_port()
        base_fds = d.fd_count()
        socks = []
        try:
            for i in range(1000):
                s = socket.socket()
                s.setblocking(False)
                try:
                    s.connect(("127.0.0.1", port))
                except BlockingIOError:
                    pass
                socks.append(s)
            for s in socks[:20]:  # slowloris: half a request each, never finished
                try:
                    s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                except OSError:
                    pass
            # The kubelet side is served as before, and every Allocate succeeds.
            ev = n.emu.load(RESOURCE, "allocate", 200, 4)
            self.assertEqual(ev.get("errors", 0), 0, ev)
            self.assertLess(d.fd_count(), base_fds + 8 + 16,
                            "connections past maxConnections are not kept open")
        finally:
            for s in socks:
                s.close()
        # The slow ones are cut, the flood is gone: a fresh scrape is answered.
        def healthy():
            try:
                return d.http("/healthz", timeout=5)[0] == 200
            except OSError:
                return False
        wait_until(healthy, 15, "/healthz answered once the flood is gone")
        self.assertTrue(d.alive())

    def test_hostile_gpu_and_pod_names_scrape_cleanly(self):
        n = self.node("two-gpus.conf")
        with open(n.fixture) as f:
            text = f.read()
        hostile = 'Evil "GPU" \\\\ back\\nline \u00e9\u6f22 \U0001f600'
        with open(n.fixture, "w") as f:
            f.write(text.replace("name = NVIDIA A2", "name = " + hostile, 1))
        d = n.start_daemon()
        n.wait_register(timeout=10)
        n.wait_devices(healthy_count=2, timeout=10)
        ev = n.emu.admit("evil%22pod%5C%0Aname", f"c1:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        status, _, body = d.http("/metrics")
        self.assertEqual(status, 200)
        ok, out = promtool_check(body.decode())
        self.assertTrue(ok, out)
        expo = d.scrape()
        labels, _ = one(expo, "DCGM_FI_DEV_GPU_TEMP", gpu="0")
        self.assertEqual(labels["modelName"], 'Evil "GPU" \\ back\nline \u00e9\u6f22 \U0001f600')

        def held():
            return samples(d.scrape(), "edgegpu_pod_gpu_allocation", resource=RESOURCE)
        wait_until(lambda: held(), 10, "the pod's allocation in /metrics")
        self.assertEqual(held()[0][0]["pod"], 'evil"pod\\\nname')


class Sampling(NodeTest):
    def test_no_telemetry_calls_without_scrapes(self):
        cfg = FAST + "  health:\n    eventPollInterval: 100ms\n"
        n, d = self.up("two-gpus.conf", config=cfg)
        probes0 = n.nvml.count("nvmlDeviceGetMemoryInfo")
        power0 = n.nvml.count("nvmlDeviceGetPowerUsage")
        # The worker does its periodic work (probes) and nobody scrapes: no telemetry call.
        wait_until(lambda: n.nvml.count("nvmlDeviceGetMemoryInfo") >= probes0 + 10, 20,
                   "ten more health probes")
        self.assertEqual(n.nvml.count("nvmlDeviceGetPowerUsage"), power0)
        d.scrape()
        wait_until(lambda: n.nvml.count("nvmlDeviceGetPowerUsage") == power0 + 2, 10,
                   "one sample: a call per GPU")

    def test_scrapes_within_min_interval_share_one_sample(self):
        cfg = "version: v1\nedgegpu:\n  metrics:\n    minInterval: 1h\n"
        n, d = self.up("two-gpus.conf", config=cfg)
        d.scrape()
        power = n.nvml.count("nvmlDeviceGetPowerUsage")
        for _ in range(5):
            d.scrape()
        self.assertEqual(n.nvml.count("nvmlDeviceGetPowerUsage"), power)

    def test_hung_nvml_call_scrape_answers_from_the_cache(self):
        cfg = FAST + "    scrapeWait: 300ms\n  health:\n    callTimeout: 500ms\n"
        n, d = self.up("two-gpus.conf", config=cfg)
        self.assertEqual(one(d.scrape(), "DCGM_FI_DEV_GPU_TEMP", gpu="0")[1], 41)
        n.nvml.block("nvmlDeviceGetPowerUsage")
        n.nvml.cmd("temp 0 66")

        def scrape_until_blocked():
            # Each scrape past minInterval asks for a sample; the first one blocks inside
            # the fake. Every scrape meanwhile answers within scrapeWait, from the cache.
            t0 = time.monotonic()
            expo = d.scrape(timeout=5)
            self.assertLess(time.monotonic() - t0, 3, "a scrape waits scrapeWait at most")
            self.assertEqual(one(expo, "DCGM_FI_DEV_GPU_TEMP", gpu="0")[1], 41)
            return n.nvml.blocked("nvmlDeviceGetPowerUsage") == 1
        wait_until(scrape_until_blocked, 10, "a sample blocked in the driver")
        d.wait_log("nvml call hung, its gpus are unhealthy until it returns, serving on",
                   timeout=10)
        # While the call hangs, scrapes answer at once with ever older samples.
        ages = []
        for _ in range(3):
            t0 = time.monotonic()
            expo = d.scrape(timeout=5)
            self.assertLess(time.monotonic() - t0, 1)
            self.assertEqual(one(expo, "edgegpu_nvml_call_hung")[1], 1)
            ages.append(one(expo, "edgegpu_metrics_sample_age_seconds")[1])
        self.assertEqual(ages, sorted(ages))
        self.assertGreater(ages[-1], 0.4)
        n.nvml.release("nvmlDeviceGetPowerUsage")
        d.wait_log("nvml call returned", timeout=10)
        # (A sample taken while GPU 0's call hung leaves GPU 0 out: its series may be gone
        # for a scrape or two.)
        wait_until(lambda: [v for _, v in samples(d.scrape(), "DCGM_FI_DEV_GPU_TEMP",
                                                  gpu="0")] == [66], 10,
                   "fresh samples once the call returned")
        # GPU 0's call, and GPU 1's (a new worker samples it) if it hung long enough too.
        self.assertIn(one(d.scrape(), "edgegpu_nvml_hung_calls_total")[1], (1, 2))


COUNTERS = uuids("counters.conf")


class Counters(NodeTest):
    """DCGM-exporter's other default counters (fixtures/counters.conf: GPU 0 has every feature,
    GPU 1 none of the optional ones), and the call a hang is logged under."""

    def test_counters_with_and_without_each_feature(self):
        n, d = self.up("counters.conf", config=FAST)
        status, _, body = d.http("/metrics")
        self.assertEqual(status, 200)
        ok, out = promtool_check(body.decode())
        self.assertTrue(ok, out)
        expo = d.scrape()
        full, bare = COUNTERS
        want = {
            "DCGM_FI_DEV_MEMORY_TEMP": (47, None),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": (3, 0),
            "DCGM_FI_DEV_ENC_UTIL": (12, 0),
            "DCGM_FI_DEV_DEC_UTIL": (34, 0),
            "DCGM_FI_DEV_FB_RESERVED": (512, 0),
            "DCGM_FI_DEV_FB_USED": (1024, 512),
            # NVML's free: total - used - reserved on GPU 0, not total - used
            "DCGM_FI_DEV_FB_FREE": (81559 - 1024 - 512, 15356 - 512),
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": (2, None),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (1, None),
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": (1, None),
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (18 * 3000, None),
        }
        for name, (v_full, v_bare) in want.items():
            with self.subTest(name=name):
                self.assertEqual(one(expo, name, UUID=full)[1], v_full)
                got = samples(expo, name, UUID=bare)
                # Absent, never a sentinel, where the GPU lacks the feature.
                self.assertEqual([v for _, v in got], [] if v_bare is None else [v_bare])
        # A feature turned on at run time shows in a later scrape.
        n.nvml.cmd("set 1 memory_temperature 52")
        wait_until(lambda: [v for _, v in samples(d.scrape(), "DCGM_FI_DEV_MEMORY_TEMP",
                                                  UUID=bare)] == [52], 10,
                   "GPU 1's memory temperature once it has one")

    def test_a_hang_is_logged_under_the_hung_calls_name(self):
        # Issue 20 said a hang in the power readings was logged under another call's name
        # (nvml-sample.c passing the pointer around the naming macro): each of those calls,
        # and the counters' ones, hung in turn, must be named in the log as itself.
        cfg = FAST + "    scrapeWait: 300ms\n  health:\n    callTimeout: 500ms\n"
        n, d = self.up("counters.conf", config=cfg)
        for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                   "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetFieldValues",
                   "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetEncoderUtilization",
                   "nvmlDeviceGetDecoderUtilization", "nvmlDeviceGetRemappedRows"):
            with self.subTest(call=fn):
                since = len(d.logs)
                n.nvml.block(fn)

                def blocked():
                    d.scrape(timeout=5)
                    return n.nvml.blocked(fn) >= 1
                wait_until(blocked, 10, f"a sample blocked in {fn}")
                r = d.wait_log("nvml call hung, its gpus are unhealthy until it returns, "
                               "serving on", timeout=10, since=since)
                n.nvml.release(fn)
                d.wait_log("nvml call returned", timeout=10, since=since)
                self.assertEqual(r.get("call"), fn, r)


def cid(n):
    return f"{n:064x}"


def uid(n):
    return f"{n:08x}-1111-4222-8333-{n:012x}"


def write_proc(root, pid, text):
    os.makedirs(os.path.join(root, str(pid)), exist_ok=True)
    with open(os.path.join(root, str(pid), "cgroup"), "w") as f:
        f.write(text)


def kubelet_log_link(log_dir, pod, container, container_id, ns="default"):
    """The kubelet's /var/log/containers symlink (its target need not exist)."""
    os.symlink(f"/var/log/pods/{ns}_{pod}_x/{container}/0.log",
               os.path.join(log_dir, "containers", f"{pod}_{ns}_{container}-{container_id}.log"))


POD_CONFIG = ("version: v1\nedgegpu:\n  sharing:\n    memory:\n      devices: [0]\n"
              "      unitMiB: 256\n      reserveMiB: 512\n  metrics:\n    minInterval: 100ms\n")


class Pods(NodeTest):
    def pod_node(self, config=POD_CONFIG):
        n, d = self.up("two-gpus.conf", config=config, healthy=1)
        n.wait_devices(GPUMEM, timeout=10)
        for pod, req in (("infer-a", f"c1:{GPUMEM}=4"), ("infer-b", f"c1:{GPUMEM}=2"),
                         ("train", f"main:{RESOURCE}=1")):
            ev = n.emu.admit(pod, req)
            self.assertTrue(ev["ok"], ev)
        # containerd, cgroup v2, systemd driver
        write_proc(n.proc_dir, 1001,
                   "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
                   f"{uid(1).replace('-', '_')}.slice/cri-containerd-{cid(1)}.scope\n")
        # Docker (cri-dockerd), cgroup v1, cgroupfs driver
        write_proc(n.proc_dir, 1002, "".join(
            f"{i}:{c}:/kubepods/besteffort/pod{uid(2)}/{cid(2)}\n"
            for i, c in ((12, "memory"), (11, "cpu,cpuacct"), (3, "devices"),
                         (1, "name=systemd"))))
        # a host process: not in a pod
        write_proc(n.proc_dir, 1003, "0::/system.slice/ollama.service\n")
        # CRI-O, cgroup v2, Guaranteed pod, seen from inside a cgroup namespace
        write_proc(n.proc_dir, 1004,
                   f"0::/../../kubepods.slice/kubepods-pod{uid(4).replace('-', '_')}.slice/"
                   f"crio-{cid(4)}.scope\n")
        kubelet_log_link(n.log_dir, "infer-a", "c1", cid(1))
        kubelet_log_link(n.log_dir, "infer-b", "c1", cid(2))
        kubelet_log_link(n.log_dir, "train", "main", cid(4))
        n.nvml.set(0, "processes",
                   f"1001:{1536 * MIB},1002:{256 * MIB},1003:{100 * MIB},4242:{8 * MIB}")
        n.nvml.set(1, "processes", f"1004:{2048 * MIB}")
        return n, d

    def test_per_pod_usage_and_slices_cgroup_v1_and_v2(self):
        n, d = self.pod_node()

        def ready():
            e = d.scrape()
            return e if len(samples(e, "edgegpu_pod_gpu_memory_used_bytes")) == 3 and \
                len(samples(e, "edgegpu_pod_gpumem_limit_bytes")) == 2 else None
        expo = wait_until(ready, 10, "three pods' usage and two slices")
        used = {lab["pod"]: v for lab, v in samples(expo, "edgegpu_pod_gpu_memory_used_bytes")}
        self.assertEqual(used, {"infer-a": 1536 * MIB, "infer-b": 256 * MIB,
                                "train": 2048 * MIB})
        lim = {lab["pod"]: (v, lab["UUID"], lab["container"], lab["namespace"])
               for lab, v in samples(expo, "edgegpu_pod_gpumem_limit_bytes", resource=GPUMEM)}
        self.assertEqual(lim, {"infer-a": (1024 * MIB, TWO[0], "c1", "default"),
                               "infer-b": (512 * MIB, TWO[0], "c1", "default")})
        un = {lab["pid"]: lab["reason"]
              for lab, _ in samples(expo, "edgegpu_unattributed_gpu_memory_used_bytes")}
        self.assertEqual(un, {"1003": "host", "4242": "no-proc"})
        # A whole GPU held by one container: its DCGM series carry the pod, as DCGM-exporter's.
        lab, _ = one(expo, "DCGM_FI_DEV_GPU_TEMP", UUID=TWO[1])
        self.assertEqual((lab["pod"], lab["namespace"], lab["container"]),
                         ("train", "default", "main"))
        # ... and its UID, from the cgroup of its process (issue 20: DCGM-exporter's pod_uid).
        self.assertEqual(lab["pod_uid"], uid(4))
        lab, _ = one(expo, "DCGM_FI_DEV_GPU_TEMP", UUID=TWO[0])
        self.assertNotIn("pod", lab, "a shared GPU's series name no pod")
        self.assertNotIn("pod_uid", lab)
        # Off by default: no per-pod DCGM_FI_DEV_GPU_UTIL (DCGM-exporter's virtual-GPU mode).
        self.assertEqual(len(samples(expo, "DCGM_FI_DEV_GPU_UTIL", UUID=TWO[0])), 1)
        units = {lab["state"]: v for lab, v in samples(expo, "edgegpu_gpumem_units",
                                                        UUID=TWO[0])}
        self.assertEqual(units["allocated"], 6)
        self.assertEqual(units["allocated"] + units["free"], (15356 - 512) // 256)

    def test_virtual_gpus_per_pod_series(self):
        """kubernetesVirtualGpus: the shared GPU's DCGM_FI_DEV_GPU_UTIL and _FB_USED once per
        container, from its processes; where the GPU cannot give a process's SM share
        (NOT_SUPPORTED, the fake's default) GPU_UTIL is left out for that container, FB_USED
        stays; the same GPU with per-process utilisation gives it."""
        cfg = POD_CONFIG + "    kubernetesVirtualGpus: true\n"
        n, d = self.pod_node(config=cfg)

        def per_pod(e, name):
            return {lab["pod"]: (v, lab.get("pod_uid"), lab["container"])
                    for lab, v in samples(e, name, UUID=TWO[0]) if "pod" in lab}

        expo = wait_until(lambda: (lambda e: e if len(per_pod(e, "DCGM_FI_DEV_FB_USED")) == 2
                                   else None)(d.scrape()), 10, "two pods' FB_USED")
        self.assertEqual(per_pod(expo, "DCGM_FI_DEV_FB_USED"),
                         {"infer-a": (1536, uid(1), "c1"), "infer-b": (256, uid(2), "c1")})
        self.assertEqual(per_pod(expo, "DCGM_FI_DEV_GPU_UTIL"), {}, "no per-process SM share")
        # the GPU's own series stay, without pod labels
        for name, want in (("DCGM_FI_DEV_GPU_UTIL", 35), ("DCGM_FI_DEV_FB_USED", 512)):
            own = [v for lab, v in samples(expo, name, UUID=TWO[0]) if "pod" not in lab]
            self.assertEqual(own, [want], name)

        n.nvml.set(0, "process_sm_util", "1001:40,1002:15")
        expo = wait_until(lambda: (lambda e: e if len(per_pod(e, "DCGM_FI_DEV_GPU_UTIL")) == 2
                                   else None)(d.scrape()), 10, "two pods' GPU_UTIL")
        self.assertEqual(per_pod(expo, "DCGM_FI_DEV_GPU_UTIL"),
                         {"infer-a": (40, uid(1), "c1"), "infer-b": (15, uid(2), "c1")})
        ok, out = promtool_check(d.http("/metrics")[2].decode())
        self.assertTrue(ok, out)

    def test_prometheus_alerts_and_dashboard_on_the_live_exporter(self):
        from prometheus import Prometheus
        n, d = self.pod_node()
        n.nvml.xid(0, 79)
        n.nvml.set(0, "clock_reasons", "0x40")
        port = d.metrics_port()
        with Prometheus(targets={"edgegpu": [f"127.0.0.1:{port}"]},
                        rule_files=[RULES]) as prom:
            prom.wait_target_up("edgegpu")
            prom.wait_for('DCGM_FI_DEV_GPU_TEMP{gpu="1"}', lambda r: r and
                          float(r[0]["value"][1]) == 38, 20)
            n.nvml.cmd("temp 1 77")
            prom.wait_for('DCGM_FI_DEV_GPU_TEMP{gpu="1"}', lambda r: r and
                          float(r[0]["value"][1]) == 77, 20)
            prom.wait_for('DCGM_FI_DEV_XID_ERRORS{gpu="0"}', lambda r: r and
                          float(r[0]["value"][1]) == 79, 20)
            prom.wait_for('edgegpu_xid_errors_total{xid="79"}', lambda r: r and
                          float(r[0]["value"][1]) == 1, 20)
            # The over-slice rule's expression names infer-a (1.5 GiB used of a 1 GiB slice).
            over = prom.wait_for("ALERTS{alertname=~\".*Slice.*\"}", lambda r: r, 30)
            self.assertEqual({a["metric"]["pod"] for a in over}, {"infer-a"})
            prom.wait_for('ALERTS{alertname=~".*Xid.*"}', lambda r: r, 30)
            prom.wait_for('ALERTS{alertname=~".*Unhealthy.*"}', lambda r: r, 30)
            prom.wait_for('ALERTS{alertname=~".*Thermal.*"}', lambda r: r, 30)
            # Every dashboard panel's query returns series for the fake GPUs.
            p = subprocess.run([os.path.join(REPO, "tests", "deploy", "dashboard-queries"),
                                DASHBOARD, prom.url], capture_output=True, timeout=120)
            self.assertEqual(p.returncode, 0, (p.stdout + p.stderr).decode())


class Labels(NodeTest):
    def read_labels(self, n):
        with open(n.labels_file) as f:
            return f.read()

    def test_labels_file_written_and_replaced_on_reload(self):
        n, d = self.up("two-gpus.conf", config=FAST)
        wait_until(lambda: os.path.exists(n.labels_file), 10, "the labels file")
        text = self.read_labels(n)
        lines = dict(line.split("=", 1) for line in text.splitlines()
                     if line and not line.startswith("#"))
        self.assertEqual(lines["nvidia.com/gpu.product"], "NVIDIA-A2")
        self.assertEqual(lines["nvidia.com/gpu.count"], "1")  # the A2s (GFD's count per model)
        self.assertEqual(lines["nvidia.com/gpu.memory"], "15356")
        self.assertEqual(lines["nvidia.com/gpu.family"], "ampere")
        self.assertEqual(lines["nvidia.com/gpu.sharing-strategy"], "none")
        self.assertIn("# +expiry-time=", text)
        self.assertEqual([f for f in os.listdir(os.path.dirname(n.labels_file))
                          if f.startswith(".")], [], "no temp file left behind")
        ino = os.stat(n.labels_file).st_ino
        n.write_config(FAST + "sharing:\n  timeSlicing:\n    resources:\n"
                       "    - name: nvidia.com/gpu\n      replicas: 4\n")
        d.send_signal(signal.SIGHUP)
        wait_until(lambda: "gpu.replicas=4" in self.read_labels(n), 10, "labels rewritten")
        self.assertNotEqual(os.stat(n.labels_file).st_ino, ino, "replaced by a rename")
        self.assertIn("nvidia.com/gpu.product=NVIDIA-A2-SHARED", self.read_labels(n))
        self.assertIn("nvidia.com/gpu.sharing-strategy=time-slicing", self.read_labels(n))


if __name__ == "__main__":
    main()
