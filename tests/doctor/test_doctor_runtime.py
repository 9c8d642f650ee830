#!/usr/bin/python3
"""The doctor's container-runtime layer (runtime.*) on fixture host trees.

Each test lays out a node's files in a temporary directory (kubeadm, k3s, MicroK8s and KubeEdge
layouts, containerd 1.x and 2.x configs, CDI specs, Docker's daemon.json, the toolkit's
binaries), runs the real `edgegpu doctor --host-root DIR --json` with the fake NVML
(two-gpus.conf) and checks each runtime.* check's status, evidence and fix. The fix strings are
spelled out here on purpose: docs/troubleshooting.md shows them word for word, so a change to
one must show up as a failing test.

Environment (tests/doctor/meson.build): EDGEGPU, FAKE_NVML.
"""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from edgegpu import binary, load_fixture, run_cli  # noqa: E402
from fixes import assert_documented  # noqa: E402

FIX_LAYOUT_NONE = (
    "Install a container runtime for Kubernetes (containerd, or the one your distribution "
    "ships: k3s, MicroK8s, KubeEdge's edgecore with containerd); with --host-root, point the "
    "doctor at the node's root filesystem")
FIX_EDGECORE_YAML = (
    "Fix the YAML of /etc/kubeedge/config/edgecore.yaml at the line shown, then restart "
    "edgecore (systemctl restart edgecore)")
FIX_TOML = ("Fix the TOML at the file and line shown (the runtime refuses to start with it), "
            "then restart the runtime")
FIX_RUNTIME_BINARY = (
    "Install the NVIDIA Container Toolkit (package nvidia-container-toolkit), or point the "
    "nvidia runtime (containerd: options.BinaryName; Docker: runtimes.nvidia.path) at the "
    "installed nvidia-container-runtime, then restart the runtime")
FIX_CTD_MISSING = (
    "nvidia-ctk runtime configure --runtime=containerd --set-as-default (it edits "
    "/etc/containerd/config.toml), then systemctl restart containerd")
FIX_CTD_CRI_DISABLED = (
    "Remove \"cri\" from disabled_plugins in /etc/containerd/config.toml (Docker's "
    "containerd.io package disables it), then systemctl restart containerd")
FIX_CTD_NOT_DEFAULT = (
    "Run GPU pods with runtimeClassName: nvidia and create a RuntimeClass named nvidia "
    "(handler: nvidia), or make nvidia the default: nvidia-ctk runtime configure "
    "--runtime=containerd --set-as-default, then systemctl restart containerd")
FIX_K3S_MISSING = (
    "Install the NVIDIA Container Toolkit (nvidia-container-runtime in /usr/bin or "
    "/usr/local/nvidia/toolkit), then restart k3s (systemctl restart k3s, or k3s-agent on an "
    "agent): k3s finds the runtime when it starts and adds it to its containerd config. With "
    "your own config.toml.tmpl, keep {{ template \"base\" . }} in it or add the nvidia "
    "runtime there")
FIX_K3S_NOT_DEFAULT = (
    "Run GPU pods with runtimeClassName: nvidia (with a RuntimeClass named nvidia, handler "
    "nvidia), or make it the default: default-runtime: nvidia in /etc/rancher/k3s/config.yaml "
    "(the --default-runtime flag), then restart k3s")
FIX_MICROK8S_MISSING = (
    "microk8s enable nvidia (microk8s enable gpu on older releases), or add the nvidia "
    "runtime to /var/snap/microk8s/current/args/containerd-template.toml and run snap "
    "restart microk8s.daemon-containerd")
FIX_TOOLKIT_MISSING = (
    "Install the NVIDIA Container Toolkit from NVIDIA's repository (apt-get install "
    "nvidia-container-toolkit, or dnf install nvidia-container-toolkit): it provides "
    "nvidia-container-runtime and nvidia-ctk")
FIX_TOOLKIT_PARTIAL = (
    "Reinstall the NVIDIA Container Toolkit (nvidia-container-toolkit and "
    "nvidia-container-toolkit-base) so that nvidia-container-runtime-hook and "
    "/etc/nvidia-container-runtime/config.toml are present")
FIX_CDI_NONE = (
    "Only needed for the cdi-annotations and cdi-cri device list strategies: edgegpu writes "
    "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json when it starts with one of them; "
    "for NVIDIA's spec run nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
FIX_CDI_PARSE = (
    "Fix or delete the CDI spec named above (runtimes refuse a broken spec); regenerate "
    "NVIDIA's with nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
FIX_CDI_STALE = (
    "Regenerate the specs for the GPUs present: nvidia-ctk cdi generate "
    "--output=/etc/cdi/nvidia.yaml for kind nvidia.com/gpu; edgegpu rewrites "
    "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json when it starts, so restart the "
    "edgegpu pod")
FIX_DOCKER_MISSING = (
    "nvidia-ctk runtime configure --runtime=docker --set-as-default (it edits "
    "/etc/docker/daemon.json), then systemctl restart docker")
FIX_DOCKER_NOT_DEFAULT = (
    "Run containers with --runtime=nvidia (or --gpus all), or make nvidia the default: "
    "nvidia-ctk runtime configure --runtime=docker --set-as-default, then systemctl restart "
    "docker")
FIX_DOCKER_JSON = (
    "Fix the JSON of /etc/docker/daemon.json at the line shown (dockerd refuses to start "
    "with it), then systemctl restart docker")

FIXTURE = "two-gpus.conf"
CTD = "/etc/containerd/config.toml"
K3S_DIR = "/var/lib/rancher/k3s/agent/etc/containerd"
MK8S = "/var/snap/microk8s/current/args"
TOOLKIT = ("nvidia-container-runtime", "nvidia-ctk", "nvidia-container-runtime-hook")

V2_PREFIX = 'plugins."io.containerd.grpc.v1.cri".containerd'
V3_PREFIX = 'plugins."io.containerd.cri.v1.runtime".containerd'


def ctd_config(version=2, nvidia=True, default="nvidia", binary="/usr/bin/nvidia-container-runtime",
               prefix=None, name="nvidia"):
    """A containerd config as nvidia-ctk writes it (version 2 or 3)."""
    p = prefix or (V3_PREFIX if version == 3 else V2_PREFIX)
    out = [f"version = {version}", "", "[plugins]", f"  [{p.rsplit('.containerd', 1)[0]}]",
           f"    [{p}]"]
    if default:
        out.append(f'      default_runtime_name = "{default}"  # set by nvidia-ctk')
    out += [f"      [{p}.runtimes.runc]", '        runtime_type = "io.containerd.runc.v2"',
            f"        [{p}.runtimes.runc.options]", "          SystemdCgroup = true"]
    if nvidia:
        out += [f"      [{p}.runtimes.{name}]",
                "        privileged_without_host_devices = false",
                '        runtime_type = "io.containerd.runc.v2"',
                f"        [{p}.runtimes.{name}.options]",
                f'          BinaryName = "{binary}"']
    return "\n".join(out) + "\n"


class Host:
    """A fixture host tree under a temporary directory."""

    def __init__(self, test):
        self.root = tempfile.mkdtemp(prefix="doctor-runtime-")
        test.addCleanup(shutil.rmtree, self.root, True)

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def write(self, p, text, mode=0o644):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
        os.chmod(full, mode)
        return self

    def exe(self, p):
        return self.write(p, "#!/bin/sh\nexit 0\n", 0o755)

    def mkdir(self, p):
        os.makedirs(self.path(p), exist_ok=True)
        return self

    def symlink(self, target, p):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)
        return self

    def toolkit(self, skip=()):
        for b in TOOLKIT:
            if b not in skip:
                self.exe("/usr/bin/" + b)
        if "config" not in skip:
            self.write("/etc/nvidia-container-runtime/config.toml",
                       '#comment\n[nvidia-container-runtime]\nmode = "cdi"\n')
        return self


class Report:
    def __init__(self, proc):
        self.proc = proc
        self.rc = proc.returncode
        try:
            self.doc = json.loads(proc.stdout)
        except ValueError as e:
            raise AssertionError(f"doctor printed no JSON ({e}):\n{proc.stdout}\n{proc.stderr}")
        assert_documented(self.doc)
        self.checks = {c["id"]: c for c in self.doc["checks"]}

    def __getitem__(self, cid):
        if cid not in self.checks:
            raise AssertionError(f"no check {cid} in {sorted(self.checks)}")
        return self.checks[cid]

    def evidence(self, cid):
        return "\n".join(self[cid]["evidence"])


class RuntimeLayer(unittest.TestCase):
    maxDiff = None

    def doctor(self, host, *extra):
        r = run_cli(["doctor", "--host-root", host.root, "--json",
                     "--nvml-lib", binary("FAKE_NVML")] + list(extra), fixture=FIXTURE)
        rep = Report(r)
        ids = [c["id"] for c in rep.doc["checks"] if c["layer"] == "runtime"]
        self.assertEqual(ids, ["runtime.layout", "runtime.containerd-nvidia", "runtime.toolkit",
                               "runtime.cdi", "runtime.tegra-mode", "runtime.docker"],
                         "the runtime checks, in order")
        failed = [c["id"] for c in rep.doc["checks"] if c["status"] == "fail"]
        self.assertEqual(rep.rc, 1 if failed else 0, f"exit status with failures {failed}")
        self.assertEqual(rep.doc["ok"], not failed)
        for c in rep.doc["checks"]:
            if c["layer"] == "runtime" and c["status"] in ("fail", "warn"):
                self.assertTrue(c.get("fix"), f"{c['id']} {c['status']} without a fix")
            if c["layer"] == "runtime" and c["status"] in ("pass", "skip"):
                self.assertNotIn("fix", c, c["id"])
        return rep

    def expect(self, rep, cid, status, fix=None, evidence=(), summary=None):
        c = rep[cid]
        self.assertEqual(c["status"], status, f"{cid}: {c['summary']}\n" + rep.evidence(cid))
        if fix is not None:
            self.assertEqual(c.get("fix"), fix, cid)
        ev = rep.evidence(cid)
        for e in evidence:
            self.assertIn(e, ev, f"{cid} evidence")
        if summary:
            self.assertIn(summary, c["summary"])
        return c

    # --- runtime.layout and runtime.containerd-nvidia: kubeadm / plain containerd ---

    def test_kubeadm_nvidia_default(self):
        h = Host(self).write(CTD, ctd_config()).toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "pass", summary="kubeadm layout",
                    evidence=[f"containerd config: {CTD}",
                              "socket /run/containerd/containerd.sock: absent"])
        self.expect(rep, "runtime.containerd-nvidia", "pass",
                    evidence=[f"read {CTD}", "config version 2; runtimes: runc, nvidia",
                              "BinaryName /usr/bin/nvidia-container-runtime (line 15): found",
                              "default_runtime_name nvidia (line 6)"])
        self.expect(rep, "runtime.toolkit", "pass",
                    evidence=["nvidia-ctk: /usr/bin/nvidia-ctk", "mode cdi"])
        self.expect(rep, "runtime.docker", "skip")

    def test_kubeadm_nvidia_not_default(self):
        h = Host(self).write(CTD, ctd_config(default="runc")).toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.containerd-nvidia", "warn", FIX_CTD_NOT_DEFAULT,
                    ["default_runtime_name runc (line 6)",
                     "GPU pods need runtimeClassName: nvidia and a RuntimeClass with handler nvidia"])
        h2 = Host(self).write(CTD, ctd_config(default=None)).toolkit()
        self.expect(self.doctor(h2), "runtime.containerd-nvidia", "warn", FIX_CTD_NOT_DEFAULT,
                    ["default_runtime_name not set (runc)"])

    def test_kubeadm_nvidia_missing(self):
        h = Host(self).write(CTD, ctd_config(nvidia=False, default="runc")).toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.containerd-nvidia", "fail", FIX_CTD_MISSING,
                    ["runtimes: runc"], summary="no nvidia runtime")
        self.assertEqual(rep.rc, 1)

    def test_cri_disabled(self):
        # Docker's containerd.io package: a containerd that kubelet cannot use.
        text = 'disabled_plugins = ["cri"]\n' + ctd_config()
        h = Host(self).write(CTD, text).toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "fail", FIX_CTD_CRI_DISABLED,
                    ["disabled_plugins lists the CRI plugin"])

    def test_kubeadm_malformed_toml(self):
        text = ctd_config().replace('default_runtime_name = "nvidia"', "default_runtime_name = nvidia")
        h = Host(self).write(CTD, text).toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.containerd-nvidia", "fail", FIX_TOML,
                    [f"{CTD}:6: invalid value 'nvidia'"])
        # An unterminated table name, a duplicate key: each names its line.
        h = Host(self).write(CTD, 'version = 2\n[plugins."io.containerd.grpc.v1.cri"\n').toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "fail", FIX_TOML,
                    [f"{CTD}:2: expected ']' after the table name"])
        h = Host(self).write(CTD, "version = 2\n# x\nversion = 3\n").toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "fail", FIX_TOML,
                    [f"{CTD}:3: duplicate key 'version'"])

    def test_binary_missing(self):
        h = Host(self).write(CTD, ctd_config(binary="/usr/local/nvidia/toolkit/nvidia-container-runtime"))
        h.toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "fail", FIX_RUNTIME_BINARY,
                    ["BinaryName /usr/local/nvidia/toolkit/nvidia-container-runtime (line 15): not found"])
        # Installed there: found.
        h.exe("/usr/local/nvidia/toolkit/nvidia-container-runtime")
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "pass")

    def test_containerd2_version3(self):
        h = Host(self).write(CTD, ctd_config(version=3)).toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "pass",
                    evidence=["config version 3; runtimes: runc, nvidia"])
        # A version 3 file with the runtime under the version 2 table: containerd 2 ignores it.
        h = Host(self).write(CTD, ctd_config(version=3, prefix=V2_PREFIX)).toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "fail", FIX_CTD_MISSING,
                    ['an nvidia runtime is under plugins."io.containerd.grpc.v1.cri", which a version 3 config ignores'])

    def test_no_runtime_at_all(self):
        h = Host(self).mkdir("/etc").toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "fail", FIX_LAYOUT_NONE,
                    ["k3s: /var/lib/rancher/k3s/agent absent"])
        self.expect(rep, "runtime.containerd-nvidia", "skip", evidence=["runtime: none found"])
        self.expect(rep, "runtime.docker", "skip")

    # --- k3s ---

    def test_k3s_template(self):
        tmpl = ('{{ template "base" . }}\n\n'
                + ctd_config().split("\n", 1)[1])  # the base has the version line
        h = Host(self).write(K3S_DIR + "/config.toml.tmpl", tmpl)
        h.write(K3S_DIR + "/config.toml", ctd_config(nvidia=False, default=None))
        h.write(CTD, ctd_config(nvidia=False))  # a stray plain containerd (Docker's)
        h.toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "pass", summary="k3s layout",
                    evidence=[f"containerd config: {K3S_DIR}/config.toml.tmpl",
                              "socket /run/k3s/containerd/containerd.sock",
                              f"not used by k3s: {CTD}"])
        self.expect(rep, "runtime.containerd-nvidia", "pass",
                    evidence=[f"read {K3S_DIR}/config.toml.tmpl",
                              "1 {{ }} line(s) not read, including k3s's base template",
                              "default_runtime_name nvidia (line 7)"])

    def test_k3s_base_template_renders_runtime(self):
        h = Host(self).write(K3S_DIR + "/config-v3.toml.tmpl", '{{ template "base" . }}\n')
        h.write(K3S_DIR + "/config.toml", ctd_config(version=3, default=None))
        h.toolkit()
        self.expect(self.doctor(h), "runtime.containerd-nvidia", "warn", FIX_K3S_NOT_DEFAULT,
                    [f"read {K3S_DIR}/config-v3.toml.tmpl",
                     f"read {K3S_DIR}/config.toml (k3s's base template, as rendered at its last start)"])

    def test_k3s_generated_without_nvidia(self):
        h = Host(self).write(K3S_DIR + "/config.toml", ctd_config(nvidia=False, default=None))
        h.toolkit(skip=TOOLKIT)
        rep = self.doctor(h)
        self.expect(rep, "runtime.containerd-nvidia", "fail", FIX_K3S_MISSING,
                    [f"read {K3S_DIR}/config.toml"])
        self.expect(rep, "runtime.toolkit", "fail", FIX_TOOLKIT_MISSING,
                    ["nvidia-container-runtime: not found"])

    # --- MicroK8s ---

    def test_microk8s_template(self):
        name = "nvidia-container-runtime"
        tmpl = ctd_config(default="${RUNTIME}", binary=name, name=name).replace(
            "io.containerd.runc.v2", "${RUNTIME_TYPE}")
        h = Host(self).write(MK8S + "/containerd-template.toml", tmpl)
        h.write(MK8S + "/containerd.toml", ctd_config(default=name, binary=name, name=name))
        h.toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "pass", summary="microk8s layout",
                    evidence=[f"containerd config: {MK8S}/containerd-template.toml",
                              "socket /var/snap/microk8s/common/run/containerd.sock"])
        self.expect(rep, "runtime.containerd-nvidia", "pass",
                    evidence=["runtime nvidia-container-runtime: BinaryName nvidia-container-runtime",
                              "found at /usr/bin/nvidia-container-runtime",
                              "default_runtime_name ${RUNTIME} (line 6) is filled in by MicroK8s"])
        h2 = Host(self).write(MK8S + "/containerd-template.toml",
                              ctd_config(nvidia=False, default="${RUNTIME}")).toolkit()
        self.expect(self.doctor(h2), "runtime.containerd-nvidia", "fail", FIX_MICROK8S_MISSING)

    # --- KubeEdge ---

    def test_kubeedge_containerd(self):
        edgecore = ("apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\n"
                    "modules:\n  edged:\n    enable: true\n    tailoredKubeletFlag:\n"
                    "      containerRuntime: remote\n"
                    "      remoteRuntimeEndpoint: unix:///run/containerd/containerd.sock\n")
        h = Host(self).write("/etc/kubeedge/config/edgecore.yaml", edgecore)
        h.write(CTD, ctd_config()).toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "pass", summary="kubeedge layout",
                    evidence=["remoteRuntimeEndpoint unix:///run/containerd/containerd.sock (line 8)",
                              f"containerd config: {CTD}"])
        self.assertNotIn("not used by", rep.evidence("runtime.layout"))
        self.expect(rep, "runtime.containerd-nvidia", "pass")
        bad = Host(self).write("/etc/kubeedge/config/edgecore.yaml",
                               "modules:\n  edged: [unclosed\n").toolkit()
        rep = self.doctor(bad)
        self.expect(rep, "runtime.layout", "fail", FIX_EDGECORE_YAML,
                    ["/etc/kubeedge/config/edgecore.yaml:"])

    # --- runtime.toolkit ---

    def test_toolkit_partial(self):
        h = Host(self).write(CTD, ctd_config()).toolkit(skip=("nvidia-ctk",))
        self.expect(self.doctor(h), "runtime.toolkit", "fail", FIX_TOOLKIT_MISSING,
                    ["nvidia-ctk: not found", "nvidia-container-runtime: /usr/bin/"])
        h = Host(self).write(CTD, ctd_config()).toolkit(skip=("nvidia-container-runtime-hook", "config"))
        self.expect(self.doctor(h), "runtime.toolkit", "warn", FIX_TOOLKIT_PARTIAL,
                    ["nvidia-container-runtime-hook: not found",
                     "/etc/nvidia-container-runtime/config.toml: absent"])

    def test_links_resolve_inside_the_root(self):
        # Absolute links as on a real host: /var/run -> /run, /usr/bin/x -> /opt/...; read
        # under the root, never on this machine.
        h = Host(self).write(CTD, ctd_config()).toolkit(skip=("nvidia-ctk",))
        h.exe("/opt/nvidia/bin/nvidia-ctk").symlink("/opt/nvidia/bin/nvidia-ctk", "/usr/bin/nvidia-ctk")
        h.symlink("/run", "/var/run").write("/run/cdi/a.yaml", self.spec_yaml())
        rep = self.doctor(h)
        self.expect(rep, "runtime.toolkit", "pass", evidence=["nvidia-ctk: /usr/bin/nvidia-ctk"])
        self.expect(rep, "runtime.cdi", "pass", evidence=["/var/run/cdi/a.yaml: cdiVersion 0.5.0"])

    # --- runtime.cdi ---

    @staticmethod
    def gpus():
        return [g["uuid"] for g in load_fixture(FIXTURE)["gpus"]]

    def spec_yaml(self, names=None):
        names = names if names is not None else ["0", "1", "all"]
        devs = "".join(f"- name: \"{n}\"\n  containerEdits:\n    deviceNodes:\n"
                       f"    - path: /dev/nvidia{i}\n" for i, n in enumerate(names))
        return ("---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n"
                "  deviceNodes:\n  - path: /dev/nvidiactl\ndevices:\n" + devs)

    def nvml_listed(self, rep):
        """Whether the driver layer gave this layer NVML's GPUs (it fills doctor_facts)."""
        return "NVML listed no GPUs" not in rep.evidence("runtime.cdi")

    def test_cdi_good(self):
        u = self.gpus()
        spec = json.dumps({"cdiVersion": "0.5.0", "kind": "k8s.device-plugin.nvidia.com/gpu",
                           "devices": [{"name": x, "containerEdits": {}} for x in u]}, indent="\t")
        h = Host(self).write(CTD, ctd_config()).toolkit()
        h.write("/etc/cdi/nvidia.yaml", self.spec_yaml())
        h.write("/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json", spec)
        h.write("/etc/cdi/README", "not a spec")
        rep = self.doctor(h)
        c = self.expect(rep, "runtime.cdi", "pass",
                        evidence=["/etc/cdi/nvidia.yaml: cdiVersion 0.5.0, kind nvidia.com/gpu, 3 device(s)",
                                  "/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json: cdiVersion 0.5.0, "
                                  "kind k8s.device-plugin.nvidia.com/gpu, 2 device(s)"])
        self.assertNotIn("README", rep.evidence("runtime.cdi"))
        if self.nvml_listed(rep):
            self.assertIn(f"all {len(u)} GPU(s) named", rep.evidence("runtime.cdi"))
        else:
            self.assertEqual(c["summary"], "the CDI specs parse")

    def test_cdi_unparsable(self):
        h = Host(self).write(CTD, ctd_config()).toolkit()
        h.write("/etc/cdi/nvidia.yaml", self.spec_yaml())
        h.write("/var/run/cdi/broken.json", '{\n  "cdiVersion": "0.5.0",\n  "kind": "x/y"\n  "devices": []\n}\n')
        rep = self.doctor(h)
        self.expect(rep, "runtime.cdi", "fail", FIX_CDI_PARSE,
                    ["/var/run/cdi/broken.json:4: does not parse"])
        h = Host(self).write(CTD, ctd_config()).toolkit()
        h.write("/etc/cdi/nodevs.yaml", "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices: []\n")
        self.expect(self.doctor(h), "runtime.cdi", "fail", FIX_CDI_PARSE,
                    ["/etc/cdi/nodevs.yaml:3: no devices"])
        h = Host(self).write(CTD, ctd_config()).toolkit()
        h.write("/etc/cdi/nokind.yaml", "cdiVersion: 0.6.0\ndevices:\n- name: a\n")
        self.expect(self.doctor(h), "runtime.cdi", "fail", FIX_CDI_PARSE,
                    ["/etc/cdi/nokind.yaml:1: no kind of the form vendor/class"])

    def test_cdi_not_naming_the_gpus(self):
        u = self.gpus()
        h = Host(self).write(CTD, ctd_config()).toolkit()
        h.write("/etc/cdi/nvidia.yaml", self.spec_yaml(["all", "GPU-00000000-dead-beef-0000-000000000000"]))
        rep = self.doctor(h)
        if self.nvml_listed(rep):
            self.expect(rep, "runtime.cdi", "fail", FIX_CDI_STALE,
                        [f"not named: 0 ({u[0]}), 1 ({u[1]})"])
        else:
            self.expect(rep, "runtime.cdi", "pass",
                        evidence=["NVML listed no GPUs (see the driver checks)"])

    def test_cdi_none(self):
        h = Host(self).write(CTD, ctd_config()).toolkit()
        self.expect(self.doctor(h), "runtime.cdi", "warn", FIX_CDI_NONE,
                    ["/etc/cdi: absent", "device list strategy: does not use CDI"])
        self.expect(self.doctor(h, "--device-list-strategy", "cdi-cri"), "runtime.cdi", "warn",
                    FIX_CDI_NONE, ["device list strategy: uses CDI"])
        h.write("/etc/cdi/vendor.yaml", "cdiVersion: 0.5.0\nkind: vendor.com/fpga\ndevices:\n- name: a\n")
        self.expect(self.doctor(h), "runtime.cdi", "warn", FIX_CDI_NONE,
                    summary="no CDI spec of kind nvidia.com/gpu")

    # --- runtime.docker ---

    def daemon_json(self, runtime=True, default=True, path="/usr/bin/nvidia-container-runtime"):
        d = {"log-driver": "json-file"}
        if runtime:
            d["runtimes"] = {"nvidia": {"args": [], "path": path}}
        if default:
            d["default-runtime"] = "nvidia"
        return json.dumps(d, indent="\t") + "\n"  # tabs, as many hand-written files have

    def test_docker_good(self):
        h = Host(self).write("/etc/docker/daemon.json", self.daemon_json()).toolkit()
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "pass", summary="Docker is the container runtime",
                    evidence=["Docker: /etc/docker/daemon.json present"])
        self.expect(rep, "runtime.containerd-nvidia", "skip", evidence=["runtime: docker"])
        self.expect(rep, "runtime.docker", "pass",
                    evidence=["runtimes.nvidia.path /usr/bin/nvidia-container-runtime", "default-runtime nvidia"])

    def test_docker_not_default_or_missing(self):
        h = Host(self).write("/etc/docker/daemon.json", self.daemon_json(default=False)).toolkit()
        self.expect(self.doctor(h), "runtime.docker", "warn", FIX_DOCKER_NOT_DEFAULT,
                    ["default-runtime not set (runc)"])
        h = Host(self).write("/etc/docker/daemon.json", self.daemon_json(runtime=False)).toolkit()
        self.expect(self.doctor(h), "runtime.docker", "fail", FIX_DOCKER_MISSING,
                    ["/etc/docker/daemon.json: no runtimes.nvidia"])
        h = Host(self).write("/etc/docker/daemon.json", self.daemon_json(path="/opt/none/ncr")).toolkit()
        self.expect(self.doctor(h), "runtime.docker", "fail", FIX_RUNTIME_BINARY,
                    ["runtimes.nvidia.path /opt/none/ncr (line 4): not found"])
        # docker.service enabled, no daemon.json at all.
        h = Host(self).symlink("/lib/systemd/system/docker.service",
                               "/etc/systemd/system/multi-user.target.wants/docker.service").toolkit()
        self.expect(self.doctor(h), "runtime.docker", "fail", FIX_DOCKER_MISSING,
                    ["/etc/docker/daemon.json: absent"])

    def test_docker_beside_containerd(self):
        # Kubernetes runs on containerd; Docker without the runtime only matters for docker run.
        h = Host(self).write(CTD, ctd_config()).toolkit()
        h.write("/etc/docker/daemon.json", self.daemon_json(runtime=False))
        rep = self.doctor(h)
        self.expect(rep, "runtime.layout", "pass", summary="kubeadm layout")
        self.expect(rep, "runtime.docker", "warn", FIX_DOCKER_MISSING,
                    ["Kubernetes uses containerd here"])

    def test_docker_malformed(self):
        h = Host(self).write("/etc/docker/daemon.json", '{\n\t"default-runtime": "nvidia",\n\t"runtimes": {\n}\n').toolkit()
        self.expect(self.doctor(h), "runtime.docker", "fail", FIX_DOCKER_JSON,
                    ["/etc/docker/daemon.json:5:"])
        h = Host(self).write("/etc/docker/daemon.json", '["nvidia"]\n').toolkit()
        self.expect(self.doctor(h), "runtime.docker", "fail", FIX_DOCKER_JSON,
                    ["/etc/docker/daemon.json:1: not a JSON object"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
