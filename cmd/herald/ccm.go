package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/herald-lb/herald/ccm"
)

// runCCM is `herald ccm`: the upstream cloud controller manager with the
// provider herald (its flags, --kubeconfig for a run outside a pod, and
// Herald's: --enable-load-balancer, --enable-node-lifecycle, ...).
func runCCM(args []string, stdout, stderr io.Writer) int {
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
