package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	mcpconfig "github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
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

// TestRegistryPolicyBeforeFirstApply holds ConnectServer to Claude Code's
// policy from the start: the API serves before the files' servers are
// applied, and a server added meanwhile must not run unchecked.
func TestRegistryPolicyBeforeFirstApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	settings := filepath.Join(dir, "managed-settings.json")
	if err := os.WriteFile(settings, []byte(`{"deniedMcpServers": [{"serverName": "denied"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	merged, err := mcpconfig.LoadLayers([]mcpconfig.Layer{{Path: settings, Claude: mcpconfig.ClaudeManagedSettings}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr := mcpclient.NewManager(&mcpclient.Options{})
	t.Cleanup(func() { _ = mgr.Close(ctx) })
	r, err := newRegistry(mgr, zerolog.Nop(), "", nil, merged.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Connect(ctx, mcpconfig.Server{Name: "denied", Kind: mcpconfig.TransportStdio, Command: "/bin/true"}, false)
	if !errors.Is(err, mcpclient.ErrPermissionDenied) {
		t.Fatalf("got %v, want the policy's denial", err)
	}
	if _, err := mgr.Get("denied"); err == nil {
		t.Error("the denied server was added")
	}
}
