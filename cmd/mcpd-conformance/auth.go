package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The authorization scenarios: the driver configures the server's oauth
// block from the scenario's context where the scenario gives the client
// credentials (a pre-registered client, a key, a workload token, an ID
// token), and otherwise leaves mcpd to discover and register by itself.
// It completes every consent the way an agent would: it receives the
// authorization request on HandleServerRequests, follows the URL like a
// browser, and lets the redirect reach mcpd's redirect listener.

// cimdURL is the Client ID Metadata Document the basic-cimd scenario's
// authorization server expects as the client id.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// authReadyTimeout bounds the wait for a server to leave
// AUTHORIZATION_REQUIRED after its consent.
const authReadyTimeout = 20 * time.Second

// oauthConfig builds the oauth block of scenario name from its context.
// dir holds files it writes (a private key).
func oauthConfig(name string, sc map[string]any, dir string) (*mcpdv1.OAuthConfig, error) {
	str := func(k string) string { v, _ := sc[k].(string); return v }
	switch name {
	case "auth/client-credentials-basic":
		return &mcpdv1.OAuthConfig{Grant: "client_credentials", ClientId: str("client_id"), ClientSecret: str("client_secret"), TokenEndpointAuthMethod: "client_secret_basic"}, nil
	case "auth/client-credentials-jwt":
		key := filepath.Join(dir, "client-key.pem")
		if err := os.WriteFile(key, []byte(str("private_key_pem")), 0o600); err != nil {
			return nil, fmt.Errorf("write client key: %w", err)
		}
		alg := str("signing_algorithm")
		return &mcpdv1.OAuthConfig{Grant: "client_credentials", ClientId: str("client_id"), PrivateKeyFile: key, SigningAlgorithm: alg, TokenEndpointAuthMethod: "private_key_jwt"}, nil
	case "auth/wif-jwt-bearer":
		return &mcpdv1.OAuthConfig{Grant: "jwt_bearer", ClientId: str("client_id"), Assertion: str("valid_jwt")}, nil
	case "auth/enterprise-managed-authorization":
		return &mcpdv1.OAuthConfig{
			Grant: "token_exchange", ClientId: str("client_id"), ClientSecret: str("client_secret"),
			Idp: &mcpdv1.OAuthIdentityProvider{
				Issuer: str("idp_issuer"), TokenEndpoint: str("idp_token_endpoint"),
				ClientId: str("idp_client_id"), IdToken: str("idp_id_token"),
			},
		}, nil
	case "auth/dpop", "auth/dpop-nonce":
		return &mcpdv1.OAuthConfig{Dpop: true}, nil
	case "auth/basic-cimd":
		return &mcpdv1.OAuthConfig{ClientMetadataUrl: cimdURL}, nil
	}
	if id := str("client_id"); id != "" && strings.HasPrefix(name, "auth/") {
		return &mcpdv1.OAuthConfig{ClientId: id, ClientSecret: str("client_secret")}, nil
	}
	return nil, nil
}

// consent plays the person at the browser: it opens the authorization URL
// and follows the redirects, the last of which reaches mcpd.
func consent(ctx context.Context, authURL string, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return fmt.Errorf("authorization URL: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("follow the authorization URL: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	fmt.Fprintf(log, "mcpd-conformance: consent ended at %s with HTTP %d\n", resp.Request.URL.Path, resp.StatusCode)
	return nil
}

// needsAuthorization reports whether err is a call refused because the
// server waits for authorization.
func needsAuthorization(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "AUTHORIZATION_REQUIRED" {
			return true
		}
	}
	return false
}

// awaitReady waits until the server is READY, as an agent does after a
// consent; a FAILED server ends the wait with its error.
func awaitReady(ctx context.Context, hub mcpdv1.MCPHubClient, server string) error {
	ctx, cancel := context.WithTimeout(ctx, authReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := hub.GetServer(ctx, &mcpdv1.GetServerRequest{Name: server})
		if err != nil {
			return fmt.Errorf("GetServer: %w", err)
		}
		switch srv := resp.GetServer(); srv.GetState() {
		case mcpdv1.ServerState_SERVER_STATE_READY:
			return nil
		case mcpdv1.ServerState_SERVER_STATE_FAILED, mcpdv1.ServerState_SERVER_STATE_STOPPED:
			return fmt.Errorf("server is %s: %s", srv.GetState(), srv.GetLastError())
		}
		select {
		case <-ctx.Done():
			return errors.New("server did not become READY after its authorization")
		case <-tick.C:
		}
	}
}
