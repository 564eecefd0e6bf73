package gobuild

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// The command carries the lab's configuration: a build without them compiles every package a second time.
func TestCommandUsesTheLabConfiguration(t *testing.T) {
	cmd := Command(context.Background(), "out/", "./cmd/herald", "./cmd/herald-ccm")
	want := []string{"go", "build", "-trimpath", "-o", "out/", "./cmd/herald", "./cmd/herald-ccm"}
	if got := append([]string{"go"}, cmd.Args[1:]...); !slices.Equal(got, want) {
		t.Errorf("args %q, want %q", got, want)
	}
	if i := slices.Index(cmd.Env, "CGO_ENABLED=0"); i < 0 || slices.ContainsFunc(cmd.Env[i+1:], func(e string) bool { return strings.HasPrefix(e, "CGO_ENABLED=") }) {
		t.Errorf("environment does not end with CGO_ENABLED=0: %q", cmd.Env)
	}
}
