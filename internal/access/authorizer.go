package access

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Options configure an Authorizer.
type Options struct {
	// APIToken, if set, is the token of the caller TokenCallerName, which
	// has every permission.
	APIToken string
	// CallersFile is the path of the callers file; empty means none.
	CallersFile string
	// ClientCertificates says that the listener verifies client
	// certificates (mutual TLS). Without a callers file, every verified
	// client is then a caller with every permission.
	ClientCertificates bool
	// Lookup reads ${VAR} references in the callers file; default
	// os.LookupEnv.
	Lookup func(string) (string, bool)
}

// Credentials are what a request presented, as an edge extracted them.
type Credentials struct {
	// Token is the bearer token; empty when none was sent.
	Token string
	// Certificate is the client's certificate, verified by the TLS
	// handshake against the client CA; nil when none.
	Certificate *x509.Certificate
}

// Authorizer authenticates callers and checks their actions against the
// callers file. It is safe for concurrent use; Reload swaps the callers
// file while checks run.
type Authorizer struct {
	opts      Options
	tokenHash [sha256.Size]byte
	reloadMu  sync.Mutex
	current   atomic.Pointer[callers] // nil without a callers file
	rules     atomic.Pointer[Rules]   // nil: every call allowed
	asks      atomic.Pointer[ServerAsks]
	// reloaded is closed, and replaced, by each reload that takes effect.
	reloaded atomic.Pointer[chan struct{}]
}

// New returns an Authorizer. It reads the callers file, if any, and fails
// if the file is unusable.
func New(opts *Options) (*Authorizer, error) {
	a := &Authorizer{}
	if opts != nil {
		a.opts = *opts
	}
	if a.opts.Lookup == nil {
		a.opts.Lookup = os.LookupEnv
	}
	if a.opts.APIToken != "" {
		a.tokenHash = sha256.Sum256([]byte(a.opts.APIToken))
	}
	if a.opts.CallersFile != "" {
		ch := make(chan struct{})
		a.reloaded.Store(&ch)
	}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Enabled reports whether requests must present a credential: a token,
// a callers file or mutual TLS is configured.
func (a *Authorizer) Enabled() bool {
	return a.opts.APIToken != "" || a.opts.CallersFile != "" || a.opts.ClientCertificates
}

// Reload reads the callers file again. On an error the callers loaded
// before stay in force. Without a callers file it does nothing.
func (a *Authorizer) Reload() error {
	if a.opts.CallersFile == "" {
		return nil
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	c, err := loadCallers(a.opts.CallersFile, a.opts.Lookup)
	if err != nil {
		return err
	}
	if a.opts.APIToken != "" {
		// The API token decides first and may do everything: a caller
		// with the same token would have no permissions of its own.
		for _, t := range c.tokens {
			if t.hash == a.tokenHash {
				return fmt.Errorf("callers file %s: caller %q has the API token; give it a token of its own", a.opts.CallersFile, t.name)
			}
		}
	}
	a.current.Store(c)
	next := make(chan struct{})
	close(*a.reloaded.Swap(&next))
	return nil
}

// TokenVariable reports whether the callers file in force reads a
// caller's token from the environment variable name: a credential of
// mcpd's that no server it starts should inherit.
func (a *Authorizer) TokenVariable(name string) bool {
	c := a.current.Load()
	return c != nil && c.tokenVars[name]
}

// Watch calls gone, once, when a reload of the callers file leaves creds
// naming no caller, or another than caller; it returns then, or when ctx
// ends. A long-lived request (a stream) runs it in a goroutine of its own,
// so that a reload applies to it and not only to new requests. Without a
// callers file it returns at once.
func (a *Authorizer) Watch(ctx context.Context, caller Caller, creds Credentials, gone func()) {
	reloaded := a.Reloaded()
	if reloaded == nil {
		return
	}
	for {
		// reloaded is taken before the check, so a reload after the check
		// closes it. The first check covers a reload that came between the
		// request's authentication and this watch.
		if now, err := a.Authenticate(creds); err != nil || now.Name != caller.Name {
			gone()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-reloaded:
		}
		reloaded = a.Reloaded()
	}
}

// Reloaded returns a channel that is closed when the callers file is next
// reloaded with effect: an open stream then checks that its credentials
// still name its caller. Nil (never ready) without a callers file.
func (a *Authorizer) Reloaded() <-chan struct{} {
	if ch := a.reloaded.Load(); ch != nil {
		return *ch
	}
	return nil
}

// Authenticate returns the caller that creds identify. A bearer token, if
// sent, decides (a wrong token is refused even with a good certificate);
// otherwise the client certificate does. The error is ErrUnauthenticated
// and never quotes the credential.
func (a *Authorizer) Authenticate(creds Credentials) (Caller, error) {
	if !a.Enabled() {
		return Caller{Name: AnonymousCallerName, all: true}, nil
	}
	cs := a.current.Load()
	if creds.Token != "" {
		h := sha256.Sum256([]byte(creds.Token))
		if a.opts.APIToken != "" && subtle.ConstantTimeCompare(h[:], a.tokenHash[:]) == 1 {
			return Caller{Name: TokenCallerName, all: true}, nil
		}
		if cs != nil {
			name := ""
			for _, t := range cs.tokens { // every hash, so the time says nothing
				if subtle.ConstantTimeCompare(h[:], t.hash[:]) == 1 {
					name = t.name
				}
			}
			if name != "" {
				return Caller{Name: name}, nil
			}
		}
		return Caller{}, &authError{"invalid bearer token"}
	}
	if cert := creds.Certificate; cert != nil {
		if cs == nil {
			return Caller{Name: certificateCaller(cert), all: true}, nil
		}
		if name, ok := cs.byCertificate(cert); ok {
			return Caller{Name: name}, nil
		}
		return Caller{}, &authError{"client certificate " + quote(CertificateIdentity(cert)) + " names no caller"}
	}
	return Caller{}, &authError{"missing bearer token"}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// byCertificate finds the caller a certificate identifies: by SPIFFE ID
// (a URI SAN), then DNS SAN, then subject common name.
func (cs *callers) byCertificate(cert *x509.Certificate) (string, bool) {
	for _, u := range cert.URIs {
		if name, ok := cs.spiffe[u.String()]; ok {
			return name, true
		}
	}
	for _, d := range cert.DNSNames {
		if name, ok := cs.dnsName[d]; ok {
			return name, true
		}
	}
	if cert.Subject.CommonName != "" {
		if name, ok := cs.cn[cert.Subject.CommonName]; ok {
			return name, true
		}
	}
	return "", false
}

// certificateCaller names the caller of a client certificate when no
// callers file does: its identity, unless that is empty or one of the
// names mcpd gives its own callers, which would make the certificate's
// calls look like the API token's (or nobody's) in the audit trail; then
// the start of the certificate's SHA-256 fingerprint.
func certificateCaller(cert *x509.Certificate) string {
	switch id := CertificateIdentity(cert); id {
	case "", TokenCallerName, AnonymousCallerName:
		sum := sha256.Sum256(cert.Raw)
		return "certificate sha256:" + hex.EncodeToString(sum[:8])
	default:
		return id
	}
}

// CertificateIdentity names a client certificate: its SPIFFE ID if it has
// one, else its first DNS SAN, else its subject common name.
func CertificateIdentity(cert *x509.Certificate) string {
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" {
			return u.String()
		}
	}
	if len(cert.DNSNames) > 0 {
		return cert.DNSNames[0]
	}
	return cert.Subject.CommonName
}

// Authorize reports whether caller may perform act: nil, a *DeniedError
// (ErrPermissionDenied) naming the missing permission, or
// ErrUnauthenticated when the caller is no longer in the callers file. It
// is the one check of every edge.
//
// A tool call the caller may make then meets the tool rules (see
// [Rules]), whoever the caller is: a "deny" rule gives a
// *RuleDeniedError, an "ask" rule an *ApprovalRequiredError, upon which
// the edge asks an agent.
func (a *Authorizer) Authorize(caller Caller, act Action) error {
	if err := a.authorizeCaller(caller, act); err != nil {
		return err
	}
	if act.Verb == CallTool {
		return a.checkRules(act.Tool)
	}
	return nil
}

// authorizeCaller checks act against the caller's permissions.
func (a *Authorizer) authorizeCaller(caller Caller, act Action) error {
	if caller.all {
		return nil
	}
	var p *Permissions
	if cs := a.current.Load(); cs != nil {
		p = cs.byName[caller.Name]
	}
	if p == nil {
		return &authError{"caller " + quote(caller.Name) + " is no longer in the callers file"}
	}
	deny := func(perm string) error {
		return &DeniedError{Caller: caller.Name, Permission: perm, Target: act.target()}
	}
	switch {
	case act.Server == AllServers:
		if !p.Servers.MatchesEverything() {
			return deny("servers")
		}
	case act.Server != "":
		if !p.Servers.Match(act.Server) {
			return deny("servers")
		}
	}
	switch act.Verb {
	case ViewServer:
	case CallTool:
		if !p.Tools.Match(act.Tool) {
			return deny("tools")
		}
	case ReadResource:
		if !matchResource(p.Resources, act.Server, act.URI) {
			return deny("resources")
		}
	case GetPrompt:
		if !matchPair(p.Prompts, act.Server, act.Prompt) {
			return deny("prompts")
		}
	case AnswerRequests:
		if !slices.Contains(p.ServerRequests, act.RequestKind) {
			return deny("server_requests")
		}
	default: // ManageServers, and any verb this switch does not know
		if !p.Manage {
			return deny("manage")
		}
	}
	return nil
}

// Approved returns what a call of act meets once an agent approved it
// under an "ask": nil while the rules still let it through (an "ask" of
// theirs included), else the refusal of what came in force while the
// agent was asked (a reload's "deny" rule, a callers file that no longer
// lets the caller call the tool). An agent approves a call, not a rule:
// what the rules in force deny, no approval given for the old ones lets
// through.
func (a *Authorizer) Approved(caller Caller, act Action) error {
	err := a.Authorize(caller, act)
	if errors.Is(err, ErrApprovalRequired) {
		return nil
	}
	return err
}

// Allowed is Authorize as a filter: whether caller may perform act. A
// tool call that needs approval counts as allowed: lists show the tool.
func (a *Authorizer) Allowed(caller Caller, act Action) bool {
	if a.authorizeCaller(caller, act) != nil {
		return false
	}
	if act.Verb != CallTool {
		return true
	}
	// Only a deny hides a tool; an ask, the rules' or a server's, lists
	// it, so the servers' asks need not be looked up.
	eff, _ := a.rules.Load().Decide(act.Tool)
	return eff != Deny
}

// Permits reports whether caller's own permissions allow act, without the
// tool rules: nil, a *DeniedError or ErrUnauthenticated. It is for acting
// on what the caller already runs (stopping its poll of a tool), which no
// rule should hold up or refuse.
func (a *Authorizer) Permits(caller Caller, act Action) error {
	return a.authorizeCaller(caller, act)
}
