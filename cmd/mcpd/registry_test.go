package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateFileNotAFile: a state file larger than a config file can be is
// refused before it is read; its mode is still checked first.
func TestStateFileNotAFile(t *testing.T) {
	dir := t.TempDir()
	large := filepath.Join(dir, "state.json")
	if err := os.WriteFile(large, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is all that is looked at.
	if err := os.Truncate(large, 256<<20+1); err != nil {
		t.Fatal(err)
	}
	_, err := readStateFile(large)
	if want := "read state file: read " + large + ": too large: more than 256 MiB"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if err := os.Chmod(large, 0o606); err != nil {
		t.Fatal(err)
	}
	_, err = readStateFile(large)
	if want := "anyone may write it (mode 0606)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
	_, err = readStateFile(dir)
	if want := "read state file: read " + dir + ": is a directory, not a regular file"; err == nil || err.Error() != want {
		t.Errorf("directory: got %v, want %q", err, want)
	}
}
