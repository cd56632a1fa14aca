package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/url"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// dpopKey proves possession of the key a server's DPoP tokens are bound to
// (RFC 9449): an ECDSA P-256 key, kept with the tokens, and the last nonce
// each server (authorization or resource) asked for.
type dpopKey struct {
	key *ecdsa.PrivateKey
	jwk map[string]any

	mu     sync.Mutex
	nonces map[string]string // by origin
}

func newDPoPKey() (*dpopKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return dpopFromKey(key), nil
}

func dpopFromKey(key *ecdsa.PrivateKey) *dpopKey {
	b64 := base64.RawURLEncoding.EncodeToString
	pub, _ := key.PublicKey.ECDH() // P-256 always converts
	raw := pub.Bytes()             // 0x04 || X || Y
	return &dpopKey{
		key: key,
		jwk: map[string]any{
			"kty": "EC",
			"crv": "P-256",
			"x":   b64(raw[1:33]),
			"y":   b64(raw[33:]),
		},
		nonces: make(map[string]string),
	}
}

// parseDPoPKey reads a key saved by marshal.
func parseDPoPKey(s string) (*dpopKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errorf(ErrAuthorizationFailed, "stored DPoP key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errorf(ErrAuthorizationFailed, "stored DPoP key: %v", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errorf(ErrAuthorizationFailed, "stored DPoP key is not a P-256 key")
	}
	return dpopFromKey(ec), nil
}

func (d *dpopKey) marshal() string {
	der, err := x509.MarshalPKCS8PrivateKey(d.key)
	if err != nil {
		return ""
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// proof returns a DPoP proof JWT for a request: htm and htu (without query
// and fragment), ath when it accompanies an access token, nonce when the
// server asked for one.
func (d *dpopKey) proof(method, rawURL, accessToken, nonce string) (string, error) {
	htu := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		u.RawQuery, u.Fragment = "", ""
		htu = u.String()
	}
	claims := jwt.MapClaims{
		"jti": rand.Text(),
		"htm": method,
		"htu": htu,
		"iat": time.Now().Unix(),
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	t.Header["typ"] = "dpop+jwt"
	t.Header["jwk"] = d.jwk
	s, err := t.SignedString(d.key)
	if err != nil {
		return "", errorf(ErrAuthorizationFailed, "sign DPoP proof: %v", err)
	}
	return s, nil
}

func nonceKey(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return u.Scheme + "://" + u.Host
}

func (d *dpopKey) nonceFor(rawURL string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nonces[nonceKey(rawURL)]
}

func (d *dpopKey) setNonce(rawURL, nonce string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nonces[nonceKey(rawURL)] = nonce
}
