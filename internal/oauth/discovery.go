package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// maxMetadataBytes bounds a metadata document.
const maxMetadataBytes = 1 << 20

// metadata is what discovery found for a server.
type metadata struct {
	// resource is the resource identifier as the Protected Resource
	// Metadata publishes it, sent as the resource parameter (RFC 8707).
	resource string
	// scopesSupported is the resource's scopes_supported.
	scopesSupported []string
	asm             *oauthex.AuthServerMeta
	// fallback: no resource metadata was found (every candidate a 4xx,
	// a 429 among them), and the server's origin was assumed.
	fallback bool
}

// discover finds the server's authorization server, as the MCP
// specification orders it: the resource_metadata URL of the challenge,
// else the path-based well-known URL, else the root one; then the
// authorization server metadata (RFC 8414 and OpenID discovery, issuer
// validated). A metadata document that exists but names another resource
// stops discovery: it must not lead to an authorization request. With no
// metadata at all, the server's origin is taken as its authorization
// server (the 2025-03-26 revision's fallback). hc are the server's
// clients.
func discover(ctx context.Context, hc *httpClients, serverURL string, challenges []oauthex.Challenge) (*metadata, error) {
	su, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	origin := *su
	origin.Path, origin.RawPath, origin.RawQuery, origin.Fragment = "", "", "", ""
	type candidate struct {
		metadataURL, resource string
		// offOrigin: named by the server's challenge, off its own origin.
		offOrigin bool
	}
	var candidates []candidate
	if u := challengeParam(challenges, "resource_metadata"); u != "" {
		candidates = append(candidates, candidate{u, serverURL, originOf(u) != originOf(serverURL)})
	}
	pathBased := origin
	pathBased.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(su.Path, "/")
	root := origin
	root.Path = "/.well-known/oauth-protected-resource"
	candidates = append(candidates, candidate{pathBased.String(), serverURL, false}, candidate{root.String(), origin.String(), false})

	for _, cand := range candidates {
		var prm *oauthex.ProtectedResourceMetadata
		var err error
		if cand.offOrigin {
			// A URL the server names elsewhere is fetched the SDK's
			// guarded way: no private, link-local (cloud metadata) or
			// reserved address, literal, resolved or redirected to
			// (SSRF). One that fails leaves the server's own well-known
			// URLs to try.
			prm, err = offOriginMetadata(ctx, hc.discovery(cand.metadataURL), cand.metadataURL, serverURL)
			if err != nil {
				continue
			}
		} else if prm, err = fetchResourceMetadata(ctx, hc.any, cand.metadataURL); err != nil {
			return nil, err
		}
		if prm == nil {
			continue
		}
		if !resourceMatches(prm.Resource, cand.resource, serverURL) {
			return nil, errorf(ErrAuthorizationFailed, "protected resource metadata names resource %q, not this server", prm.Resource)
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, errorf(ErrAuthorizationFailed, "protected resource metadata names no authorization server")
		}
		asm, err := authServerMetadata(ctx, hc.discovery(prm.AuthorizationServers[0]), prm.AuthorizationServers[0])
		if err != nil {
			return nil, err
		}
		return &metadata{resource: prm.Resource, scopesSupported: prm.ScopesSupported, asm: asm}, nil
	}
	asm, err := authServerMetadata(ctx, hc.discovery(origin.String()), origin.String())
	if err != nil {
		return nil, err
	}
	return &metadata{resource: serverURL, asm: asm, fallback: true}, nil
}

// resourceMatches accepts the resource a metadata document names when it
// is the identifier its well-known URL was built from, or the server URL.
func resourceMatches(got, want, serverURL string) bool {
	return got == want || got == serverURL
}

// fetchResourceMetadata returns the document at u, or nil when there is
// none (a 4xx answer).
func fetchResourceMetadata(ctx context.Context, c *http.Client, u string) (*oauthex.ProtectedResourceMetadata, error) {
	if err := httpsOrLoopback(u); err != nil {
		return nil, errorf(ErrAuthorizationFailed, "resource metadata URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, errorf(ErrAuthorizationFailed, "resource metadata URL: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := withSafeRedirects(c).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch protected resource metadata: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		// Not "no document": the server may have one, later.
		return nil, errorf(ErrUnreachable, "fetch protected resource metadata: HTTP %d; try again later", resp.StatusCode)
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errorf(ErrAuthorizationFailed, "fetch protected resource metadata: HTTP %d", resp.StatusCode)
	}
	var prm oauthex.ProtectedResourceMetadata
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(&prm); err != nil {
		return nil, errorf(ErrAuthorizationFailed, "protected resource metadata is not valid JSON")
	}
	for i, as := range prm.AuthorizationServers {
		if err := httpsOrLoopback(as); err != nil {
			return nil, errorf(ErrAuthorizationFailed, "authorization_servers[%d]: %v", i, err)
		}
	}
	return &prm, nil
}

// authServerMetadata fetches the metadata of the authorization server
// issuer (RFC 8414, OpenID discovery, path insertion and appending) and
// validates its issuer; with none published, it assumes the default
// endpoints of the 2025-03-26 revision.
func authServerMetadata(ctx context.Context, c *http.Client, issuer string) (*oauthex.AuthServerMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, c)
	if err != nil {
		return nil, errorf(ErrAuthorizationFailed, "authorization server metadata: %v", err)
	}
	if asm == nil {
		base := strings.TrimSuffix(issuer, "/")
		asm = &oauthex.AuthServerMeta{
			Issuer:                base,
			AuthorizationEndpoint: base + "/authorize",
			TokenEndpoint:         base + "/token",
			RegistrationEndpoint:  base + "/register",
		}
	}
	// The person's browser goes to the authorization endpoint, the code
	// and any refresh token to the token endpoint, and a registration may
	// come back with a client secret: none of them in clear.
	for _, e := range []struct{ name, url string }{
		{"authorization_endpoint", asm.AuthorizationEndpoint},
		{"token_endpoint", asm.TokenEndpoint},
		{"registration_endpoint", asm.RegistrationEndpoint},
	} {
		if e.url == "" {
			continue
		}
		if err := httpsOrLoopback(e.url); err != nil {
			return nil, errorf(ErrAuthorizationFailed, "authorization server metadata: %s: %v", e.name, err)
		}
	}
	return asm, nil
}

// withSafeRedirects is c following a redirect only to a URL the first
// one could have been (https, or plain http to loopback), and never from
// https down to http.
func withSafeRedirects(c *http.Client) *http.Client {
	safe := *c
	next := c.CheckRedirect
	safe.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := httpsOrLoopback(req.URL.String()); err != nil {
			return fmt.Errorf("redirected: %v", err)
		}
		if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
			return errors.New("redirected from https to http")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &safe
}

// httpsOrLoopback refuses plain HTTP except to a loopback host, so that
// tokens and codes never cross a network in clear.
func httpsOrLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a valid URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("plain http to a host that is not loopback")
	}
	return fmt.Errorf("scheme %q is not https", u.Scheme)
}

func isLoopbackHost(h string) bool {
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// challengeParam returns a parameter of the first Bearer or DPoP challenge
// that has it.
func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if c.Scheme != "bearer" && c.Scheme != "dpop" {
			continue
		}
		if v := c.Params[name]; v != "" {
			return v
		}
	}
	return ""
}

// unionScopes returns a's scopes followed by those of b not in a.
func unionScopes(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// offOriginMetadata fetches the protected resource metadata at u, which
// the server's challenge names off its own origin, through the SDK's
// discovery client: https (or loopback), no private or reserved address
// whether literal, resolved at dial time or reached by a redirect, a JSON
// answer, and a resource that is the server's URL.
func offOriginMetadata(ctx context.Context, c *http.Client, u, serverURL string) (*oauthex.ProtectedResourceMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return oauthex.GetProtectedResourceMetadata(ctx, u, serverURL, c)
}
