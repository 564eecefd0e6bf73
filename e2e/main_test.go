//go:build e2e

package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/e2e/kind"
	"github.com/herald-lb/herald/e2e/lab"
)

// cluster is the cluster the suites run against, opened by TestMain.
var cluster e2e.Cluster

// TestMain runs the suites against the lab, or with HERALD_E2E_CLUSTER=kind against the kind setup that
// e2e/kind/kind.sh brought up (make e2e-kind brings it up, runs the suites and takes it down; its facts are read
// from HERALD_KIND_ENV, default `kind.sh env`).
//
// For the lab, it brings the lab up (it reuses a running lab), runs the suites and tears the lab down again, also when
// tests fail or the run is interrupted, then checks that the lab left nothing behind. LAB_KEEP=1 keeps the lab
// running afterwards (for debugging; `e2e/lab/lab down` removes it). A test that panics kills the test binary
// before it can tear down: the next `lab up` or `lab down` removes what was left.
func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // the suites use controller-runtime's client, which logs nothing worth reading
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Not being able to run is a failure, never a pass with no tests: `make e2e` (and CI) must not report
	// success for suites that did not run. A lab that cannot come up (missing tools, a failed step) fails
	// below.
	if os.Geteuid() != 0 {
		fmt.Println("--- FAIL: e2e: the lab needs root (network namespaces, mounts); run the e2e suites as root")
		return 1
	}
	switch c := os.Getenv("HERALD_E2E_CLUSTER"); c {
	case "", "lab":
	case "kind":
		k, err := kind.Open(os.Getenv("HERALD_KIND_ENV"))
		if err != nil {
			fmt.Printf("--- FAIL: kind: %v\n(make e2e-kind brings the kind setup up and runs the suites)\n", err)
			return 1
		}
		fmt.Printf("e2e: kind cluster %s: %d nodes, router %s\n", k.Env()["KIND_CLUSTER"], len(k.Nodes()), k.Routers()[0].Name())
		cluster = k
		code := m.Run()
		if err := removeShared(); err != nil {
			fmt.Printf("--- FAIL: %v\n", err)
			code = 1
		}
		return code
	default:
		fmt.Printf("--- FAIL: HERALD_E2E_CLUSTER=%s: want lab or kind\n", c)
		return 1
	}
	keep := os.Getenv("LAB_KEEP") == "1"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	down := func() int {
		if keep {
			fmt.Println("e2e: LAB_KEEP=1: leaving the lab up")
			return 0
		}
		start := time.Now()
		if err := lab.Run(context.Background(), os.Stdout, "down"); err != nil {
			fmt.Printf("--- FAIL: lab down: %v\n", err)
			return 1
		}
		if left := leftovers(); len(left) > 0 {
			fmt.Printf("--- FAIL: lab down left things behind:\n  %s\n", strings.Join(left, "\n  "))
			return 1
		}
		fmt.Printf("e2e: lab down in %.1fs; no namespace, interface, mount or process of the lab remains\n",
			time.Since(start).Seconds())
		return 0
	}
	// An interrupted run still tears the lab down.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("e2e: interrupted: tearing the lab down")
		down()
		os.Exit(1)
	}()

	// go test -timeout kills the binary without running deferred code: tear the lab down a minute before.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			time.AfterFunc(d-time.Minute, func() {
				fmt.Println("e2e: the test timeout is near: tearing the lab down")
				down()
				os.Exit(1)
			})
		}
	}

	start := time.Now()
	if err := lab.Run(ctx, os.Stdout, "up"); err != nil {
		fmt.Printf("--- FAIL: lab up: %v\n", err)
		down()
		return 1
	}
	fmt.Printf("e2e: lab up in %.1fs\n", time.Since(start).Seconds())
	l, err := lab.Open()
	if err != nil {
		fmt.Printf("--- FAIL: open lab: %v\n", err)
		down()
		return 1
	}
	cluster = l
	code := m.Run()
	if keep {
		// The shared install stays with the lab; otherwise lab down takes it with everything else.
		fmt.Println("e2e: LAB_KEEP=1: Herald stays installed")
	}
	if c := down(); c != 0 {
		code = c
	}
	return code
}

// leftovers lists what the lab left behind: namespaces, host interfaces, mounts and processes with its prefix or
// its state directory. It checks independently of the lab script's own check.
func leftovers() []string {
	const prefix = "hl-"
	state := os.Getenv("HERALD_LAB_STATE")
	if state == "" {
		state = "/run/herald-lab"
	}
	var left []string
	if ents, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				left = append(left, "netns "+e.Name())
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasPrefix(f[1], prefix) {
				left = append(left, "interface "+strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (strings.HasPrefix(f[4], state) || strings.Contains(f[4], "/netns/"+prefix)) {
				left = append(left, "mount "+f[4])
			}
		}
	}
	if _, err := os.Stat(state); err == nil {
		left = append(left, "state dir "+state)
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || p.Name() == fmt.Sprint(os.Getpid()) {
			continue
		}
		// Daemons name the state dir on their command line; container processes have their root in it.
		root, _ := os.Readlink("/proc/" + p.Name() + "/root")
		if strings.Contains(string(cmdline), state+"/") || strings.HasPrefix(root, state+"/") {
			left = append(left, fmt.Sprintf("process %s: %s", p.Name(), strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return left
}
