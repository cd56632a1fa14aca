package oauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/localfile"
)

// maxTokenResponseBytes bounds a token endpoint's answer.
const maxTokenResponseBytes = 1 << 20

// clientAuth is how mcpd authenticates to a token endpoint.
type clientAuth struct {
	id     string
	secret string
	method string // a config.AuthMethod* value
	// keyFile and alg sign private_key_jwt assertions.
	keyFile string
	alg     string
}

// apply adds the client's credentials to a token request.
func (a clientAuth) apply(req *http.Request, form url.Values, audience string) error {
	switch a.method {
	case config.AuthMethodClientSecretBasic:
		// RFC 6749 section 2.3.1: both parts form-encoded first.
		req.SetBasicAuth(url.QueryEscape(a.id), url.QueryEscape(a.secret))
	case config.AuthMethodClientSecretPost:
		form.Set("client_id", a.id)
		form.Set("client_secret", a.secret)
	case config.AuthMethodPrivateKeyJWT:
		assertion, err := a.assertion(audience)
		if err != nil {
			return err
		}
		form.Set("client_id", a.id)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	default: // none: a public client names itself
		if a.id != "" {
			form.Set("client_id", a.id)
		}
	}
	return nil
}

// assertion signs a client authentication JWT (RFC 7523 section 2.2).
func (a clientAuth) assertion(audience string) (string, error) {
	pem, err := localfile.Read(a.keyFile, localfile.CredentialLimit)
	if err != nil {
		return "", errorf(ErrAuthorizationFailed, "read privateKeyFile: %v", errWithoutPath(err))
	}
	alg := a.alg
	if alg == "" {
		alg = "ES256"
	}
	key, err := parsePrivateKey(pem, alg)
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Issuer:    a.id,
		Subject:   a.id,
		Audience:  jwt.ClaimStrings{audience},
		ID:        rand.Text(),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}
	return jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims).SignedString(key)
}

// parsePrivateKey reads a PEM private key for alg.
func parsePrivateKey(pem []byte, alg string) (any, error) {
	var (
		key any
		err error
	)
	switch {
	case strings.HasPrefix(alg, "ES"):
		key, err = jwt.ParseECPrivateKeyFromPEM(pem)
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		key, err = jwt.ParseRSAPrivateKeyFromPEM(pem)
	case alg == "EdDSA":
		key, err = jwt.ParseEdPrivateKeyFromPEM(pem)
	default:
		return nil, errorf(ErrAuthorizationFailed, "signing algorithm %q is not supported", alg)
	}
	if err != nil {
		return nil, errorf(ErrAuthorizationFailed, "privateKeyFile does not hold a %s private key", alg)
	}
	return key, nil
}

// tokenError is an error answer of a token endpoint (RFC 6749 section 5.2).
type tokenError struct {
	Status      int
	Code        string
	Description string
}

func (e *tokenError) Error() string {
	msg := fmt.Sprintf("token endpoint answered HTTP %d", e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}

func (e *tokenError) Is(target error) bool { return target == ErrAuthorizationFailed }

// tokenRequest posts form to the token endpoint with the client's
// credentials (and a DPoP proof when dpop is set, answering a nonce
// challenge once) and returns the token.
func tokenRequest(ctx context.Context, c *http.Client, endpoint string, form url.Values, ca clientAuth, issuer string, dpop *dpopKey) (*tokenRecord, error) {
	if err := httpsOrLoopback(endpoint); err != nil {
		return nil, errorf(ErrAuthorizationFailed, "token endpoint: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		body := url.Values{}
		for k, v := range form {
			body[k] = v
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, nil)
		if err != nil {
			return nil, errorf(ErrAuthorizationFailed, "token endpoint: %v", err)
		}
		// The client assertion's audience is the authorization server's
		// issuer (RFC 7523 bis); servers accept it or the token endpoint.
		aud := issuer
		if aud == "" {
			aud = endpoint
		}
		if err := ca.apply(req, body, aud); err != nil {
			return nil, err
		}
		if dpop != nil {
			proof, err := dpop.proof(http.MethodPost, endpoint, "", dpop.nonceFor(endpoint))
			if err != nil {
				return nil, err
			}
			req.Header.Set("DPoP", proof)
		}
		encoded := body.Encode()
		req.Body = io.NopCloser(strings.NewReader(encoded))
		req.ContentLength = int64(len(encoded))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return nil, unreachable("token endpoint", err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponseBytes))
		resp.Body.Close()
		if err != nil {
			return nil, unreachable("token endpoint", err)
		}
		if resp.StatusCode != http.StatusOK {
			var te struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			_ = json.Unmarshal(data, &te)
			if dpop != nil && te.Error == "use_dpop_nonce" && resp.Header.Get("DPoP-Nonce") != "" && attempt == 0 {
				dpop.setNonce(endpoint, resp.Header.Get("DPoP-Nonce"))
				continue
			}
			return nil, &tokenError{Status: resp.StatusCode, Code: te.Error, Description: withoutSecrets(te.Description, body, ca.secret)}
		}
		if dpop != nil {
			if n := resp.Header.Get("DPoP-Nonce"); n != "" {
				dpop.setNonce(endpoint, n)
			}
		}
		return parseTokenResponse(data)
	}
}

// secretFormFields are the fields of a token request whose values are
// secrets.
var secretFormFields = []string{"client_secret", "client_assertion", "assertion", "subject_token", "refresh_token", "code", "code_verifier"}

// withoutSecrets is a token endpoint's error description with every
// secret of the request it answers (form holds the request's fields,
// clientSecret the client's secret, sent as a header or a field) masked:
// the description reaches last_error and the log, and an authorization
// server may quote the request in it.
func withoutSecrets(description string, form url.Values, clientSecret string) string {
	secrets := []string{clientSecret}
	for _, f := range secretFormFields {
		secrets = append(secrets, form[f]...)
	}
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		description = strings.ReplaceAll(description, secret, "[REDACTED]")
		if escaped := url.QueryEscape(secret); escaped != secret {
			description = strings.ReplaceAll(description, escaped, "[REDACTED]")
		}
	}
	return description
}

func parseTokenResponse(data []byte) (*tokenRecord, error) {
	var tr struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		RefreshToken string          `json:"refresh_token"`
		ExpiresIn    json.Number     `json:"expires_in"`
		Scope        string          `json:"scope"`
		IssuedType   json.RawMessage `json:"issued_token_type"`
	}
	if err := json.Unmarshal(data, &tr); err != nil || tr.AccessToken == "" {
		return nil, errorf(ErrAuthorizationFailed, "token endpoint answered without an access token")
	}
	t := &tokenRecord{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken}
	if secs, err := tr.ExpiresIn.Int64(); err == nil && secs > 0 {
		t.Expiry = time.Now().Add(time.Duration(secs) * time.Second)
	}
	if tr.Scope != "" {
		t.Scopes = strings.Fields(tr.Scope)
	}
	return t, nil
}

// unreachable is an ErrUnreachable for a request to what that failed on
// the way; a cancelled or expired context stays findable with errors.Is.
// (A request's error names its URL, never its form or headers.)
func unreachable(what string, err error) error {
	return &kindError{kind: ErrUnreachable, msg: what + " unreachable: " + err.Error(), cause: err}
}

// errWithoutPath is err's reason without the path os errors repeat.
func errWithoutPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
