package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/rls"
)

// rlsOptions are serve's flags of Envoy's rate-limit service.
type rlsOptions struct {
	listen  string // --rls-listen
	config  string // --rls-config
	tlsCert string // --rls-tls-cert (serve_tls.go reads it)
	tlsKey  string // --rls-tls-key
}

// rlsServing is Envoy's rate-limit service while serve runs it.
type rlsServing struct {
	ln     net.Listener
	g      *grpc.Server
	svc    *rls.Service
	served chan error // nil without --rls-listen: never ready
}

func (c *serveCommand) rlsFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.rls.listen, "rls-listen", c.env("SHARDCOUNTER_RLS_LISTEN", ""),
		"also serve Envoy's gRPC rate-limit service (envoy.service.ratelimit.v3) on `ADDR`, such as 127.0.0.1:8081; needs --rls-config (env SHARDCOUNTER_RLS_LISTEN; docs/LIMITS.md)")
	fs.StringVar(&c.rls.config, "rls-config", c.env("SHARDCOUNTER_RLS_CONFIG", ""),
		"the rate limits of --rls-listen, from `PATH`: envoyproxy/ratelimit's YAML, a file or a directory of *.yaml, reread on SIGHUP (env SHARDCOUNTER_RLS_CONFIG)")
	fs.StringVar(&c.rls.tlsCert, "rls-tls-cert", "", "speak TLS on --rls-listen with the certificate chain in `PATH` (PEM; needs --rls-tls-key; reread on SIGHUP); with --tls-client-ca its clients must present a certificate those CAs signed")
	fs.StringVar(&c.rls.tlsKey, "rls-tls-key", "", "the private key of --rls-tls-cert, in `PATH` (PEM)")
}

// checkRLS refuses one of --rls-listen and --rls-config without the
// other, and one of --rls-tls-cert and --rls-tls-key without the other or
// without --rls-listen.
func (c *serveCommand) checkRLS() error {
	switch {
	case (c.rls.listen == "") != (c.rls.config == ""):
		return usagef("--rls-listen and --rls-config go together: give both, or neither")
	case (c.rls.tlsCert == "") != (c.rls.tlsKey == ""):
		return usagef("--rls-tls-cert and --rls-tls-key go together: give both, or neither for a plaintext rate-limit port")
	case c.rls.tlsCert != "" && c.rls.listen == "":
		return usagef("--rls-tls-cert needs --rls-listen: it is the rate-limit port's certificate")
	}
	return nil
}

// startRLS, with --rls-listen, reads --rls-config, defines its limits on
// the engine and serves the rate-limit service. On an error it closes the
// listeners listenBoth opened, as nothing serves them yet.
func (c *serveCommand) startRLS(ctx context.Context, sv *serving) (err error) {
	if c.rls.listen == "" {
		return nil
	}
	defer func() {
		if err != nil {
			sv.ln.Close()
			if sv.respLn != nil {
				sv.respLn.Close()
			}
		}
	}()
	cfg, err := rls.Load(c.rls.config)
	if err != nil {
		return fmt.Errorf("--rls-config: %v", err)
	}
	sv.rls.svc = rls.New(sv.eng)
	if err := sv.rls.svc.SetConfig(ctx, cfg); err != nil {
		return fmt.Errorf("--rls-config: %v", err)
	}
	if err := probeTakes(ctx, sv, cfg); err != nil {
		return err
	}
	if sv.rls.ln, err = net.Listen("tcp", c.rls.listen); err != nil {
		return fmt.Errorf("cannot listen on %s: %v: choose another --rls-listen address", c.rls.listen, err)
	}
	var opts []grpc.ServerOption
	if c.rls.tlsCert != "" {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sv.tls.tlsConfig(&sv.tls.rlsCert))))
	}
	sv.rls.g = grpc.NewServer(opts...)
	sv.rls.svc.Register(sv.rls.g)
	sv.rls.served = make(chan error, 1)
	go func() { sv.rls.served <- sv.rls.g.Serve(sv.rls.ln) }()
	sv.log.Info("serving Envoy's rate-limit service", "addr", sv.rls.ln.Addr().String(), "config", c.rls.config, "rules", len(cfg.Rules()),
		"tls", c.rls.tlsCert != "", "client_certs", c.rls.tlsCert != "" && c.tlsClientCA != "")
	if c.rls.tlsCert == "" || c.tlsClientCA == "" { // client certificates keep others out
		warnUnprotected(sv, "Envoy's rate-limit service (which has no authentication) listens", sv.rls.ln)
	}
	return nil
}

// reloadRLS rereads --rls-config on SIGHUP; a file that cannot be read or
// parsed is logged and the previous configuration stays in force.
func (c *serveCommand) reloadRLS(ctx context.Context, sv *serving) {
	if sv.rls.svc == nil {
		return
	}
	cfg, err := rls.Load(c.rls.config)
	if err == nil {
		err = sv.rls.svc.SetConfig(ctx, cfg)
	}
	if err != nil {
		sv.log.Error("SIGHUP: keeping the previous --rls-config", "error", err)
		return
	}
	sv.log.Info("SIGHUP: --rls-config reloaded", "config", c.rls.config, "rules", len(cfg.Rules()))
}

// stopRLS lets calls in flight finish, within shutdownTimeout, before the
// engine commits and closes.
func (sv *serving) stopRLS() {
	if sv.rls.g == nil {
		return
	}
	done := make(chan struct{})
	go func() { sv.rls.g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownTimeout):
		sv.rls.g.Stop()
	}
}

// probeTakes peeks at one key of the first rule that keeps a limit, so
// that a store that does not decide takes (docs/LIMITS.md, "Stores")
// is refused at start rather than at Envoy's first call.
func probeTakes(ctx context.Context, sv *serving, cfg *rls.Config) error {
	for _, r := range cfg.Rules() {
		if r.Limit == "" {
			continue
		}
		if _, err := sv.eng.Peek(ctx, r.Limit, "-", 1); shardcounter.IsLimitsUnsupported(err) {
			return fmt.Errorf("--rls-listen: %s", shardcounter.ErrorMessage(err))
		}
		return nil
	}
	return nil
}
