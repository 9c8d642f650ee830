#!/usr/bin/python3
"""GPU discovery as `edgegpu discover` and `edgegpu serve` report it, on the fake NVML."""

import json

from common import RESOURCE, NodeTest, load_fixture, main
from edgegpu import run_cli


def mib(v):
    assert v.endswith("MiB"), v
    return int(v[:-3])


class Discover(NodeTest):
    def test_discover_json_reports_every_field(self):
        fx = load_fixture("two-gpus.conf")
        r = run_cli(["discover", "--json"], fixture="two-gpus.conf", fake_host=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        g = fx["global"]
        self.assertEqual(out["driver_version"], g["driver_version"])
        self.assertEqual(out["cuda_driver_version"], int(g["cuda_driver_version"]))
        self.assertEqual(out["nvml_version"], g["nvml_version"])
        self.assertEqual(out["skipped"], 0)
        self.assertEqual(len(out["gpus"]), len(fx["gpus"]))
        for i, (got, want) in enumerate(zip(out["gpus"], fx["gpus"])):
            with self.subTest(gpu=i):
                self.assertEqual(got["index"], i)
                self.assertEqual(got["uuid"], want["uuid"])
                self.assertEqual(got["name"], want["name"])
                self.assertEqual(got["minor"], int(want["minor"]))
                self.assertEqual(got["memory_mib"], mib(want["memory_total"]))
                self.assertEqual(got["pci_bus_id"], want["pci_bus_id"])
                self.assertEqual(got["numa_node"], int(want["numa"]))
                self.assertEqual(got["compute_capability"], want["compute_capability"])
                # GFD's names ("ada-lovelace"), where the fixture says the fake's keyword.
                self.assertEqual(got["architecture"],
                                 {"ada": "ada-lovelace"}.get(want["architecture"],
                                                             want["architecture"]))
                self.assertTrue(got["events_supported"])
        self.assertEqual([(x["name"], x["devices"]) for x in out["resources"]],
                         [(RESOURCE, 2)])

    def test_discover_text(self):
        fx = load_fixture("two-gpus.conf")
        r = run_cli(["discover"], fixture="two-gpus.conf", fake_host=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(fx["global"]["driver_version"], r.stdout)
        for g in fx["gpus"]:
            self.assertIn(g["uuid"], r.stdout)
            self.assertIn(g["name"], r.stdout)
            self.assertIn(f"/dev/nvidia{g['minor']}", r.stdout)

    def test_numa_unknown_or_minus_one_is_no_numa(self):
        fx = load_fixture("numa.conf")
        r = run_cli(["discover", "--json"], fixture="numa.conf", fake_host=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [g["numa_node"] for g in json.loads(r.stdout)["gpus"]]
        want = [int(g["numa"]) if g["numa"] not in ("none",) else -1 for g in fx["gpus"]]
        self.assertEqual(got, want)

    def test_mig_gpu_skipped_and_logged(self):
        fx = load_fixture("mig.conf")
        mig = [g for g in fx["gpus"] if g.get("mig") == "on"]
        whole = [g for g in fx["gpus"] if g.get("mig") != "on"]
        self.assertEqual((len(mig), len(whole)), (1, 1))
        r = run_cli(["discover", "--json"], fixture="mig.conf")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["skipped"], 1)
        self.assertEqual([g["uuid"] for g in out["gpus"]], [whole[0]["uuid"]])
        self.assertEqual(out["gpus"][0]["index"], 1, "NVML index kept")

        # serve: the MIG GPU is not advertised, and the log says which GPU and why.
        n, d = self.up("mig.conf", healthy=1)
        self.assertEqual(n.emu.last_devices(RESOURCE)["healthy"], [whole[0]["uuid"]])
        recs = d.find_logs(pred=lambda r: "mig" in r["_line"].lower())
        self.assertTrue(recs, "no log line about the MIG GPU:\n" + d.tail())
        self.assertTrue(any(r.get("level") == "warn" for r in recs), recs)
        self.assertTrue(any("not supported" in r["_line"] for r in recs), recs)
        self.assertTrue(any(mig[0]["uuid"] in r["_line"] for r in recs),
                        "the log does not name the skipped GPU " + mig[0]["uuid"] + ":\n" +
                        "\n".join(r["_line"] for r in recs))

    def test_serve_logs_each_gpu(self):
        fx = load_fixture("two-gpus.conf")
        n, d = self.up("two-gpus.conf")
        for i, g in enumerate(fx["gpus"]):
            rec = d.find_logs("found GPU", device=g["uuid"])
            self.assertEqual(len(rec), 1, d.tail())
            self.assertEqual(rec[0]["gpu"], str(i))
            self.assertEqual(rec[0]["minor"], g["minor"])
            self.assertEqual(rec[0]["pci"], g["pci_bus_id"])


if __name__ == "__main__":
    main()
