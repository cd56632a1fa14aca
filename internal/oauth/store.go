package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/localfile"
)

// record is what persists of one server's authorization.
type record struct {
	// Resource is the server URL the record is for; a server whose URL
	// changed starts afresh.
	Resource string `json:"resource"`
	// Settings describes the oauth settings the record was made under.
	Settings string `json:"settings,omitempty"`
	// Issuer is the authorization server that issued the client and the
	// tokens; a different one means the resource moved (SEP-2352).
	Issuer string        `json:"issuer,omitempty"`
	Client *clientRecord `json:"client,omitempty"`
	Token  *tokenRecord  `json:"token,omitempty"`
	// DPoPKey is the PKCS#8 PEM of the key DPoP tokens are bound to.
	DPoPKey string `json:"dpopKey,omitempty"`
}

// clientRecord is a client registration mcpd made (or was given).
type clientRecord struct {
	ID          string `json:"id"`
	Secret      string `json:"secret,omitempty"`
	AuthMethod  string `json:"authMethod,omitempty"`
	RedirectURI string `json:"redirectUri,omitempty"`
	// How is "dynamic", "metadata-document" or "preregistered".
	How string `json:"how"`
	// SecretExpires is when a registration's secret expires
	// (client_secret_expires_at); zero: never.
	SecretExpires time.Time `json:"secretExpires,omitzero"`
}

// secretExpiresWithin reports whether the client's secret expires within
// d from now: a consent started with it could not be completed.
func (c *clientRecord) secretExpiresWithin(d time.Duration) bool {
	return c.Secret != "" && !c.SecretExpires.IsZero() && time.Now().Add(d).After(c.SecretExpires)
}

// tokenRecord is a token response.
type tokenRecord struct {
	AccessToken  string    `json:"accessToken"`
	TokenType    string    `json:"tokenType,omitempty"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`
	// IssuedTo is the client a consent's token was issued to, which
	// refreshes it: the record's Client may be a newer registration
	// (another redirect URL) whose consent did not complete. Nil in
	// records from before, and for the grants without a person.
	IssuedTo *clientRecord `json:"issuedTo,omitempty"`
}

// expiring reports whether the token must be renewed before use.
func (t *tokenRecord) expiring(now time.Time) bool {
	return !t.Expiry.IsZero() && now.Add(refreshMargin).After(t.Expiry)
}

// store keeps records as files <dir>/<server>.json; a nil dir keeps
// nothing.
type store struct {
	dir string
}

func openStore(dir string) (*store, error) {
	if dir == "" {
		return &store{}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("oauth state directory: %w", err)
	}
	// MkdirAll keeps the mode of a directory that exists; tokens must not
	// sit in a directory others can list.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("oauth state directory: %w", err)
	}
	return &store{dir: dir}, nil
}

// path is the file of a server; server names are validated
// ([A-Za-z0-9_-]), so they are safe file names.
func (s *store) path(server string) string {
	return filepath.Join(s.dir, server+".json")
}

// lockPath is the server's lock file (see lock).
func (s *store) lockPath(server string) string {
	return filepath.Join(s.dir, server+".lock")
}

// exists reports whether the server has a record on disk.
func (s *store) exists(server string) bool {
	if s.dir == "" || strings.ContainsAny(server, `/\`) {
		return false
	}
	_, err := os.Stat(s.path(server))
	return err == nil
}

// load returns the server's record, or nil when there is none.
func (s *store) load(server string) (*record, error) {
	if s.dir == "" || strings.ContainsAny(server, `/\`) {
		return nil, nil
	}
	data, err := localfile.Read(s.path(server), localfile.CredentialLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read oauth state of %q: %w", server, err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read oauth state of %q: the file is not valid JSON", server)
	}
	return &r, nil
}

// save writes the record atomically (config.WriteFileAtomic): a crash or
// a power loss leaves the old record or the new one, never the old one
// after the new was saved, whose refresh token the server may have
// rotated away (reusing one can revoke the whole grant).
func (s *store) save(server string, r *record) error {
	if s.dir == "" || strings.ContainsAny(server, `/\`) {
		return nil
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := config.WriteFileAtomic(s.path(server), data); err != nil {
		return fmt.Errorf("write oauth state of %q: %w", server, err)
	}
	return nil
}

// lock takes the server's lock, which every mcpd sharing the directory
// takes before it renews the server's token (a refresh token spent by two
// instances at once is refused to one of them, and an authorization
// server that detects the reuse revokes the whole grant), saves its
// record or removes it. The lock file, <server>.lock, stays with the
// record: the holder removes it as it lets go when there is no record
// (forgotten, or never saved), so that server names that come and go
// leave nothing behind; an instance that waited for the lock then finds
// the file gone and locks a new one (lockFile). It waits until ctx ends;
// without a directory there is nothing to share, and nothing to lock.
func (s *store) lock(ctx context.Context, server string) (func(), error) {
	if s.dir == "" || strings.ContainsAny(server, `/\`) {
		return func() {}, nil
	}
	unlock, err := lockFile(ctx, s.lockPath(server))
	if err != nil {
		return nil, err
	}
	return func() {
		if !s.exists(server) {
			_ = os.Remove(s.lockPath(server))
		}
		unlock()
	}, nil
}

func (s *store) remove(server string) error {
	if s.dir == "" || strings.ContainsAny(server, `/\`) {
		return nil
	}
	if err := os.Remove(s.path(server)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errorf(ErrStore, "cannot delete the stored oauth state of %q: %v", server, errWithoutPath(err))
	}
	return nil
}
