// kubelet-emulator: the kubelet's side of the device-plugin API v1beta1 and the pod-resources
// API v1, on Debian's grpc-go, for edgegpu's tests and benchmarks. See README.md.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: kubelet-emulator --dir DIR [--script FILE] [--pod-resources-socket PATH]
                        [--max-recv BYTES] [--max-ids N] [--exit-on-eof]
                        [--podres-order shuffle|stable]
Commands (script file, then stdin; one per line, optional "@TAG " prefix echoed in "done"):
  admit POD CONTAINER:RESOURCE=N[,RESOURCE=N] [CONTAINER:...]
  delete POD
  restart [DOWNTIME]
  wait-registered RESOURCE [TIMEOUT]
  wait-unregistered RESOURCE [TIMEOUT]
  wait-devices RESOURCE HEALTHY_COUNT [TIMEOUT]
  load RESOURCE options|allocate|preferred N C [K]
  podres-pad N | podres-list [MAXRECV] | podres-allocatable [MAXRECV]
  state | echo TEXT | sleep DUR | quit
`)
	flag.PrintDefaults()
}

func main() {
	dir := flag.String("dir", "", "device-plugin directory (kubelet.sock is served here)")
	script := flag.String("script", "", "file of commands run before stdin")
	podres := flag.String("pod-resources-socket", "", "pod-resources socket (default DIR/../pod-resources/kubelet.sock)")
	maxRecv := flag.Int("max-recv", 4*1024*1024, "receive limit of the client side (calls to plugins)")
	maxIDs := flag.Int("max-ids", 10000, "list device IDs in events only up to this many devices")
	exitOnEOF := flag.Bool("exit-on-eof", false, "exit when stdin ends (default: keep serving)")
	podresOrder := flag.String("podres-order", "shuffle", "order of pod-resources List answers: shuffle (new on every call, as the kubelet's Go maps give) or stable (admission order)")
	flag.Usage = usage
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		usage()
		os.Exit(2)
	}
	d, err := filepath.Abs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *podres == "" {
		*podres = filepath.Join(filepath.Dir(d), "pod-resources", "kubelet.sock")
	}
	if *podresOrder != "shuffle" && *podresOrder != "stable" {
		usage()
		os.Exit(2)
	}
	k := newKubelet(d, *podres, *maxRecv, *maxIDs)
	k.podresStable = *podresOrder == "stable"
	if err := k.start(); err != nil {
		emit("error", "where", "start", "error", err.Error())
		os.Exit(1)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		k.stop()
		emit("exit", "signal", s.String())
		os.Exit(0)
	}()

	lines := make(chan string)
	go func() {
		if *script != "" {
			f, err := os.Open(*script)
			if err != nil {
				emit("error", "where", "script", "error", err.Error())
			} else {
				feed(f, lines)
				f.Close()
			}
		}
		feed(os.Stdin, lines)
		if *exitOnEOF {
			close(lines)
		}
	}()

	n := 0
	for line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		tag := ""
		if strings.HasPrefix(line, "@") {
			tag, line, _ = strings.Cut(line[1:], " ")
			line = strings.TrimSpace(line)
		}
		t0 := monoUS()
		quit, err := k.exec(line)
		kv := []interface{}{"cmd", line, "n", n, "ok", err == nil, "error", errText(err),
			"dur_us", monoUS() - t0}
		if tag != "" {
			kv = append(kv, "tag", tag)
		}
		emit("done", kv...)
		if quit {
			break
		}
	}
	k.stop()
	emit("exit")
}

func feed(r io.Reader, lines chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		lines <- sc.Text()
	}
}

// parseDur takes a Go duration ("250ms", "2s") or plain seconds ("1.5").
func parseDur(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func optDur(args []string, i int, def time.Duration) (time.Duration, error) {
	if len(args) > i {
		return parseDur(args[i])
	}
	return def, nil
}

func optInt(args []string, i int, def int) (int, error) {
	if len(args) > i {
		return strconv.Atoi(args[i])
	}
	return def, nil
}

func nargs(args []string, min, max int) error {
	if len(args) < min || len(args) > max {
		return fmt.Errorf("%s: wrong number of arguments", args[0])
	}
	return nil
}

// unescapeName decodes %XX in a pod name, so that tests can admit pods whose names hold
// what a command line cannot (spaces, newlines): hostile names for the exporters.
func unescapeName(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// exec runs one command; it reports whether the emulator should exit.
func (k *kubelet) exec(line string) (bool, error) {
	args := strings.Fields(line)
	const defWait = 10 * time.Second
	switch args[0] {
	case "quit", "exit":
		return true, nil
	case "echo":
		emit("echo", "text", strings.TrimSpace(strings.TrimPrefix(line, "echo")))
		return false, nil
	case "sleep":
		if err := nargs(args, 2, 2); err != nil {
			return false, err
		}
		d, err := parseDur(args[1])
		if err != nil {
			return false, err
		}
		time.Sleep(d)
		return false, nil
	case "admit":
		if len(args) < 3 {
			return false, errors.New("admit POD CONTAINER:RESOURCE=N[,RESOURCE=N] [CONTAINER:...]")
		}
		specs, err := parseContainers(args[2:])
		if err != nil {
			return false, err
		}
		return false, k.admit(unescapeName(args[1]), specs)
	case "delete":
		if err := nargs(args, 2, 2); err != nil {
			return false, err
		}
		return false, k.deletePod(unescapeName(args[1]))
	case "restart":
		if err := nargs(args, 1, 2); err != nil {
			return false, err
		}
		d, err := optDur(args, 1, 0)
		if err != nil {
			return false, err
		}
		return false, k.restart(d)
	case "wait-registered", "wait-unregistered":
		if err := nargs(args, 2, 3); err != nil {
			return false, err
		}
		d, err := optDur(args, 2, defWait)
		if err != nil {
			return false, err
		}
		want := args[0] == "wait-registered"
		ok := k.waitFor(d, func() bool {
			r := k.resources[args[1]]
			live := r != nil && r.ep != nil && r.ep.live
			return live == want
		})
		if !ok {
			return false, fmt.Errorf("timeout after %v waiting for %s to be %s", d, args[1],
				map[bool]string{true: "registered", false: "unregistered"}[want])
		}
		return false, nil
	case "wait-devices":
		if err := nargs(args, 3, 4); err != nil {
			return false, err
		}
		want, err := strconv.Atoi(args[2])
		if err != nil {
			return false, err
		}
		d, err := optDur(args, 3, defWait)
		if err != nil {
			return false, err
		}
		got := 0
		ok := k.waitFor(d, func() bool {
			got = 0
			if r := k.resources[args[1]]; r != nil {
				got = len(r.healthy)
			}
			return got == want
		})
		if !ok {
			return false, fmt.Errorf("timeout after %v waiting for %d healthy %s devices (have %d)",
				d, want, args[1], got)
		}
		return false, nil
	case "load":
		if err := nargs(args, 5, 6); err != nil {
			return false, err
		}
		n, err1 := strconv.Atoi(args[3])
		c, err2 := strconv.Atoi(args[4])
		sz, err3 := optInt(args, 5, 1)
		if err1 != nil || err2 != nil || err3 != nil {
			return false, errors.New("load RESOURCE METHOD N C [K]: N, C, K are integers")
		}
		return false, k.load(args[1], args[2], n, c, sz)
	case "podres-pad":
		if err := nargs(args, 2, 2); err != nil {
			return false, err
		}
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 0 {
			return false, fmt.Errorf("podres-pad N: bad N %q", args[1])
		}
		emit("podres_pad", "added", n, "size", k.padPods(n))
		return false, nil
	case "podres-list", "podres-allocatable":
		if err := nargs(args, 1, 2); err != nil {
			return false, err
		}
		mr, err := optInt(args, 1, 16*1024*1024)
		if err != nil {
			return false, err
		}
		if args[0] == "podres-list" {
			return false, k.podresList(mr)
		}
		return false, k.podresAllocatable(mr)
	case "state":
		k.emitState()
		return false, nil
	}
	return false, fmt.Errorf("unknown command %q", args[0])
}

func (k *kubelet) emitState() {
	k.mu.Lock()
	res := map[string]interface{}{}
	for name, r := range k.resources {
		e := map[string]interface{}{
			"healthy":   sortedKeys(r.healthy),
			"unhealthy": sortedKeys(r.unhealthy),
			"allocated": sortedKeys(k.allocatedLocked(name)),
		}
		if r.ep != nil {
			e["reg"] = r.ep.id
			e["endpoint"] = r.ep.name
			e["live"] = r.ep.live
			e["pre_start_required"] = r.ep.opts.PreStartRequired
			e["get_preferred_allocation_available"] = r.ep.opts.GetPreferredAllocationAvailable
		}
		res[name] = e
	}
	pods := []interface{}{}
	for _, p := range k.pods {
		cs := []interface{}{}
		for _, c := range p.containers {
			devs := map[string][]string{}
			for _, a := range c.allocs {
				devs[a.resource] = a.ids
			}
			cs = append(cs, map[string]interface{}{"name": c.name, "devices": devs})
		}
		pods = append(pods, map[string]interface{}{"name": p.name, "containers": cs})
	}
	k.mu.Unlock()
	emit("state", "resources", res, "pods", pods)
}
