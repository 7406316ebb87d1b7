package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
)

// This file holds serve's TLS on the Redis port (--resp-tls-cert,
// --resp-tls-key) and the client certificates of both ports
// (--tls-client-ca), each reread on SIGHUP.

// tlsFlags registers the flags of this file.
func (c *serveCommand) tlsFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.respTLSCert, "resp-tls-cert", "", "speak TLS on --resp-listen with the certificate chain in `PATH` (PEM; needs --resp-tls-key; reread on SIGHUP); TLS connections are served a goroutine each, not by the event loop")
	fs.StringVar(&c.respTLSKey, "resp-tls-key", "", "the private key of --resp-tls-cert, in `PATH` (PEM)")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "require client certificates signed by the CAs in `PATH` (PEM) on the TLS ports, HTTPS and RESP; a certificate's subject CN names its user (reread on SIGHUP)")
}

// checkTLS checks that the TLS flags go together.
func (c *serveCommand) checkTLS() error {
	switch {
	case (c.respTLSCert == "") != (c.respTLSKey == ""):
		return usagef("--resp-tls-cert and --resp-tls-key go together: give both, or neither for a plain Redis port")
	case c.respTLSCert != "" && c.respListen == "":
		return usagef("--resp-tls-cert needs --resp-listen: it is the Redis port's certificate")
	case c.tlsClientCA != "" && c.tlsCert == "" && c.respTLSCert == "":
		return usagef("--tls-client-ca needs --tls-cert or --resp-tls-cert: client certificates come over TLS")
	}
	return nil
}

// tlsState is what the TLS ports serve with, replaced on SIGHUP.
type tlsState struct {
	respCert atomic.Pointer[tls.Certificate]
	clientCA atomic.Pointer[x509.CertPool]
}

// loadTLS reads --resp-tls-cert and --tls-client-ca, when given.
func (c *serveCommand) loadTLS(st *tlsState) error {
	if c.respTLSCert != "" {
		kp, err := tls.LoadX509KeyPair(c.respTLSCert, c.respTLSKey)
		if err != nil {
			return fmt.Errorf("cannot load --resp-tls-cert %s and --resp-tls-key %s: %v: give PEM files of a certificate chain and its private key", c.respTLSCert, c.respTLSKey, err)
		}
		st.respCert.Store(&kp)
	}
	if c.tlsClientCA != "" {
		b, err := os.ReadFile(c.tlsClientCA)
		if err != nil {
			return fmt.Errorf("cannot read --tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("--tls-client-ca %s holds no PEM certificate: give the CA certificates that sign your clients'", c.tlsClientCA)
		}
		st.clientCA.Store(pool)
	}
	return nil
}

// reloadTLS rereads the files of loadTLS on SIGHUP; a file that cannot be
// used is logged and the previous ones stay in force.
func (c *serveCommand) reloadTLS(log *slog.Logger, st *tlsState) {
	if c.respTLSCert == "" && c.tlsClientCA == "" {
		return
	}
	if err := c.loadTLS(st); err != nil {
		log.Error("SIGHUP: keeping the previous Redis-port certificate and client CAs", "error", err)
		return
	}
	log.Info("SIGHUP: Redis-port certificate and client CAs reloaded")
}

// tlsConfig returns the configuration of a TLS port whose certificate
// cert gives, requiring and verifying client certificates when there are
// client CAs. Each handshake takes the current certificate and CAs.
func (st *tlsState) tlsConfig(cert *atomic.Pointer[tls.Certificate]) *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil },
	}
	if st.clientCA.Load() == nil {
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{*cert.Load()},
			NextProtos:   base.NextProtos, // as http.Server set them
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    st.clientCA.Load(),
		}, nil
	}
	return base
}
