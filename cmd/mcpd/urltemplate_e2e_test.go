package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestURLTemplateSecretsNotShown: a config URL written with a ${VAR}
// shows as its template, but the literal password and query values the
// template holds are masked there as in any other URL: in the server's
// url and last_error, and in the log.
func TestURLTemplateSecretsNotShown(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const password, literalKey, envKey = "pw-literal-3f9a", "lit-query-77c1", "env-value-5b2e"
	// Nothing listens there: the server fails, and its error quotes the URL.
	url := "http://alice:" + password + "@127.0.0.1:" + strconv.Itoa(freePort(t)) + "/mcp?sig=" + literalKey + "&key=${URL_KEY}"
	cfg := writeConfig(t, `{"mcpServers": {"remote": {"type": "http", "url": "`+url+`"}}}`)
	d := startDaemon(ctx, t, daemonOptions{config: cfg, env: []string{"URL_KEY=" + envKey}, args: []string{"--log-level", "debug"}})
	st := d.waitServer(ctx, t, "remote", mcpdv1.ServerState_SERVER_STATE_FAILED)
	if st.GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED || st.GetLastError() == "" {
		t.Fatalf("state: got %v (%q), want FAILED with an error", st.GetState(), st.GetLastError())
	}
	if want := "?key=${URL_KEY}&sig=xxxxx"; !strings.Contains(st.GetUrl(), want) || !strings.Contains(st.GetUrl(), "//xxxxx@127.0.0.1:") {
		t.Errorf("url: got %q, want the template with its user info and literal query values masked (%q)", st.GetUrl(), want)
	}
	secrets := []string{password, literalKey, envKey}
	checkNoSecrets(t, "ListServers and GetServer", serversText(ctx, t, d), secrets)
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("mcpd exit code: got %d, want 0", code)
	}
	checkNoSecrets(t, "mcpd's log", d.log.String(), secrets)
}
