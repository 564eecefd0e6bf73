package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
