package config

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFileAtomic replaces path with data, mode 0600, so that a crash or
// a power loss leaves the old file or the new one whole, never a mix and
// never the old one after the new was reported written: a temporary file
// in the same directory is written and synced, renamed over path, and the
// directory is synced. mcpd's state file and OAuth records use it.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		// Some file systems cannot sync a directory (EINVAL, ENOTSUP):
		// the file is written all the same.
		return err
	}
	return nil
}
