package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// Python MCP servers from PyPI, started by uvx exactly as a .mcp.json
// starts them. The Makefile installs the same versions into uv's cache
// (UVX_SERVERS); a version here that the cache lacks fails the test under
// UV_OFFLINE=1 instead of downloading.
const (
	uvxTimeServer  = "mcp-server-time==2026.10.19"
	uvxFetchServer = "mcp-server-fetch==2026.10.24"
	// uvxMCP1 is the Python SDK that TestUvxBusyFastMCP1Server's server
	// runs on (Makefile: UVX_MCP1).
	uvxMCP1 = "mcp==1.30.0"
	// uvxEnv names the uvx executable; a link to it goes first on mcpd's
	// PATH, so the config can say "command": "uvx".
	uvxEnv = "MCPD_UVX_BIN"
)

// uvxBinary returns MCPD_UVX_BIN, skipping the test when it is unset unless
// MCPD_E2E_REQUIRED=1.
func uvxBinary(t *testing.T) string {
	t.Helper()
	return externalBinary(t, uvxEnv, "uvx", " (install uv and point it at uvx)")
}

// fetchSite is a loopback web site for mcp-server-fetch: a robots.txt that
// allows everything and one page; it records the requests it served.
type fetchSite struct {
	mu       sync.Mutex
	requests []string // "PATH USER-AGENT"
}

const fetchMarker = "The lighthouse keeper counts 1729 ships"

func (s *fetchSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.Path+" "+r.UserAgent())
	s.mu.Unlock()
	switch r.URL.Path {
	case "/robots.txt":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
	case "/page.html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>Lighthouse</title></head><body><article>"+
			"<h1>Lighthouse log</h1><p>%s every night.</p><p>Nothing else happened.</p></article></body></html>", fetchMarker)
	default:
		http.NotFound(w, r)
	}
}

func (s *fetchSite) served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// TestUvxServers runs mcp-server-time and mcp-server-fetch from PyPI with
// uvx, configured as a .mcp.json configures them, and calls their tools
// through mcpd. uv's settings reach uvx through the environment mcpd gives
// its servers: the Makefile sets UV_CACHE_DIR (the pre-filled cache) and
// UV_OFFLINE=1, and the test points uv's default cache (XDG_CACHE_HOME) at
// an empty folder, so the servers start only if UV_CACHE_DIR got through.
func TestUvxServers(t *testing.T) {
	t.Parallel()
	uvx := uvxBinary(t)
	ctx := testContext(t)

	site := &fetchSite{}
	web := httptest.NewServer(site) // 127.0.0.1, a free port
	t.Cleanup(web.Close)

	config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"time": map[string]any{"command": "uvx", "args": []string{uvxTimeServer, "--local-timezone", "UTC"}},
		// The page is on loopback, which the server refuses by default.
		"fetch": map[string]any{"command": "uvx", "args": []string{uvxFetchServer, "--allow-private-ips"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// uvx alone on mcpd's PATH, not the rest of its folder (uv's own venv).
	bin := t.TempDir()
	if err := os.Symlink(uvx, filepath.Join(bin, "uvx")); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, string(config)),
		env: []string{
			"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
			"XDG_CACHE_HOME=" + t.TempDir(),
			// mcp-server-fetch's readabilipy runs `npm install` on first
			// use; make tools did that already, and npm stays offline here.
			"npm_config_offline=true",
		},
	})
	for _, name := range []string{"time", "fetch"} {
		s := d.waitServer(ctx, t, name, mcpdv1.ServerState_SERVER_STATE_READY, mcpdv1.ServerState_SERVER_STATE_FAILED)
		if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
			t.Fatalf("server %s: %v (%s); stderr %q", name, s.GetState(), s.GetLastError(), s.GetStderrTail())
		}
		t.Logf("server %s: %s %s, protocol %s", name, s.GetServerInfo().GetName(), s.GetServerInfo().GetVersion(), s.GetProtocolVersion())
	}

	t.Run("time", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__time__convert_time", map[string]any{
			"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo",
		})
		if resp.GetIsError() {
			t.Fatalf("convert_time: is_error, %q", text(resp))
		}
		var got struct {
			Target struct {
				Timezone string `json:"timezone"`
				Datetime string `json:"datetime"`
			} `json:"target"`
		}
		if err := json.Unmarshal([]byte(text(resp)), &got); err != nil {
			t.Fatalf("convert_time result %q: %v", text(resp), err)
		}
		if got.Target.Timezone != "Asia/Tokyo" || !strings.Contains(got.Target.Datetime, "T21:00:00+09:00") {
			t.Errorf("convert_time 12:00 UTC to Asia/Tokyo: got %+v, want 21:00+09:00", got.Target)
		}

		resp = d.mustCall(ctx, t, "mcp__time__get_current_time", map[string]any{"timezone": "UTC"})
		if resp.GetIsError() || !strings.Contains(text(resp), `"timezone": "UTC"`) {
			t.Errorf("get_current_time UTC: got %q (is_error %v)", text(resp), resp.GetIsError())
		}
	})

	t.Run("fetch", func(t *testing.T) {
		resp := d.mustCall(ctx, t, "mcp__fetch__fetch", map[string]any{"url": web.URL + "/page.html"})
		if resp.GetIsError() || !strings.Contains(text(resp), fetchMarker) {
			t.Fatalf("fetch %s/page.html: got %q (is_error %v), want the page's text", web.URL, text(resp), resp.GetIsError())
		}
		// A tool call is an autonomous fetch: the server asked robots.txt
		// first, with its autonomous user agent.
		served := site.served()
		if len(served) < 2 || !strings.HasPrefix(served[0], "/robots.txt ") ||
			!strings.Contains(served[0], "Autonomous") || !strings.HasPrefix(served[len(served)-1], "/page.html ") {
			t.Errorf("requests served: got %q, want /robots.txt then /page.html with the autonomous user agent", served)
		}

		// A missing page is a tool error, as data.
		resp = d.mustCall(ctx, t, "mcp__fetch__fetch", map[string]any{"url": web.URL + "/missing.html"})
		if !resp.GetIsError() || !strings.Contains(text(resp), "404") {
			t.Errorf("fetch of a missing page: got %q (is_error %v), want an error result naming 404", text(resp), resp.GetIsError())
		}
	})
}

// busyFastMCP1Server is a FastMCP server of the Python SDK's 1.x line whose
// tool is a plain def: FastMCP 1.x runs it on the event loop that reads
// the server's input, so the server answers nothing, pings included, until
// it returns. The tool returns once its marker file is gone.
const busyFastMCP1Server = `
import os, sys, time
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("busy")

@mcp.tool()
def work(marker: str) -> str:
    open(marker, "w").close()
    print("working " + marker, file=sys.stderr, flush=True)
    while os.path.exists(marker):
        time.sleep(0.01)
    return "done"

mcp.run()
`

// TestUvxBusyFastMCP1Server: a FastMCP 1.x server busy with a plain-def
// tool fails mcpd's keepalive pings for as long as the tool runs; its
// session is kept, and the call gets its result from the same process.
func TestUvxBusyFastMCP1Server(t *testing.T) {
	t.Parallel()
	uvx := uvxBinary(t)
	ctx := testContext(t)
	script := filepath.Join(t.TempDir(), "busy.py")
	if err := os.WriteFile(script, []byte(busyFastMCP1Server), 0o600); err != nil {
		t.Fatal(err)
	}
	config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"busy": map[string]any{"command": uvx, "args": []string{"--from", uvxMCP1, "python", script}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(ctx, t, daemonOptions{
		config: writeConfig(t, string(config)),
		env:    []string{"XDG_CACHE_HOME=" + t.TempDir()},
		args:   []string{"--keepalive-interval", "1s", "--keepalive-failures", "2"},
	})
	s := d.waitServer(ctx, t, "busy", mcpdv1.ServerState_SERVER_STATE_READY, mcpdv1.ServerState_SERVER_STATE_FAILED)
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY || s.GetProtocolVersion() == "2026-07-28" {
		t.Fatalf("server: %v %s (%s); stderr %q", s.GetState(), s.GetProtocolVersion(), s.GetLastError(), s.GetStderrTail())
	}

	marker := filepath.Join(t.TempDir(), "working")
	type outcome struct {
		resp *mcpdv1.CallToolResponse
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		resp, err := d.call(ctx, t, "mcp__busy__work", map[string]any{"marker": marker}, 0)
		done <- outcome{resp, err}
	}()
	// The tool has begun, and the pings sent since have failed, enough of
	// them to end a session that runs nothing.
	var ended *outcome
	poll(ctx, t, "the pings to fail while the tool runs", func() (bool, error) {
		select {
		case o := <-done:
			ended = &o
			return true, nil
		default:
			return strings.Contains(d.log.String(), "the session is kept until that request ends"), nil
		}
	})
	if ended != nil {
		t.Fatalf("the call ended while the server was busy: %v, %v", text(ended.resp), ended.err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.resp.GetIsError() || text(o.resp) != "done" {
		t.Fatalf("the call: got %q, %v; want done", text(o.resp), o.err)
	}
	after := d.waitServer(ctx, t, "busy", mcpdv1.ServerState_SERVER_STATE_READY)
	if after.GetPid() != s.GetPid() || after.GetRestarts() != 0 {
		t.Errorf("after the call: pid %d, %d restarts; want the same process (%d), none", after.GetPid(), after.GetRestarts(), s.GetPid())
	}
}
