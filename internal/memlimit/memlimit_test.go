package memlimit

import (
	"io/fs"
	"math"
	"runtime/debug"
	"testing"
)

func TestSet(t *testing.T) {
	defer debug.SetMemoryLimit(math.MaxInt64)
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if s, ok := m[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name    string
		env     string
		files   map[string]string
		want    int64
		wantErr bool
	}{
		{"cgroup v2 limit", "", map[string]string{"/sys/fs/cgroup/memory.max": "268435456\n"}, 241591910, false},
		{"cgroup v2 without a limit", "", map[string]string{"/sys/fs/cgroup/memory.max": "max\n"}, 0, false},
		{"cgroup v1 limit", "", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912"}, 483183820, false},
		{"cgroup v1 without a limit", "", map[string]string{"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712"}, 0, false},
		{"no cgroup files", "", nil, 0, false},
		{"GOMEMLIMIT set: left alone", "200MiB", map[string]string{"/sys/fs/cgroup/memory.max": "268435456"}, 0, false},
		{"garbage", "", map[string]string{"/sys/fs/cgroup/memory.max": "lots"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			getenv := noEnv
			if tc.env != "" {
				getenv = func(k string) string {
					if k == "GOMEMLIMIT" {
						return tc.env
					}
					return ""
				}
			}
			got, err := Set(getenv, files(tc.files))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("Set = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
			applied := debug.SetMemoryLimit(-1)
			if tc.want > 0 && applied != tc.want {
				t.Fatalf("runtime limit %d, want %d", applied, tc.want)
			}
			if tc.want == 0 && applied != math.MaxInt64 {
				t.Fatalf("runtime limit changed to %d", applied)
			}
		})
	}
}
