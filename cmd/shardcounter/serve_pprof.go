package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofFlags adds --pprof-listen: Go's profiles of the serving process
// (CPU, allocations, goroutines) on an address of their own, so that a
// profile is taken under the real load (scripts/bench-doors.sh PROFILE=DIR)
// and never on the API's port, where they would need the API's
// credentials to keep them from anyone who can reach it.
func (c *serveCommand) pprofFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.pprofListen, "pprof-listen", "",
		"serve Go's profiles (/debug/pprof/) on `ADDR`, such as 127.0.0.1:6060, without authentication: bind it to loopback; off unless given")
}

// startPprof serves the profiles on --pprof-listen until the process
// ends; nothing without it.
func (c *serveCommand) startPprof(sv *serving) error {
	if c.pprofListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", c.pprofListen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v: choose another --pprof-listen address", c.pprofListen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with the process
	sv.log.Info("serving profiles", "addr", ln.Addr().String())
	return nil
}
