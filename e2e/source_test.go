package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocate(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(root, "repo")
	write(filepath.Join(repo, "go.mod"), "// Herald\nmodule github.com/herald-lb/herald\n\ngo 1.26\n")
	// A nested module of its own (as e2e/lab/build/k8s is) is walked past.
	write(filepath.Join(repo, "e2e", "lab", "build", "k8s", "go.mod"), "module herald-lab-k8s\n")
	other := filepath.Join(root, "other")
	write(filepath.Join(other, "go.mod"), "module example.com/other\n")

	for _, tc := range []struct {
		name, caller, wd string
		want             string // "" when an error is expected
	}{
		{"paths kept: the compiled-in path wins", "/src/herald/e2e/source.go", other, "/src/herald/e2e/lab/lab"},
		{"trimmed, from the package directory", "github.com/herald-lb/herald/e2e/source.go", filepath.Join(repo, "e2e"),
			filepath.Join(repo, "e2e", "lab", "lab")},
		{"trimmed, from the root", "github.com/herald-lb/herald/e2e/source.go", repo, filepath.Join(repo, "e2e", "lab", "lab")},
		{"trimmed, past a nested module", "github.com/herald-lb/herald/e2e/source.go",
			filepath.Join(repo, "e2e", "lab", "build", "k8s"), filepath.Join(repo, "e2e", "lab", "lab")},
		{"trimmed, outside the module", "github.com/herald-lb/herald/e2e/source.go", other, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := locate("e2e/lab/lab", tc.caller, tc.wd)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "no go.mod of github.com/herald-lb/herald") {
					t.Fatalf("locate = %q, %v; want the missing go.mod named", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("locate = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestSourceFileFindsTheLabScript checks the real thing in whichever configuration this test was built (make test
// keeps paths, make e2e trims them).
func TestSourceFileFindsTheLabScript(t *testing.T) {
	path, err := SourceFile("e2e/lab/lab")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v (mode %v); want the executable lab script", path, err, fi)
	}
}
