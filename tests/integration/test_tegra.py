#!/usr/bin/python3
"""Jetson (Tegra) boards end to end (issue 18): the real daemon with --host-root on a copy of
each fixture host tree (tests/fixtures/tegra/make-board), the fake NVML loaded from the board's
nvml.conf where NVML exists there, against the kubelet emulator.

Per board: registration and the ListAndWatch IDs (`tegra`, the discrete GPUs beside it),
Allocate (envvar and DeviceSpecs), the CDI spec (the Tegra nodes, the libraries the L4T CSV
files name), /metrics against expect.json (NVML's answer where NVML answers, sysfs for the
rest, never -256), the labels file (product, family, board labels). Then time-sliced
replicas, gpumem on a carve-out, and a hostile host: telemetry files that vanish or hold
garbage while serving, devfreq appearing late (early boot), the GPU's device nodes removed and
back, a garbage nv_tegra_release.

Each board is copied into the node's root so a test may break it. Device nodes in the
fixtures are empty regular files; --driver-root (and so the dev root) is the board copy."""

import json
import os
import re
import shutil
import subprocess

from common import RESOURCE, NodeTest, main, wait_until
from edgegpu import PluginClient, gfd_sanitise, load_fixture, samples

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
BOARDS_DIR = os.path.abspath(os.environ.get("TEGRA_BOARDS") or os.path.join(SRC, "build", "tests", "fixtures",
                                                                            "tegra"))
BOARDS = ("nano-r32", "xavier-nx-r35", "orin-nano-r36", "agx-thor-r38", "thor-dgpu",
          "arm64-server")
TEGRA_BOARDS = BOARDS[:5]
CDI_KIND = "k8s.device-plugin.nvidia.com/gpu"
CDI_FILE = "k8s.device-plugin.nvidia.com-gpu.json"
GPUMEM = "nvidia.com/gpumem"
IGPU = "tegra"
# GFD's family per compute capability, Thor's blackwell where GFD says undefined.
FAMILY = {(5, 3): "maxwell", (7, 2): "volta", (8, 7): "ampere", (11, 0): "blackwell"}
# Nodes CUDA needs on every L4T release (edge-metrics.md §1.2, the toolkit's minimum).
CORE_NODES = ("/dev/nvmap", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu", "/dev/nvhost-as-gpu")
# What NVML's discrete libraries are called on the boards with a discrete card (CDI).
DGPU_LIBS = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so")
FAST_METRICS = "  metrics:\n    minInterval: 100ms\n"
FAST_HEALTH = "  health:\n    recoveryQuietPeriod: 1s\n    pollInterval: 200ms\n"
DEBUG = {"EDGEGPU_LOG_LEVEL": "debug"}


def config(edgegpu="", plugin="", sharing=""):
    """A config file: `edgegpu:` lines (indented two), `flags.plugin` lines, a `sharing:` block."""
    out = "version: v1\n"
    if plugin:
        out += "flags:\n  plugin:\n" + plugin
    if sharing:
        out += "sharing:\n" + sharing
    return out + "edgegpu:\n" + FAST_METRICS + edgegpu


def time_slicing(replicas):
    return ("  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
            f"      replicas: {replicas}\n")


def read(path):
    with open(path) as f:
        return f.read().strip()


class Board:
    """A copy of one fixture board under `root`, with what expect.json and nvml.conf say."""

    def __init__(self, name, root):
        src = os.path.join(BOARDS_DIR, name)
        if not os.path.isfile(os.path.join(src, "expect.json")):
            raise AssertionError(f"{src}/expect.json missing: build the tegra_boards target")
        self.name = name
        self.root = root
        shutil.copytree(src, root, symlinks=True)
        with open(os.path.join(root, "expect.json")) as f:
            self.expect = json.load(f)
        conf = os.path.join(root, "nvml.conf")
        self.nvml_conf = conf if os.path.exists(conf) else None
        self.nvml = load_fixture(conf) if self.nvml_conf else None
        self.igpu = next((g for g in self.expect["gpus"] if g["integrated"]), None)
        self.dgpus = [g for g in self.expect["gpus"] if not g["integrated"]]
        self.ids = sorted(g["id"] for g in self.expect["gpus"])

    def path(self, rel):
        return os.path.join(self.root, rel.lstrip("/"))

    def nvml_igpu(self):
        """The fake NVML's section for the iGPU, or None."""
        if not self.nvml or not self.igpu:
            return None
        return next((g for g in self.nvml["gpus"] if g["name"] == self.igpu.get("nvml_name")),
                    None)

    def nvml_value(self, key, func):
        """What NVML answers for the iGPU (raw string), or None when it does not answer."""
        g = self.nvml_igpu()
        if g is None or func in g.get("not_supported", "") or key not in g:
            return None
        return g[key]

    def gpu_dir(self):
        return self.path("sys/" + self.igpu_dev())

    def igpu_dev(self):
        """The GPU's sysfs device, relative to sys/ (through its devfreq device link)."""
        for name in sorted(os.listdir(self.path("sys/class/devfreq"))):
            if "gpu" in name or "gv11b" in name:
                d = os.path.realpath(self.path(f"sys/class/devfreq/{name}/device"))
                return os.path.relpath(d, self.path("sys"))
        raise AssertionError(f"{self.name}: no GPU devfreq")

    def devfreq_dir(self):
        """The GPU's devfreq directory (the first one of the GPU device)."""
        dev = self.gpu_dir()
        names = sorted(os.listdir(os.path.join(dev, "devfreq")))
        return os.path.join(dev, "devfreq", names[0])

    def add_dgpu_libs(self):
        """The discrete driver's libraries under the board's lib dir (CDI for a dGPU)."""
        ver = self.nvml["global"]["driver_version"]
        for lib in DGPU_LIBS:
            p = self.path(f"usr/lib/aarch64-linux-gnu/{lib}.{ver}")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").close()


class TegraTest(NodeTest):
    def board_node(self, name, cfg=None, flags=(), env=None, prepare=None):
        """A node whose daemon serves the board `name` (copied into the node's root as host/).
        `prepare(board)` may change the copy before the daemon starts. Returns (node, daemon,
        board); the daemon has not necessarily registered yet."""
        probe = os.path.join(BOARDS_DIR, name, "nvml.conf")
        n = self.node(probe if os.path.exists(probe) else None)
        b = Board(name, os.path.join(n.root, "host"))
        if prepare:
            prepare(b)
        argv = ["--host-root", b.root, "--driver-root", b.root] + list(flags)
        if b.nvml_conf:
            d = n.start_daemon(config=cfg or config(), flags=argv, env=env)
        else:
            # No NVML on this board: nothing found where the search looks (the board).
            d = n.start_daemon(config=cfg or config(), flags=argv, env=env, nvml_lib=False,
                               wait_control=False)
        return n, d, b

    def up_board(self, name, cfg=None, flags=(), env=None, prepare=None, resource=RESOURCE):
        n, d, b = self.board_node(name, cfg, flags, env, prepare)
        n.wait_register(resource, timeout=20)
        return n, d, b

    def labels(self, n):
        wait_until(lambda: os.path.exists(n.labels_file), 20, "the labels file")
        with open(n.labels_file) as f:
            return dict(line.split("=", 1) for line in f.read().splitlines()
                        if line and not line.startswith("#"))

    def igpu_series(self, d, name):
        return samples(d.scrape(), name, UUID=IGPU)

    def wait_series(self, d, name, present=True, timeout=20, **match):
        """Scrapes until `name` (with labels `match`) is there (or gone): [(labels, value)]."""
        def look():
            got = samples(d.scrape(), name, **match)
            return (got or None) if present else (not got)
        return wait_until(look, timeout, f"{name} {match} {'present' if present else 'gone'}",
                          step=0.1)


# --- per board: registration, IDs, Allocate, metrics, labels ---

class PerBoard(TegraTest):
    def check_registration(self, n, b):
        ev = n.wait_devices(healthy_count=len(b.ids), timeout=20)
        self.assertEqual(sorted(ev["healthy"]), b.ids)
        self.assertEqual(ev["unhealthy"], [])
        self.assertNotIn("empty_topology", ev)

    def check_allocate(self, n, b):
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        if b.igpu:
            r = c.allocate([IGPU])
            self.assertEqual(r.code, "OK", r)
            resp = r.responses[0]
            self.assertEqual(resp["envs"]["NVIDIA_VISIBLE_DEVICES"], IGPU)
            paths = [x["container_path"] for x in resp["devices"]]
            self.assertEqual(len(paths), len(set(paths)), f"a node twice: {paths}")
            for x in resp["devices"]:
                self.assertEqual(x["host_path"], b.root + x["container_path"])
                self.assertIn("rw", x["permissions"])
            self.assertEqual(set(paths) - set(b.igpu["nodes"]), set(),
                             "nodes the board does not have")
            for node in CORE_NODES:
                self.assertIn(node, paths)
            major = int(b.expect["l4t"].split(".")[0])
            if major >= 35:
                self.assertTrue([p for p in paths if p.startswith("/dev/nvgpu/igpu0/")], paths)
            if b.expect["soc"] == "tegra264":
                ng = b.nvml_igpu()
                self.assertIn(f"/dev/nvidia{ng['minor'] if ng else 0}", paths)
                self.assertIn("/dev/nvidiactl", paths)
            for g in (b.nvml or {}).get("gpus", []):
                if g["name"] != b.igpu.get("nvml_name"):  # a discrete card, served or in MIG mode
                    self.assertNotIn(f"/dev/nvidia{g['minor']}", paths,
                                     "the discrete card's node in the iGPU's")
        for g in b.dgpus:
            r = c.allocate([g["id"]])
            self.assertEqual(r.code, "OK", r)
            resp = r.responses[0]
            self.assertEqual(resp["envs"], {"NVIDIA_VISIBLE_DEVICES": g["id"]})
            paths = [x["container_path"] for x in resp["devices"]]
            minor = next(int(x["minor"]) for x in b.nvml["gpus"] if x["uuid"] == g["id"])
            self.assertIn(f"/dev/nvidia{minor}", paths)
            self.assertIn("/dev/nvidiactl", paths)
            self.assertFalse([p for p in paths if "nvhost" in p or "nvmap" in p or "nvgpu" in p
                              or (p.startswith("/dev/nvidia") and p[11:].isdigit()
                                  and p != f"/dev/nvidia{minor}")],
                             f"Tegra or other GPUs' nodes in a discrete allocation: {paths}")
        # And through the kubelet: one pod, one GPU.
        adm = n.emu.admit("pod1", f"c1:{RESOURCE}=1")
        self.assertTrue(adm["ok"], adm)
        al = n.emu.allocations("pod1")
        self.assertTrue(al[0]["ok"], al[0])
        self.assertIn(al[0]["ids"][0], b.ids)

    def check_metrics(self, d, b):
        self.wait_series(d, "DCGM_FI_DEV_GPU_TEMP", UUID=IGPU if b.igpu else b.ids[0])
        expo = d.scrape()
        for (name, labels), v in expo.items():
            self.assertNotEqual(v, -256, f"{name}{dict(labels)}: -256 is no reading")
        for lab, v in samples(expo, "DCGM_FI_DEV_GPU_TEMP"):
            self.assertGreater(v, -100, lab)
        for g in b.dgpus:
            nv = next(x for x in b.nvml["gpus"] if x["uuid"] == g["id"])
            got = samples(expo, "DCGM_FI_DEV_GPU_UTIL", UUID=g["id"])
            self.assertEqual(len(got), 1, got)
            if "util_gpu" in nv:
                self.assertEqual(got[0][1], float(nv["util_gpu"]))
        if not b.igpu:
            self.assertEqual([n for (n, _) in expo if n.startswith("edgegpu_board_")], [])
            return
        g = b.igpu

        def one(name):
            got = samples(expo, name, UUID=IGPU)
            self.assertEqual(len(got), 1, f"{name}: {got}")
            return got[0][1]

        util = b.nvml_value("util_gpu", "nvmlDeviceGetUtilizationRates")
        util = float(util) if util is not None else g["load_pct"]
        if util is None:
            self.assertEqual(samples(expo, "DCGM_FI_DEV_GPU_UTIL", UUID=IGPU), [])
        else:
            self.assertAlmostEqual(one("DCGM_FI_DEV_GPU_UTIL"), util, places=1)
        temp = b.nvml_value("temperature", "nvmlDeviceGetTemperature")
        self.assertAlmostEqual(one("DCGM_FI_DEV_GPU_TEMP"),
                               float(temp) if temp is not None else g["temperature_c"], places=1)
        power = b.nvml_value("power", "nvmlDeviceGetPowerUsage")
        power = float(power) / 1000 if power is not None else g["gpu_power_w"]
        if power is not None:
            self.assertAlmostEqual(one("DCGM_FI_DEV_POWER_USAGE"), power, places=2)
        self.assertAlmostEqual(one("DCGM_FI_DEV_SM_CLOCK"), g["clock_mhz"], places=1)
        if "emc_clock_mhz" in g:
            self.assertAlmostEqual(one("DCGM_FI_DEV_MEM_CLOCK"), g["emc_clock_mhz"], places=1)
        total = g["mem_total"] >> 20
        self.assertEqual(one("DCGM_FI_DEV_FB_TOTAL"), total)
        used, free = one("DCGM_FI_DEV_FB_USED"), one("DCGM_FI_DEV_FB_FREE")
        self.assertGreater(used, 0)
        self.assertGreater(free, 0)
        self.assertLessEqual(used + free, total + 1)
        # Per-process memory where NVML lists the iGPU's processes (Thor): it flows through
        # the Tegra backend's merge to the attribution; elsewhere there is none to show.
        procs = b.nvml_value("processes", "nvmlDeviceGetComputeRunningProcesses_v3")
        if procs:
            pid, mem = procs.split(",")[0].split(":")
            got = self.wait_series(d, "edgegpu_unattributed_gpu_memory_used_bytes",
                                   UUID=IGPU, pid=pid)
            self.assertEqual(got[0][1], float(mem))
        else:
            self.assertEqual(samples(expo, "edgegpu_unattributed_gpu_memory_used_bytes",
                                     UUID=IGPU), [])
        # The governor's bounds (Hz), the board's power (the input rail alone) and each rail.
        self.assertEqual(one("edgegpu_gpu_clock_min_hertz"), g["clock_min_mhz"] * 1e6)
        self.assertEqual(one("edgegpu_gpu_clock_max_hertz"), g["clock_max_mhz"] * 1e6)
        board = samples(expo, "edgegpu_board_power_watts")
        self.assertEqual(len(board), 1, f"once per board: {board}")
        self.assertEqual(set(board[0][0]), {"Hostname"})
        self.assertAlmostEqual(board[0][1], g["board_power_w"], places=3)
        rails = {lab["rail"]: v for lab, v in samples(expo, "edgegpu_board_rail_power_watts")}
        self.assertEqual(sorted(rails), sorted(g["rails"]))
        for rail, w in g["rail_watts"].items():
            self.assertAlmostEqual(rails[rail], w, places=3, msg=rail)
        info = samples(expo, "edgegpu_board_info")
        self.assertEqual(len(info), 1, info)
        lab = info[0][0]
        self.assertEqual((lab["model"], lab["soc"], lab["l4t"], lab["jetpack"], lab["power_mode"]),
                         (b.expect["model"], b.expect["soc"], b.expect["l4t"],
                          b.expect["jetpack"], g["power_mode"]))

    def check_labels(self, n, b):
        lab = self.labels(n)
        # GFD's count: the GPUs of the model the labels describe (a Thor's iGPU and its
        # discrete card are two models).
        names = ([b.igpu.get("nvml_name") or b.igpu["name"]] if b.igpu else []) + \
            [d["name"] for d in b.dgpus]
        self.assertEqual(len(names), len(b.ids))
        self.assertEqual(lab["nvidia.com/gpu.count"],
                         str(sum(gfd_sanitise(x) == lab["nvidia.com/gpu.product"]
                                 for x in names)))
        self.assertEqual(lab["nvidia.com/gpu.mode"], "compute")
        # a card in MIG mode is not served, but GFD counts it as MIG-capable
        self.assertEqual(lab["nvidia.com/mig.capable"],
                         "true" if b.expect["mig_gpus"] else "false")
        ours = {k: v for k, v in lab.items() if not k.startswith("nvidia.com/")}
        if not b.igpu:
            self.assertEqual(lab["nvidia.com/gpu.product"], gfd_sanitise(b.dgpus[0]["name"]))
            self.assertFalse([k for k in lab if "tegra" in k.lower() or "l4t" in k.lower()], lab)
            return
        g = b.igpu
        if not b.dgpus:
            self.assertEqual(lab["nvidia.com/gpu.product"],
                             gfd_sanitise(g.get("nvml_name") or g["name"]))
            self.assertEqual(lab["nvidia.com/gpu.memory"], str(g["mem_total"] >> 20))
            self.assertEqual(lab["nvidia.com/gpu.family"], FAMILY[tuple(g["cc"])])
            self.assertEqual(lab["nvidia.com/gpu.compute.major"], str(g["cc"][0]))
            self.assertEqual(lab["nvidia.com/gpu.compute.minor"], str(g["cc"][1]))
        else:
            self.assertIn(lab["nvidia.com/gpu.family"], {"blackwell", "ada-lovelace"})
        self.assertNotEqual(lab.get("nvidia.com/gpu.family"), "undefined")
        self.assertEqual(ours["edgegpu.io/board.soc"], b.expect["soc"])
        self.assertEqual(ours["edgegpu.io/board.l4t"], b.expect["l4t"])
        self.assertEqual(ours["edgegpu.io/board.jetpack"], b.expect["jetpack"])
        self.assertEqual(ours["edgegpu.io/board.power-mode"], g["power_mode"])
        model = gfd_sanitise(b.expect["model"])[:63].rstrip("-_.")
        self.assertEqual(ours["edgegpu.io/board.model"], model)

    def run_board(self, name):
        cfg = config(plugin="    passDeviceSpecs: true\n")
        n, d, b = self.up_board(name, cfg)
        self.check_registration(n, b)
        self.check_allocate(n, b)
        self.check_metrics(d, b)
        self.check_labels(n, b)

    def test_nano_r32(self):
        self.run_board("nano-r32")

    def test_xavier_nx_r35(self):
        self.run_board("xavier-nx-r35")

    def test_orin_nano_r36(self):
        self.run_board("orin-nano-r36")

    def test_agx_thor_r38(self):
        self.run_board("agx-thor-r38")

    def test_thor_dgpu(self):
        self.run_board("thor-dgpu")

    def test_thor_with_a_mig_card(self):
        self.run_board("thor-mig-card")

    def test_arm64_server(self):
        self.run_board("arm64-server")


# --- the CDI spec per board ---

class Cdi(TegraTest):
    def run_cdi(self, name):
        def prepare(b):
            if b.dgpus:
                b.add_dgpu_libs()
        cfg = config(plugin="    deviceListStrategy: [envvar, cdi-cri]\n")
        n, d, b = self.board_node(name, cfg, prepare=prepare)
        d.wait_log("cdi spec written", timeout=20)
        n.wait_register(timeout=20)
        path = os.path.join(n.cdi_dir, CDI_FILE)
        with open(path) as f:
            spec = json.load(f)
        validator = os.environ.get("CDI_VALIDATE")
        if validator:
            r = subprocess.run([validator, "-spec", path], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        devs = {dv["name"]: dv for dv in spec["devices"]}
        self.assertEqual(sorted(devs), b.ids)
        common = spec.get("containerEdits", {})
        for g in b.dgpus:
            nodes = [x["path"] for x in devs[g["id"]]["containerEdits"]["deviceNodes"]]
            minor = next(int(x["minor"]) for x in b.nvml["gpus"] if x["uuid"] == g["id"])
            self.assertEqual(nodes, [f"/dev/nvidia{minor}"])
        # Allocate answers with the CDI name too.
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        r = c.allocate([b.ids[0]])
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.responses[0]["cdi_devices"], [f"{CDI_KIND}={b.ids[0]}"])
        if not b.igpu:
            return
        edits = devs[IGPU]["containerEdits"]
        nodes = edits.get("deviceNodes", []) + common.get("deviceNodes", [])
        paths = {x["path"] for x in nodes}
        for x in nodes:
            self.assertEqual(x.get("hostPath", x["path"]), b.root + x["path"])
        for node in CORE_NODES:
            self.assertIn(node, paths)
        self.assertEqual(paths - set(b.igpu["nodes"]) - {f"/dev/nvidia{i}" for i in range(4)}
                         - {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                            "/dev/nvidia-modeset"}, set(), "nodes the board does not have")
        if b.dgpus:
            self.assertNotIn("/dev/nvidia0", {x["path"] for x in edits.get("deviceNodes", [])})
        # The libraries the L4T CSV files name, mounted from the board, read-only.
        mounts = {m["containerPath"]: m for m in common.get("mounts", []) + edits.get("mounts", [])}
        csvdir = b.path("etc/nvidia-container-runtime/host-files-for-container.d")
        want = [("lib", "/etc/nv_tegra_release")]
        with open(os.path.join(csvdir, "drivers.csv")) as f:
            want += [tuple(x.strip() for x in line.split(",", 1)) for line in f if line.strip()]
        hooks = json.dumps(common.get("hooks", []) + edits.get("hooks", []))
        for kind, p in want:
            if kind == "sym" and p not in mounts:
                self.assertIn(p, hooks, f"symlink {p}: neither mounted nor made by a hook")
                continue
            self.assertIn(p, mounts, sorted(mounts))
            self.assertEqual(mounts[p]["hostPath"], b.root + p)
            self.assertIn("ro", mounts[p].get("options", []))

    def test_nano_r32(self):
        self.run_cdi("nano-r32")

    def test_xavier_nx_r35(self):
        self.run_cdi("xavier-nx-r35")

    def test_orin_nano_r36(self):
        self.run_cdi("orin-nano-r36")

    def test_agx_thor_r38(self):
        self.run_cdi("agx-thor-r38")

    def test_thor_dgpu(self):
        self.run_cdi("thor-dgpu")

    def test_arm64_server(self):
        self.run_cdi("arm64-server")


# --- sharing: time-sliced replicas, gpumem on the carve-out ---

class Sharing(TegraTest):
    def test_time_sliced_replicas(self):
        for name in ("orin-nano-r36", "thor-dgpu"):
            with self.subTest(board=name):
                n, d, b = self.up_board(name, config(sharing=time_slicing(4)))
                want = sorted(f"{i}::{k}" for i in b.ids for k in range(4))
                ev = n.wait_devices(healthy_count=len(want), timeout=20)
                self.assertEqual(sorted(ev["healthy"]), want)
                adm = n.emu.admit("p1", f"c1:{RESOURCE}=1")
                self.assertTrue(adm["ok"], adm)
                al = n.emu.allocations("p1")[0]
                gpu = al["ids"][0].split("::")[0]
                env = al["response"]["envs"]
                self.assertEqual(env["NVIDIA_VISIBLE_DEVICES"], gpu)
                self.assertEqual(al["response"]["devices"], [], "envvar only: no DeviceSpecs")
                if name == "orin-nano-r36":
                    lab = self.labels(n)
                    self.assertEqual(lab["nvidia.com/gpu.replicas"], "4")
                    self.assertEqual(lab["nvidia.com/gpu.sharing-strategy"], "time-slicing")
                    self.assertEqual(lab["nvidia.com/gpu.product"], "Orin-nvgpu-SHARED")

    def test_gpumem_on_the_carve_out(self):
        cfg = config("  tegra:\n    memoryMiB: 4096\n"
                     "  sharing:\n    memory:\n      devices: [tegra]\n      reserveMiB: 256\n")
        n, d, b = self.up_board("orin-nano-r36", cfg, resource=GPUMEM)
        ev = n.wait_devices(GPUMEM, pred=lambda e: e.get("healthy_count", 0) > 0, timeout=20)
        self.assertEqual(ev["healthy_count"], 4096 - 256, "carve-out less the reserve")
        self.assertEqual(n.registrations(RESOURCE, ok=None), [], "the iGPU is not also whole")
        seen = set()
        for pod, mib in (("a", 1024), ("b", 2048)):
            adm = n.emu.admit(pod, f"c1:{GPUMEM}={mib}")
            self.assertTrue(adm["ok"], adm)
            al = n.emu.allocations(pod)[0]
            self.assertEqual(len(al["ids"]), mib)
            self.assertFalse(seen & set(al["ids"]))
            seen |= set(al["ids"])
            envs = al["response"]["envs"]
            self.assertEqual(envs["NVIDIA_VISIBLE_DEVICES"], IGPU)
            self.assertEqual(envs["EDGEGPU_GPUMEM_LIMIT_MIB"], str(mib))
        adm = n.emu.admit("c", f"c1:{GPUMEM}={4096 - 256 - 3072 + 1}")
        self.assertFalse(adm["ok"], "more than the carve-out holds")
        # The carve-out is the GPU's memory everywhere: metrics and labels.
        self.assertEqual(self.wait_series(d, "DCGM_FI_DEV_FB_TOTAL", UUID=IGPU)[0][1], 4096)
        self.assertEqual(self.labels(n)["nvidia.com/gpu.memory"], "4096")


# --- a hostile host ---

class Hostile(TegraTest):
    def test_telemetry_vanishes_or_turns_garbage_while_serving(self):
        cfg = config(FAST_HEALTH)
        n, d, b = self.up_board("orin-nano-r36", cfg, env=DEBUG)
        n.wait_devices(healthy_count=1, timeout=20)
        self.wait_series(d, "DCGM_FI_DEV_GPU_UTIL", UUID=IGPU)
        self.wait_series(d, "DCGM_FI_DEV_SM_CLOCK", UUID=IGPU)
        since, mark = n.emu.mark(), d.mark()
        load = os.path.join(b.gpu_dir(), "load")
        cur = os.path.join(b.devfreq_dir(), "cur_freq")
        zone = next(z for z in sorted(os.listdir(b.path("sys/class/thermal")))
                    if read(b.path(f"sys/class/thermal/{z}/type")) == "gpu-thermal")
        temp = os.path.realpath(b.path(f"sys/class/thermal/{zone}/temp"))
        with open(load, "w") as f:
            f.write("garbage\n")
        os.unlink(cur)
        os.unlink(temp)
        os.mkdir(temp)  # a file replaced by a directory
        hwmon = [os.path.join(dp, f) for dp, _, fs in os.walk(b.path("sys/devices/platform"))
                 for f in fs if re.fullmatch(r"curr\d_input", f)]
        for p in hwmon:
            with open(p, "w") as f:
                f.write("9" * 5000 + "\n")  # out of range and long
        for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP"):
            self.wait_series(d, name, present=False, UUID=IGPU)
        # The sampler ran several times more over the broken files: still Healthy, still up.
        s0 = samples(d.scrape(), "edgegpu_metrics_samples_total")
        base = sum(v for _, v in s0)
        wait_until(lambda: sum(v for _, v in samples(d.scrape(), "edgegpu_metrics_samples_total"))
                   >= base + 3, 20, "three more samples", step=0.1)
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices" and e["unhealthy"],
                                    since), [], "telemetry gaps made the GPU unhealthy")
        self.assertTrue(d.alive())
        text = d.text(mark)
        self.assertNotIn("level=error", text)
        expo = d.scrape()
        self.assertEqual(samples(expo, "edgegpu_gpu_healthy", UUID=IGPU)[0][1], 1)
        for (name, lab), v in expo.items():
            self.assertLess(abs(v), 1e6 if "power" in name.lower() else 1e18, f"{name}: {v}")
        # Files come back right: the series come back.
        with open(load, "w") as f:
            f.write("500\n")
        with open(cur, "w") as f:
            f.write("612000000\n")
        self.assertEqual(self.wait_series(d, "DCGM_FI_DEV_GPU_UTIL", UUID=IGPU)[0][1], 50)
        self.assertEqual(self.wait_series(d, "DCGM_FI_DEV_SM_CLOCK", UUID=IGPU)[0][1], 612)
        # Garbage in a file gets a line naming the file (a missing one may be early boot).
        self.assertTrue([r for r in d.logs[mark:] if r.get("path", "").endswith("/load")],
                        "no log line names the garbage load file")

    def test_devfreq_appears_late(self):
        aside = {}

        def prepare(b):
            # Early boot: no devfreq for the GPU yet (nor its class link).
            dev = b.devfreq_dir()
            name = os.path.basename(dev)
            aside["dir"] = (dev, os.path.join(b.root, "..", "devfreq-" + name))
            aside["link"] = b.path(f"sys/class/devfreq/{name}")
            aside["target"] = os.readlink(aside["link"])
            shutil.move(dev, aside["dir"][1])
            os.unlink(aside["link"])
        n, d, b = self.up_board("nano-r32", config(FAST_HEALTH), prepare=prepare)
        ev = n.wait_devices(timeout=20)
        self.assertEqual(ev["healthy"], [IGPU], "served at once, devfreq or not")
        self.wait_series(d, "DCGM_FI_DEV_GPU_TEMP", UUID=IGPU)
        self.assertEqual(samples(d.scrape(), "DCGM_FI_DEV_SM_CLOCK", UUID=IGPU), [])
        since = n.emu.mark()
        shutil.move(aside["dir"][1], aside["dir"][0])
        os.symlink(aside["target"], aside["link"])
        # The backend looks for it again at each sample: scrapes drive the sampler until the
        # backend says it has found the directory.
        msg = "the Tegra GPU's devfreq directory appeared: reporting its clocks and load"
        wait_until(lambda: d.scrape() is not None and d.find_logs(msg), 30, msg, step=0.1)
        got = samples(d.scrape(), "DCGM_FI_DEV_SM_CLOCK", UUID=IGPU)
        self.assertEqual([v for _, v in got], [b.igpu["clock_mhz"]])
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices" and e["unhealthy"],
                                    since), [])

    def test_gpu_node_removed_then_back(self):
        # The GPU's own nodes leave (the driver unbound): Unhealthy; back: Healthy again after
        # the quiet period, as a discrete GPU recovers.
        n, d, b = self.up_board("nano-r32", config(FAST_HEALTH))
        n.wait_devices(healthy_count=1, timeout=20)
        away = os.path.join(b.root, "..", "dev-away")
        os.makedirs(away)
        gone = ("nvhost-gpu", "nvhost-ctrl-gpu", "nvhost-as-gpu")
        since = n.emu.mark()
        for node in gone:
            os.rename(b.path("dev/" + node), os.path.join(away, node))
        bad = n.wait_devices(since=since, unhealthy=[IGPU], timeout=20)
        self.assertEqual(bad["healthy"], [])
        d.wait_log("gpu unhealthy", timeout=10)
        since = n.emu.mark()
        for node in gone:
            os.rename(os.path.join(away, node), b.path("dev/" + node))
        good = n.wait_devices(since=since, healthy=[IGPU], timeout=20)
        # The quiet period runs from the failure the daemon saw, a little before the kubelet
        # got the Unhealthy list.
        self.assertGreaterEqual((good["recv_us"] - bad["recv_us"]) / 1e6, 0.9,
                                "recovered before the quiet period")
        d.wait_log("gpu healthy again", timeout=10)

    def test_nv_tegra_release_garbage(self):
        def prepare(b):
            with open(b.path("etc/nv_tegra_release"), "wb") as f:
                f.write(b"\xff\xfe# R?? (bogus)\x00 REVISION: x.y\n" + b"z" * 70000)
        n, d, b = self.up_board("orin-nano-r36", prepare=prepare)
        ev = n.wait_devices(healthy_count=1, timeout=20)
        self.assertEqual(ev["healthy"], [IGPU], "detected through soc0 / compatible")
        self.assertTrue([r for r in d.logs if r.get("level") == "warn" and
                         r.get("file", "").endswith("nv_tegra_release")],
                        "no warning names the release file")
        lab = self.labels(n)
        self.assertEqual(lab["edgegpu.io/board.soc"], "tegra234")
        self.assertNotIn("edgegpu.io/board.l4t", lab)
        self.assertFalse([v for v in lab.values() if "bogus" in v or "??" in v], lab)
        self.assertEqual(lab["nvidia.com/gpu.family"], "ampere")

    def test_garbage_in_every_board_file_at_start(self):
        def prepare(b):
            def put(rel, data):
                p = b.path(rel)
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                elif os.path.lexists(p):
                    os.unlink(p)
                if data is None:
                    os.makedirs(p)  # a file replaced by a directory
                    return
                with open(p, "wb") as f:
                    f.write(data)
            put("sys/firmware/devicetree/base/model", b"\x01\x1b[31mJetson\x00\xff" * 50)
            put("sys/devices/soc0/family", None)
            put("sys/devices/soc0/soc_id", b"99999999999999999999999\n")
            put("proc/meminfo", b"MemTotal: lots kB\nMemFree: -5 kB\n" + b"x" * 300000)
            put("etc/nvpmodel.conf", b"< POWER_MODEL ID=zz NAME=\x07 >\n" * 40000)
            put("var/lib/nvpmodel/status", b"pmode:99999999999\n")
            dev = b.devfreq_dir()
            put(os.path.relpath(os.path.join(dev, "max_freq"), b.root), b"-5\n")
            put(os.path.relpath(os.path.join(dev, "min_freq"), b.root), b"abc\n")
            for z in os.listdir(b.path("sys/class/thermal")):
                put(os.path.relpath(os.path.realpath(b.path(f"sys/class/thermal/{z}/type")),
                                    b.root), b"")
        n, d, b = self.up_board("orin-nano-r36", config(FAST_HEALTH), prepare=prepare)
        ev = n.wait_devices(healthy_count=1, timeout=20)
        self.assertEqual(ev["healthy"], [IGPU], "the release file and compatible still say Tegra")
        lab = self.labels(n)
        for k, v in lab.items():
            self.assertRegex(v, r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$", k)
        self.assertEqual(lab["edgegpu.io/board.l4t"], "36.4.3")
        self.assertNotIn("edgegpu.io/board.power-mode", lab)
        expo = d.scrape()
        for (name, labels), v in expo.items():
            self.assertNotEqual(v, -256, name)
            self.assertTrue(v == v and abs(v) < 1e19, f"{name}: {v}")
        for name in ("edgegpu_gpu_clock_min_hertz", "edgegpu_gpu_clock_max_hertz",
                     "DCGM_FI_DEV_GPU_TEMP"):
            self.assertEqual(samples(expo, name, UUID=IGPU), [], name)
        self.assertEqual(samples(expo, "DCGM_FI_DEV_SM_CLOCK", UUID=IGPU)[0][1], 612)
        warned = " ".join(r["_line"] for r in d.logs if r.get("level") == "warn")
        for what in ("model", "meminfo", "nvpmodel"):
            self.assertIn(what, warned, f"no warning names the garbage {what} file")
        self.assertFalse([r for r in d.logs if r.get("level") == "error"])
        self.assertTrue(d.alive())


if __name__ == "__main__":
    main()
