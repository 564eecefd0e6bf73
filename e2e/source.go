package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// modulePath is the main module's path, as its go.mod names it.
const modulePath = "github.com/herald-lb/herald"

// SourceFile is the absolute path of rel (slash-separated, relative to the repository's root), e.g.
// "e2e/lab/lab". A test binary built with -trimpath (the Makefile's NOCGO) carries no absolute source paths
// (runtime.Caller names "github.com/herald-lb/herald/e2e/source.go"), so then the root is found by walking up from
// the working directory (go test runs a test in its package's directory) to the go.mod that declares the module.
func SourceFile(rel string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", rel, err)
	}
	return locate(rel, file, wd)
}

// locate is SourceFile for this file's compiled-in path (callerFile) and a working directory.
func locate(rel, callerFile, wd string) (string, error) {
	if filepath.IsAbs(callerFile) {
		return filepath.Join(filepath.Dir(filepath.Dir(callerFile)), filepath.FromSlash(rel)), nil
	}
	for d := wd; ; d = filepath.Dir(d) {
		if declaresModule(filepath.Join(d, "go.mod")) {
			return filepath.Join(d, filepath.FromSlash(rel)), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("locate %s: no go.mod of %s in %s or above it", rel, modulePath, wd)
		}
	}
}

// declaresModule reports whether the go.mod file exists and declares modulePath.
func declaresModule(gomod string) bool {
	raw, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == modulePath
		}
	}
	return false
}
