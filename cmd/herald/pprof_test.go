package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The profiles are served where asked and nowhere by default; an address taken is an error, not silence.
func TestServePprof(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := servePprof(ctx, "", log); err != nil {
		t.Fatalf("empty address: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := servePprof(ctx, addr, log); err == nil || !strings.Contains(err.Error(), "--pprof-bind-address") {
		t.Fatalf("address in use: got %v, want an error naming the flag", err)
	}
	ln.Close()
	if err := servePprof(ctx, addr, log); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.80q", resp.StatusCode, body)
	}
}
