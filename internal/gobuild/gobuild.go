// Package gobuild builds the project's commands for tests with the flags the lab's images are built with
// (e2e/lab/lib/images.sh: CGO_ENABLED=0, -trimpath) and the Makefile's vet, staticcheck and non-race test runs use
// (NOCGO): one configuration, so that Go's build cache compiles each package once for all of them. A second
// configuration (cgo on, paths kept) compiled every dependency again: about 4 minutes of a cold CI run on 2 cores.
// Race-instrumented builds are a configuration of their own either way.
package gobuild

import (
	"context"
	"os"
	"os/exec"
)

// Command returns the go build command that writes pkgs to out (a file, or a directory ending in "/"), run from
// the caller's working directory.
func Command(ctx context.Context, out string, pkgs ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-trimpath", "-o", out}, pkgs...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
