package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteIfChanged(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	wrote, err := WriteIfChanged(p, []byte("one"), 0o600)
	if err != nil || !wrote {
		t.Fatalf("first write: wrote=%v err=%v", wrote, err)
	}
	st1, _ := os.Stat(p)
	if st1.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st1.Mode().Perm())
	}
	wrote, err = WriteIfChanged(p, []byte("one"), 0o600)
	if err != nil || wrote {
		t.Fatalf("same content: wrote=%v err=%v, want no write", wrote, err)
	}
	st2, _ := os.Stat(p)
	if !os.SameFile(st1, st2) {
		t.Fatal("same content: the file was replaced")
	}
	if wrote, err = WriteIfChanged(p, []byte("one"), 0o640); err != nil || wrote {
		t.Fatalf("same content, other mode: wrote=%v err=%v", wrote, err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode after chmod %v, want 0640", st.Mode().Perm())
	}
	if wrote, err = WriteIfChanged(p, []byte("two"), 0o640); err != nil || !wrote {
		t.Fatalf("new content: wrote=%v err=%v", wrote, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("content %q, want two", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only the file (no temporary left)", len(ents))
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
