package oauth

import (
	"crypto/tls"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpd-project/mcpd/internal/config"
)

// countingRT sends requests on through http.DefaultTransport and records
// each one's host and path.
type countingRT struct {
	mu   sync.Mutex
	seen []string
}

func (c *countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.seen = append(c.seen, req.URL.Host+req.URL.Path)
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (c *countingRT) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

// TestServerTransports: a server given Transports has its OAuth requests
// sent through them, by origin: its protected resource metadata through
// Own, the requests to its authorization server (another origin) through
// Other, and none through the Manager's client; a server given none uses
// the Manager's client for all of them.
func TestServerTransports(t *testing.T) {
	for _, given := range []bool{true, false} {
		name := "none"
		if given {
			name = "given"
		}
		t.Run(name, func(t *testing.T) {
			rs, as := newTestAS(t), newTestAS(t)
			rs.mu.Lock()
			rs.movedTo = as.srv.URL // the resource's metadata names as
			rs.mu.Unlock()
			managers, own, other := &countingRT{}, &countingRT{}, &countingRT{}
			m, err := New(&Options{HTTPClient: &http.Client{Transport: managers}})
			if err != nil {
				t.Fatal(err)
			}
			var ts *Transports
			if given {
				ts = &Transports{Own: own, Other: other}
			}
			cfg := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecret: "s3cret"}
			c := &http.Client{Transport: m.Transport("srv", rs.srv.URL+"/mcp", cfg, http.DefaultTransport, ts)}
			if resp, err := post(t, c, rs); err == nil {
				resp.Body.Close()
			}
			if as.tokenCalls.Load() != 1 {
				t.Fatalf("%d token requests at the authorization server, want 1 (the test proves nothing otherwise)", as.tokenCalls.Load())
			}
			rsHost, asHost := strings.TrimPrefix(rs.srv.URL, "http://"), strings.TrimPrefix(as.srv.URL, "http://")
			wantOwn := []string{rsHost + "/.well-known/oauth-protected-resource/mcp"}
			wantOther := []string{asHost + "/.well-known/oauth-authorization-server", asHost + "/token"}
			want := map[*countingRT][]string{own: wantOwn, other: wantOther}
			if !given {
				want = map[*countingRT][]string{managers: append(wantOwn, wantOther...)}
			}
			for rt, what := range map[*countingRT]string{managers: "the Manager's client", own: "Own", other: "Other"} {
				if got := rt.requests(); !slices.Equal(got, want[rt]) {
					t.Errorf("%s carried %q, want %q", what, got, want[rt])
				}
			}
		})
	}
}

// TestDiscoveryTransports: the SDK's discovery fetches get the transport
// of the origin they start at, as an *http.Transport that leaves dialing
// to the SDK (which refuses private addresses only then) and keeps its
// TLS settings; the other requests' client keeps the Manager's timeout.
func TestDiscoveryTransports(t *testing.T) {
	dialer := &net.Dialer{}
	own := &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: &tls.Config{ServerName: "own"}}
	other := &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: &tls.Config{ServerName: "other"}}
	hc := newHTTPClients(&http.Client{Timeout: requestTimeout}, "https://MCP.example:8443/mcp", &Transports{Own: own, Other: other})
	for _, tc := range []struct {
		url, want string
	}{
		{"https://mcp.example:8443/.well-known/oauth-authorization-server", "own"},
		{"https://mcp.example/.well-known/oauth-authorization-server", "other"}, // another port
		{"http://mcp.example:8443/", "other"},                                   // another scheme
		{"https://as.example/", "other"},
	} {
		c := hc.discovery(tc.url)
		tr, ok := c.Transport.(*http.Transport)
		if !ok {
			t.Fatalf("%s: a %T, want an *http.Transport", tc.url, c.Transport)
		}
		if tr.DialContext != nil || tr.TLSClientConfig.ServerName != tc.want {
			t.Errorf("%s: DialContext set %v, the transport of %q; want none, that of %q", tc.url, tr.DialContext != nil, tr.TLSClientConfig.ServerName, tc.want)
		}
		if c.Timeout != requestTimeout {
			t.Errorf("%s: timeout %v, want %v", tc.url, c.Timeout, requestTimeout)
		}
	}
	if own.DialContext == nil || other.DialContext == nil {
		t.Error("the given transports were changed")
	}
	if hc.any.Timeout != requestTimeout {
		t.Errorf("timeout %v, want %v", hc.any.Timeout, requestTimeout)
	}
}
