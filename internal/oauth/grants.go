package oauth

import (
	"context"
	"net/url"
	"strings"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/localfile"
)

// Grant types of the token requests mcpd makes without a person.
const (
	grantTypeJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	grantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeIDToken       = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG         = "urn:ietf:params:oauth:token-type:id-jag"
)

// grantToken obtains a token with a grant that needs no person: client
// credentials (SEP-1046), a workload's JWT (RFC 7523, SEP-1933), or an
// enterprise identity provider's identity assertion (SEP-990). A refused
// request is reported, not retried with another grant.
func (sa *serverAuth) grantToken(ctx context.Context, grant string, meta *metadata, scopes []string) (*tokenRecord, error) {
	sa.mu.Lock()
	cfg := sa.cfg
	dk, err := sa.dpopKeyLocked()
	sa.mu.Unlock()
	if err != nil {
		return nil, err
	}
	asm := meta.asm
	form := url.Values{"resource": {meta.resource}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	client := sa.clientAuth(configuredClient(cfg, asm.TokenEndpointAuthMethodsSupported))
	switch grant {
	case config.GrantClientCredentials:
		form.Set("grant_type", "client_credentials")
	case config.GrantJWTBearer:
		assertion, err := secretOrFile(cfg.Assertion, cfg.AssertionFile, "assertionFile")
		if err != nil {
			return nil, err
		}
		form.Set("grant_type", grantTypeJWTBearer)
		form.Set("assertion", assertion)
	case config.GrantTokenExchange:
		idjag, err := sa.identityAssertion(ctx, cfg.IdP, asm.Issuer, meta.resource, scopes)
		if err != nil {
			return nil, err
		}
		form.Set("grant_type", grantTypeJWTBearer)
		form.Set("assertion", idjag)
	default:
		return nil, errorf(ErrAuthorizationFailed, "grant %q needs a person", grant)
	}
	t, err := tokenRequest(ctx, sa.httpClients().any, asm.TokenEndpoint, form, client, asm.Issuer, dk)
	if err != nil {
		return nil, err
	}
	if t.Scopes == nil {
		t.Scopes = scopes
	}
	return t, nil
}

// identityAssertion exchanges the user's ID token at the identity
// provider for an identity assertion grant (ID-JAG) for the server's
// authorization server (RFC 8693 token exchange, SEP-990).
func (sa *serverAuth) identityAssertion(ctx context.Context, idp *config.IdP, audience, resource string, scopes []string) (string, error) {
	idToken, err := secretOrFile(idp.IDToken, idp.IDTokenFile, "idp.idTokenFile")
	if err != nil {
		return "", err
	}
	endpoint := idp.TokenEndpoint
	if endpoint == "" {
		asm, err := authServerMetadata(ctx, sa.httpClients().discovery(idp.Issuer), idp.Issuer)
		if err != nil {
			return "", err
		}
		endpoint = asm.TokenEndpoint
	}
	form := url.Values{
		"grant_type":           {grantTypeTokenExchange},
		"requested_token_type": {tokenTypeIDJAG},
		"subject_token":        {idToken},
		"subject_token_type":   {tokenTypeIDToken},
		"audience":             {audience},
		"resource":             {resource},
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	ca := clientAuth{id: idp.ClientID, secret: idp.ClientSecret, method: config.AuthMethodNone}
	if idp.ClientSecret != "" {
		ca.method = config.AuthMethodClientSecretPost
	}
	t, err := tokenRequest(ctx, sa.httpClients().any, endpoint, form, ca, idp.Issuer, nil)
	if err != nil {
		return "", errorf(ErrAuthorizationFailed, "identity provider token exchange: %v", err)
	}
	return t.AccessToken, nil
}

// configuredClient is the client of the config, authenticated the way the
// config says, else by private_key_jwt when it has a key, else the way
// the server supports.
func configuredClient(cfg *config.OAuth, supported []string) *clientRecord {
	if cfg == nil || cfg.ClientID == "" {
		return nil
	}
	method := cfg.AuthMethod
	switch {
	case method != "":
	case cfg.PrivateKeyFile != "":
		method = config.AuthMethodPrivateKeyJWT
	default:
		method = chooseAuthMethod(supported, cfg.ClientSecret != "")
	}
	return &clientRecord{ID: cfg.ClientID, Secret: cfg.ClientSecret, AuthMethod: method, How: "preregistered"}
}

// secretOrFile returns an inline value, or else the contents of a file
// (read each time, so that a rotated token is used).
func secretOrFile(inline, file, field string) (string, error) {
	if inline != "" {
		return inline, nil
	}
	data, err := localfile.Read(file, localfile.CredentialLimit)
	if err != nil {
		return "", errorf(ErrAuthorizationFailed, "read %s: %v", field, errWithoutPath(err))
	}
	return strings.TrimSpace(string(data)), nil
}
