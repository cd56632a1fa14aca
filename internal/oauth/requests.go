package oauth

import (
	"net/http"
	"net/url"
	"strings"
)

// Transports carry one server's metadata, registration and token
// requests in place of Options.HTTPClient's Transport: a server reached
// with TLS settings of its own (a private CA, a client certificate) has
// its OAuth requests made with them too, since its authorization server
// is often behind the same CA. The rest of Options.HTTPClient (Timeout,
// CheckRedirect, Jar) still applies.
//
// The SDK's discovery (authorization server metadata, and resource
// metadata off the server's origin) refuses private and reserved
// addresses when it dials, but only over an *http.Transport that leaves
// dialing to it: an *http.Transport here with a DialContext of its own is
// used without that DialContext for those fetches, so that the check
// stays.
type Transports struct {
	// Own carries the requests to the server's own origin (scheme, host
	// and port of its URL): its protected resource metadata, and those
	// of an authorization server at the same origin.
	Own http.RoundTripper
	// Other carries the requests to every other origin: the
	// authorization server, an identity provider.
	Other http.RoundTripper
}

// httpClients are the clients of one server's OAuth requests.
type httpClients struct {
	// any sends a request to any URL: with Transports, each request (a
	// redirect's too) goes through the transport of its own origin.
	any *http.Client
	// own and other are for the SDK's discovery fetches, which take a
	// client, not a request: the transport of the origin the fetch
	// starts at, as the SDK checks addresses over it.
	origin     string
	own, other *http.Client
}

// newHTTPClients returns the clients of the OAuth requests of the server
// at serverURL: base (the Manager's) without ts, else copies of base with
// ts's transports.
func newHTTPClients(base *http.Client, serverURL string, ts *Transports) *httpClients {
	if ts == nil {
		return &httpClients{any: base, own: base, other: base}
	}
	with := func(rt http.RoundTripper) *http.Client {
		c := *base
		c.Transport = rt
		return &c
	}
	fallback := base.Transport
	if fallback == nil {
		fallback = http.DefaultTransport
	}
	own, other := ts.Own, ts.Other
	if own == nil {
		own = fallback
	}
	if other == nil {
		other = fallback
	}
	origin := originOf(serverURL)
	return &httpClients{
		any:    with(&byOrigin{origin: origin, own: own, other: other}),
		origin: origin,
		own:    with(sdkDialed(own)),
		other:  with(sdkDialed(other)),
	}
}

// discovery returns the client for an SDK discovery fetch of u. A
// redirect it follows to another origin goes through the transport of
// u's.
func (h *httpClients) discovery(u string) *http.Client {
	if originOf(u) == h.origin {
		return h.own
	}
	return h.other
}

// sdkDialed is rt as the SDK's discovery checks addresses over: an
// *http.Transport without a DialContext of its own.
func sdkDialed(rt http.RoundTripper) http.RoundTripper {
	t, ok := rt.(*http.Transport)
	if !ok || t.DialContext == nil {
		return rt
	}
	c := t.Clone()
	c.DialContext = nil
	return c
}

// byOrigin sends the requests to origin through own, and all others
// through other.
type byOrigin struct {
	origin     string
	own, other http.RoundTripper
}

func (b *byOrigin) RoundTrip(req *http.Request) (*http.Response, error) {
	if urlOrigin(req.URL) == b.origin {
		return b.own.RoundTrip(req)
	}
	return b.other.RoundTrip(req)
}

func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return urlOrigin(u)
}

// urlOrigin is u's scheme and host (with its port, if it names one),
// lower case.
func urlOrigin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}
