package oauth

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpd-project/mcpd/internal/config"
)

// Transport returns base wrapped for server (reached at serverURL, with
// its oauth block cfg, which may be nil): requests to the server's origin
// carry its token, and an answer that asks for authorization is
// authorized and the request sent once more. A request that needs a
// person's consent fails with an error wrapping ErrAuthorizationRequired.
// The server's own metadata, registration and token requests go through
// requests, or, when it is nil, Options.HTTPClient; the latest call for
// a server decides, for its requests from then on.
func (m *Manager) Transport(server, serverURL string, cfg *config.OAuth, base http.RoundTripper, requests *Transports) http.RoundTripper {
	return &transport{sa: m.server(server, serverURL, cfg, requests), base: base, origin: originOf(serverURL)}
}

type transport struct {
	sa     *serverAuth
	base   http.RoundTripper
	origin string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if urlOrigin(req.URL) != t.origin {
		return t.base.RoundTrip(req) // a token never leaves its server
	}
	ctx := req.Context()
	tok := t.sa.token()
	if tok != nil && tok.expiring(time.Now()) {
		// Renewed before it is sent: with its refresh token, or, for a
		// grant that needs no person, with the grant again.
		if err := t.sa.renewIfStale(ctx, tok); err == nil {
			tok = t.sa.token()
		}
	}
	body, err := replayable(req)
	if err != nil {
		return nil, err
	}
	resp, err := t.send(req, body, tok)
	if err != nil {
		return nil, err
	}
	// A DPoP nonce challenge from the resource server: send again with it.
	if resp.StatusCode == http.StatusUnauthorized && tok != nil && t.sa.dpopKey() != nil {
		if nonce := resp.Header.Get("DPoP-Nonce"); nonce != "" && strings.Contains(resp.Header.Get("WWW-Authenticate"), "use_dpop_nonce") {
			t.sa.dpopKey().setNonce(req.URL.String(), nonce)
			drain(resp)
			if resp, err = t.send(req, body, tok); err != nil {
				return nil, err
			}
		}
	}
	var stepUp bool
	switch resp.StatusCode {
	case http.StatusUnauthorized:
	case http.StatusForbidden:
		challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
		if challengeParam(challenges, "error") != "insufficient_scope" {
			return resp, nil
		}
		stepUp = true
		t.sa.refusedScope(requestKey(req, body))
	default:
		if n := resp.Header.Get("DPoP-Nonce"); n != "" && t.sa.dpopKey() != nil {
			t.sa.dpopKey().setNonce(req.URL.String(), n)
		}
		// Any accepted request, with a token or without one (a server
		// that let mcpd in after all), ends a refusal that blocked it.
		if resp.StatusCode < 300 {
			t.sa.accepted(func() string { return requestKey(req, body) })
		}
		return resp, nil
	}
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err := t.sa.authorize(ctx, challenges, tok, stepUp); err != nil {
		drain(resp)
		return nil, err
	}
	drain(resp)
	return t.send(req, body, t.sa.token())
}

// send sends a copy of req with the token (and a DPoP proof).
func (t *transport) send(req *http.Request, body []byte, tok *tokenRecord) (*http.Response, error) {
	r := req.Clone(req.Context())
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	if tok != nil {
		scheme := "Bearer"
		if dk := t.sa.dpopKey(); dk != nil && strings.EqualFold(tok.TokenType, "DPoP") {
			scheme = "DPoP"
			proof, err := dk.proof(r.Method, r.URL.String(), tok.AccessToken, dk.nonceFor(r.URL.String()))
			if err != nil {
				return nil, err
			}
			r.Header.Set("DPoP", proof)
		}
		r.Header.Set("Authorization", scheme+" "+tok.AccessToken)
	}
	return t.base.RoundTrip(r)
}

// requestKey names what a request asks for: its JSON-RPC method with the
// tool, prompt or resource it names, else its HTTP method and path.
func requestKey(req *http.Request, body []byte) string {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Method != "" {
		return msg.Method + " " + msg.Params.Name + msg.Params.URI
	}
	return req.Method + " " + req.URL.Path
}

// replayable reads a request body so that the request can be sent again;
// nil for a request without one.
func replayable(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	return data, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
