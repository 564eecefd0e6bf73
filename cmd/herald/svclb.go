package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/herald-lb/herald/svclb"
)

// runSvclb is the forwarder of a ServiceLB pod container. Its configuration
// is the environment (see package svclb); exit codes are svclb.Exit*.
func runSvclb(args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("herald svclb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	logLevel := fs.String("log-level", envOr("HERALD_SVCLB_LOG_LEVEL", "info"), "debug, info, warn or error (env HERALD_SVCLB_LOG_LEVEL)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: herald svclb [flags]")
		fmt.Fprintln(stderr, "\nForwards SRC_PORT to DEST_IPS:DEST_PORT; configured by the environment:")
		for _, v := range []string{svclb.EnvSrcPort, svclb.EnvSrcRanges, svclb.EnvDestProto, svclb.EnvDestPort, svclb.EnvDestIPs,
			svclb.EnvMode, svclb.EnvProbePort, svclb.EnvUDPIdleTimeout} {
			fmt.Fprintln(stderr, "  "+v)
		}
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return svclb.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "herald svclb: unexpected arguments: %q\n", fs.Args())
		return svclb.ExitUsage
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "herald svclb:", err)
		return svclb.ExitUsage
	}
	c, warnings, err := svclb.ParseEnv(os.Getenv)
	if err != nil {
		log.Error("bad environment", "error", err.Error())
		return svclb.ExitCode(err)
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := svclb.Run(ctx, c, svclb.Options{Logger: log}); err != nil {
		log.Error("svclb failed", "error", err.Error())
		return svclb.ExitCode(err)
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
