#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets added with it (toml, allocate, preferred, podres,
cgroup, lognames, tegra) into fuzz/corpus/<target>/, reproducibly: the protobuf messages are encoded
here by hand (no protobuf package needed), the text seeds are literal. Run it from anywhere;
it replaces only the files it names (crash inputs added to a corpus by hand stay).

    fuzz/gen-seeds.py

The plugin targets' first byte picks the resource (fuzz/plugin-rig.h): 0 whole GPUs, 1
replicas (2 each), 3 replicas (4, 2, 3, 2), 2 gpumem (IDs below); +4 fail_requests_gt_one, +8
onSplit allow, 0x10 << i GPU i unhealthy. The fake node's GPUs are tests/unit/gpus.h's.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
UUID = ['GPU-%08u-1111-2222-3333-444444444444' % i for i in range(4)]
# gpumem IDs of the rig's resource (4 GiB units, 1 GiB reserve, 16 GiB GPUs): letters hash
# from the UUIDs, three units each, GPUs 0-3.
MEM = [['k0', 'k1', 'k2'], ['t0', 't1', 't2'], ['c0', 'c1', 'c2'], ['h0', 'h1', 'h2']]


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, val):
    """A field: bytes/str are length-delimited, ints varints."""
    if isinstance(val, int):
        return varint(num << 3) + varint(val)
    if isinstance(val, str):
        val = val.encode()
    return varint(num << 3 | 2) + varint(len(val)) + val


def msg(*fields):
    return b''.join(field(n, v) for n, v in fields)


def write(target, name, data):
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- Allocate: AllocateRequest{1: ContainerAllocateRequest{1: devices_ids}} ---
def alloc(*containers):
    return msg(*[(1, msg(*[(1, i) for i in ids])) for ids in containers])


A = {
    'gpu-one': (0, alloc([UUID[1]])),
    'gpu-all': (0, alloc(UUID)),
    'gpu-two-containers': (0, alloc([UUID[0]], [UUID[3], UUID[2]])),
    'gpu-unknown': (0, alloc(['GPU-nope'])),
    'gpu-duplicate': (0, alloc([UUID[0], UUID[0]])),
    'gpu-unhealthy': (0x20, alloc([UUID[1]])),
    'gpu-nul-in-id': (0, alloc([UUID[0] + '\0x'])),
    'gpu-no-containers': (0, b''),
    'gpu-empty-container': (0, msg((1, b''))),
    'gpu-truncated': (0, alloc([UUID[0]])[:-3]),
    'replica-two': (1, alloc([UUID[0] + '::1', UUID[2] + '::0'])),
    'replica-per-gpu': (3, alloc([UUID[0] + '::3', UUID[2] + '::2'])),
    'replica-past-count': (3, alloc([UUID[1] + '::2'])),
    'replica-leading-zero': (1, alloc([UUID[0] + '::01'])),
    'replica-gt-one': (5, alloc([UUID[0] + '::0', UUID[1] + '::0'])),
    'gpumem-one-gpu': (2, alloc(MEM[2][:2])),
    'gpumem-split-reject': (2, alloc([MEM[0][0], MEM[1][0]])),
    'gpumem-split-allow': (10, alloc([MEM[0][0], MEM[1][0], MEM[1][2]])),
    'gpumem-bad-letter': (2, alloc(['z0', 'K0', 'k00', 'k3'])),
    'wrong-wire-type': (0, field(1, 5)),
}
for name, (sel, body) in A.items():
    write('allocate', name, bytes([sel]) + body)


# --- GetPreferredAllocation: PreferredAllocationRequest{1: ContainerPreferredAllocationRequest{
#     1: available_deviceIDs, 2: must_include_deviceIDs, 3: allocation_size}} ---
def pref(*containers):
    out = b''
    for avail, must, size in containers:
        c = msg(*[(1, i) for i in avail], *[(2, i) for i in must])
        if size is not None:
            c += field(3, size)
        out += field(1, c)
    return out


P = {
    'gpu-two-of-four': (0, pref((UUID, [], 2))),
    'gpu-must': (0, pref((UUID, [UUID[3]], 2))),
    'gpu-must-not-available': (0, pref((UUID[:2], [UUID[3]], 2))),
    'gpu-all': (0, pref((UUID, UUID, 4))),
    'gpu-size-zero': (0, pref((UUID, [], 0))),
    'gpu-size-too-big': (0, pref((UUID[:2], [], 3))),
    'gpu-size-negative': (0, pref((UUID, [], -1))),
    'gpu-size-below-must': (0, pref((UUID, UUID[:3], 2))),
    'gpu-must-unknown': (0, pref((UUID, ['GPU-nope'], 1))),
    'gpu-must-duplicate': (0, pref((UUID, [UUID[1], UUID[1]], 2))),
    'gpu-available-duplicates': (0, pref(([UUID[0]] * 3 + ['junk'], [], 1))),
    'gpu-two-containers': (0, pref((UUID, [], 1), (UUID[2:], [UUID[2]], 2))),
    'gpu-seventeen-containers': (0, pref(*[(UUID, [], 1)] * 17)),
    'replica-spread': (3, pref(([u + '::%d' % k for u in UUID for k in range(2)], [], 3))),
    'gpumem-units': (2, pref(([i for g in MEM for i in g], [MEM[1][1]], 4))),
    'gpumem-unhealthy': (0x42, pref(([i for g in MEM for i in g], [], 2))),
    'size-wrong-wire-type': (0, field(1, msg((1, UUID[0])) + varint(3 << 3 | 2) + b'\x01\x01')),
    'truncated': (0, pref((UUID, [], 2))[:-5]),
}
for name, (sel, body) in P.items():
    write('preferred', name, bytes([sel]) + body)


# --- pod-resources: ListPodResourcesResponse{1: PodResources{1: name, 2: namespace,
#     3: ContainerResources{1: name, 2: ContainerDevices{1: resource_name, 2: device_ids}}}} ---
def devices(res, *ids):
    return msg((1, res), *[(2, i) for i in ids])


def container(name, *devs):
    return msg((1, name), *[(2, d) for d in devs])


def pod(name, ns, *containers):
    return msg((1, name), (2, ns), *[(3, c) for c in containers])


def answer(*pods):
    return msg(*[(1, p) for p in pods])


R = {
    'empty': b'',
    'one-gpu': answer(pod('train', 'ml', container('main', devices('nvidia.com/gpu', UUID[0])))),
    'two-pods': answer(pod('a', 'default', container('c', devices('nvidia.com/gpu', UUID[1]))),
                       pod('b', 'default', container('c', devices('nvidia.com/gpumem', 'k0',
                                                                  'k1', 't2')))),
    'numa-duplicate': answer(pod('a', 'ns', container('c', devices('nvidia.com/gpu', UUID[0]),
                                                      devices('nvidia.com/gpu', UUID[0])))),
    'no-devices': answer(pod('idle', 'ns', container('c'))),
    'missing-names': answer(msg((3, msg((2, msg((2, 'x'))))))),
    'empty-id': answer(pod('a', 'ns', container('c', devices('r', '')))),
    'nul-in-id': answer(pod('a', 'ns', container('c', devices('r', 'a\0x', 'a\0y')))),
    'many-ids': answer(pod('a', 'ns', container('c', devices('nvidia.com/gpumem',
                                                             *['k%d' % i for i in range(40)])))),
    'other-resources': answer(pod('a', 'ns', container('c', devices('cpu', '1'),
                                                       devices('nvidia.com/gpu', UUID[2])))),
    'unknown-fields': answer(pod('a', 'ns', container('c', devices('r', 'i') + field(9, 7)))
                             + field(15, 'x')),
    'truncated': answer(pod('a', 'ns', container('c', devices('r', 'id'))))[:-2],
    'bad-wire-type': field(1, 3),
    'deep-garbage': b'\x0a\xff\xff\xff\xff\x0f',
}
for name, body in R.items():
    write('podres', name, body)


# --- /proc/<pid>/cgroup ---
U = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0'
CID = '4a' * 32
C = {
    'v2-containerd': '0::/kubepods/besteffort/pod%s/%s\n' % (U, CID),
    'v2-crio': '0::/kubepods/burstable/pod%s/crio-%s\n' % (U, CID),
    'v2-systemd': '0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice'
                  '/cri-containerd-%s.scope\n' % (U.replace('-', '_'), CID),
    'v2-systemd-guaranteed': '0::/kubepods.slice/kubepods-pod%s.slice/docker-%s.scope\n'
                             % (U.replace('-', '_'), CID),
    'v2-conmon': '0::/kubepods.slice/kubepods-pod%s.slice/crio-conmon-%s.scope\n'
                 % (U.replace('-', '_'), CID),
    'v2-static-pod': '0::/kubepods/pod%s/%s\n' % ('ab' * 16, CID),
    'v2-pause-only': '0::/kubepods/pod%s\n' % U,
    'v2-namespaced': '0::/../../kubepods/pod%s/%s\r\n' % (U, CID),
    'v1-mixed': '12:memory:/kubepods/pod%s\n11:cpu,cpuacct:/kubepods/pod%s/%s\n1:name=systemd:/\n'
                % (U, U, CID),
    'host': '0::/system.slice/containerd.service\n',
    'no-slash': '0::kubepods/pod%s\n' % U,
    'not-digits': 'x::/kubepods/pod%s\n' % U,
    'nul-in-line': '0::/kubepods/pod%s\0\n' % U,
    'short-uid': '0::/kubepods/pod%s/%s\n' % (U[:-1], CID),
    'pod-not-after-kubepods': '0::/pod%s/%s\n' % (U, CID),
    'no-newline': '0::/kubepods/pod%s/%s' % (U, CID),
}
for name, body in C.items():
    write('cgroup', name, body)


# --- Tegra sysfs / procfs files (one file's bytes, given to every parser) ---
G = {
    'load': '372\n',
    'freq-hz': '1020000000\n',
    'u64-max': '18446744073709551615\n',
    'u64-over': '18446744073709551616\n',
    'temp': '47500\n',
    'temp-sentinel': '-256000\n',
    'int-min': '-2147483648',
    'of-name': 'gv11b\0',
    'zone-type': 'GPU-therm\n',
    'rail-nc': 'NC\n',
    'name-long': 'VDD_' + 'X' * 40 + '\n',
    'nul-inside': '1\x002\n',
    'garbage': b'\x01\xfe12abc\n',
    'two-newlines': '1\n\n',
    'meminfo': 'MemTotal:        7802332 kB\nMemFree:         2600777 kB\n'
               'MemAvailable:    3300777 kB\nBuffers:           12345 kB\n'
               'Cached:           654321 kB\nNvMapMemUsed:     310000 kB\n',
    'meminfo-old': 'MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 1 kB\nCached: 2 kB\n',
    'meminfo-dup': 'MemTotal: 100 kB\nMemTotal: 5 kB\nMemAvailable: 5 MB\nMemAvailable: 8 kB\n',
    'meminfo-overflow': 'MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n',
    'meminfo-no-newline': 'MemTotal: 100 kB\nMemAvailable: 9 kB',
}
for name, body in G.items():
    write('tegra', name, body)


# --- log names: containers/ links, pods/ directories, container directory names ---
L = {
    'container-log': 'coredns-5d78c9869d-abcde_kube-system_coredns-%s.log' % CID,
    'container-log-dotted-pod': 'web.example.com_prod_nginx-%s.log' % CID,
    'container-log-extra-underscore': 'a_b_c_d-%s.log' % CID,
    'container-log-short-cid': 'a_b_c-%s.log' % CID[:-1],
    'container-log-upper': 'A_b_c-%s.log' % CID,
    'container-log-long-ns': 'a_%s_c-%s.log' % ('n' * 64, CID),
    'container-log-max-pod': '%s_b_c-%s.log' % ('.'.join(['p' * 63] * 4)[:253], CID),
    'pod-dir': 'kube-system_coredns-5d78c9869d-abcde_%s' % U,
    'pod-dir-static': 'kube-system_etcd-node1_%s' % ('ab' * 16),
    'pod-dir-bad-uid': 'ns_pod_%s' % U.replace('-', '_'),
    'pod-dir-empty-part': '_pod_%s' % U,
    'container-name': 'nvidia-device-plugin',
    'container-name-dash-end': 'main-',
    'dot-dot': '..',
    'empty': '',
}
for name, body in L.items():
    write('lognames', name, body)


# --- containerd config.toml ---
T = {
    'containerd-v2.toml': '''version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
      SystemdCgroup = true
''',
    'containerd-v3.toml': '''version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd]
default_runtime_name = 'runc'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
BinaryName = '/usr/bin/runc'
''',
    'k3s.toml': '''# k3s template
[plugins."io.containerd.grpc.v1.cri".cdi]
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
''',
    'numbers.toml': 'a = 1\nb = -0\nc = +1_000\nd = 0xf_f\ne = 0o17\nf = 0b101\n'
                    'g = 1.5\nh = -1e10\ni = 6.02E+23\nj = inf\nk = -nan\nl = 1_0.0_1\n',
    'bad-numbers.toml': 'a = 01\nb = 0x_ff\nc = 1__0\nd = 1.\ne = .5\nf = 1e\n',
    'bad-float.toml': 'a = e5\n',
    'strings.toml': 'a = "tab\\there \\u00e9 \\U0001F600"\nb = \'C:\\\\path\'\n'
                    'c = """\nline one\\\n   still one\nline two"""\nd = \'\'\'raw\n\'\'\'\n'
                    'e = """quote""""\n',
    'inline-table.toml': 'a = { b = 1, c.d = "x", e = { f = [1, [2, "s"]] } }\n',
    'array-of-tables.toml': '[[r]]\nn = 1\n[[r]]\nn = 2\n[[r.s]]\nm = "x"\n',
    'arrays.toml': 'a = [\n  "x", # comment\n  "y",\n]\nb = [[1, 2], ["z"]]\nc = []\n',
    'dotted-quoted.toml': '"a.b".\'c\' . d = true\n[ "x" . y ]\nz = false\n',
    'duplicate.toml': 'a = 1\na = 2\n',
    'date.toml': 'd = 1979-05-27T07:32:00Z\n',
    'crlf.toml': 'a = 1\r\n[t]\r\nb = "x"\r\n',
    'nul.toml': 'a = "x"\0\n',
    'nul-escape.toml': 'a = "x\\u0000y"\n',
    'deep.toml': 'a = ' + '[' * 40 + ']' * 40 + '\n',
    'bad-escape.toml': 'a = "\\x41"\nb = "\\ud800"\n',
    'unterminated.toml': 'a = """never closed\n',
    'empty.toml': '',
}
for name, body in T.items():
    write('toml', name, body)
