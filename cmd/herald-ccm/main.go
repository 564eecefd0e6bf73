// Command herald-ccm is Herald as the cluster's cloud provider: the upstream
// cloud controller manager (k8s.io/cloud-provider) with the provider herald,
// its LoadBalancer backed by Herald's controller and a minimal InstancesV2.
//
// It is a binary of its own, shipped in Herald's image beside herald, because
// the cloud-provider framework roughly doubles a binary's size and the memory
// every process of it starts with; the speakers and svclb pods on every node
// should not pay for it. `herald ccm` runs it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/herald-lb/herald/controller/ccm"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is `herald-ccm`: the upstream cloud controller manager's flags
// (--kubeconfig for a run outside a pod, --leader-elect, ...) and Herald's
// (--enable-load-balancer, --enable-node-lifecycle, ...).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == "version" {
		fmt.Fprintf(stdout, "herald-ccm %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd, err := ccm.NewCommand(ctx.Done())
	if err != nil {
		fmt.Fprintln(stderr, "herald ccm:", err)
		return 1
	}
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(stderr, "herald ccm:", err)
		return 2
	}
	return 0
}
