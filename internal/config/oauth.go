package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
)

// OAuth grants: how mcpd obtains tokens for a server.
const (
	// GrantAuthorizationCode asks a person for consent in a browser (the
	// default).
	GrantAuthorizationCode = "authorization_code"
	// GrantClientCredentials authenticates mcpd itself as the client.
	GrantClientCredentials = "client_credentials"
	// GrantJWTBearer presents a JWT issued to the workload, such as a
	// Kubernetes projected service-account token (RFC 7523, SEP-1933).
	GrantJWTBearer = "jwt_bearer"
	// GrantTokenExchange exchanges an enterprise identity provider's ID
	// token for an identity assertion grant, then presents that to the
	// server's authorization server (SEP-990).
	GrantTokenExchange = "token_exchange"
)

// Token endpoint authentication methods (RFC 7591).
const (
	AuthMethodNone              = "none"
	AuthMethodClientSecretBasic = "client_secret_basic"
	AuthMethodClientSecretPost  = "client_secret_post"
	AuthMethodPrivateKeyJWT     = "private_key_jwt"
)

// OAuth is the "oauth" block of an HTTP or SSE server: how mcpd obtains
// tokens for it. Every field is optional; with none set, a server that
// answers 401 is authorized with the authorization code grant, a client
// registered dynamically, and a person's consent.
type OAuth struct {
	// ClientID is a client registered beforehand with the server's
	// authorization server.
	ClientID string `json:"clientId,omitempty"`
	// ClientSecret is the secret of ClientID. A secret: never logged or
	// returned.
	ClientSecret string `json:"clientSecret,omitempty"`
	// ClientMetadataURL is an HTTPS URL of a Client ID Metadata Document
	// that names mcpd's client, used where the authorization server
	// supports it.
	ClientMetadataURL string `json:"clientMetadataUrl,omitempty"`
	// Scopes replaces the scopes mcpd would choose (from the challenge,
	// else scopes_supported).
	Scopes []string `json:"scopes,omitempty"`
	// AuthMethod is the token endpoint authentication method; empty
	// chooses from what the authorization server supports.
	AuthMethod string `json:"tokenEndpointAuthMethod,omitempty"`
	// PrivateKeyFile is a PEM file holding the key that signs client
	// assertions (private_key_jwt). Re-read on every use.
	PrivateKeyFile string `json:"privateKeyFile,omitempty"`
	// SigningAlgorithm signs client assertions: ES256 (default), ES384,
	// ES512, RS256, RS384, RS512, PS256, PS384, PS512 or EdDSA.
	SigningAlgorithm string `json:"signingAlgorithm,omitempty"`
	// Grant is how tokens are obtained: authorization_code (default),
	// client_credentials, jwt_bearer or token_exchange.
	Grant string `json:"grant,omitempty"`
	// Assertion is the JWT presented by the jwt_bearer grant. A secret.
	Assertion string `json:"assertion,omitempty"`
	// AssertionFile is a file holding the JWT for the jwt_bearer grant,
	// re-read on every token request so that a rotated token is used.
	AssertionFile string `json:"assertionFile,omitempty"`
	// IdP describes the enterprise identity provider of token_exchange.
	IdP *IdP `json:"idp,omitempty"`
	// DPoP binds tokens to a key mcpd holds (RFC 9449, SEP-1932).
	DPoP bool `json:"dpop,omitempty"`
}

// IdP is the enterprise identity provider that the token_exchange grant
// asks for an identity assertion grant (ID-JAG).
type IdP struct {
	// TokenEndpoint is the identity provider's token endpoint; empty
	// means the one its Issuer's metadata names.
	TokenEndpoint string `json:"tokenEndpoint,omitempty"`
	// Issuer is the identity provider's issuer URL.
	Issuer string `json:"issuer,omitempty"`
	// ClientID and ClientSecret authenticate mcpd to the identity
	// provider. ClientSecret is a secret.
	ClientID     string `json:"clientId,omitempty"`
	ClientSecret string `json:"clientSecret,omitempty"`
	// IDToken is the user's ID token (a secret); IDTokenFile a file
	// holding it, re-read on every use.
	IDToken     string `json:"idToken,omitempty"`
	IDTokenFile string `json:"idTokenFile,omitempty"`
}

// Grants lists the values OAuth.Grant accepts.
func Grants() []string {
	return []string{GrantAuthorizationCode, GrantClientCredentials, GrantJWTBearer, GrantTokenExchange}
}

// AuthMethods lists the values OAuth.AuthMethod accepts.
func AuthMethods() []string {
	return []string{AuthMethodNone, AuthMethodClientSecretBasic, AuthMethodClientSecretPost, AuthMethodPrivateKeyJWT}
}

// SigningAlgorithms lists the values OAuth.SigningAlgorithm accepts.
func SigningAlgorithms() []string {
	return []string{"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
}

// EffectiveGrant is Grant, or authorization_code when it is empty.
func (o *OAuth) EffectiveGrant() string {
	if o == nil || o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

// problems lists what is wrong with the block, never quoting a secret.
func (o *OAuth) problems() []string {
	var ps []string
	add := func(format string, args ...any) { ps = append(ps, "oauth: "+fmt.Sprintf(format, args...)) }
	if o.Grant != "" && !slices.Contains(Grants(), o.Grant) {
		add("grant %q is not one of %s", o.Grant, strings.Join(Grants(), ", "))
	}
	if o.AuthMethod != "" && !slices.Contains(AuthMethods(), o.AuthMethod) {
		add("tokenEndpointAuthMethod %q is not one of %s", o.AuthMethod, strings.Join(AuthMethods(), ", "))
	}
	if o.SigningAlgorithm != "" && !slices.Contains(SigningAlgorithms(), o.SigningAlgorithm) {
		add("signingAlgorithm %q is not one of %s", o.SigningAlgorithm, strings.Join(SigningAlgorithms(), ", "))
	}
	if o.AuthMethod == AuthMethodPrivateKeyJWT && o.PrivateKeyFile == "" {
		add("tokenEndpointAuthMethod private_key_jwt needs privateKeyFile")
	}
	if o.PrivateKeyFile != "" {
		if _, err := os.Stat(o.PrivateKeyFile); err != nil {
			add("privateKeyFile %s cannot be read: %v", o.PrivateKeyFile, errWithoutPath(err))
		}
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		add("clientSecret needs clientId")
	}
	if o.ClientMetadataURL != "" {
		if u, err := url.Parse(o.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			add("clientMetadataUrl must be an https URL with a path")
		}
	}
	switch o.EffectiveGrant() {
	case GrantClientCredentials:
		if o.ClientID == "" {
			add("grant client_credentials needs clientId")
		}
		if o.ClientSecret == "" && o.PrivateKeyFile == "" {
			add("grant client_credentials needs clientSecret or privateKeyFile")
		}
	case GrantJWTBearer:
		if o.Assertion == "" && o.AssertionFile == "" {
			add("grant jwt_bearer needs assertion or assertionFile")
		}
		if o.AssertionFile != "" {
			if _, err := os.Stat(o.AssertionFile); err != nil {
				add("assertionFile %s cannot be read: %v", o.AssertionFile, errWithoutPath(err))
			}
		}
	case GrantTokenExchange:
		switch {
		case o.IdP == nil:
			add("grant token_exchange needs an idp block")
		case o.IdP.TokenEndpoint == "" && o.IdP.Issuer == "":
			add("idp needs tokenEndpoint or issuer")
		case o.IdP.IDToken == "" && o.IdP.IDTokenFile == "":
			add("idp needs idToken or idTokenFile")
		}
		if o.ClientID == "" {
			add("grant token_exchange needs clientId")
		}
	}
	return ps
}

// errWithoutPath is err's reason without the path os errors repeat.
func errWithoutPath(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Clone returns a deep copy.
func (o *OAuth) Clone() *OAuth {
	if o == nil {
		return nil
	}
	c := *o
	c.Scopes = slices.Clone(o.Scopes)
	if o.IdP != nil {
		idp := *o.IdP
		c.IdP = &idp
	}
	return &c
}

// Equal reports whether two blocks are the same.
func (o *OAuth) Equal(p *OAuth) bool {
	return reflect.DeepEqual(o, p)
}
