// cdi-validate checks what edgegpu writes for CDI with the reference CDI library (Debian's
// golang-github-container-orchestrated-devices-container-device-interface-dev, v0.5):
//
//	cdi-validate -spec FILE   parse FILE and run the library's validation (JSON schema,
//	                          version, vendor/class, device names, edits); exit 1 if invalid
//	cdi-validate -dir DIR     the full check of what tests/cdi-validate/cdi-write left in DIR:
//	                          the spec, the CDI cache's view of it, the Allocate responses
//	                          decoded by protobuf-go, and an injection into an OCI spec
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi"
	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi/validate"
	"github.com/container-orchestrated-devices/container-device-interface/schema"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"

	pb "edgegpu/deviceplugin/v1beta1"
)

const (
	kind       = "k8s.device-plugin.nvidia.com/gpu"
	specName   = "k8s.device-plugin.nvidia.com-gpu.json"
	driverVer  = "550.54.15"
	libDir     = "/usr/lib/x86_64-linux-gnu"
	annoPrefix = "cdi.k8s.io/nvidia-device-plugin_"
)

var failures int

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	failures++
}

func check(ok bool, format string, args ...interface{}) {
	if !ok {
		fail(format, args...)
	}
}

func validateSpecFile(path string) (*cdi.Spec, error) {
	if err := schema.BuiltinSchema().ValidateFile(path); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return cdi.ReadSpec(path, 0)
}

type gpu struct {
	name  string
	minor int
}

func readExpect(dir string) ([]gpu, string) {
	f, err := os.Open(filepath.Join(dir, "expect"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	var gpus []gpu
	root := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		switch {
		case len(w) == 3 && w[0] == "device":
			m, _ := strconv.Atoi(w[2])
			gpus = append(gpus, gpu{w[1], m})
		case len(w) == 2 && w[0] == "root":
			root = w[1]
		}
	}
	return gpus, root
}

func readResponse(path string) *pb.ContainerAllocateResponse {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
		return &pb.ContainerAllocateResponse{}
	}
	r := &pb.ContainerAllocateResponse{}
	// protobuf-go checks proto3 strings for UTF-8, as the kubelet (k8s >= 1.34) does.
	if err := proto.Unmarshal(data, r); err != nil {
		fail("%s: protobuf-go rejects the response: %v", path, err)
	}
	return r
}

func checkSpec(spec *cdi.Spec, gpus []gpu, root string) {
	check(spec.Version == "0.5.0", "cdiVersion %q", spec.Version)
	check(spec.Kind == kind, "kind %q", spec.Kind)
	check(spec.GetVendor() == "k8s.device-plugin.nvidia.com" && spec.GetClass() == "gpu",
		"vendor %q class %q", spec.GetVendor(), spec.GetClass())
	check(len(spec.Devices) == len(gpus), "%d devices, want %d", len(spec.Devices), len(gpus))
	for i, g := range gpus {
		if i >= len(spec.Devices) {
			break
		}
		d := spec.Devices[i]
		node := fmt.Sprintf("/dev/nvidia%d", g.minor)
		check(d.Name == g.name, "device %d named %q, want %q", i, d.Name, g.name)
		check(len(d.ContainerEdits.DeviceNodes) == 1 &&
			d.ContainerEdits.DeviceNodes[0].Path == node &&
			d.ContainerEdits.DeviceNodes[0].HostPath == root+node,
			"device %q nodes %+v", d.Name, d.ContainerEdits.DeviceNodes)
		check(spec.GetDevice(g.name) != nil, "spec.GetDevice(%q) is nil", g.name)
	}
	e := spec.ContainerEdits
	check(reflect.DeepEqual(e.Env, []string{"NVIDIA_VISIBLE_DEVICES=void"}), "env %q", e.Env)
	var nodes []string
	for _, n := range e.DeviceNodes {
		nodes = append(nodes, n.Path)
		check(n.HostPath == root+n.Path, "node %q host path %q", n.Path, n.HostPath)
	}
	check(reflect.DeepEqual(nodes, []string{"/dev/nvidiactl", "/dev/nvidia-uvm"}),
		"common device nodes %q", nodes)
	want := map[string]string{
		libDir + "/libcuda.so." + driverVer:                  libDir + "/libcuda.so." + driverVer,
		libDir + "/libcuda.so.1":                             libDir + "/libcuda.so." + driverVer,
		libDir + "/libnvidia-ml.so." + driverVer:             libDir + "/libnvidia-ml.so." + driverVer,
		libDir + "/libnvidia-ml.so.1":                        libDir + "/libnvidia-ml.so." + driverVer,
		libDir + "/libnvidia-ptxjitcompiler.so." + driverVer: libDir + "/libnvidia-ptxjitcompiler.so." + driverVer,
		libDir + "/libnvidia-ptxjitcompiler.so.1":            libDir + "/libnvidia-ptxjitcompiler.so." + driverVer,
		"/usr/bin/nvidia-smi":                                "/usr/bin/nvidia-smi",
	}
	check(len(e.Mounts) == len(want), "%d mounts, want %d", len(e.Mounts), len(want))
	for _, m := range e.Mounts {
		host, ok := want[m.ContainerPath]
		check(ok, "unexpected mount %q", m.ContainerPath)
		check(m.HostPath == root+host, "mount %q from %q", m.ContainerPath, m.HostPath)
		check(reflect.DeepEqual(m.Options, []string{"ro", "nosuid", "nodev", "bind"}),
			"mount %q options %q", m.ContainerPath, m.Options)
		_, err := os.Stat(m.HostPath)
		check(err == nil, "mount source: %v", err)
	}
	check(len(e.Hooks) == 0, "hooks %+v (none expected by default)", e.Hooks)
}

func checkResponses(dir string, cache *cdi.Cache, gpus []gpu, root string) {
	var names []string
	for _, g := range gpus {
		names = append(names, kind+"="+g.name)
	}

	r := readResponse(filepath.Join(dir, "allocate-cdi.pb"))
	check(len(r.Envs) == 0 && len(r.Mounts) == 0 && len(r.Devices) == 0,
		"CDI-only response has envs %v mounts %v devices %v", r.Envs, r.Mounts, r.Devices)
	check(len(r.Annotations) == 1, "annotations %v", r.Annotations)
	for key := range r.Annotations {
		id := strings.TrimPrefix(key, annoPrefix)
		check(id != key, "annotation key %q", key)
		canon, err := cdi.AnnotationKey("nvidia-device-plugin", id)
		check(err == nil && canon == key, "annotation key %q: library says %q, %v",
			key, canon, err)
	}
	keys, devs, err := cdi.ParseAnnotations(r.Annotations)
	check(err == nil && len(keys) == 1, "ParseAnnotations: %v %v", keys, err)
	check(reflect.DeepEqual(devs, names), "annotated devices %q, want %q", devs, names)
	var cri []string
	for _, d := range r.CdiDevices {
		cri = append(cri, d.Name)
	}
	check(reflect.DeepEqual(cri, names), "cdi_devices %q, want %q", cri, names)
	for _, n := range cri {
		check(cdi.IsQualifiedName(n), "%q is not a qualified CDI name", n)
	}

	// What a CDI-enabled runtime does with the annotation: inject into an OCI spec.
	ociSpec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	unresolved, err := cache.InjectDevices(ociSpec, devs...)
	check(err == nil && len(unresolved) == 0, "InjectDevices: %v (unresolved %q)", err,
		unresolved)
	got := map[string]oci.LinuxDevice{}
	for _, d := range ociSpec.Linux.Devices {
		got[d.Path] = d
	}
	for _, p := range []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"} {
		d, ok := got[p]
		check(ok && d.Type == "c" && d.Major == 1 && d.Minor == 3, "injected %s: %+v", p, d)
	}
	check(len(ociSpec.Linux.Devices) == 4, "injected devices %+v", ociSpec.Linux.Devices)
	check(reflect.DeepEqual(ociSpec.Process.Env, []string{"NVIDIA_VISIBLE_DEVICES=void"}),
		"injected env %q", ociSpec.Process.Env)
	found := false
	for _, m := range ociSpec.Mounts {
		if m.Destination == libDir+"/libcuda.so.1" {
			// No type, as in NVIDIA's specs: the "bind" option makes it a bind mount.
			found = m.Source == root+libDir+"/libcuda.so."+driverVer &&
				reflect.DeepEqual(m.Options, []string{"ro", "nosuid", "nodev", "bind"})
		}
	}
	check(found, "no libcuda.so.1 bind mount in the OCI spec: %+v", ociSpec.Mounts)

	r = readResponse(filepath.Join(dir, "allocate-envvar.pb"))
	wantEnv := map[string]string{
		"NVIDIA_VISIBLE_DEVICES":     "/var/run/nvidia-container-devices",
		"EDGEGPU_GPUMEM_LIMIT_MIB":   "6",
		"CUDA_DEVICE_MEMORY_LIMIT_0": "4m",
		"CUDA_DEVICE_MEMORY_LIMIT_1": "2m",
		"A":                          "café",
	}
	check(reflect.DeepEqual(r.Envs, wantEnv), "envs %v, want %v", r.Envs, wantEnv)
	check(len(r.Mounts) == 2, "mounts %v", r.Mounts)
	for i, g := range gpus {
		if i < len(r.Mounts) {
			m := r.Mounts[i]
			check(m.ContainerPath == "/var/run/nvidia-container-devices/"+g.name &&
				m.HostPath == "/dev/null", "mount %d %+v", i, m)
		}
	}
	var specs []string
	for _, d := range r.Devices {
		specs = append(specs, d.ContainerPath+"="+d.HostPath+":"+d.Permissions)
	}
	wantSpecs := []string{
		"/dev/nvidiactl=" + root + "/dev/nvidiactl:rw",
		"/dev/nvidia-uvm=" + root + "/dev/nvidia-uvm:rw",
		"/dev/nvidia0=" + root + "/dev/nvidia0:rw",
		"/dev/nvidia1=" + root + "/dev/nvidia1:rw",
	}
	check(reflect.DeepEqual(specs, wantSpecs), "device specs %q, want %q", specs, wantSpecs)
}

func main() {
	specFile := flag.String("spec", "", "validate this spec file only")
	dir := flag.String("dir", "", "check everything cdi-write left in this directory")
	flag.Parse()

	cdi.SetSpecValidator(validate.WithSchema(schema.BuiltinSchema()))
	if *specFile != "" {
		if _, err := validateSpecFile(*specFile); err != nil {
			fmt.Fprintf(os.Stderr, "invalid CDI spec: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("valid CDI spec: %s\n", *specFile)
		return
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: cdi-validate -spec FILE | -dir DIR")
		os.Exit(2)
	}

	gpus, root := readExpect(*dir)
	if len(gpus) == 0 || root == "" {
		fmt.Fprintln(os.Stderr, "expect file lists no devices or no root")
		os.Exit(1)
	}
	specDir := filepath.Join(*dir, "cdi")
	spec, err := validateSpecFile(filepath.Join(specDir, specName))
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: invalid CDI spec: %v\n", err)
		os.Exit(1)
	}
	checkSpec(spec, gpus, root)

	cache, err := cdi.NewCache(cdi.WithSpecDirs(specDir), cdi.WithAutoRefresh(false))
	if err != nil {
		fail("NewCache: %v", err)
	} else {
		for path, errs := range cache.GetErrors() {
			fail("cache error in %s: %v", path, errs)
		}
		var want []string
		for _, g := range gpus {
			want = append(want, kind+"="+g.name)
		}
		sort.Strings(want)
		got := cache.ListDevices()
		sort.Strings(got)
		check(reflect.DeepEqual(got, want), "cache devices %q, want %q", got, want)
		checkResponses(*dir, cache, gpus, root)
	}

	if failures > 0 {
		fmt.Fprintf(os.Stderr, "%d check(s) failed\n", failures)
		os.Exit(1)
	}
	fmt.Printf("ok: CDI spec and Allocate responses valid (%d devices)\n", len(gpus))
}
