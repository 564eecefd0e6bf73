package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseCapBnd(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         []string // checked: present
		missing      []string // checked: absent
		null         bool
	}{
		{name: "all but CAP_SYS_RESOURCE", status: "Name:\tx\nCapBnd:\t000001fffeffffff\n",
			want: []string{"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_TIME", "CAP_CHECKPOINT_RESTORE"}, missing: []string{"CAP_SYS_RESOURCE"}},
		{name: "everything", status: "CapBnd:\t000001ffffffffff", want: []string{"CAP_SYS_RESOURCE", "CAP_BPF"}},
		{name: "only CAP_CHOWN", status: "CapBnd:\t0000000000000001", want: []string{"CAP_CHOWN"}, missing: []string{"CAP_KILL"}},
		{name: "no CapBnd line", status: "Name:\tx\n", null: true},
		{name: "garbage", status: "CapBnd:\tzz\n", null: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseCapBnd(tc.status)
			if tc.null {
				if got != nil {
					t.Fatalf("got %v, want nil", got)
				}
				return
			}
			for _, c := range tc.want {
				if !got[c] {
					t.Errorf("%s missing", c)
				}
			}
			for _, c := range tc.missing {
				if got[c] {
					t.Errorf("%s present", c)
				}
			}
		})
	}
}

func TestSubcommandAndFlags(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		cmd, bundle   string
		process       string
		wantRestFirst string
	}{
		{args: []string{"--root", "/run/x", "--log", "/l", "--log-format", "json", "create", "--bundle", "/b", "id"}, cmd: "create", bundle: "/b"},
		{args: []string{"--systemd-cgroup", "create", "-b", "/b2", "--pid-file", "p", "id"}, cmd: "create", bundle: "/b2"},
		{args: []string{"run", "--bundle=/b3", "id"}, cmd: "run", bundle: "/b3"},
		{args: []string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, cmd: "exec", process: "/tmp/p.json"},
		{args: []string{"exec", "-p", "/tmp/q.json", "id"}, cmd: "exec", process: "/tmp/q.json"},
		{args: []string{"--root", "/r", "state", "id"}, cmd: "state"},
		{args: []string{"--version"}, cmd: ""},
	} {
		cmd, rest := subcommand(tc.args)
		if cmd != tc.cmd {
			t.Errorf("%v: command %q, want %q", tc.args, cmd, tc.cmd)
		}
		if b := flagValue(rest, "bundle", "b"); b != tc.bundle {
			t.Errorf("%v: bundle %q, want %q", tc.args, b, tc.bundle)
		}
		if p := flagValue(rest, "process", "p"); p != tc.process {
			t.Errorf("%v: process %q, want %q", tc.args, p, tc.process)
		}
	}
}

func TestFilterRewritesSpecs(t *testing.T) {
	have := map[string]bool{"CAP_CHOWN": true, "CAP_NET_ADMIN": true}
	all := []any{"CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_NET_ADMIN", "CAP_FUTURE_THING"}
	kept := []any{"CAP_CHOWN", "CAP_NET_ADMIN", "CAP_FUTURE_THING"}
	caps := func(l []any) map[string]any {
		return map[string]any{"bounding": l, "effective": l, "permitted": l}
	}
	dir := t.TempDir()
	write := func(path string, doc map[string]any) {
		b, _ := json.Marshal(doc)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) map[string]any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	for _, tc := range []struct {
		name  string
		args  func(path string) []string
		file  string
		doc   map[string]any
		proc  func(doc map[string]any) map[string]any
		write bool
		want  []any
	}{
		{name: "create", file: "config.json", args: func(p string) []string {
			return []string{"--root", "/r", "create", "--bundle", filepath.Dir(p), "id"}
		}, doc: map[string]any{"ociVersion": "1.0.2", "process": map[string]any{"capabilities": caps(all)}},
			proc: func(d map[string]any) map[string]any { return d["process"].(map[string]any) }, want: kept},
		{name: "exec", file: "process.json", args: func(p string) []string {
			return []string{"exec", "--process", p, "id"}
		}, doc: map[string]any{"args": []any{"sh"}, "capabilities": caps(all)},
			proc: func(d map[string]any) map[string]any { return d }, want: kept},
		{name: "other command untouched", file: "config.json", args: func(p string) []string {
			return []string{"delete", "id"}
		}, doc: map[string]any{"process": map[string]any{"capabilities": caps(all)}},
			proc: func(d map[string]any) map[string]any { return d["process"].(map[string]any) }, want: all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := filepath.Join(dir, tc.name)
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(sub, tc.file)
			write(path, tc.doc)
			if err := filter(tc.args(path), have); err != nil {
				t.Fatal(err)
			}
			got := tc.proc(read(path))["capabilities"].(map[string]any)
			for _, set := range []string{"bounding", "effective", "permitted"} {
				if !reflect.DeepEqual(got[set], tc.want) {
					t.Errorf("%s: %v, want %v", set, got[set], tc.want)
				}
			}
		})
	}
	// Nothing known about the host: nothing changes, not even a missing file is an error.
	if err := filter([]string{"create", "--bundle", "/nonexistent"}, nil); err != nil {
		t.Errorf("nil bounding set: %v", err)
	}
}
