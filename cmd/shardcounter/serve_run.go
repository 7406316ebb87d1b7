package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/acl"
	"github.com/shardcounter/shardcounter/collection"
	"github.com/shardcounter/shardcounter/dsn"
	"github.com/shardcounter/shardcounter/engine"
	shttp "github.com/shardcounter/shardcounter/http"
	"github.com/shardcounter/shardcounter/metrics"
	"github.com/shardcounter/shardcounter/redis"
	respserver "github.com/shardcounter/shardcounter/resp/server"
	"github.com/shardcounter/shardcounter/tracing"
	"github.com/shardcounter/shardcounter/transfer"
)

// serving is what run sets up, phase by phase, and takes down in reverse.
type serving struct {
	log   *slog.Logger
	users *acl.Users // nil: no --users-file, no --auth-token-file
	cert  atomic.Pointer[tls.Certificate]
	tls   tlsState // the Redis port's certificate, the client CAs
	cfg   engine.Config
	m     *metrics.Metrics
	store shardcounter.CounterStore
	colls shardcounter.CollectionService
	eng   *engine.Engine
	trace *tracing.Tracing // nil: no OTEL_* variable asks for traces

	ln, respLn net.Listener
	api        *shttp.Server
	srv        *http.Server
	rs         *respserver.Server
	served     chan error // the HTTP server's end
	respServed chan error // the RESP server's end, when not a shutdown
	rls        rlsServing // --rls-listen (serve_rls.go)
}

// run serves until ctx ends: it reads the credentials, opens the store and
// the engine over it, listens, serves HTTP (and RESP), reloads the
// credentials on SIGHUP, and on the end of ctx lets requests in flight
// finish, commits what is queued and closes the store.
func (c *serveCommand) run(ctx context.Context, args []string) (err error) {
	sv := &serving{}
	if sv.cfg, err = c.check(args); err != nil {
		return err
	}
	if sv.log, err = newLogger(c.m.Stderr, c.logFormat, c.logLevel); err != nil {
		return err
	}
	if err := c.credentials(sv); err != nil {
		return err
	}
	// SIGHUP rereads the token file and the certificate, so that they
	// can be rotated without a restart. Without Notify, SIGHUP would end
	// the process, so it is caught from the start, before anyone can
	// know our address; the loop below handles it once we serve.
	if err := sv.startTracing(ctx); err != nil {
		return err
	}
	defer sv.stopTracing() // after the engine's Close: its last commits' spans
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	if err := c.openStore(ctx, sv); err != nil {
		return err
	}
	defer func() {
		if cerr := sv.store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing store: %w", cerr)
		}
	}()
	if err := sv.startEngine(); err != nil {
		return err
	}
	defer func() {
		// Commit queued writes before the store closes; a fresh context,
		// since ctx is already cancelled when a signal brought us here.
		cctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if cerr := sv.eng.Close(cctx); cerr != nil && err == nil {
			err = fmt.Errorf("committing queued writes: %s", errorText(cerr))
		}
	}()
	if err := c.listenBoth(sv); err != nil {
		return err
	}
	if err := c.startPprof(sv); err != nil {
		return err
	}
	if err := c.startRLS(ctx, sv); err != nil {
		return err
	}
	defer sv.stopRLS() // before the engine's Close
	c.serveBoth(sv)
	for {
		select {
		case err := <-sv.served:
			return fmt.Errorf("serving HTTP: %w", err)
		case err := <-sv.respServed:
			return fmt.Errorf("serving the Redis protocol: %w", err)
		case err := <-sv.rls.served:
			return fmt.Errorf("serving Envoy's rate-limit service: %w", err)
		case <-hup:
			c.reload(sv.log, sv.api, sv.rs, &sv.cert)
			c.reloadTLS(sv.log, &sv.tls)
			c.reloadRLS(ctx, sv)
		case <-ctx.Done():
			return sv.shutdown() // the deferred engine.Close and store.Close run next
		}
	}
}

// startTracing sets up OpenTelemetry traces when the OTEL_* variables ask
// for them (package tracing), for the engine and both front ends.
func (sv *serving) startTracing(ctx context.Context) (err error) {
	if sv.trace, err = tracing.FromEnv(ctx, Version()); err != nil {
		return fmt.Errorf("cannot set up OpenTelemetry traces from the OTEL_* variables: %v", err)
	}
	if sv.trace != nil {
		sv.cfg.Tracer = sv.trace.Tracer
		sv.log.Info("tracing: exporting spans as the OTEL_* variables configure")
	}
	return nil
}

// stopTracing exports the spans not yet exported.
func (sv *serving) stopTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := sv.trace.Shutdown(ctx); err != nil {
		sv.log.Warn("exporting the last spans failed", "error", err)
	}
}

// credentials reads the token file and the certificate, if given.
func (c *serveCommand) credentials(sv *serving) (err error) {
	if sv.users, err = c.readUsers(); err != nil {
		return err
	}
	if err := c.loadTLS(&sv.tls); err != nil {
		return err
	}
	if c.tlsCert != "" {
		return c.loadCert(&sv.cert)
	}
	return nil
}

// openStore opens the store (the default one when --store is not given)
// and its collections, and sets the engine's configuration from it.
func (c *serveCommand) openStore(ctx context.Context, sv *serving) (err error) {
	c.chooseStore(sv.log)
	sv.m = metrics.New()
	redis.SetClientLog(sv.log) // the Redis client's own lines, at debug level
	if sv.store, err = dsn.Open(ctx, c.store); err != nil {
		return fmt.Errorf("cannot open store %s: %s", dsn.Redact(c.store), errorText(err))
	}
	// Collections share the counters' store; a store kind without them
	// serves counters alone, and the collection routes answer not_found.
	if cs, cerr := dsn.Collections(sv.store); cerr != nil {
		sv.log.Warn("collections are not available on this store", "store", dsn.Redact(c.store), "error", errorText(cerr))
	} else {
		sv.colls = collection.New(cs, collection.Config{})
	}
	sv.cfg.OnFlush, sv.cfg.Logger = sv.m.ObserveFlush, sv.log
	sv.cfg.RankingRescan = c.rescanRankings()
	switch sp, ok := shardcounter.As[shardcounter.ShardPacer](sv.store); {
	case c.shardInterval != nil:
		sv.cfg.ShardWriteInterval = *c.shardInterval
	case ok:
		sv.cfg.ShardWriteInterval = sp.ShardWriteInterval()
	}
	if ds, ok := shardcounter.As[metrics.DocumentStore](sv.store); ok {
		sv.m.RegisterDocumentStore(ds)
	}
	return nil
}

// startEngine starts the engine over the store, wrapped for /metrics
// (metrics.Store): the engine puts package expiry over that, so its
// store is expiry over metrics over the store dsn.Open returned. Each
// wrapper unwraps (shardcounter.Unwrapper), and the engine finds what the
// store does beyond CounterStore beneath them with shardcounter.As
// (TestCapabilitiesThroughWrappers).
func (sv *serving) startEngine() (err error) {
	if sv.eng, err = engine.New(sv.m.Store(sv.store), sv.cfg); err != nil {
		return err
	}
	sv.m.RegisterEngine(sv.eng.Stats())
	return nil
}

// listenBoth opens the HTTP listener and, with --resp-listen, the RESP one.
func (c *serveCommand) listenBoth(sv *serving) (err error) {
	if sv.ln, err = net.Listen("tcp", c.listen); err != nil {
		return fmt.Errorf("cannot listen on %s: %v: choose another --listen address", c.listen, err)
	}
	if c.respListen != "" {
		if sv.respLn, err = net.Listen("tcp", c.respListen); err != nil {
			sv.ln.Close()
			return fmt.Errorf("cannot listen on %s: %v: choose another --resp-listen address", c.respListen, err)
		}
	}
	return nil
}

// serveBoth starts serving HTTP and, with a RESP listener, the Redis
// protocol, each on a goroutine that reports its end.
func (c *serveCommand) serveBoth(sv *serving) {
	guard := authGuard(sv.log)
	sv.api = shttp.NewServer(sv.eng, shttp.ServerOptions{
		MaxBodyBytes:   c.maxBody,
		MaxBodyTotal:   c.maxBodyTotal,
		AuthGuard:      guard,
		Logger:         sv.log,
		Users:          sv.users,
		Audit:          &acl.Audit{Logger: sv.log},
		Metrics:        sv.m,
		MaxConcurrent:  c.maxConcurrent,
		RequestTimeout: c.reqTimeout,
		BodyTimeout:    c.bodyTimeout,
		AsyncWrites:    sv.cfg.Durability == engine.Async,
		Collections:    sv.colls,
		Admin:          transfer.Admin(sv.store, sv.log), // export, import, verify, backup
		Tracer:         sv.cfg.Tracer,
		Propagator:     sv.propagator(),
	})
	sv.srv = c.httpServer(sv)
	sv.served = make(chan error, 1)
	go func() {
		if c.tlsCert != "" {
			sv.served <- sv.srv.ServeTLS(sv.ln, "", "")
			return
		}
		sv.served <- sv.srv.Serve(sv.ln)
	}()
	sv.log.Info("shardcounter serving", "addr", sv.ln.Addr().String(), "store", dsn.Redact(c.store),
		"durability", c.durability, "shard_write_interval", sv.cfg.ShardWriteInterval, "auth", sv.users != nil, "tls", c.tlsCert != "", "version", Version())
	warnUnprotected(sv, "listening", sv.ln)
	sv.respServed = make(chan error, 1)
	if sv.respLn == nil {
		return
	}
	var respTLS *tls.Config
	if c.respTLSCert != "" {
		respTLS = sv.tls.tlsConfig(&sv.tls.respCert)
	}
	sv.rs = c.respServer(sv.eng, sv.cfg, sv.users, guard, sv.log, respTLS)
	sv.m.RegisterRESP(sv.rs)
	go func() {
		if err := sv.rs.Serve(sv.respLn); !errors.Is(err, respserver.ErrServerClosed) {
			sv.respServed <- err
		}
	}()
	sv.log.Info("serving the Redis protocol", "addr", sv.respLn.Addr().String(), "tls", c.respTLSCert != "")
	warnUnprotected(sv, "the Redis protocol listens", sv.respLn)
}

// propagator is the tracing's propagator, or nil without tracing.
func (sv *serving) propagator() propagation.TextMapPropagator {
	if sv.trace == nil {
		return nil
	}
	return sv.trace.Propagator
}

// warnUnprotected warns of a listener open beyond this machine without
// tokens.
func warnUnprotected(sv *serving, what string, ln net.Listener) {
	if sv.users == nil && !loopback(ln.Addr()) {
		sv.log.Warn("UNPROTECTED: "+what+" on a non-loopback address without --auth-token-file: "+
			"anyone who can reach this address can read and change every counter; "+
			"give --auth-token-file, or listen on 127.0.0.1", "addr", ln.Addr().String())
	}
}

// httpServer is the http.Server of the API, the admin endpoints and the
// dashboard, with the timeouts that bound a slow client.
func (c *serveCommand) httpServer(sv *serving) *http.Server {
	srv := &http.Server{
		Handler:           sv.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // a body of --max-body bytes arrives well within it
		// The handler answers within --request-timeout; the rest is for
		// a slow reader, who cannot hold a connection past it.
		WriteTimeout: c.reqTimeout + shttp.ReplySlack,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(sv.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(sv.api.EndWatches) // streams never finish by themselves
	if c.tlsCert != "" {
		srv.TLSConfig = sv.tls.tlsConfig(&sv.cert)
	}
	return srv
}

// shutdown stops both servers accepting and lets what is in flight finish,
// together, within shutdownTimeout; the engine commits what is queued
// after both (run's deferred Close).
func (sv *serving) shutdown() error {
	sv.log.Info("shutting down: finishing requests in flight and committing queued writes")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	respDone := make(chan struct{})
	go func() {
		defer close(respDone)
		if sv.rs != nil {
			if err := sv.rs.Shutdown(sctx); err != nil {
				sv.log.Warn("RESP commands still in flight at the shutdown deadline were cut off", "error", err)
			}
		}
	}()
	if err := sv.srv.Shutdown(sctx); err != nil {
		sv.log.Warn("requests still in flight at the shutdown deadline were cut off", "error", err)
	}
	<-respDone
	if err := <-sv.served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving HTTP: %w", err)
	}
	return nil
}
