package repocheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFuzzTargetsListed: every `func FuzzX(f *testing.F)` in the repository is in the Makefile's FUZZ_TARGETS (so
// `make fuzz` runs it) and has a committed corpus in its package's testdata/fuzz/FuzzX (so `make test` replays
// what fuzzing found), and every listed target exists.
func TestFuzzTargetsListed(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\nFUZZ_TARGETS :=(.*?)\n[^ \t]`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no FUZZ_TARGETS in the Makefile")
	}
	listed := map[string]bool{}
	for _, f := range strings.Fields(strings.ReplaceAll(string(m[1]), "\\", " ")) {
		listed[f] = true
	}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	found := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, name := range decl.FindAllSubmatch(src, -1) {
			target := "./" + filepath.ToSlash(rel) + ":" + string(name[1])
			found[target] = true
			if !listed[target] {
				t.Errorf("%s (%s) is not in the Makefile's FUZZ_TARGETS", target, path)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), "testdata", "fuzz", string(name[1]))); err != nil {
				t.Errorf("%s has no committed corpus: %v", target, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for target := range listed {
		if !found[target] {
			t.Errorf("FUZZ_TARGETS lists %s, which no test file declares", target)
		}
	}
}
