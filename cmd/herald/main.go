// Command herald is Herald's one binary: every role (controller, speaker,
// ServiceLB forwarder) is a subcommand, so one image serves them all.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// command is one subcommand: a one-line summary and what it runs.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"version":    {"print the version and git commit", runVersion},
		"controller": {"assign LoadBalancer addresses from pools (cluster-wide)", runController},
		"speaker":    {"announce addresses over ARP, NDP and BGP (one per node)", runSpeaker},
		"svclb":      {"forward a node port to a Service (ServiceLB pods)", runSvclb},
		"nllb":       {"balance the node's API server traffic on the loopback (bootstrap mode)", runNLLB},
		"cleanup":    {"remove what a release wrote at run time (after helm uninstall)", runCleanup},
		"migrate":    {"convert MetalLB's configuration into Herald's (objects to stdout, report to stderr)", runMigrate},
		"ccm":        {"run as the cluster's cloud provider: LoadBalancer and node lifecycle (cloud-controller-manager)", runCCM},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "herald: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Usage: herald <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
}

func runVersion(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "herald %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
