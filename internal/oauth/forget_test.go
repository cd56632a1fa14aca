package oauth

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// serverCount counts the servers m keeps an authorization for in memory.
func (m *Manager) serverCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.servers)
}

// A server removed with nothing stored leaves nothing behind, and one
// whose tokens stayed leaves nothing once they are forgotten, its lock
// file included: server names are the callers' to choose, and every HTTP
// or SSE server goes through the Manager, whether it needs a token or
// not.
func TestReleasedServersLeaveNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oauth")
	m := newManager(t, dir)
	for i := range 50 {
		name := fmt.Sprintf("gone-%d", i)
		m.Transport(name, "http://127.0.0.1:1/mcp", nil, http.DefaultTransport, nil)
		m.Release(name)
		if m.Stored(name) {
			t.Fatalf("Stored(%q) after Release with nothing obtained: got true, want false", name)
		}
	}
	if got := m.serverCount(); got != 0 {
		t.Errorf("servers after 50 released with nothing stored: got %d, want 0", got)
	}

	// A connected server keeps its authorization through a Forget: its
	// transport still asks it for tokens and consents.
	m.Transport("live", "http://127.0.0.1:1/mcp", nil, http.DefaultTransport, nil)
	if err := m.Forget("live"); err != nil {
		t.Fatal(err)
	}
	if got := m.serverCount(); got != 1 {
		t.Errorf("servers after Forget of a connected one: got %d, want 1", got)
	}
	m.Release("live")

	// Tokens stay past Release, for the next connect, until Forget.
	as := newTestAS(t)
	c := client(m, as, nil)
	authorize(t, m, c, as)
	if resp, err := post(t, c, as); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request after consent: got %v %v, want 200", resp, err)
	}
	m.Release("srv")
	if got := m.serverCount(); got != 1 || !m.Stored("srv") {
		t.Errorf("after Release of a server with a token: got %d servers, Stored %v; want 1, true", got, m.Stored("srv"))
	}
	if err := m.Forget("srv"); err != nil {
		t.Fatal(err)
	}
	if got := m.serverCount(); got != 0 || m.Stored("srv") {
		t.Errorf("after Forget of a released server: got %d servers, Stored %v; want 0, false", got, m.Stored("srv"))
	}
	if _, err := os.Stat(filepath.Join(dir, "srv.json")); !os.IsNotExist(err) {
		t.Errorf("state file after Forget: got %v, want it gone", err)
	}
	if files := dirFiles(t, dir); len(files) != 0 {
		t.Errorf("state directory after the churn: got %v, want nothing", files)
	}
}

// dirFiles lists the files in dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	return files
}
