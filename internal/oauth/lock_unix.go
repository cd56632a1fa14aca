//go:build unix

package oauth

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often a lock held by another process is tried again:
// flock cannot wait for a context, so the wait polls.
const lockPoll = 20 * time.Millisecond

// lockFile takes an exclusive flock(2) on path, made if missing, or
// returns ctx's error once ctx ends first. Closing the file (the returned
// func) releases it, and so does the process's end, however it ends.
//
// The holder may remove the file before it lets go (see store.lock): a
// lock then taken on the removed file excludes nobody who opens the path
// afresh, so a lock is kept only if path still names the file locked, and
// taken again on the new file otherwise.
func lockFile(ctx context.Context, path string) (func(), error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flockWait(ctx, f); err != nil {
			_ = f.Close()
			return nil, err
		}
		if sameFile(f, path) {
			return func() { _ = f.Close() }, nil
		}
		_ = f.Close()
	}
}

// flockWait takes an exclusive flock(2) on f, waiting until ctx ends.
func flockWait(ctx context.Context, f *os.File) error {
	fd := int(f.Fd())
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sameFile reports whether path names the open file f.
func sameFile(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(path)
	return err == nil && os.SameFile(open, named)
}
