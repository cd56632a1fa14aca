package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"

	"github.com/mcpd-project/mcpd/internal/localfile"
)

// tlsFlags are the TLS flags of mcpd's client commands (`mcpd health`,
// `mcpd mcp-stdio`): how they verify mcpd and present a client
// certificate. They have no MCPD_* fallback: in mcpd's own container
// MCPD_TLS_CERT and the like are the daemon's server files.
type tlsFlags struct {
	on                 bool
	caFile, serverName string
	certFile, keyFile  string
}

// register adds the flags to fs; target names the flag whose host the
// server name defaults to.
func (c *tlsFlags) register(fs *flag.FlagSet, target string) {
	fs.BoolVar(&c.on, "tls", false, "connect with TLS, trusting the system's CAs unless --tls-ca is set (implied by the other --tls-* flags)")
	fs.StringVar(&c.caFile, "tls-ca", "", "PEM CA certificates that mcpd's certificate must chain to")
	fs.StringVar(&c.serverName, "tls-server-name", "", "name mcpd's certificate must hold (default the "+target+" host, localhost for a Unix socket)")
	fs.StringVar(&c.certFile, "tls-client-cert", "", "PEM client certificate to present, for a mcpd with mutual TLS (needs --tls-client-key)")
	fs.StringVar(&c.keyFile, "tls-client-key", "", "PEM private key of --tls-client-cert")
}

// set reports whether any TLS flag was given.
func (c *tlsFlags) set() bool {
	return c.on || c.caFile != "" || c.serverName != "" || c.certFile != "" || c.keyFile != ""
}

// config loads the files the flags name into a client configuration.
func (c *tlsFlags) config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.serverName}
	if c.caFile != "" {
		pem, err := localfile.Read(c.caFile, localfile.CredentialLimit)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificates", c.caFile)
		}
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return nil, errors.New("--tls-client-cert and --tls-client-key go together")
	}
	if c.certFile != "" {
		cert, err := localfile.Read(c.certFile, localfile.CredentialLimit)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-cert: %w", err)
		}
		key, err := localfile.Read(c.keyFile, localfile.CredentialLimit)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-key: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-cert %s and --tls-client-key %s: %w", c.certFile, c.keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
