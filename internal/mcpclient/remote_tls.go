package mcpclient

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"

	"github.com/mcpd-project/mcpd/internal/config"
)

// A server with a tls block (a private CA, a client certificate) needs
// TLS settings of its own, and net/http keeps them per http.Transport: such
// a server gets a copy of the base transport, with the block's
// configuration, that its sessions share with those of servers whose
// blocks name the same files (and with it their pooled
// connections). As the listener's certificates are (access.NewServerTLS),
// the block's files are read again for every new session and parsed
// again when their content changed: a rotated client certificate or CA
// is used from the next session on, without a restart of mcpd. The
// previous copy's idle connections are closed then; one still in use (a
// stream of an older session) closes by the idle timeout once it is idle.
//
// Unlike a listener, which keeps serving the previous certificate when
// changed files do not load, a session whose files do not load fails to
// connect with an error naming the field and the path: that is the
// server's last_error, and the next attempt reads the files again.
//
// The server's OAuth requests use the block too (oauth.Transports): those
// to its own origin go through the endpoint's transport, and those to
// other origins (its authorization server, often behind the same private
// CA, or a public one) through a second copy that trusts the block's CA
// as well as the roots the endpoint's would trust without it, and
// presents the client certificate to a server that asks (RFC 8705).

// tlsTransports are the transports of the tls blocks in use, by block:
// servers whose blocks name the same files share one (net/http keeps its
// connections per host all the same). A block no server uses any more
// keeps its entry (a few bytes, and connections that close once idle for
// the base's IdleConnTimeout); only config files set blocks, so they are
// few, and renaming or replacing servers adds none.
type tlsTransports struct {
	mu      sync.Mutex
	byBlock map[config.TLS]*tlsBlock
}

// tlsBlock is what one tls block is in use with: its transport and the
// file contents it was made from, under its own lock, so that a slow read
// of one block's files (a network mount) holds up no other block.
type tlsBlock struct {
	mu  sync.Mutex
	pem config.TLSPEM
	t   *http.Transport // nil until the files first loaded
	// elsewhere is t for origins other than the server's: t itself when
	// the block names no CA.
	elsewhere *http.Transport
}

// get returns the transports of block, reading the block's files: that
// of the server's endpoint, and that of the OAuth requests to other
// origins. base is RemoteOptions.HTTPClient's transport; nil stands for
// http.DefaultTransport.
func (ts *tlsTransports) get(block *config.TLS, base http.RoundTripper) (endpoint, elsewhere *http.Transport, err error) {
	if base == nil {
		base = http.DefaultTransport
	}
	bt, ok := base.(*http.Transport)
	if !ok {
		return nil, nil, errorf(ErrInvalidArgument, "a tls block needs mcpd's own HTTP transport, not a %T", base)
	}
	ts.mu.Lock()
	b := ts.byBlock[*block]
	if b == nil {
		b = &tlsBlock{}
		ts.byBlock[*block] = b
	}
	ts.mu.Unlock()
	// Read under the block's lock: two sessions connecting during a
	// rotation must not install the older contents after the newer.
	b.mu.Lock()
	defer b.mu.Unlock()
	pem, err := block.Read()
	if err != nil {
		return nil, nil, err
	}
	if b.t != nil && b.pem.Equal(pem) {
		return b.t, b.elsewhere, nil
	}
	cfg, err := block.ClientConfig(pem)
	if err != nil {
		return nil, nil, err
	}
	t := bt.Clone()
	if bt.TLSClientConfig != nil {
		// Keep what the base sets (a server name, say); what the block
		// names replaces the base's.
		c := bt.TLSClientConfig.Clone()
		if block.CA != "" {
			c.RootCAs = cfg.RootCAs
		}
		if block.Cert != "" {
			c.Certificates, c.GetClientCertificate = nil, cfg.GetClientCertificate
		}
		c.MinVersion = max(c.MinVersion, cfg.MinVersion)
		cfg = c
	}
	t.TLSClientConfig = cfg
	other := t
	if block.CA != "" {
		other = t.Clone()
		other.TLSClientConfig.RootCAs = rootsWith(bt.TLSClientConfig, pem.CA)
	}
	if b.t != nil {
		b.t.CloseIdleConnections()
		b.elsewhere.CloseIdleConnections()
	}
	b.pem, b.t, b.elsewhere = pem, t, other
	return t, other, nil
}

// rootsWith returns the roots that base trusts (the system's when it
// names none) with the certificates of caPEM added: what origins other
// than the server's are verified with. caPEM loaded already
// (ClientConfig).
func rootsWith(base *tls.Config, caPEM []byte) *x509.CertPool {
	var pool *x509.CertPool
	if base != nil && base.RootCAs != nil {
		pool = base.RootCAs.Clone()
	} else if sys, err := x509.SystemCertPool(); err == nil {
		pool = sys // a copy of its own
	} else {
		// No system roots to be had (none installed): only the CA is
		// trusted, as nothing else would be without the block.
		pool = x509.NewCertPool()
	}
	pool.AppendCertsFromPEM(caPEM)
	return pool
}
