package svclb

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

func TestProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var ready atomic.Bool
	stop, err := serveProbe(port, &ready)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) int {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz before forwarding: %d, want 503", c)
	}
	if c := get("/healthz"); c != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", c)
	}
	ready.Store(true)
	if c := get("/readyz"); c != http.StatusOK {
		t.Errorf("/readyz while forwarding: %d, want 200", c)
	}
	ready.Store(false)
	if c := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("/readyz while stopping: %d, want 503", c)
	}
	if _, err := serveProbe(port, &ready); err == nil {
		t.Error("a second probe endpoint on the same port: no error")
	}
}
