//go:build !unix

package oauth

import (
	"context"
	"errors"
)

// lockFile takes no lock where flock(2) is missing: a renewal or a save
// goes on without it (logged), and instances that share a state directory
// there may spend a refresh token twice.
func lockFile(ctx context.Context, _ string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("no file locks on this system")
}
