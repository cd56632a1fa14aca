package access

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/localfile"
)

// TLSFiles name the PEM files of a TLS listener.
type TLSFiles struct {
	// Cert is the server's certificate chain, leaf first.
	Cert string
	// Key is the server certificate's private key.
	Key string
	// ClientCA, if set, holds the CA certificates that client certificates
	// must chain to: it turns on mutual TLS (a client without a valid
	// certificate is refused during the handshake).
	ClientCA string
}

// TLSOptions configure NewServerTLS.
type TLSOptions struct {
	// Logger receives a line when the files change and when changed files
	// do not load; default: none.
	Logger zerolog.Logger
	// NextProtos are the ALPN protocols offered; default "h2" (gRPC). An
	// HTTP listener adds "http/1.1".
	NextProtos []string
}

// NewServerTLS returns the TLS configuration of a listener: TLS 1.2 or
// newer, the certificate and key from files, and with files.ClientCA
// mutual TLS. The files are read again at each new connection and parsed
// again when their content changed, so a rotated certificate (or CA) is
// served from the next connection on, without a restart. Changed files
// that do not load (a certificate written before its key) leave the
// previous ones in use until they do. Any listener (gRPC, HTTP, metrics)
// can use the result.
func NewServerTLS(files TLSFiles, opts *TLSOptions) (*tls.Config, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	s := &tlsSource{files: files, log: zerolog.Nop(), protos: []string{"h2"}}
	if opts != nil {
		s.log = opts.Logger
		if len(opts.NextProtos) > 0 {
			s.protos = opts.NextProtos
		}
	}
	raw, err := s.read()
	if err != nil {
		return nil, err
	}
	cfg, err := s.parse(raw)
	if err != nil {
		return nil, err
	}
	s.raw, s.cfg = raw, cfg
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         s.protos,
		GetConfigForClient: s.configForClient,
	}, nil
}

// tlsSource holds the last good configuration and the file contents it
// came from.
type tlsSource struct {
	files  TLSFiles
	log    zerolog.Logger
	protos []string

	mu      sync.Mutex
	raw     [3][]byte // cert, key, client CA
	cfg     *tls.Config
	lastBad [3][]byte // contents that failed to load, not to log twice
}

func (s *tlsSource) read() ([3][]byte, error) {
	var raw [3][]byte
	for i, path := range []string{s.files.Cert, s.files.Key, s.files.ClientCA} {
		if path == "" {
			continue
		}
		b, err := localfile.Read(path, localfile.CredentialLimit)
		if err != nil {
			return raw, fmt.Errorf("TLS: %w", err)
		}
		raw[i] = b
	}
	return raw, nil
}

func (s *tlsSource) parse(raw [3][]byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(raw[0], raw[1])
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", s.files.Cert, s.files.Key, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   s.protos,
	}
	if s.files.ClientCA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw[2]) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate in it", s.files.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func sameFiles(a, b [3][]byte) bool {
	return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) && bytes.Equal(a[2], b[2])
}

// configForClient is tls.Config.GetConfigForClient: the configuration of
// the files as they are now, or the last good one.
func (s *tlsSource) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	raw, readErr := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	if readErr != nil {
		// A file between a delete and a create during rotation: serve
		// what was loaded.
		return s.cfg, nil
	}
	if sameFiles(raw, s.raw) || sameFiles(raw, s.lastBad) {
		return s.cfg, nil
	}
	cfg, err := s.parse(raw)
	if err != nil {
		s.lastBad = raw
		s.log.Error().Err(err).Msg("TLS files changed but do not load; serving the previous certificate")
		return s.cfg, nil
	}
	s.raw, s.cfg, s.lastBad = raw, cfg, [3][]byte{}
	s.log.Info().Str("cert", s.files.Cert).Msg("TLS files changed; serving the new certificate")
	return cfg, nil
}
