package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/explain"
)

func TestServiceName(t *testing.T) {
	for _, tc := range []struct {
		arg, want string
		ok        bool
	}{
		{"svc/web", "web", true},
		{"service/web", "web", true},
		{"services/web", "web", true},
		{"web", "web", true},
		{"deploy/web", "", false},
		{"svc/", "", false},
		{"svc/a/b", "", false},
	} {
		got, err := serviceName(tc.arg)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("serviceName(%q) = %q, %v; want %q, ok %v", tc.arg, got, err, tc.want, tc.ok)
		}
	}
}

// TestUsageErrors: mistakes are refused before any connection, with exit
// code 2 and a message saying what is wanted.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"explain"}, "want one Service"},
		{[]string{"explain", "pod/x"}, "only Services are explained"},
		{[]string{"-o", "table", "status"}, `-o "table": want wide, json or yaml`},
		{[]string{"status", "extra"}, "takes no argument"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.msg)
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "kubectl-herald ") {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
}

// TestWriteEscapesControls: -o json and -o yaml of a report whose texts
// (written by whoever may write the objects) hold ESC, DEL and C1 controls
// print none raw, and read back exact; yaml.Marshal alone refused DEL and
// C1 and printed nothing.
func TestWriteEscapesControls(t *testing.T) {
	rep := explain.ServiceReport{Service: "apps/web\u009b2J", Cause: "pool l2\x7f\x1b]8;;https://evil.example/\x07 is full"}
	for _, output := range []string{"json", "yaml"} {
		var out bytes.Buffer
		if err := write(&out, output, rep, nil); err != nil {
			t.Fatalf("-o %s: %v", output, err)
		}
		for _, r := range strings.ReplaceAll(out.String(), "\n", "") {
			if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
				t.Fatalf("-o %s prints %U raw:\n%q", output, r, out.String())
			}
		}
		var back explain.ServiceReport
		if err := yaml.UnmarshalStrict(out.Bytes(), &back); err != nil || back.Service != rep.Service || back.Cause != rep.Cause {
			t.Errorf("-o %s reads back as %+v (%v), want %+v:\n%s", output, back, err, rep, out.String())
		}
	}
}
