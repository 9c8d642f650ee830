"""The Kubernetes manifests of deployments/, rendered, validated offline and linted.

1. `kubectl kustomize` renders the base and every overlay; each render holds the objects it
   should, and the DaemonSet keeps every requirement of issue 10 (one named check each, so
   dropping one fails here);
2. every rendered object and every example is validated against the Kubernetes OpenAPI v3
   schemas from Debian's kubernetes source package (build-deps/k8s-openapi), made strict:
   an unknown field is an error, as with kubeconform -strict. The Prometheus Operator's kinds
   (ServiceMonitor, PrometheusRule) are checked by the validators compiled from its CRD
   schemas (npm @kubernetes-models/prometheus-operator, build-deps/k8s-crd, run with node),
   plus an unknown-field check from the field lists of the same package;
3. the config.yaml of each render's ConfigMap goes through the real `edgegpu check-config`,
   with the DaemonSet's own flags and environment, so a flag the binary does not know fails;
   each keeps failOnInitError false (a driver-less node must not crash-loop a rollout);
   the jetson overlay mounts read-only what the Tegra backend reads below its host root
   (edgegpu.hostRoot /host) and what the CDI spec and Allocate look at under /driver-root,
   never a host tree whose submounts would come in writable, and runs the base's amd64 +
   arm64 image;
4. `yamllint --strict` with the repository's .yamllint passes over deployments/;
5. each check is shown to fail: broken copies (an unknown field, a wrong type, a dropped
   requirement, a bad config, bad YAML) must be reported.

The tools come from scripts/k8s-tools (scripts/deps runs it): build-deps/kubectl/kubectl when
present, else PATH's kubectl. Fails when one is missing (scripts/deps fetches them).
"""

import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(SRC, "deployments")
DEPS = os.path.join(SRC, "build-deps")
OPENAPI = os.path.join(DEPS, "k8s-openapi")
CRD = os.path.join(DEPS, "k8s-crd")
CRD_MODELS = os.path.join(CRD, "node_modules", "@kubernetes-models", "prometheus-operator")
# The same npm lock's kubernetes-models (a dependency of the above): the validators of the
# kinds Debian's OpenAPI copy lacks (networking.k8s.io/v1 NetworkPolicy).
K8S_MODELS = os.path.join(CRD, "node_modules", "kubernetes-models")
NODE_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (
        CRD_MODELS, "ComGithubPrometheusOperatorPrometheusOperatorPkgApisMonitoringV1ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"): (
        CRD_MODELS, "ComGithubPrometheusOperatorPrometheusOperatorPkgApisMonitoringV1PrometheusRule"),
    ("networking.k8s.io/v1", "NetworkPolicy"): (K8S_MODELS, "IoK8sApiNetworkingV1NetworkPolicy"),
}
OVERLAYS = ["time-slicing", "gpumem", "jetson", "metrics", "k3s", "no-nvidia-runtime",
            "backstop", "kubeedge", "microk8s"]
# The components, each rendered on top of the base in a kustomization of the test's own
# ("components"), and the one overlay that uses one.
COMPONENTS = ["tolerations", "networkpolicy", "pod-log-dirs"]
MICROK8S_KUBELET = "/var/snap/microk8s/common/var/lib/kubelet"
# components/tolerations: what it adds to the base's nvidia.com/gpu toleration.
EDGE_TOLERATIONS = [
    {"key": "node-role.kubernetes.io/edge", "operator": "Exists"},
    {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
]
NAMESPACE = "kube-system"
IMAGE = "ghcr.io/edgegpu/edgegpu"
FLAGS = [
    "--config-file=/etc/edgegpu/config.yaml",
    "--driver-root=/",
    "--container-driver-root=/driver-root",
    "--host-proc=/host/proc",
    "--metrics-address=:9400",
]
# mountPath -> (volume source kind, its path or name, read-only)
MOUNTS = {
    "/var/lib/kubelet/device-plugins": ("hostPath", "/var/lib/kubelet/device-plugins", False),
    "/var/lib/kubelet/pod-resources": ("hostPath", "/var/lib/kubelet/pod-resources", True),
    "/var/run/cdi": ("hostPath", "/var/run/cdi", False),
    "/etc/kubernetes/node-feature-discovery/features.d": (
        "hostPath", "/etc/kubernetes/node-feature-discovery/features.d", False),
    "/var/log/containers": ("hostPath", "/var/log/containers", True),
    "/host/proc": ("hostPath", "/proc", True),
    "/driver-root/usr": ("hostPath", "/usr", True),
    "/etc/edgegpu": ("configMap", "edgegpu-config", True),
    # gpumem enforcement's stateDir, at the host's path (issue 19)
    "/var/lib/edgegpu": ("hostPath", "/var/lib/edgegpu", False),
}
# The jetson overlay's own mounts: mountPath -> (hostPath, type), all read-only. Those under
# /host are the host's files below edgegpu.hostRoot; those under /driver-root are where the
# CDI spec and Allocate look for the toolkit's CSV files and the device nodes.
JETSON_MOUNTS = {
    "/host/sys/devices": ("/sys/devices", "Directory"),
    "/host/sys/class": ("/sys/class", "Directory"),
    "/host/sys/bus": ("/sys/bus", "Directory"),
    "/host/sys/module": ("/sys/module", "Directory"),
    "/host/sys/firmware/devicetree": ("/sys/firmware/devicetree", "Directory"),
    "/host/dev": ("/dev", "Directory"),
    "/driver-root/dev": ("/dev", "Directory"),
    # absent on some boards: never File (the pod would not start), never "" (containerd would
    # create a directory in the file's place)
    "/host/etc/nv_tegra_release": ("/etc/nv_tegra_release", "FileOrCreate"),
    "/host/etc/nvpmodel.conf": ("/etc/nvpmodel.conf", "FileOrCreate"),
    "/host/var/lib/nvpmodel": ("/var/lib/nvpmodel", "DirectoryOrCreate"),
    "/driver-root/etc/nvidia-container-runtime": ("/etc/nvidia-container-runtime",
                                                  "DirectoryOrCreate"),
}
# Host trees whose submounts would come in writable through a read-only bind mount (a
# read-only mount is not recursive): the cgroup tree, debugfs, bpf, efivarfs, and all of /.
UNSAFE_HOST_PATHS = {"/", "/sys", "/sys/fs", "/sys/kernel", "/sys/firmware", "/etc"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def skip(why):
    # Not a skip: `make check` runs scripts/deps (and so scripts/k8s-tools) first, so a missing
    # tool is a broken setup, and a skipped manifest check would hide it.
    print("FAIL:", why, "(run scripts/deps)", flush=True)
    sys.exit(1)


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)
    return r.returncode, r.stdout, r.stderr


# --- tools ---

def find_kubectl():
    own = os.path.join(DEPS, "kubectl", "kubectl")
    k = own if os.access(own, os.X_OK) else shutil.which("kubectl")
    if not k:
        skip("no kubectl: run scripts/k8s-tools")
    rc, out, err = run([k, "version", "--client"])
    m = re.search(r"Kustomize Version: v(\d+)", out)
    if rc != 0 or not m or int(m.group(1)) < 5:
        skip(f"{k} has no kustomize v5 or later: run scripts/k8s-tools")
    print(f"kubectl: {k}\n{out.strip()}", flush=True)
    return k


def need_tools():
    for p in ("api/v1.json", "apis/apps/v1.json", "SOURCE"):
        if not os.path.isfile(os.path.join(OPENAPI, p)):
            skip(f"{OPENAPI}/{p} is missing: run scripts/k8s-tools")
    for d in (CRD_MODELS, K8S_MODELS):
        if not os.path.isdir(d):
            skip(f"{d} is missing: run scripts/k8s-tools")
    for t in ("node", "yamllint"):
        if not shutil.which(t):
            skip(f"{t} is not installed (scripts/deps)")
    edgegpu = os.environ.get("EDGEGPU") or os.path.join(SRC, "build", "edgegpu")
    if not os.access(edgegpu, os.X_OK):
        skip(f"no edgegpu binary at {edgegpu}")
    with open(os.path.join(OPENAPI, "SOURCE")) as f:
        print("OpenAPI schemas:", f.read().strip(), flush=True)
    return find_kubectl(), edgegpu


def render(kubectl, path):
    rc, out, err = run([kubectl, "kustomize", path])
    if rc != 0:
        fail(f"kubectl kustomize {os.path.relpath(path, SRC)}: {err.strip()}")
        return []
    return [d for d in yaml.safe_load_all(out) if d]


# --- Kubernetes' OpenAPI v3 schemas, strict ---

def strictify(node):
    """The OpenAPI schema as JSON Schema: local $refs, unknown fields refused, nullable."""
    if isinstance(node, list):
        return [strictify(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "$ref":
            out[k] = v.replace("#/components/schemas/", "#/definitions/")
        elif k in ("properties", "definitions"):
            out[k] = {name: strictify(s) for name, s in v.items()}
        else:
            out[k] = strictify(v)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in out and "additionalProperties" not in out and \
            not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


class K8sSchemas:
    def __init__(self):
        self.defs = {}
        for p in ("api/v1.json", "apis/apps/v1.json"):
            with open(os.path.join(OPENAPI, p)) as f:
                self.defs.update(json.load(f)["components"]["schemas"])
        self.gvk = {}
        for name, s in self.defs.items():
            for g in s.get("x-kubernetes-group-version-kind", []):
                api = f"{g['group']}/{g['version']}" if g["group"] else g["version"]
                self.gvk[(api, g["kind"])] = name
        self.strict = {n: strictify(s) for n, s in self.defs.items()}

    def knows(self, obj):
        return (obj.get("apiVersion"), obj.get("kind")) in self.gvk

    def validate(self, obj, name=None):
        name = name or self.gvk[(obj.get("apiVersion"), obj.get("kind"))]
        schema = {"$ref": f"#/definitions/{name}", "definitions": self.strict}
        v = jsonschema.Draft7Validator(schema)
        return [f"{'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
                for e in sorted(v.iter_errors(obj), key=lambda e: list(map(str, e.path)))]


# --- the Prometheus Operator's kinds ---

NODE_VALIDATE = r"""
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
const items = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const [f, o] of items) {
  const { validate } = await import(pathToFileURL(f).href);
  out.push(validate(o) ? [] :
    validate.errors.map((e) => `${e.instancePath.slice(1).replaceAll("/", ".") || "(top)"}: ` +
      (e.message || `${e.keyword} ${JSON.stringify(e.params)}`)));
}
process.stdout.write(JSON.stringify(out));
"""

MEMBER = re.compile(r'\s*"([^"]+)"\??:\s*')


def parse_members(body):
    """'"a"?: T; "b": { ... };' -> {a: T, b: {...}} (types as text, braces matched)."""
    out, i = {}, 0
    while True:
        m = MEMBER.match(body, i)
        if not m:
            return out
        j, depth = m.end(), 0
        while j < len(body):
            c = body[j]
            if c in "{<(":
                depth += 1
            elif c in "}>)":
                depth -= 1
            elif c == ";" and depth == 0:
                break
            j += 1
        out[m.group(1)] = body[m.end():j].strip()
        i = j + 1


class CrdSchemas:
    """ajv validators of the CRD schemas, and the field lists of the package's classes."""

    def __init__(self):
        self.classes = {}
        nm = os.path.dirname(os.path.dirname(CRD_MODELS))
        files = glob.glob(os.path.join(CRD_MODELS, "monitoring.coreos.com", "v1", "*.d.ts")) + \
            glob.glob(os.path.join(nm, "@kubernetes-models", "apimachinery", "**", "*.d.ts"),
                      recursive=True) + \
            glob.glob(os.path.join(nm, "kubernetes-models", "v1", "*.d.ts")) + \
            glob.glob(os.path.join(K8S_MODELS, "networking.k8s.io", "v1", "*.d.ts"))
        for p in files:
            with open(p) as f:
                text = f.read()
            cm = re.search(r"export declare class (\w+) [^{]*\{(.*?)\n\}", text, re.S)
            am = re.search(r"export type \{ I\w+ as (I\w+), (\w+) as \w+ \}", text)
            if not cm or not am or am.group(2) != cm.group(1):
                continue
            members = parse_members(cm.group(2))
            members.pop("constructor", None)
            self.classes[am.group(1)] = members
            if os.path.dirname(p).endswith(os.path.join("monitoring.coreos.com", "v1")) or \
                    os.path.dirname(p).endswith(os.path.join("networking.k8s.io", "v1")):
                self.classes["kind:" + cm.group(1)] = members

    def unknown_fields(self, value, typ, path, out):
        typ = typ.strip()
        if typ.startswith("Array<") and typ.endswith(">"):
            for i, v in enumerate(value if isinstance(value, list) else []):
                self.unknown_fields(v, typ[6:-1], f"{path}.{i}", out)
            return
        if typ.startswith("{"):
            if "[key: string]" in typ or not isinstance(value, dict):
                return
            members = parse_members(typ[1:-1])
        elif typ in self.classes:
            members = self.classes[typ]
        else:
            return  # a scalar, a union of literals or a type the package does not describe
        if not isinstance(value, dict):
            return
        for k, v in value.items():
            p = f"{path}.{k}" if path else k
            if k not in members:
                out.append(f"{p}: unknown field")
            else:
                self.unknown_fields(v, members[k], p, out)

    def validate_many(self, objs):
        items = [[os.path.join(NODE_KINDS[(o["apiVersion"], o["kind"])][0], "_schemas",
                               NODE_KINDS[(o["apiVersion"], o["kind"])][1] + ".js"), o]
                 for o in objs]
        rc, out, err = run(["node", "--input-type=module", "-e", NODE_VALIDATE],
                           input=json.dumps(items))
        if rc != 0:
            fail(f"node validator: {err.strip()}")
            return [["the validator did not run"] for _ in objs]
        res = json.loads(out)
        for o, errs in zip(objs, res):
            self.unknown_fields(o, "kind:" + o["kind"], "", errs)
        return res


def validate_all(k8s, crd, docs, where):
    """Every object against its schema; returns {index: [errors]} for those with errors."""
    bad, custom = {}, []
    for i, d in enumerate(docs):
        if k8s.knows(d):
            errs = k8s.validate(d)
            if errs:
                bad[i] = errs
        elif (d.get("apiVersion"), d.get("kind")) in NODE_KINDS:
            custom.append(i)
        else:
            bad[i] = [f"no schema for {d.get('apiVersion')} {d.get('kind')}"]
    if custom:
        for i, errs in zip(custom, crd.validate_many([docs[i] for i in custom])):
            meta = k8s.validate(docs[i].get("metadata", {}),
                                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
            errs = errs + ["metadata." + e for e in meta]
            if errs:
                bad[i] = errs
    for i, d in enumerate(docs):
        n = f"{where}: {d.get('kind')} {d.get('metadata', {}).get('name')}"
        if i in bad:
            fail(f"{n}: schema: " + "; ".join(bad[i][:8]))
        else:
            print(f"ok   {n}: schema-valid", flush=True)
    return bad


# --- what the objects must hold ---

def mib(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", str(q))
    return int(m.group(1)) * {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, None: 1 / 2**20}[m.group(2)]


def millicores(q):
    s = str(q)
    return int(s[:-1]) if s.endswith("m") else int(float(s) * 1000)


def one(docs, kind, name=None):
    found = [d for d in docs if d.get("kind") == kind and
             (name is None or d.get("metadata", {}).get("name") == name)]
    return found[0] if len(found) == 1 else None


def daemonset_checks(docs, overlay):
    """(requirement, holds) for the DaemonSet of one render."""
    ds = one(docs, "DaemonSet", "edgegpu") or {}
    sa = one(docs, "ServiceAccount", "edgegpu") or {}
    cm = one(docs, "ConfigMap", "edgegpu-config") or {}
    spec = ds.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    ctrs = pod.get("containers") or [{}]
    c = ctrs[0]
    sc = c.get("securityContext", {})
    vols = {v.get("name"): v for v in pod.get("volumes", [])}
    mounts = {m.get("mountPath"): m for m in c.get("volumeMounts", [])}
    env = {e.get("name"): e for e in c.get("env", [])}
    ports = {p.get("name"): p for p in c.get("ports", [])}
    res = c.get("resources", {})
    ru = spec.get("updateStrategy", {})
    privileged = overlay == "no-nvidia-runtime"

    def probe(kind, path):
        g = c.get(kind, {}).get("httpGet", {})
        return g.get("path") == path and g.get("port") in ("metrics", 9400)

    def mount_ok(path):
        kind, src, ro = mounts_of(overlay)[path]
        m = mounts.get(path)
        if not m or bool(m.get("readOnly")) != ro or m.get("subPath") or m.get("subPathExpr"):
            return False
        v = vols.get(m.get("name"), {})
        return (v.get("hostPath", {}).get("path") if kind == "hostPath"
                else v.get("configMap", {}).get("name")) == src

    checks = [
        ("one DaemonSet, one container", bool(ds) and len(ctrs) == 1),
        ("selector matches the pod labels",
         all(spec.get("template", {}).get("metadata", {}).get("labels", {}).get(k) == v
             for k, v in spec.get("selector", {}).get("matchLabels", {"": None}).items())),
        ("nodeSelector accelerator: nvidia-gpu (jetson: nvidia-jetson on arm64)",
         pod.get("nodeSelector") == ({"accelerator": "nvidia-jetson", "kubernetes.io/arch": "arm64"}
                                     if overlay == "jetson" else {"accelerator": "nvidia-gpu"})),
        ("toleration nvidia.com/gpu Exists NoSchedule",
         {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
         in pod.get("tolerations", [])),
        ("priorityClassName system-node-critical",
         pod.get("priorityClassName") == "system-node-critical"),
        ("no hostPID (but in the backstop overlay), no hostNetwork",
         bool(pod.get("hostPID")) == (overlay == "backstop") and not pod.get("hostNetwork")),
        ("ServiceAccount edgegpu without a token",
         pod.get("serviceAccountName") == "edgegpu" and
         pod.get("automountServiceAccountToken") is False and
         sa.get("automountServiceAccountToken") is False),
        ("RollingUpdate maxUnavailable a percentage of at most 25%, maxSurge 0",
         ru.get("type") == "RollingUpdate" and
         bool(re.fullmatch(r"([1-9]|1[0-9]|2[0-5])%",
                           str(ru.get("rollingUpdate", {}).get("maxUnavailable")))) and
         ru.get("rollingUpdate", {}).get("maxSurge") == 0),
        ("terminationGracePeriodSeconds set, at most 30",
         isinstance(pod.get("terminationGracePeriodSeconds"), int) and
         0 < pod["terminationGracePeriodSeconds"] <= 30),
        ("runtimeClassName nvidia only in the k3s overlay",
         pod.get("runtimeClassName") == ("nvidia" if overlay == "k3s" else None)),
        ("image ghcr.io/edgegpu/edgegpu:<tag>, IfNotPresent",
         str(c.get("image", "")).startswith(IMAGE + ":") and
         c.get("imagePullPolicy") == "IfNotPresent"),
        ("args: serve and the mount-bound flags",
         (c.get("args") or [None])[0] == "serve" and all(f in c.get("args", []) for f in FLAGS)
         and not c.get("command")),
        ("env NODE_NAME from spec.nodeName",
         env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
         == "spec.nodeName"),
        ("env NVIDIA_VISIBLE_DEVICES=all, NVIDIA_DRIVER_CAPABILITIES=utility",
         env.get("NVIDIA_VISIBLE_DEVICES", {}).get("value") == "all" and
         env.get("NVIDIA_DRIVER_CAPABILITIES", {}).get("value") == "utility"),
        ("port metrics 9400/TCP",
         ports.get("metrics", {}).get("containerPort") == 9400 and
         ports.get("metrics", {}).get("protocol", "TCP") == "TCP"),
        ("livenessProbe /healthz on metrics", probe("livenessProbe", "/healthz")),
        # /healthz, never /readyz (a slow kubelet registration must not restart the pod), and
        # long enough for the metrics port's retries (1 s doubling to 30 s: 121 s to the 8th)
        ("startupProbe /healthz on metrics, allowing at least 120 s",
         probe("startupProbe", "/healthz") and
         c["startupProbe"].get("periodSeconds", 10) *
         c["startupProbe"].get("failureThreshold", 3) >= 120),
        ("readinessProbe /readyz on metrics", probe("readinessProbe", "/readyz")),
        ("small requests and a memory limit",
         "cpu" in res.get("requests", {}) and "memory" in res.get("requests", {}) and
         "memory" in res.get("limits", {}) and
         millicores(res["requests"]["cpu"]) <= 50 and
         mib(res["requests"]["memory"]) <= mib(res["limits"]["memory"]) <= 128),
        ("runs as root (the kubelet's directory and socket are root's)",
         sc.get("runAsUser") == 0 and sc.get("runAsNonRoot") is False),
        ("readOnlyRootFilesystem", sc.get("readOnlyRootFilesystem") is True),
        ("seccompProfile RuntimeDefault",
         sc.get("seccompProfile", {}).get("type") == "RuntimeDefault"),
        # The backstop signals GPU processes of any user: KILL, and nothing else, back.
        ("every capability dropped, none added (but KILL in the backstop overlay)",
         sc.get("capabilities", {}).get("drop") == ["ALL"] and
         (sc.get("capabilities", {}).get("add") or []) == (["KILL"] if overlay == "backstop" else [])),
    ]
    if privileged:
        checks.append(("privileged, no allowPrivilegeEscalation (no-nvidia-runtime)",
                       sc.get("privileged") is True and "allowPrivilegeEscalation" not in sc))
    else:
        checks.append(("allowPrivilegeEscalation false, not privileged",
                       sc.get("allowPrivilegeEscalation") is False and
                       sc.get("privileged") is False))
    for path, (kind, src, ro) in mounts_of(overlay).items():
        checks.append((f"mount {path} <- {kind} {src} {'ro' if ro else 'rw'}", mount_ok(path)))
    if overlay == "jetson":
        checks += jetson_mount_checks(mounts, vols)
    checks += [
        ("/var/run/cdi mountPropagation HostToContainer (a tmpfs mounted over it later is seen)",
         mounts.get("/var/run/cdi", {}).get("mountPropagation") == "HostToContainer"),
        ("no subPath mounts (a subPath never sees a ConfigMap update)",
         not any(m.get("subPath") or m.get("subPathExpr") for m in mounts.values())),
        ("/var/log/pods (every pod's logs) mounted only with components/pod-log-dirs",
         ("/var/log/pods" in mounts) == (overlay == "components") and
         not any(v.get("hostPath", {}).get("path", "").rstrip("/") in ("/var/log", "/var")
                 for v in vols.values())),
        ("tolerations: the edge taints only with components/tolerations",
         all((t in pod.get("tolerations", [])) == (overlay in ("kubeedge", "components"))
             for t in EDGE_TOLERATIONS)),
        ("every mount has a volume, every volume a mount",
         {m.get("name") for m in mounts.values()} == set(vols)),
        ("--config-file is config.yaml in the ConfigMap's mount",
         "config.yaml" in cm.get("data", {}) and
         "--config-file=" + os.path.join(
             next((p for p, m in mounts.items() if "configMap" in vols.get(m.get("name"), {})),
                  "?"), "config.yaml") in c.get("args", [])),
        ("ConfigMap named edgegpu-config, no hash suffix",
         cm.get("metadata", {}).get("name") == "edgegpu-config"),
        ("every object in kube-system",
         all(d.get("metadata", {}).get("namespace") == NAMESPACE for d in docs)),
    ]
    return checks


def mounts_of(overlay):
    """The mounts every render must have: the base's, with microk8s's kubelet directory and
    the pod-log-dirs component's /var/log/pods."""
    m = dict(MOUNTS)
    if overlay == "microk8s":
        for p in ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources"):
            kind, src, ro = m[p]
            m[p] = (kind, MICROK8S_KUBELET + src[len("/var/lib/kubelet"):], ro)
    if overlay == "components":
        m["/var/log/pods"] = ("hostPath", "/var/log/pods", True)
    return m


def jetson_mount_checks(mounts, vols):
    """(requirement, holds) for what the jetson overlay mounts for the Tegra backend."""
    checks = []
    for path, (src, typ) in JETSON_MOUNTS.items():
        m = mounts.get(path, {})
        hp = vols.get(m.get("name"), {}).get("hostPath", {})
        checks.append((f"jetson: mount {path} <- hostPath {src} ({typ}) ro",
                       m.get("readOnly") is True and hp.get("path") == src and
                       hp.get("type") == typ))
    host = {p: vols.get(m.get("name"), {}).get("hostPath", {}).get("path")
            for p, m in mounts.items() if p.startswith("/host/")}
    checks += [
        # edgegpu.hostRoot /host reads <host root>/X: each /host/X must be the host's X.
        ("jetson: every /host/X mount is the host's X",
         all(src == p[len("/host"):] for p, src in host.items())),
        ("jetson: every mount of a host path is read-only, but the base's own rw ones",
         all(m.get("readOnly") is True for p, m in mounts.items()
             if "hostPath" in vols.get(m.get("name"), {}) and
             not (p in MOUNTS and not MOUNTS[p][2]))),
        ("jetson: no host tree with writable submounts (/, /sys, /etc whole)",
         not any((v["hostPath"].get("path", "").rstrip("/") or "/") in UNSAFE_HOST_PATHS
                 for v in vols.values() if "hostPath" in v)),
        # the L4T libraries the CSV files name (/usr/lib/aarch64-linux-gnu/nvidia, .../tegra)
        # are under the base's /driver-root/usr, where the CDI spec looks for them
        ("jetson: the host's /usr (L4T libraries) at /driver-root/usr",
         vols.get(mounts.get("/driver-root/usr", {}).get("name"), {}).get("hostPath", {})
         .get("path") == "/usr"),
    ]
    return checks


def check_daemonset(docs, overlay, report=True):
    bad = [name for name, ok in daemonset_checks(docs, overlay) if not ok]
    if report:
        for name in bad:
            fail(f"{overlay}: DaemonSet: {name}")
        if not bad:
            print(f"ok   {overlay}: DaemonSet: all {len(daemonset_checks(docs, overlay))} "
                  "requirements", flush=True)
    return bad


def config_of(docs):
    cm = one(docs, "ConfigMap", "edgegpu-config") or {}
    return cm.get("data", {}).get("config.yaml", "")


def check_config(edgegpu, docs, overlay, tmp):
    """The ConfigMap's config through `edgegpu check-config` with the DaemonSet's flags."""
    text = config_of(docs)
    src = os.path.join(DEPLOY, "base" if overlay == "base" else f"overlays/{overlay}",
                       "config.yaml")
    if not os.path.exists(src):
        src = os.path.join(DEPLOY, "base", "config.yaml")
    with open(src) as f:
        if f.read() != text:
            fail(f"{overlay}: the ConfigMap's config.yaml is not {os.path.relpath(src, SRC)}")
    path = os.path.join(tmp, f"{overlay}.yaml")
    with open(path, "w") as f:
        f.write(text)
    c = (one(docs, "DaemonSet", "edgegpu") or {}).get("spec", {}).get("template", {}) \
        .get("spec", {}).get("containers", [{}])[0]
    flags = [a for a in c.get("args", [])[1:] if not a.startswith("--config-file=")]
    env = {"PATH": os.environ.get("PATH", "")}
    for e in c.get("env", []):
        env[e["name"]] = e.get("value", "node-a")
    rc, out, err = run([edgegpu, "check-config", path] + flags, env=env)
    if rc != 0:
        fail(f"{overlay}: edgegpu check-config {' '.join(flags)}: rc {rc}: {err.strip()}")
        return None
    if "warning" in err:
        fail(f"{overlay}: edgegpu check-config warns: {err.strip()}")
    eff = yaml.safe_load(out)
    got = (eff["flags"]["nvidiaDriverRoot"], eff["flags"]["plugin"]["containerDriverRoot"],
           eff["edgegpu"]["metrics"]["hostProc"], eff["edgegpu"]["metrics"]["address"],
           eff["edgegpu"]["metrics"]["nodeName"])
    if got != ("/", "/driver-root", "/host/proc", ":9400", "node-a"):
        fail(f"{overlay}: the flags did not reach the effective config: {got}")
    print(f"ok   {overlay}: edgegpu check-config with the DaemonSet's flags", flush=True)
    return eff


def check_overlay_specifics(overlay, docs, eff):
    kinds = sorted(d["kind"] for d in docs)
    want = ["ConfigMap", "DaemonSet", "ServiceAccount"]
    if overlay == "metrics":
        want += ["PrometheusRule", "Service", "ServiceMonitor"]
    if overlay == "components":
        want += ["NetworkPolicy"]
    if kinds != sorted(want):
        fail(f"{overlay}: objects {kinds}, expected {sorted(want)}")
    if eff is None:
        return
    ts = (eff.get("sharing") or {}).get("timeSlicing")
    mem = ((eff.get("edgegpu") or {}).get("sharing") or {}).get("memory") or {}
    mem = mem if mem.get("devices") else None  # gpumem is off without devices
    exp = {
        "time-slicing": ts and ts["resources"][0]["name"] == "nvidia.com/gpu" and
        ts["resources"][0]["replicas"] >= 2 and not mem,
        "gpumem": mem and mem["resourceName"] == "nvidia.com/gpumem" and not ts and
        not mem["enforcement"]["backstop"]["enabled"],
        "backstop": mem and mem["resourceName"] == "nvidia.com/gpumem" and not ts and
        mem["enforcement"]["backstop"]["enabled"] is True,
        "jetson": eff["flags"]["failOnInitError"] is False and
        (eff.get("edgegpu") or {}).get("hostRoot") == "/host" and
        eff["flags"].get("deviceDiscoveryStrategy") == "auto" and
        eff["flags"]["plugin"]["deviceIDStrategy"] == "uuid" and not ts and not mem,
        "no-nvidia-runtime": eff["flags"]["plugin"]["deviceListStrategy"] == ["cdi-cri"] and
        eff["flags"]["plugin"]["passDeviceSpecs"] is True,
    }.get(overlay, not ts and not mem)
    if not exp:
        fail(f"{overlay}: the effective config is not what the overlay is for")
    # A node without a working driver or GPU must not crash-loop: that would stall every
    # rollout of the DaemonSet there (docs/failures.md, "Readiness").
    if eff["flags"]["failOnInitError"] is not False:
        fail(f"{overlay}: failOnInitError is not false: a driver-less node would crash-loop "
             "and stall the rollout")
    if overlay == "jetson":
        got = ((eff.get("edgegpu") or {}).get("hostRoot"),
               eff["flags"].get("deviceDiscoveryStrategy"))
        if got != ("/host", "auto"):
            fail(f"jetson: edgegpu.hostRoot, flags.deviceDiscoveryStrategy are {got}, "
                 "expected ('/host', 'auto') (the mounts are under /host)")
    if overlay == "components":
        bad = networkpolicy_checks(docs)
        for b in bad:
            fail(f"components: NetworkPolicy: {b}")
        if not bad:
            print("ok   components: the NetworkPolicy admits only the monitoring namespace, "
                  "on the metrics port", flush=True)
    if overlay == "metrics":
        svc = one(docs, "Service", "edgegpu-metrics") or {}
        sm = one(docs, "ServiceMonitor", "edgegpu") or {}
        pr = one(docs, "PrometheusRule", "edgegpu") or {}
        ds = one(docs, "DaemonSet", "edgegpu")
        labels = ds["spec"]["template"]["metadata"]["labels"]
        sspec = svc.get("spec", {})
        if sspec.get("clusterIP") != "None" or \
                any(labels.get(k) != v for k, v in sspec.get("selector", {"": 1}).items()) or \
                [(p.get("name"), p.get("targetPort")) for p in sspec.get("ports", [])] != \
                [("metrics", "metrics")]:
            fail("metrics: the Service is not headless on the pods' metrics port")
        sel = sm.get("spec", {}).get("selector", {}).get("matchLabels", {"": 1})
        eps = sm.get("spec", {}).get("endpoints", [])
        if any(svc.get("metadata", {}).get("labels", {}).get(k) != v for k, v in sel.items()) \
                or [e.get("port") for e in eps] != ["metrics"] or \
                not all(e.get("honorLabels") for e in eps):
            fail("metrics: the ServiceMonitor does not select the Service's metrics port "
                 "with honorLabels")
        with open(os.path.join(DEPLOY, "prometheus", "prometheusrule.yaml")) as f:
            if yaml.safe_load(f)["spec"] != pr.get("spec"):
                fail("metrics: the PrometheusRule is not deployments/prometheus's")


def networkpolicy_checks(docs):
    """What components/networkpolicy must hold; the names of those that do not."""
    np = one(docs, "NetworkPolicy", "edgegpu-metrics") or {}
    ds = one(docs, "DaemonSet", "edgegpu") or {}
    tpl = ds.get("spec", {}).get("template", {})
    labels = tpl.get("metadata", {}).get("labels", {})
    ports = {p.get("name"): p for c in tpl.get("spec", {}).get("containers", [])
             for p in c.get("ports", [])}
    spec = np.get("spec", {})
    sel = spec.get("podSelector", {})
    rules = spec.get("ingress", [])
    rule = rules[0] if len(rules) == 1 else {}
    peers = rule.get("from", [])
    nports = rule.get("ports", [])
    checks = [
        ("selects the edgegpu pods (matchLabels only, each a pod label)",
         bool(sel.get("matchLabels")) and not sel.get("matchExpressions") and
         all(labels.get(k) == v for k, v in sel["matchLabels"].items())),
        ("policyTypes [Ingress] (egress untouched)", spec.get("policyTypes") == ["Ingress"]),
        ("one ingress rule, one peer: the namespace named monitoring, by its name label",
         len(rules) == 1 and len(peers) == 1 and set(peers[0]) == {"namespaceSelector"} and
         peers[0]["namespaceSelector"] == {
             "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}),
        ("on the pod's metrics port only, TCP",
         len(nports) == 1 and nports[0].get("protocol", "TCP") == "TCP" and
         (nports[0].get("port") == "metrics" and "metrics" in ports or
          nports[0].get("port") == ports.get("metrics", {}).get("containerPort"))),
        ("in the DaemonSet's namespace",
         np.get("metadata", {}).get("namespace") == ds.get("metadata", {}).get("namespace")),
    ]
    return [name for name, ok in checks if not ok]


def render_components(kubectl, tmp):
    """The base with every component, in a kustomization of the test's own."""
    d = os.path.join(tmp, "components")
    os.makedirs(d)
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [os.path.relpath(os.path.join(DEPLOY, "base"), d)],
            "components": [os.path.relpath(os.path.join(DEPLOY, "components", c), d)
                           for c in COMPONENTS]}, f)
    return render(kubectl, d)


def image_arches():
    """The platforms scripts/image builds by default and the Dockerfile's buildx line names."""
    with open(os.path.join(SRC, "scripts", "image")) as f:
        m = re.search(r"arches=\$\{IMAGE_ARCHES:-([^}]*)\}", f.read())
    with open(os.path.join(SRC, "Dockerfile")) as f:
        d = re.search(r"buildx build --platform (\S+)", f.read())
    return (set(m.group(1).split()) if m else set(),
            {p.split("/")[1] for p in d.group(1).split(",")} if d else set())


def check_multiarch(renders):
    """The jetson overlay runs the base's image, and that image is an amd64 + arm64 index."""
    def image(docs):
        ds = one(docs, "DaemonSet", "edgegpu") or {}
        return ds.get("spec", {}).get("template", {}).get("spec", {}) \
            .get("containers", [{}])[0].get("image")
    base, jetson = image(renders.get("base", [])), image(renders.get("jetson", []))
    built, docker = image_arches()
    if not jetson or jetson != base or re.search(r"arm64|aarch64|amd64", jetson):
        fail(f"jetson: image {jetson} is not the base's multi-arch {base}")
    elif not {"amd64", "arm64"} <= built or not {"amd64", "arm64"} <= docker:
        fail(f"the image is not built for amd64 and arm64: scripts/image {sorted(built)}, "
             f"Dockerfile {sorted(docker)}")
    else:
        print(f"ok   jetson: image {jetson}, the base's index of {sorted(built)}", flush=True)


def check_examples(k8s, crd):
    docs = []
    for p in sorted(glob.glob(os.path.join(DEPLOY, "examples", "*.yaml"))):
        with open(p) as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    validate_all(k8s, crd, docs, "examples")
    limits = {}
    for d in docs:
        pod = d["spec"] if d["kind"] == "Pod" else d["spec"]["template"]["spec"]
        for c in pod["containers"]:
            for k, v in c.get("resources", {}).get("limits", {}).items():
                if k.startswith("nvidia.com/"):
                    limits[(d["metadata"]["name"], k)] = v
    test = one(docs, "Pod", "gpu-test") or {}
    c = (test.get("spec", {}).get("containers") or [{}])[0]
    if c.get("command") != ["nvidia-smi"] or test["spec"].get("restartPolicy") != "Never" or \
            limits.get(("gpu-test", "nvidia.com/gpu")) != 1:
        fail("examples: gpu-test is not the seed's nvidia-smi pod with one nvidia.com/gpu")
    jet = one(docs, "Deployment", "jetson-gpumem") or {}
    jpod = jet.get("spec", {}).get("template", {}).get("spec", {})
    if jpod.get("nodeSelector", {}).get("kubernetes.io/arch") != "arm64" or \
            not isinstance(limits.get(("jetson-gpumem", "nvidia.com/gpumem")), int) or \
            ("jetson-gpumem", "nvidia.com/gpu") in limits:
        fail("examples: jetson-gpumem is not an arm64 pod asking for nvidia.com/gpumem only")
    if not any(k == "nvidia.com/gpumem" for _, k in limits) or \
            not any(k == "nvidia.com/gpu" and n != "gpu-test" for n, k in limits):
        fail(f"examples: no inference pods on gpumem and on time-sliced GPUs: {limits}")


# --- the checks fail when they should ---

def check_can_fail(k8s, crd, edgegpu, base, metrics, jetson, components, tmp):
    before = len(failures)
    ds = copy.deepcopy(one(base, "DaemonSet", "edgegpu"))
    c = ds["spec"]["template"]["spec"]["containers"][0]
    c["securityContext"]["readOnlyRootFS"] = True            # unknown field
    ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "10"   # wrong type
    c["ports"][0]["containerPort"] = "9400"                   # wrong type
    ds["spec"]["updateStrategy"]["rollingUpdat"] = {}         # unknown field
    errs = " | ".join(k8s.validate(ds))
    for want in ("readOnlyRootFS", "terminationGracePeriodSeconds", "containerPort",
                 "rollingUpdat"):
        if want not in errs:
            fail(f"a broken DaemonSet: no error for {want}: {errs}")
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "labelz": {}},
           "spec": {"ports": [{"port": "http"}]}}
    errs = " | ".join(k8s.validate(svc))
    if "labelz" not in errs or "port" not in errs:
        fail(f"a broken Service: missing errors: {errs}")

    sm = copy.deepcopy(one(metrics, "ServiceMonitor", "edgegpu"))
    sm["spec"]["endpoints"][0]["intervall"] = "30s"           # unknown field
    sm["spec"]["endpoints"][0]["port"] = 9400                 # wrong type
    sm["spec"]["endpoints"][0]["relabelings"][0]["sourceLabel"] = "x"   # unknown, nested
    pr = copy.deepcopy(one(metrics, "PrometheusRule", "edgegpu"))
    pr["spec"]["groups"][0]["rules"][0]["forr"] = "1m"        # unknown field
    pr["spec"]["groups"][0]["interval"] = "often"             # not a duration
    e1, e2 = (" | ".join(e) for e in crd.validate_many([sm, pr]))
    for want, errs in (("intervall", e1), ("endpoints.0.port", e1), ("sourceLabel", e1),
                       ("forr", e2), ("interval", e2)):
        if want not in errs:
            fail(f"a broken {'ServiceMonitor' if errs is e1 else 'PrometheusRule'}: "
                 f"no error for {want}: {errs}")

    broken = copy.deepcopy(base)
    d = one(broken, "DaemonSet", "edgegpu")
    pod = d["spec"]["template"]["spec"]
    pod["tolerations"] = []
    del pod["containers"][0]["securityContext"]["seccompProfile"]
    pod["containers"][0]["volumeMounts"][-1]["subPath"] = "config.yaml"
    pod["containers"][0]["args"].remove("--host-proc=/host/proc")
    d["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = 1
    pod["containers"][0]["startupProbe"]["httpGet"]["path"] = "/readyz"
    pod["containers"][0]["volumeMounts"].append(
        {"name": "pod-logs", "mountPath": "/var/log/pods", "readOnly": True})
    pod["volumes"].append({"name": "pod-logs", "hostPath": {"path": "/var/log/pods"}})
    bad = check_daemonset(broken, "base", report=False)
    for want in ("toleration", "seccompProfile", "subPath", "args", "maxUnavailable",
                 "startupProbe", "/var/log/pods"):
        if not any(want in b for b in bad):
            fail(f"the DaemonSet checks miss a dropped requirement ({want}): {bad}")

    broken = copy.deepcopy(one(base, "DaemonSet", "edgegpu"))
    broken["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureThreshold"] = 3
    if not any("startupProbe" in b for b in check_daemonset([broken], "base", report=False)):
        fail("the DaemonSet checks pass a startupProbe that gives up after 30 s")

    broken = copy.deepcopy(one(components, "NetworkPolicy", "edgegpu-metrics"))
    broken["spec"]["ingress"][0]["form"] = []                 # unknown field
    broken["spec"]["ingress"][0]["ports"][0]["protocl"] = "TCP"   # unknown, nested
    broken["spec"]["podSelector"]["matchLabels"] = "edgegpu"  # wrong type
    errs = " | ".join(crd.validate_many([broken])[0])
    for want in ("form", "protocl", "matchLabels"):
        if want not in errs:
            fail(f"a broken NetworkPolicy: no error for {want}: {errs}")
    for change, want in (
            (lambda n: n["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]
             .update({"kubernetes.io/metadata.name": "default"}), "monitoring"),
            (lambda n: n["spec"]["ingress"][0].pop("ports"), "metrics port"),
            (lambda n: n["spec"]["podSelector"]["matchLabels"].update(
                {"app.kubernetes.io/name": "other"}), "selects"),
            (lambda n: n["spec"]["ingress"][0]["from"].append({"podSelector": {}}), "one peer")):
        docs = copy.deepcopy(components)
        change(one(docs, "NetworkPolicy", "edgegpu-metrics"))
        if not any(want in b for b in networkpolicy_checks(docs)):
            fail(f"the NetworkPolicy checks miss a broken policy ({want})")

    broken = copy.deepcopy(jetson)
    pod = one(broken, "DaemonSet", "edgegpu")["spec"]["template"]["spec"]
    byp = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    byp["/host/dev"]["readOnly"] = False
    pod["containers"][0]["volumeMounts"].remove(byp["/host/sys/class"])
    vols = {v["name"]: v for v in pod["volumes"]}
    vols[byp["/host/etc/nv_tegra_release"]["name"]]["hostPath"]["type"] = "File"
    vols[byp["/host/sys/bus"]["name"]]["hostPath"]["path"] = "/sys"
    bad = check_daemonset(broken, "jetson", report=False)
    for want in ("/host/dev <-", "/host/sys/class <-", "nv_tegra_release", "/host/X",
                 "writable submounts"):
        if not any(want in b for b in bad):
            fail(f"the jetson checks miss a broken mount ({want}): {bad}")

    path = os.path.join(tmp, "bad-config.yaml")
    with open(path, "w") as f:
        f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "      - name: nvidia.com/gpu\n        replicas: 1\n")
    rc, _, err = run([edgegpu, "check-config", path])
    if rc == 0 or "replicas" not in err:
        fail(f"edgegpu check-config accepted replicas: 1 (rc {rc}): {err}")
    rc, _, err = run([edgegpu, "check-config", os.path.join(DEPLOY, "base", "config.yaml"),
                      "--host-procs=/host/proc"])
    if rc == 0:
        fail("edgegpu check-config accepted an unknown flag")

    path = os.path.join(tmp, "bad.yaml")
    with open(path, "w") as f:
        f.write("kind: Pod \nkind: Service\nmetadata: {name: x}\n")
    rc, out, _ = run(["yamllint", "--strict", "-c", os.path.join(SRC, ".yamllint"), path])
    if rc == 0 or "duplication" not in out or "trailing" not in out:
        fail(f"yamllint passed a duplicate key and a trailing space (rc {rc}): {out}")
    if len(failures) == before:
        print("ok   every check rejects its broken input", flush=True)


def main():
    kubectl, edgegpu = need_tools()
    k8s, crd = K8sSchemas(), CrdSchemas()
    renders = {"base": render(kubectl, os.path.join(DEPLOY, "base"))}
    for o in OVERLAYS:
        renders[o] = render(kubectl, os.path.join(DEPLOY, "overlays", o))
    with tempfile.TemporaryDirectory(prefix="test-manifests-") as tmp:
        renders["components"] = render_components(kubectl, tmp)
        for name, docs in renders.items():
            if not docs:
                continue
            validate_all(k8s, crd, docs, name)
            check_daemonset(docs, name)
            eff = check_config(edgegpu, docs, name, tmp)
            check_overlay_specifics(name, docs, eff)
        check_examples(k8s, crd)
        rc, out, err = run(["yamllint", "--strict", "-c", ".yamllint", "deployments"], cwd=SRC)
        if rc != 0:
            fail(f"yamllint deployments/: {out}{err}")
        else:
            print("ok   yamllint --strict deployments/", flush=True)
        check_multiarch(renders)
        if renders["base"] and renders["metrics"] and renders["jetson"] and \
                renders["components"]:
            check_can_fail(k8s, crd, edgegpu, renders["base"], renders["metrics"],
                           renders["jetson"], renders["components"], tmp)
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        sys.exit(1)
    print("all manifest checks passed", flush=True)


if __name__ == "__main__":
    main()
