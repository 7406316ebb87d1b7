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
// --resp-tls-key) and on Envoy's rate-limit port (--rls-tls-cert,
// --rls-tls-key, registered with the rate-limit flags), and the client
// certificates of every TLS port (--tls-client-ca), each reread on SIGHUP.

// tlsFlags registers the flags of this file.
func (c *serveCommand) tlsFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.respTLSCert, "resp-tls-cert", "", "speak TLS on --resp-listen with the certificate chain in `PATH` (PEM; needs --resp-tls-key; reread on SIGHUP); TLS connections are served a goroutine each, not by the event loop")
	fs.StringVar(&c.respTLSKey, "resp-tls-key", "", "the private key of --resp-tls-cert, in `PATH` (PEM)")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "require client certificates signed by the CAs in `PATH` (PEM) on the TLS ports, HTTPS, RESP and the rate-limit port; a certificate's subject CN names its user on HTTPS and RESP (reread on SIGHUP)")
}

// checkTLS checks that the TLS flags go together.
func (c *serveCommand) checkTLS() error {
	switch {
	case (c.respTLSCert == "") != (c.respTLSKey == ""):
		return usagef("--resp-tls-cert and --resp-tls-key go together: give both, or neither for a plain Redis port")
	case c.respTLSCert != "" && c.respListen == "":
		return usagef("--resp-tls-cert needs --resp-listen: it is the Redis port's certificate")
	case c.tlsClientCA != "" && c.tlsCert == "" && c.respTLSCert == "" && c.rls.tlsCert == "":
		return usagef("--tls-client-ca needs --tls-cert, --resp-tls-cert or --rls-tls-cert: client certificates come over TLS")
	}
	return nil
}

// tlsState is what the TLS ports serve with, replaced on SIGHUP.
type tlsState struct {
	respCert atomic.Pointer[tls.Certificate]
	rlsCert  atomic.Pointer[tls.Certificate]
	clientCA atomic.Pointer[x509.CertPool]
}

// loadTLS reads --resp-tls-cert, --rls-tls-cert and --tls-client-ca, when
// given. It stores nothing unless every file loads, so that a reload
// that fails keeps all the previous ones.
func (c *serveCommand) loadTLS(st *tlsState) error {
	var resp, rls *tls.Certificate
	var err error
	if resp, err = loadKeyPair("--resp-tls-cert", c.respTLSCert, "--resp-tls-key", c.respTLSKey); err != nil {
		return err
	}
	if rls, err = loadKeyPair("--rls-tls-cert", c.rls.tlsCert, "--rls-tls-key", c.rls.tlsKey); err != nil {
		return err
	}
	var pool *x509.CertPool
	if c.tlsClientCA != "" {
		b, err := os.ReadFile(c.tlsClientCA)
		if err != nil {
			return fmt.Errorf("cannot read --tls-client-ca: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("--tls-client-ca %s holds no PEM certificate: give the CA certificates that sign your clients'", c.tlsClientCA)
		}
	}
	if resp != nil {
		st.respCert.Store(resp)
	}
	if rls != nil {
		st.rlsCert.Store(rls)
	}
	if pool != nil {
		st.clientCA.Store(pool)
	}
	return nil
}

// loadKeyPair reads the certificate chain and key of flags certFlag and
// keyFlag, or returns nil when cert is "".
func loadKeyPair(certFlag, cert, keyFlag, key string) (*tls.Certificate, error) {
	if cert == "" {
		return nil, nil
	}
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s %s and %s %s: %v: give PEM files of a certificate chain and its private key", certFlag, cert, keyFlag, key, err)
	}
	return &kp, nil
}

// reloadTLS rereads the files of loadTLS on SIGHUP; a file that cannot be
// used is logged and the previous ones stay in force.
func (c *serveCommand) reloadTLS(log *slog.Logger, st *tlsState) {
	if c.respTLSCert == "" && c.rls.tlsCert == "" && c.tlsClientCA == "" {
		return
	}
	if err := c.loadTLS(st); err != nil {
		log.Error("SIGHUP: keeping the previous Redis-port and rate-limit-port certificates and client CAs", "error", err)
		return
	}
	log.Info("SIGHUP: Redis-port and rate-limit-port certificates and client CAs reloaded",
		"resp_cert", c.respTLSCert, "rls_cert", c.rls.tlsCert, "client_ca", c.tlsClientCA)
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
