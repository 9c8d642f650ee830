#!/usr/bin/python3
"""Time-slicing (sharing.timeSlicing, NVIDIA's schema) through the real daemon, the kubelet
emulator and the fake NVML: replica IDs, rename / renameByDefault, `devices` subsets, the
distributed GetPreferredAllocation policy, failRequestsGreaterThanOne, de-duplicated
NVIDIA_VISIBLE_DEVICES, health of every replica; and the config errors of GPU sharing
(docs/sharing.md, issue 4)."""

import os

from common import RESOURCE, NodeTest, main, uuids
from edgegpu import PluginClient, run_cli

TWO = uuids("two-gpus.conf")
THREE = uuids("three-gpus.conf")
ONE = uuids("sharing/one-16g.conf")
SHARED = "nvidia.com/gpu.shared"
SMALL = "nvidia.com/gpu.small"
GPUMEM = "nvidia.com/gpumem"


def ts_config(*resources, rename_by_default=False, fail_gt_one=False, extra=""):
    """sharing.timeSlicing with one entry per dict (name, replicas, devices, rename)."""
    out = ["version: v1", "sharing:", "  timeSlicing:",
           f"    renameByDefault: {str(rename_by_default).lower()}",
           f"    failRequestsGreaterThanOne: {str(fail_gt_one).lower()}",
           "    resources:"]
    for r in resources:
        out.append(f"    - name: {r.get('name', RESOURCE)}")
        out.append(f"      replicas: {r['replicas']}")
        if "devices" in r:
            out.append(f"      devices: {r['devices']}")
        if "rename" in r:
            out.append(f"      rename: {r['rename']}")
    return "\n".join(out) + "\n" + extra


def replicas(uuid, n):
    return [f"{uuid}::{i}" for i in range(n)]


class SharingTest(NodeTest):
    def start(self, fixture, config, resources, emulator_args=(), **kw):
        """A node whose daemon registered every resource in `resources` {name: healthy count}
        and sent a first list of each. Returns (node, daemon)."""
        n = self.node(fixture, emulator_args=emulator_args)
        d = n.start_daemon(config=config, **kw)
        for name, healthy in resources.items():
            n.wait_register(name, timeout=10)
            n.wait_devices(name, healthy_count=healthy, timeout=10)
        return n, d

    def admit(self, n, pod, resource, count):
        ev = n.emu.admit(pod, f"c1:{resource}={count}")
        self.assertTrue(ev["ok"], ev)
        al = n.emu.allocations(pod)
        self.assertEqual(len(al), 1, al)
        self.assertTrue(al[0]["ok"], al[0])
        return al[0]

    def assertNeverRegistered(self, n, resource):
        self.assertEqual(n.emu.find(lambda e: e.get("event") in ("register_begin", "register")
                                    and e.get("resource") == resource), [],
                         f"{resource} was registered")


class ReplicaIds(SharingTest):
    def test_replica_ids_and_no_whole_gpus(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}), {RESOURCE: 8})
        ev = n.emu.last_devices(RESOURCE)
        self.assertEqual(ev["endpoint"], "nvidia-gpu.sock")
        self.assertEqual(sorted(ev["healthy"]), sorted(replicas(TWO[0], 4) + replicas(TWO[1], 4)))
        self.assertEqual(ev["unhealthy"], [])
        self.assertNotIn("duplicates", ev)
        # The time-sliced GPUs are not also offered whole.
        for u in TWO:
            self.assertNotIn(u, ev["healthy"])
        self.assertEqual(len(n.registrations(RESOURCE)), 1)

    def test_rename_and_devices_subset(self):
        cfg = ts_config({"replicas": 3, "devices": "[0]", "rename": SMALL})
        n, d = self.start("two-gpus.conf", cfg, {SMALL: 3, RESOURCE: 1})
        small = n.emu.last_devices(SMALL)
        self.assertEqual(small["endpoint"], "nvidia-gpu.small.sock")
        self.assertEqual(sorted(small["healthy"]), replicas(TWO[0], 3))
        whole = n.emu.last_devices(RESOURCE)
        self.assertEqual(whole["endpoint"], "nvidia-gpu.sock")
        # Only the listed GPU is replicated; the other stays a whole nvidia.com/gpu, and the
        # shared GPU is absent from the whole resource.
        self.assertEqual(whole["healthy"], [TWO[1]])
        self.assertEqual(whole["unhealthy"], [])
        self.assertTrue(os.path.exists(n.socket("nvidia-gpu.small.sock")))
        # Allocations follow: a replica gives GPU 0, a whole GPU gives GPU 1.
        a = self.admit(n, "p-small", SMALL, 1)
        self.assertEqual(a["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"], TWO[0])
        a = self.admit(n, "p-whole", RESOURCE, 1)
        self.assertEqual(a["ids"], [TWO[1]])
        self.assertEqual(a["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"], TWO[1])

    def test_devices_subset_by_uuid(self):
        cfg = ts_config({"replicas": 2, "devices": f"[\"{THREE[2]}\"]", "rename": SMALL})
        n, d = self.start("three-gpus.conf", cfg, {SMALL: 2, RESOURCE: 2})
        self.assertEqual(sorted(n.emu.last_devices(SMALL)["healthy"]), replicas(THREE[2], 2))
        self.assertEqual(sorted(n.emu.last_devices(RESOURCE)["healthy"]),
                         sorted(THREE[:2]))

    def test_rename_by_default(self):
        cfg = ts_config({"replicas": 2}, rename_by_default=True)
        n, d = self.start("two-gpus.conf", cfg, {SHARED: 4})
        ev = n.emu.last_devices(SHARED)
        self.assertEqual(ev["endpoint"], "nvidia-gpu.shared.sock")
        self.assertEqual(sorted(ev["healthy"]), sorted(replicas(TWO[0], 2) + replicas(TWO[1], 2)))
        self.assertTrue(os.path.exists(n.socket("nvidia-gpu.shared.sock")))
        # Every GPU is shared: no whole nvidia.com/gpu at all. A health change seen on the
        # shared resource is the sentinel: the daemon has long finished its start by then.
        since = n.emu.mark()
        n.nvml.xid(0, 79)
        n.wait_devices(SHARED, since=since, unhealthy_count=2, timeout=10)
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "devices" and
                                    e.get("resource") == RESOURCE), [])
        self.assertNeverRegistered(n, RESOURCE)
        self.assertFalse(os.path.exists(n.socket("nvidia-gpu.sock")))

    def test_rename_by_default_with_devices_subset(self):
        cfg = ts_config({"replicas": 2, "devices": "[1]"}, rename_by_default=True)
        n, d = self.start("two-gpus.conf", cfg, {SHARED: 2, RESOURCE: 1})
        self.assertEqual(sorted(n.emu.last_devices(SHARED)["healthy"]), replicas(TWO[1], 2))
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy"], [TWO[0]])

    def test_time_slicing_gpumem_and_whole_side_by_side(self):
        cfg = ts_config({"replicas": 2, "devices": "[0]", "rename": SMALL},
                        extra="edgegpu:\n  sharing:\n    memory:\n      devices: [1]\n"
                              "      unitMiB: 64\n")
        units = (23034 - 512) // 64
        n, d = self.start("three-gpus.conf", cfg, {SMALL: 2, GPUMEM: units, RESOURCE: 1})
        self.assertEqual(sorted(n.emu.last_devices(SMALL)["healthy"]), replicas(THREE[0], 2))
        self.assertEqual(n.emu.last_devices(GPUMEM)["count"], units)
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy"], [THREE[2]])
        a = self.admit(n, "p-mem", GPUMEM, 3)
        self.assertEqual(a["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"], THREE[1])
        self.assertEqual(a["response"]["envs"]["EDGEGPU_GPUMEM_LIMIT_MIB"], str(3 * 64))


class Balancing(SharingTest):
    def test_distributed_policy_through_the_emulator(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}), {RESOURCE: 8})
        got = [self.admit(n, f"p{i}", RESOURCE, 1)["ids"] for i in range(5)]
        # Least-used GPU first; ties to the lower GPU index, then the lower replica.
        self.assertEqual(got, [[f"{TWO[0]}::0"], [f"{TWO[1]}::0"], [f"{TWO[0]}::1"],
                               [f"{TWO[1]}::1"], [f"{TWO[0]}::2"]])
        prefs = n.emu.find(lambda e: e.get("event") == "preferred")
        self.assertEqual([p["preferred"] for p in prefs], got, "the kubelet followed the answer")
        # A three-replica pod now: GPU 1 has one replica fewer in use, then they alternate.
        a = self.admit(n, "p-three", RESOURCE, 3)
        pref = n.emu.find(lambda e: e.get("event") == "preferred" and e.get("pod") == "p-three")
        self.assertEqual(pref[0]["preferred"], [f"{TWO[1]}::2", f"{TWO[0]}::3", f"{TWO[1]}::3"])
        self.assertEqual(sorted(a["ids"]), sorted(pref[0]["preferred"]))
        self.assertEqual(a["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"], f"{TWO[0]},{TWO[1]}")

    def test_distributed_policy_direct(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}), {RESOURCE: 8})
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        every = replicas(TWO[1], 4) + replicas(TWO[0], 4)  # order of the request is not used
        r = c.preferred(every, [], 4)
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.ids, [f"{TWO[0]}::0", f"{TWO[1]}::0", f"{TWO[0]}::1",
                                 f"{TWO[1]}::1"])
        # Replicas not offered count as in use: GPU 0 has two taken, so GPU 1 first.
        r = c.preferred(replicas(TWO[0], 4)[2:] + replicas(TWO[1], 4), [], 3)
        self.assertEqual(r.ids, [f"{TWO[1]}::0", f"{TWO[1]}::1", f"{TWO[0]}::2"])
        # Must-include replicas come first and count as in use: GPU 1 has one, so GPU 0
        # gets the next, then the tie goes to GPU 0 again.
        r = c.preferred(every, [f"{TWO[1]}::3"], 3)
        self.assertEqual(r.code, "OK", r)
        self.assertEqual(r.ids, [f"{TWO[1]}::3", f"{TWO[0]}::0", f"{TWO[0]}::1"])


class Allocation(SharingTest):
    def test_two_replicas_of_one_gpu_deduplicated(self):
        n, d = self.start("sharing/one-16g.conf", ts_config({"replicas": 4}), {RESOURCE: 4})
        a = self.admit(n, "p1", RESOURCE, 2)
        self.assertEqual(sorted(a["ids"]), [f"{ONE[0]}::0", f"{ONE[0]}::1"])
        self.assertEqual(a["response"]["envs"], {"NVIDIA_VISIBLE_DEVICES": ONE[0]})

    def test_replicas_with_volume_mounts_deduplicated(self):
        cfg = ts_config({"replicas": 4},
                        extra="flags:\n  plugin:\n    deviceListStrategy: volume-mounts\n")
        n, d = self.start("sharing/one-16g.conf", cfg, {RESOURCE: 4})
        a = self.admit(n, "p1", RESOURCE, 3)
        mounts = [m["container_path"] for m in a["response"]["mounts"]]
        self.assertEqual(mounts, [f"/var/run/nvidia-container-devices/{ONE[0]}"])

    def test_fail_requests_greater_than_one(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}, fail_gt_one=True),
                          {RESOURCE: 8})
        ev = n.emu.admit("p2", f"c1:{RESOURCE}=2")
        self.assertFalse(ev["ok"], ev)
        self.assertIn("maximum request size for shared resources is 1; found 2", ev["error"])
        self.assertIn(f'invalid allocation request for "{RESOURCE}"', ev["error"])
        al = n.emu.allocations("p2")
        self.assertEqual(len(al), 1, "refused in Allocate, not earlier")
        self.assertFalse(al[0]["ok"])
        rec = d.wait_log("request refused", timeout=10)
        self.assertIn("found 2", rec["_line"])
        # One replica is fine.
        a = self.admit(n, "p1", RESOURCE, 1)
        self.assertEqual(a["response"]["envs"]["NVIDIA_VISIBLE_DEVICES"], TWO[0])

    def test_refusal_logged_in_logfmt(self):
        # The refusal's text has quotes ("nvidia.com/gpu"): the err= value must stay one
        # logfmt value (log_quote), or log tools cut it at the first inner quote.
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}, fail_gt_one=True),
                          {RESOURCE: 8})
        self.assertFalse(n.emu.admit("p2", f"c1:{RESOURCE}=2")["ok"])
        rec = d.wait_log("request refused", timeout=10)
        self.assertEqual(rec.get("err"), f'invalid allocation request for "{RESOURCE}": '
                         "invalid request: maximum request size for shared resources is 1; "
                         "found 2", rec["_line"])

    def test_fail_requests_greater_than_one_off_by_default(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}), {RESOURCE: 8})
        a = self.admit(n, "p2", RESOURCE, 2)
        self.assertEqual(sorted(a["ids"]), sorted([f"{TWO[0]}::0", f"{TWO[1]}::0"]))

    def test_unknown_replica_refused(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 2}), {RESOURCE: 4})
        c = PluginClient(n.socket())
        self.addCleanup(c.close)
        for bad in (f"{TWO[0]}::2", TWO[0], f"{TWO[0]}::01", "GPU-bogus::0"):
            with self.subTest(id=bad):
                r = c.allocate([bad])
                self.assertEqual(r.code, "INVALID_ARGUMENT", r)
                self.assertIn(bad, r.details)


class Health(SharingTest):
    def test_xid_marks_every_replica_unhealthy(self):
        n, d = self.start("two-gpus.conf", ts_config({"replicas": 4}), {RESOURCE: 8})
        since = n.emu.mark()
        n.nvml.xid(1, 79)
        ev = n.wait_devices(RESOURCE, since=since, timeout=10)
        self.assertEqual(sorted(ev["unhealthy"]), replicas(TWO[1], 4))
        self.assertEqual(sorted(ev["healthy"]), replicas(TWO[0], 4))
        self.assertEqual(ev["reg"], 1, "same stream")
        # The kubelet now only has GPU 0's replicas to give.
        a = self.admit(n, "p1", RESOURCE, 3)
        self.assertTrue(all(i.startswith(TWO[0] + "::") for i in a["ids"]), a["ids"])

    def test_lost_renamed_gpu_marks_its_replicas_only(self):
        cfg = ts_config({"replicas": 3, "devices": "[0]", "rename": SMALL})
        n, d = self.start("two-gpus.conf", cfg, {SMALL: 3, RESOURCE: 1})
        since = n.emu.mark()
        n.nvml.lost(0)
        ev = n.wait_devices(SMALL, since=since, timeout=10)
        self.assertEqual(sorted(ev["unhealthy"]), replicas(TWO[0], 3))
        self.assertEqual(ev["healthy"], [])
        # GPU 1's XID is the sentinel: the first update of the whole GPU is its own.
        n.nvml.xid(1, 79)
        self.assertFirstUpdateIs(n, since, [TWO[1]], RESOURCE)


# --- config errors ---

OVERLAP = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
      devices: [0]
      rename: nvidia.com/gpu.small
edgegpu:
  sharing:
    memory:
      devices: [0, 1]
"""

UNIT_ZERO = """version: v1
edgegpu:
  sharing:
    memory:
      devices: [0]
      unitMiB: 0
"""

BIG_RESERVE = """version: v1
edgegpu:
  sharing:
    memory:
      devices: [1]
      reserveMiB: 30000
"""


class ConfigErrors(SharingTest):
    def check_config(self, text):
        n = self.node("two-gpus.conf", start_emulator=False)
        path = n.write_config(text)
        return run_cli(["check-config", path]), path

    def serve_fails(self, text, fixture="two-gpus.conf"):
        """edgegpu serve with this config exits non-zero without registering anything."""
        n = self.node(fixture)
        d = n.start_daemon(config=text, wait_control=False)
        rc = d.wait(timeout=10)
        self.assertNotEqual(rc, 0, d.text())
        self.assertEqual(n.emu.find(lambda e: e.get("event") == "register_begin"), [])
        return d

    def test_overlapping_devices(self):
        r, path = self.check_config(OVERLAP)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("edgegpu.sharing.memory.devices[0]", r.stderr)
        self.assertIn("also time-sliced by sharing.timeSlicing.resources[0]", r.stderr)
        self.assertIn("only one of the two", r.stderr)
        self.assertIn(path, r.stderr, "the message names the file")
        self.assertNotIn("devices[1]", r.stderr, "GPU 1 is not time-sliced")
        d = self.serve_fails(OVERLAP)
        rec = d.find_logs("invalid config")
        self.assertTrue(rec, d.text())
        self.assertIn("also time-sliced", rec[0]["detail"])

    def test_unit_zero(self):
        r, path = self.check_config(UNIT_ZERO)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("edgegpu.sharing.memory.unitMiB", r.stderr)
        self.assertIn(path, r.stderr)
        d = self.serve_fails(UNIT_ZERO)
        self.assertIn("unitMiB", d.text())

    def test_reserve_larger_than_the_gpu(self):
        # check-config cannot know the GPU; serve and discover can.
        d = self.serve_fails(BIG_RESERVE)
        text = d.text()
        self.assertIn("edgegpu.sharing.memory.reserveMiB", text)
        self.assertIn("reserving 30000 MiB of GPU 1", text)
        self.assertIn("23034 MiB", text)
        r = run_cli(["discover", "--json"], fixture="two-gpus.conf",
                    env={"CONFIG_FILE": d.argv[d.argv.index("--config-file") + 1]})
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("reserving 30000 MiB of GPU 1", r.stderr)

    def test_reserve_fits_one_gpu_not_the_other(self):
        # 15356 MiB and 23034 MiB GPUs: 16000 MiB fits GPU 1 only, so only GPU 0 may fail.
        text = BIG_RESERVE.replace("[1]", "[0, 1]").replace("30000", "16000")
        d = self.serve_fails(text)
        self.assertIn("reserving 16000 MiB of GPU 0", d.text())
        self.assertNotIn("of GPU 1", d.text())
        ok = BIG_RESERVE.replace("30000", "16000")
        n, d = self.start("two-gpus.conf", ok, {GPUMEM: 23034 - 16000, RESOURCE: 1})

    def test_unknown_gpu_in_devices(self):
        text = UNIT_ZERO.replace("unitMiB: 0", "unitMiB: 1").replace("[0]", "[5]")
        d = self.serve_fails(text)
        self.assertIn("edgegpu.sharing.memory.devices[0]", d.text())
        self.assertIn("not a GPU of this node", d.text())


if __name__ == "__main__":
    main()
