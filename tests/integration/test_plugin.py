#!/usr/bin/python3
"""nvidia.com/gpu through the kubelet emulator: registration, the device list, Allocate for
every deviceListStrategy, deviceIDStrategy, passDeviceSpecs, refused requests, and
GetPreferredAllocation for whole GPUs."""

import json
import os
import subprocess

from common import RESOURCE, NodeTest, load_fixture, main, uuids
from edgegpu import PluginClient

CDI_KIND = "k8s.device-plugin.nvidia.com/gpu"
CDI_FILE = "k8s.device-plugin.nvidia.com-gpu.json"
VOLUME_DIR = "/var/run/nvidia-container-devices"
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                 "/dev/nvidia-modeset")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def touch(root, rel, mode=0o644):
    p = root + rel
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w"):
        pass
    os.chmod(p, mode)
    return p


def flow_config(strategy, extra_plugin=""):
    return ("version: v1\nflags:\n  plugin:\n"
            f"    deviceListStrategy: {strategy}\n{extra_plugin}")


class Registration(NodeTest):
    def test_register_and_device_list(self):
        n, d = self.up("two-gpus.conf")
        reg = n.registrations()
        self.assertEqual(len(reg), 1)
        self.assertEqual(reg[0]["endpoint"], "nvidia-gpu.sock")
        begin = n.emu.find(lambda e: e.get("event") == "register_begin")[0]
        self.assertEqual(begin["version"], "v1beta1")
        self.assertEqual(begin["resource"], RESOURCE)
        opts = n.emu.find(lambda e: e.get("event") == "options")[0]
        self.assertTrue(opts["get_preferred_allocation_available"])
        self.assertFalse(opts["pre_start_required"])
        ev = n.emu.last_devices(RESOURCE)
        self.assertEqual(sorted(ev["healthy"]), sorted(uuids("two-gpus.conf")))
        self.assertEqual(ev["unhealthy"], [])
        self.assertNotIn("duplicates", ev)
        self.assertNotIn("nonstandard_health", ev)
        # Real /sys knows nothing of the fake's PCI addresses: no TopologyInfo at all, and
        # never an empty one.
        self.assertNotIn("empty_topology", ev)
        self.assertTrue(os.path.exists(n.socket()))
        self.assertEqual(os.stat(n.socket()).st_mode & 0o777, 0o600)

    def test_topology_info_from_sysfs_numa(self):
        fx = load_fixture("two-gpus.conf")
        n, d = self.up("two-gpus.conf", fake_host=True)
        ev = n.emu.last_devices(RESOURCE)
        self.assertEqual(ev.get("numa"), {g["uuid"]: [int(g["numa"])] for g in fx["gpus"]})
        self.assertNotIn("empty_topology", ev)

    def test_topology_info_only_where_numa_is_known(self):
        fx = load_fixture("numa.conf")
        known = {g["uuid"]: [int(g["numa"])] for g in fx["gpus"]
                 if g["numa"] not in ("none", "-1")}
        self.assertEqual(len(known), 1)
        n, d = self.up("numa.conf", fake_host=True)
        ev = n.emu.last_devices(RESOURCE)
        self.assertEqual(ev["count"], len(fx["gpus"]))
        self.assertEqual(ev.get("numa"), known)
        self.assertNotIn("empty_topology", ev)


class Allocate(NodeTest):
    def admit_one(self, n, count=1, pod="p1"):
        ev = n.emu.admit(pod, f"c1:{RESOURCE}={count}")
        self.assertTrue(ev["ok"], ev)
        al = n.emu.allocations(pod)
        self.assertEqual(len(al), 1)
        self.assertTrue(al[0]["ok"], al[0])
        return al[0]["ids"], al[0]["response"]

    def test_envvar(self):
        n, d = self.up("two-gpus.conf")
        ids, resp = self.admit_one(n, 2)
        self.assertEqual(sorted(ids), sorted(uuids("two-gpus.conf")))
        self.assertEqual(list(resp["envs"]), ["NVIDIA_VISIBLE_DEVICES"])
        self.assertEqual(sorted(resp["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")), sorted(ids))
        self.assertEqual(resp["mounts"], [])
        self.assertEqual(resp["devices"], [])
        self.assertEqual(resp["annotations"], {})
        self.assertEqual(resp["cdi_devices"], [])

    def test_volume_mounts(self):
        n, d = self.up("two-gpus.conf", config=flow_config("volume-mounts"))
        ids, resp = self.admit_one(n, 2)
        self.assertEqual(resp["envs"], {"NVIDIA_VISIBLE_DEVICES": VOLUME_DIR})
        got = sorted((m["container_path"], m["host_path"]) for m in resp["mounts"])
        self.assertEqual(got, sorted((f"{VOLUME_DIR}/{i}", "/dev/null") for i in ids))
        self.assertEqual(resp["devices"], [])

    def cdi_node(self, strategy, extra="", id_strategy=None, flags=()):
        n = self.node("two-gpus.conf")
        driver = os.path.join(n.root, "driver")
        devroot = os.path.join(n.root, "devroot")
        ver = load_fixture("two-gpus.conf")["global"]["driver_version"]
        for lib in ("libcuda.so.", "libnvidia-ml.so.", "libnvidia-ptxjitcompiler.so."):
            touch(driver, f"{LIBDIR}/{lib}{ver}", 0o755)
        touch(driver, "/usr/bin/nvidia-smi", 0o755)
        for node in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia1"):
            touch(devroot, node)
        plugin = extra + (f"    deviceIDStrategy: {id_strategy}\n" if id_strategy else "")
        n.start_daemon(config=flow_config(strategy, plugin),
                       flags=["--driver-root", driver, "--dev-root", devroot] + list(flags))
        n.wait_register()
        n.wait_devices(healthy_count=2)
        n.daemon.wait_log("cdi spec written")  # Allocate fails until then, by design
        return n, driver, devroot

    def check_spec(self, n, driver, devroot, names):
        path = os.path.join(n.cdi_dir, CDI_FILE)
        self.assertTrue(os.path.exists(path), os.listdir(n.cdi_dir))
        self.assertEqual(sorted(os.listdir(n.cdi_dir)), [CDI_FILE], "temp files left behind")
        with open(path) as f:
            spec = json.load(f)
        self.assertEqual(spec["cdiVersion"], "0.5.0")
        self.assertEqual(spec["kind"], CDI_KIND)
        fx = load_fixture("two-gpus.conf")["gpus"]
        devs = {dv["name"]: dv for dv in spec["devices"]}
        self.assertEqual(sorted(devs), sorted(names))
        for name, g in zip(names, fx):
            nodes = devs[name]["containerEdits"]["deviceNodes"]
            self.assertEqual([(x["path"], x.get("hostPath", x["path"])) for x in nodes],
                             [(f"/dev/nvidia{g['minor']}",
                               f"{devroot}/dev/nvidia{g['minor']}")])
        common = spec["containerEdits"]
        self.assertIn("NVIDIA_VISIBLE_DEVICES=void", common.get("env", []))
        ctl = sorted(x["path"] for x in common.get("deviceNodes", []))
        self.assertEqual(ctl, ["/dev/nvidia-uvm", "/dev/nvidiactl"],
                         "control nodes: exactly those that exist under --dev-root")
        for x in common["deviceNodes"]:
            self.assertEqual(x.get("hostPath"), devroot + x["path"])
        mounts = {m["containerPath"]: m for m in common.get("mounts", [])}
        ver = load_fixture("two-gpus.conf")["global"]["driver_version"]
        lib = f"{LIBDIR}/libcuda.so.{ver}"
        self.assertIn(lib, mounts, sorted(mounts))
        self.assertEqual(mounts[lib]["hostPath"], driver + lib)
        self.assertIn("ro", mounts[lib].get("options", []))
        validator = os.environ.get("CDI_VALIDATE")
        self.assertTrue(validator, "CDI_VALIDATE not set")
        r = subprocess.run([validator, "-spec", path], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_cdi_cri(self):
        n, driver, devroot = self.cdi_node("cdi-cri", "    passDeviceSpecs: true\n")
        ids, resp = self.admit_one(n, 1)
        self.assertEqual(resp["cdi_devices"], [f"{CDI_KIND}={ids[0]}"])
        # CDI-only: no env, no mounts, and no DeviceSpecs even with passDeviceSpecs.
        self.assertEqual(resp["envs"], {})
        self.assertEqual(resp["mounts"], [])
        self.assertEqual(resp["devices"], [])
        self.assertEqual(resp["annotations"], {})
        self.check_spec(n, driver, devroot, uuids("two-gpus.conf"))

    def test_cdi_annotations(self):
        n, driver, devroot = self.cdi_node("cdi-annotations")
        ev = n.emu.admit("p2", f"a:{RESOURCE}=1", f"b:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        keys = []
        for a in n.emu.allocations("p2"):
            resp = a["response"]
            self.assertEqual(len(resp["annotations"]), 1, resp)
            (key, value), = resp["annotations"].items()
            prefix = "cdi.k8s.io/nvidia-device-plugin_"
            self.assertTrue(key.startswith(prefix), key)
            self.assertRegex(key[len(prefix):], r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-"
                             r"[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
            self.assertEqual(value, ",".join(f"{CDI_KIND}={i}" for i in a["ids"]))
            self.assertEqual(resp["cdi_devices"], [])
            self.assertEqual(resp["envs"], {})
            keys.append(key)
        self.assertEqual(len(set(keys)), 2, "a fresh annotation key per container")
        self.check_spec(n, driver, devroot, uuids("two-gpus.conf"))

    def test_cdi_with_index_names_and_envvar(self):
        n, driver, devroot = self.cdi_node("[envvar, cdi-cri]", id_strategy="index")
        ids, resp = self.admit_one(n, 1)
        idx = str(uuids("two-gpus.conf").index(ids[0]))
        self.assertEqual(resp["cdi_devices"], [f"{CDI_KIND}={idx}"])
        self.assertEqual(resp["envs"], {"NVIDIA_VISIBLE_DEVICES": idx})
        self.check_spec(n, driver, devroot, ["0", "1"])

    def test_device_id_strategy_index(self):
        n, d = self.up("two-gpus.conf", config=flow_config("envvar",
                                                           "    deviceIDStrategy: index\n"))
        # The kubelet still sees UUIDs; only what the runtime gets changes.
        self.assertEqual(sorted(n.emu.last_devices(RESOURCE)["healthy"]),
                         sorted(uuids("two-gpus.conf")))
        ids, resp = self.admit_one(n, 2)
        all_ids = uuids("two-gpus.conf")
        # NVIDIA's order for index is its map order: compare as a set.
        self.assertEqual(sorted(resp["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")),
                         sorted(str(all_ids.index(i)) for i in ids))

    def test_pass_device_specs(self):
        n = self.node("two-gpus.conf")
        devroot = os.path.join(n.root, "devroot")
        for node in ("/dev/nvidiactl", "/dev/nvidia-uvm-tools", "/dev/nvidia0",
                     "/dev/nvidia1"):
            touch(devroot, node)
        n.start_daemon(flags=["--pass-device-specs", "--dev-root", devroot])
        n.wait_register()
        n.wait_devices(healthy_count=2)
        ids, resp = self.admit_one(n, 1)
        minor = load_fixture("two-gpus.conf")["gpus"][uuids("two-gpus.conf").index(ids[0])][
            "minor"]
        want = ["/dev/nvidiactl", "/dev/nvidia-uvm-tools", f"/dev/nvidia{minor}"]
        got = [(x["container_path"], x["host_path"], x["permissions"]) for x in resp["devices"]]
        self.assertEqual(sorted(got), sorted((p, devroot + p, "rw") for p in want))
        self.assertEqual(resp["envs"], {"NVIDIA_VISIBLE_DEVICES": ids[0]})

    def test_two_containers_get_separate_responses(self):
        n, d = self.up("two-gpus.conf")
        ev = n.emu.admit("p2", f"a:{RESOURCE}=1", f"b:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        al = n.emu.allocations("p2")
        self.assertEqual([a["container"] for a in al], ["a", "b"])
        seen = []
        for a in al:
            self.assertEqual(a["response"]["envs"], {"NVIDIA_VISIBLE_DEVICES": a["ids"][0]})
            seen += a["ids"]
        self.assertEqual(sorted(seen), sorted(uuids("two-gpus.conf")))


class RefusedRequests(NodeTest):
    """Requests the kubelet would not send, straight to the plugin socket."""

    def client(self, n):
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        return c

    def test_unknown_id(self):
        n, d = self.up("two-gpus.conf")
        c = self.client(n)
        bogus = "GPU-00000000-dead-beef-0000-000000000000"
        r = c.allocate([uuids("two-gpus.conf")[0], bogus])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn(bogus, r.details)
        # The second container is as bad as a single bad one: the whole RPC fails.
        r = c.allocate([uuids("two-gpus.conf")[0]], [bogus])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn(bogus, r.details)
        r = c.allocate([""])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)

    def test_empty_and_malformed_requests(self):
        n, d = self.up("two-gpus.conf")
        c = self.client(n)
        r = c.allocate()  # no ContainerAllocateRequest at all
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn("no container requests", r.details)
        r = c.allocate([])  # one container asking for nothing
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn("no devices requested", r.details)
        r = c.call("Allocate", b"\x0a\xff")  # a length running past the end
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn("malformed", r.details)
        r = c.call("GetPreferredAllocation", b"\x0a\x05\x0a\xff")
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn("malformed", r.details)
        # and the plugin still answers
        r = c.allocate([uuids("two-gpus.conf")[0]])
        self.assertEqual(r.code, "OK", r)

    def test_duplicate_id(self):
        n, d = self.up("two-gpus.conf")
        c = self.client(n)
        u = uuids("two-gpus.conf")[1]
        r = c.allocate([u, u])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn(u, r.details)
        self.assertIn("duplicate", r.details)

    def test_unhealthy_device(self):
        n, d = self.up("two-gpus.conf")
        c = self.client(n)
        bad, good = uuids("two-gpus.conf")[1], uuids("two-gpus.conf")[0]
        since = n.emu.mark()
        n.nvml.xid(1, 79)
        n.wait_devices(since=since, unhealthy=[bad])
        r = c.allocate([bad])
        self.assertEqual(r.code, "INVALID_ARGUMENT", r)
        self.assertIn(bad, r.details)
        self.assertIn("unhealthy", r.details)
        r = c.allocate([good])
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.responses[0]["envs"], {"NVIDIA_VISIBLE_DEVICES": good})
        # The kubelet side: only the healthy GPU is left to admit.
        ev = n.emu.admit("p3", f"c:{RESOURCE}=2")
        self.assertFalse(ev["ok"])
        self.assertIn("Requested: 2, Available: 1", ev["error"])

    def test_envvar_keeps_request_order(self):
        # nvidia-plugin.md §2: with the uuid strategy NVIDIA_VISIBLE_DEVICES lists the IDs in
        # the order of the request (the container's CUDA device numbering follows it).
        n, d = self.up("two-gpus.conf")
        c = self.client(n)
        for order in (list(reversed(uuids("two-gpus.conf"))), uuids("two-gpus.conf")):
            r = c.allocate(order)
            self.assertEqual(r.code, "OK", r)
            self.assertEqual(r.responses[0]["envs"], {"NVIDIA_VISIBLE_DEVICES": ",".join(order)})

    def test_options_and_prestart(self):
        n, d = self.up("two-gpus.conf")
        r = self.client(n).options()
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.options.get(2), 1, "GetPreferredAllocationAvailable")
        self.assertFalse(r.options.get(1, 0), "PreStartRequired")


class Preferred(NodeTest):
    def preferred_events(self, n, pod):
        return n.emu.find(lambda e: e.get("event") == "preferred" and e.get("pod") == pod)

    def test_same_numa_node_preferred(self):
        fx = load_fixture("four-gpus-numa.conf")
        numa = {g["uuid"]: int(g["numa"]) for g in fx["gpus"]}
        n, d = self.up("four-gpus-numa.conf", fake_host=True)
        self.assertEqual(n.emu.last_devices(RESOURCE)["numa"],
                         {u: [v] for u, v in numa.items()})
        # Several rounds: the emulator lists the available IDs in random order.
        for i in range(6):
            pod = f"pair{i}"
            ev = n.emu.admit(pod, f"c:{RESOURCE}=2")
            self.assertTrue(ev["ok"], ev)
            pref = self.preferred_events(n, pod)
            self.assertEqual(len(pref), 1)
            self.assertEqual(len(pref[0]["preferred"]), 2)
            self.assertEqual(len({numa[u] for u in pref[0]["preferred"]}), 1,
                             f"not one NUMA node: {pref[0]}")
            self.assertEqual(sorted(n.emu.allocations(pod)[0]["ids"]),
                             sorted(pref[0]["preferred"]))
            n.emu.delete(pod)
        # One GPU of node A taken: a pair must come from the other node.
        ev = n.emu.admit("single", f"c:{RESOURCE}=1")
        self.assertTrue(ev["ok"], ev)
        taken = n.emu.allocations("single")[0]["ids"][0]
        ev = n.emu.admit("pair", f"c:{RESOURCE}=2")
        self.assertTrue(ev["ok"], ev)
        got = n.emu.allocations("pair")[0]["ids"]
        self.assertEqual({numa[u] for u in got}, {1 - numa[taken]}, got)

    def test_pci_closeness_preferred(self):
        fx = load_fixture("four-gpus-topo.conf")
        ids = [g["uuid"] for g in fx["gpus"]]
        close = {frozenset((ids[0], ids[2])), frozenset((ids[1], ids[3]))}
        n, d = self.up("four-gpus-topo.conf")
        for i in range(6):
            pod = f"pair{i}"
            ev = n.emu.admit(pod, f"c:{RESOURCE}=2")
            self.assertTrue(ev["ok"], ev)
            pref = self.preferred_events(n, pod)[0]["preferred"]
            self.assertIn(frozenset(pref), close, pref)
            n.emu.delete(pod)
        # Straight to the plugin: exact size, must-include honoured, its partner chosen.
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        for must, size, want in (([ids[1]], 2, {ids[1], ids[3]}),
                                 ([ids[2]], 2, {ids[0], ids[2]}),
                                 ([ids[0], ids[1]], 2, {ids[0], ids[1]}),
                                 ([], 4, set(ids))):
            r = c.preferred(ids, must, size)
            self.assertEqual(r.code, "OK", r)
            self.assertEqual(len(r.ids), size, r.ids)
            self.assertEqual(set(r.ids), want, (must, size))
        r = c.preferred([ids[0], ids[1], ids[3]], [], 2)
        self.assertEqual(set(r.ids), {ids[1], ids[3]})

    def test_topology_error_falls_back(self):
        ids = uuids("four-gpus-topo-error.conf")
        n, d = self.up("four-gpus-topo-error.conf")
        d.wait_log("GPU topology not available, preferring by NUMA node only", timeout=2)
        ev = n.emu.admit("p", f"c:{RESOURCE}=3")
        self.assertTrue(ev["ok"], ev)
        pref = self.preferred_events(n, "p")[0]
        self.assertTrue(pref["ok"], pref)
        self.assertEqual(len(set(pref["preferred"])), 3)
        self.assertTrue(set(pref["preferred"]) <= set(ids))


if __name__ == "__main__":
    main()
