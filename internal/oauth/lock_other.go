//go:build !unix

package oauth

import "context"

// lockFile takes no lock where flock(2) is missing: instances that share a
// state directory there may spend a refresh token twice.
func lockFile(ctx context.Context, _ string) (func(), error) { return func() {}, ctx.Err() }
