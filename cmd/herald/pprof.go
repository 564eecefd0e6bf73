package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofFlagHelp is the help of --pprof-bind-address.
const pprofFlagHelp = "serve Go's runtime profiles (/debug/pprof/: heap, CPU, goroutines) on this address, for sizing and " +
	"support; empty: off. They show internals and cost CPU while taken: bind to 127.0.0.1"

// servePprof serves the runtime profiles on addr until ctx ends. An address that cannot be bound is an error at
// start, not a silent absence.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "error", err)
		}
	}()
	log.Info("serving runtime profiles", "address", ln.Addr().String())
	return nil
}
