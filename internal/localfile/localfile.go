// Package localfile reads the files an operator names: config files,
// tokens, keys and certificates. It reads a regular file or a pipe (a
// FIFO, or process substitution such as --config <(gen)) up to a bound
// the caller gives, and refuses anything else (a device such as
// /dev/zero, a directory, a socket) before reading a byte of it, so that
// a path that points somewhere endless or blocking, such as a cloned
// repository's .mcp.json linked to /dev/zero, can neither exhaust mcpd's
// memory nor hold it for ever. Its errors name the path and what is wrong
// with the file, never its contents.
package localfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// The bounds mcpd reads its files with. Each is far above what the file
// holds in use and far below what would strain a host's memory.
const (
	// ConfigLimit bounds a config file: every scope's .mcp.json, --config
	// and the state file. Claude Code's ~/.claude.json, read as the user
	// scope, keeps a history of every project and can legitimately reach
	// tens of MB.
	ConfigLimit = 256 << 20
	// CallersLimit bounds a callers file: a list of callers with their
	// permissions, a few hundred bytes each.
	CallersLimit = 64 << 20
	// CredentialLimit bounds a token, a PEM certificate (a CA bundle too:
	// the system's whole bundle is about 200 KiB) and a private key.
	CredentialLimit = 1 << 20
)

// pipeTimeout bounds the time reading a pipe takes in all: a FIFO whose
// writer never writes nor closes would otherwise hold mcpd for ever (at
// start, before it handles signals). A generator behind process
// substitution (a secrets manager's CLI) has this long to write its
// output.
const pipeTimeout = 30 * time.Second

// ErrNotRegular is wrapped by the error for a path that is neither a
// regular file nor a pipe.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file that holds more than the
// bound it is read with.
var ErrTooLarge = errors.New("too large")

// Read returns the contents of the regular file or pipe at path, of at
// most limit bytes. A path that does not exist fails as [os.Open] does
// (errors.Is(err, fs.ErrNotExist) holds); any other error is an
// [*fs.PathError] too, wrapping [ErrNotRegular] or [ErrTooLarge] where
// they apply.
func Read(path string, limit int64) ([]byte, error) {
	return read(path, limit, nil, pipeTimeout)
}

// ReadChecked is [Read], which first calls check with what the opened
// file is, and returns check's error, as it is, instead of reading it.
func ReadChecked(path string, limit int64, check func(fs.FileInfo) error) ([]byte, error) {
	return read(path, limit, check, pipeTimeout)
}

func read(path string, limit int64, check func(fs.FileInfo) error, timeout time.Duration) ([]byte, error) {
	// A device is refused before it is opened, not only after: opening
	// some (a terminal, a tape, a watchdog) does something. A missing
	// path is left for the open to report, as it always has.
	if fi, err := os.Stat(path); err == nil {
		if err := checkType(path, fi); err != nil {
			return nil, err
		}
	}
	// O_NONBLOCK: opening a FIFO that no writer has open returns at once
	// instead of waiting for one. O_NOCTTY: a terminal, should the path
	// have become one since the Stat, does not become mcpd's.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkType(path, fi); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(fi); err != nil {
			return nil, err
		}
	}
	hint := int64(0)
	if fi.Mode().IsRegular() {
		if fi.Size() > limit {
			return nil, tooLarge(path, limit)
		}
		hint = fi.Size()
	} else if err := f.SetReadDeadline(time.Now().Add(timeout)); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		// A pipe the poller does not take (ErrNoDeadline) cannot block
		// either: its descriptor is non-blocking, and a read with
		// nothing to read fails.
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(int(hint) + bytes.MinRead)
	// One byte over the bound tells a file that grew past it since the
	// Stat (or a pipe that holds more) from one that fits.
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("the pipe did not end within %v: %w", timeout, err)}
		}
		return nil, err
	}
	if int64(buf.Len()) > limit {
		return nil, tooLarge(path, limit)
	}
	return buf.Bytes(), nil
}

// checkType refuses what is neither a regular file nor a pipe, saying
// what it is.
func checkType(path string, fi fs.FileInfo) error {
	var what string
	switch m := fi.Mode(); {
	case m.IsRegular(), m&fs.ModeNamedPipe != 0:
		return nil
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	default:
		what = "a special file"
	}
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("is %s, %w", what, ErrNotRegular)}
}

func tooLarge(path string, limit int64) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %s", ErrTooLarge, size(limit))}
}

// size writes n in the largest binary unit that divides it.
func size(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
