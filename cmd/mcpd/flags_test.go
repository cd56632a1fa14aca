package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/server"
)

func TestParseFlags(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	defaults, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags with no flags: %v", err)
	}
	// The documented defaults; fields added later keep whatever default
	// they have, so each case below compares against this parse.
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"listen", defaults.listen, "127.0.0.1:50051"},
		{"config", defaults.configs.String(), ""},
		{"log-level", defaults.logLevel, "info"},
		{"log-format", defaults.logFormat, "json"},
		{"shutdown-timeout", defaults.shutdownTimeout, 10 * time.Second},
		{"call-timeout", defaults.callTimeout, 60 * time.Second},
		{"connect-timeout", defaults.connectTimeout, 30 * time.Second},
		{"probe-timeout", defaults.probeTimeout, 5 * time.Second},
		{"stop-grace", defaults.stopGrace, 2 * time.Second},
		{"api token", defaults.apiToken, ""},
		{"allow-command", len(defaults.allowCommands), 0},
		{"max-procs", defaults.maxProcs, 1},
		{"memory-limit", defaults.memoryLimit, byteSize(128 << 20)},
		{"stderr-log-rate", defaults.stderrLogRate, 20},
		{"stderr-log-burst", defaults.stderrLogBurst, 200},
	} {
		if c.got != c.want {
			t.Errorf("default %s: got %v, want %v", c.field, c.got, c.want)
		}
	}
	with := func(f func(*config)) *config {
		c := *defaults
		f(&c)
		return &c
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    *config
		wantErr string // substring; "" means success
	}{
		{name: "defaults", want: defaults},
		{
			name: "flags",
			args: []string{"--listen", "unix:///tmp/x.sock", "--config", "a.json", "--log-level", "debug",
				"--probe-timeout", "1s", "--stop-grace", "500ms", "--api-token-file", "/t"},
			want: with(func(c *config) {
				c.listen, c.configs, c.logLevel = "unix:///tmp/x.sock", configList{"a.json"}, "debug"
				c.probeTimeout, c.stopGrace, c.apiTokenFile = time.Second, 500*time.Millisecond, "/t"
			}),
		},
		{
			name: "every --config, in order, inline JSON whole",
			args: []string{"--config", "a.json", "--config", `{"mcpServers": {"x": {"command": "y", "args": ["1,2"]}}}`},
			want: with(func(c *config) {
				c.configs = configList{"a.json", `{"mcpServers": {"x": {"command": "y", "args": ["1,2"]}}}`}
			}),
		},
		{
			name: "MCPD_CONFIG unless the command line sets --config",
			env:  map[string]string{"MCPD_CONFIG": "env.json", "MCPD_PROJECT": "/p", "MCPD_STATE_FILE": "/s"},
			args: []string{"--config", "b.json"},
			want: with(func(c *config) { c.configs, c.project, c.stateFile = configList{"b.json"}, "/p", "/s" }),
		},
		{
			name: "MCPD_CONFIG",
			env:  map[string]string{"MCPD_CONFIG": "env.json"},
			want: with(func(c *config) { c.configs = configList{"env.json"} }),
		},
		{name: "empty --config", args: []string{"--config", " "}, wantErr: "empty"},
		{name: "unknown scope", args: []string{"--scopes", "project,global"}, wantErr: `unknown scope "global"`},
		{name: "no scopes", args: []string{"--scopes", ""}, want: with(func(c *config) { c.scopes = "" })},
		{
			name: "environment",
			env:  map[string]string{"MCPD_LISTEN": "127.0.0.1:1", "MCPD_CALL_TIMEOUT": "3s", "MCPD_API_TOKEN": "tok", "MCPD_ALLOW_COMMAND": "npx, uvx"},
			want: with(func(c *config) {
				c.listen, c.callTimeout, c.apiToken, c.allowCommands = "127.0.0.1:1", 3*time.Second, "tok", commandList{"npx", "uvx"}
			}),
		},
		{
			name: "flag beats environment",
			args: []string{"--listen", "127.0.0.1:2"},
			env:  map[string]string{"MCPD_LISTEN": "127.0.0.1:1"},
			want: with(func(c *config) { c.listen = "127.0.0.1:2" }),
		},
		{
			name: "repeated and comma-separated allow-command",
			args: []string{"--allow-command", "a,b", "--allow-command", " c ", "--allow-command", "d,"},
			want: with(func(c *config) { c.allowCommands = commandList{"a", "b", "c", "d"} }),
		},
		// "$LIST" with LIST empty: none meant, every command allowed.
		{name: "empty allow-command", args: []string{"--allow-command", ""}, wantErr: `invalid value "" for flag -allow-command: names no command: leave --allow-command out to allow every command, or give --allow-command none to allow none`},
		{name: "allow-command of commas", args: []string{"--allow-command", "npx", "--allow-command", " , "}, wantErr: "names no command"},
		{name: "allow-command of commas from the environment", env: map[string]string{"MCPD_ALLOW_COMMAND": ","}, wantErr: `MCPD_ALLOW_COMMAND ",": names no command: leave --allow-command out to allow every command, or give --allow-command none to allow none`},
		{name: "empty MCPD_ALLOW_COMMAND is unset", env: map[string]string{"MCPD_ALLOW_COMMAND": ""}, want: defaults},
		{name: "allow-command none", args: []string{"--allow-command", "none"}, want: with(func(c *config) { c.allowCommands = commandList{"none"} })},
		{name: "allow-command none with a command", args: []string{"--allow-command", "none,npx"}, wantErr: "--allow-command none allows no command: it cannot go with a command"},
		{name: "empty deny-tool", args: []string{"--deny-tool", ""}, wantErr: `invalid value "" for flag -deny-tool: names nothing: leave the flag out for none`},
		{name: "trace-server of commas", args: []string{"--trace-server", ","}, wantErr: "names nothing"},
		{name: "ask-tool of commas from the environment", env: map[string]string{"MCPD_ASK_TOOL": " ,"}, wantErr: `MCPD_ASK_TOOL " ,": names nothing: leave the flag out for none (--ask-tool)`},
		{name: "empty MCPD_ALLOW_TOOL is unset", env: map[string]string{"MCPD_ALLOW_TOOL": ""}, want: defaults},
		{
			name: "max-procs",
			env:  map[string]string{"MCPD_MAX_PROCS": "4"},
			want: with(func(c *config) { c.maxProcs = 4 }),
		},
		{
			name: "GOMAXPROCS replaces the max-procs default",
			env:  map[string]string{"GOMAXPROCS": "3"},
			want: with(func(c *config) { c.maxProcs = 0 }),
		},
		{
			name: "max-procs beats GOMAXPROCS",
			args: []string{"--max-procs", "2"},
			env:  map[string]string{"GOMAXPROCS": "3"},
			want: with(func(c *config) { c.maxProcs = 2 }),
		},
		{
			name: "MCPD_MAX_PROCS beats GOMAXPROCS",
			env:  map[string]string{"GOMAXPROCS": "3", "MCPD_MAX_PROCS": "2"},
			want: with(func(c *config) { c.maxProcs = 2 }),
		},
		{
			name: "memory-limit",
			args: []string{"--memory-limit", "1GiB"},
			want: with(func(c *config) { c.memoryLimit = 1 << 30 }),
		},
		{
			name: "memory-limit in bytes and off",
			env:  map[string]string{"MCPD_MEMORY_LIMIT": "1000"},
			args: []string{"--memory-limit", "off"},
			want: with(func(c *config) { c.memoryLimit = noMemoryLimit }),
		},
		{
			name: "GOMEMLIMIT replaces the memory-limit default",
			env:  map[string]string{"GOMEMLIMIT": "100MiB"},
			want: with(func(c *config) { c.memoryLimit = keepGoMemoryLimit }),
		},
		{
			name: "memory-limit beats GOMEMLIMIT",
			args: []string{"--memory-limit", "64MiB"},
			env:  map[string]string{"GOMEMLIMIT": "100MiB"},
			want: with(func(c *config) { c.memoryLimit = 64 << 20 }),
		},
		{
			name: "MCPD_MEMORY_LIMIT beats GOMEMLIMIT",
			env:  map[string]string{"GOMEMLIMIT": "100MiB", "MCPD_MEMORY_LIMIT": "32KiB"},
			want: with(func(c *config) { c.memoryLimit = 32 << 10 }),
		},
		{name: "zero memory-limit", args: []string{"--memory-limit", "0"}, wantErr: "memory-limit"},
		{name: "memory-limit with a unit Go does not take", args: []string{"--memory-limit", "1GB"}, wantErr: "memory-limit"},
		{name: "memory-limit too large", args: []string{"--memory-limit", "9000000TiB"}, wantErr: "memory-limit"},
		{name: "negative max-procs", args: []string{"--max-procs", "-1"}, wantErr: "--max-procs -1"},
		{name: "max-procs too large", args: []string{"--max-procs", "100000"}, wantErr: "--max-procs 100000: want 0 (one per CPU) to 1024"},
		{name: "max-procs too large from the environment", env: map[string]string{"MCPD_MAX_PROCS": "1025"}, wantErr: "--max-procs 1025"},
		{name: "max-procs at its bound", args: []string{"--max-procs", "1024"}, want: with(func(c *config) { c.maxProcs = 1024 })},
		{name: "no polls", args: []string{"--max-polls", "0"}, wantErr: "--max-polls 0"},
		{name: "no stderr log limit", args: []string{"--stderr-log-rate", "0"}, want: with(func(c *config) { c.stderrLogRate = 0 })},
		{name: "stderr log limit", env: map[string]string{"MCPD_STDERR_LOG_RATE": "5", "MCPD_STDERR_LOG_BURST": "50"}, want: with(func(c *config) { c.stderrLogRate, c.stderrLogBurst = 5, 50 })},
		{name: "negative stderr log rate", args: []string{"--stderr-log-rate", "-1"}, wantErr: "--stderr-log-rate -1: want 0 (no limit) or more"},
		{name: "stderr log rate that is no whole number", env: map[string]string{"MCPD_STDERR_LOG_RATE": "0.5"}, wantErr: `MCPD_STDERR_LOG_RATE "0.5": want a whole number (--stderr-log-rate)`},
		{name: "no stderr log burst", args: []string{"--stderr-log-burst", "0"}, wantErr: "--stderr-log-burst 0: want at least 1"},
		{name: "no message size", args: []string{"--max-message-bytes", "0"}, wantErr: "--max-message-bytes 0: want at least 1"},
		{name: "zero call timeout", args: []string{"--call-timeout", "0"}, wantErr: "--call-timeout 0: want a duration above 0"},
		{name: "negative stop grace", args: []string{"--stop-grace", "-1s"}, wantErr: "--stop-grace -1s: want a duration of 0 or more"},
		// A stop needs a grace to tell a server's exit from its stdout
		// closing and to read its last stderr lines; 0 was taken, and
		// meant the default 2s.
		{name: "zero stop grace", args: []string{"--stop-grace", "0"}, wantErr: "--stop-grace 0: want a duration above 0"},
		{name: "zero stop grace from the environment", env: map[string]string{"MCPD_STOP_GRACE": "0s"}, wantErr: "--stop-grace 0: want a duration above 0"},
		{name: "client keepalive below a second", args: []string{"--client-keepalive", "500ms"}, wantErr: "--client-keepalive 500ms: want 0 (off) or at least 1s"},
		{name: "no client keepalive", args: []string{"--client-keepalive", "0"}, want: with(func(c *config) { c.clientKeepalive = 0 })},
		// A probe waits half the interval: at a few ms every probe failed,
		// and every server went FAILED.
		{name: "keepalive interval below a second", args: []string{"--keepalive-interval", "1ms"}, wantErr: "--keepalive-interval 1ms: want 0 (off) or at least 1s"},
		{name: "keepalive interval of a nanosecond from the environment", env: map[string]string{"MCPD_KEEPALIVE_INTERVAL": "1ns"}, wantErr: "--keepalive-interval 1ns: want 0 (off) or at least 1s"},
		{name: "no keepalive", args: []string{"--keepalive-interval", "0"}, want: with(func(c *config) { c.keepAlive = 0 })},
		{name: "keepalive interval of a second", args: []string{"--keepalive-interval", "1s"}, want: with(func(c *config) { c.keepAlive = time.Second })},
		// A host's session closed between its initialize and its next request.
		{name: "MCP session timeout below a second", args: []string{"--mcp-session-timeout", "10ms"}, wantErr: "--mcp-session-timeout 10ms: want at least 1s"},
		{name: "negative timeout from the environment", env: map[string]string{"MCPD_SHUTDOWN_TIMEOUT": "-5s"}, wantErr: "--shutdown-timeout -5s"},
		{name: "backoff ceiling below its start", args: []string{"--restart-backoff", "1m", "--restart-backoff-max", "30s"}, wantErr: "--restart-backoff-max 30s is below --restart-backoff 1m0s"},
		{name: "a slow start lifts the default ceiling", args: []string{"--restart-backoff", "1m"}, want: with(func(c *config) { c.restartBackoff, c.restartMax = time.Minute, time.Minute })},
		{name: "backoff ceiling below its start, from the environment", args: []string{"--restart-backoff", "1m"}, env: map[string]string{"MCPD_RESTART_BACKOFF_MAX": "30s"}, wantErr: "--restart-backoff-max 30s is below"},
		{name: "no crash-loop restarts", args: []string{"--crash-loop-restarts", "0"}, wantErr: "--crash-loop-restarts 0: want at least 1"},
		{name: "no event buffer", args: []string{"--event-buffer", "0"}, wantErr: "--event-buffer 0: want at least 1"},
		{name: "no MCP sessions", args: []string{"--mcp-max-sessions", "0"}, wantErr: "--mcp-max-sessions 0"},
		{name: "negative max-inflight-calls", args: []string{"--max-inflight-calls", "-1"}, wantErr: "--max-inflight-calls -1"},
		{name: "empty MCPD_API_TOKEN means none", env: map[string]string{"MCPD_API_TOKEN": ""}, want: defaults},
		{name: "blank MCPD_API_TOKEN", env: map[string]string{"MCPD_API_TOKEN": " "}, wantErr: "MCPD_API_TOKEN is empty but for whitespace"},
		{name: "MCPD_API_TOKEN with a newline", env: map[string]string{"MCPD_API_TOKEN": "tok-value\n"}, wantErr: "MCPD_API_TOKEN contains whitespace"},
		{name: "MCPD_API_TOKEN with a space", env: map[string]string{"MCPD_API_TOKEN": "tok value"}, wantErr: "MCPD_API_TOKEN contains whitespace"},
		{name: "bad environment value", env: map[string]string{"MCPD_STOP_GRACE": "soon"}, wantErr: "MCPD_STOP_GRACE"},
		// The flag package says only "parse error"; without the usage it
		// prints for a bad flag, the variable's error must say what it wants.
		{name: "duration without a unit from the environment", env: map[string]string{"MCPD_CALL_TIMEOUT": "5"}, wantErr: `MCPD_CALL_TIMEOUT "5": want a duration such as 30s or 2m (--call-timeout)`},
		{name: "bad boolean from the environment", env: map[string]string{"MCPD_STRICT": "yes"}, wantErr: `MCPD_STRICT "yes": want true or false (--strict)`},
		{name: "blank config from the environment", env: map[string]string{"MCPD_CONFIG": "  "}, wantErr: `MCPD_CONFIG "  ": empty: want a file or inline JSON (--config)`},
		{name: "bad number from the environment", env: map[string]string{"MCPD_EVENT_BUFFER": "4k"}, wantErr: `MCPD_EVENT_BUFFER "4k": want a whole number (--event-buffer)`},
		{name: "bad size from the environment", env: map[string]string{"MCPD_MEMORY_LIMIT": "1GB"}, wantErr: `MCPD_MEMORY_LIMIT: "1GB": want a positive size`},
		{name: "bad flag value", args: []string{"--call-timeout", "forever"}, wantErr: "call-timeout"},
		{name: "unknown flag", args: []string{"--api-token", "x"}, wantErr: "api-token"},
		{name: "extra argument", args: []string{"serve"}, wantErr: `unexpected argument "serve"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := parseFlags(tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "tok-value") {
					t.Errorf("error %q quotes the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFlags: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("help", func(t *testing.T) {
		var out bytes.Buffer
		_, err := parseFlags([]string{"-h"}, func(string) (string, bool) { return "", false }, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("got error %v, want flag.ErrHelp", err)
		}
		if !strings.Contains(out.String(), "-listen") {
			t.Errorf("usage: got %q, want it to describe -listen", out.String())
		}
	})
}

func TestListen(t *testing.T) {
	t.Run("loopback without token", func(t *testing.T) {
		for _, addr := range []string{"127.0.0.1:0", "localhost:0", "127.0.0.2:0"} {
			lis, err := listen(addr, false)
			if err != nil {
				t.Errorf("listen(%q): %v", addr, err)
				continue
			}
			if ip := lis.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
				t.Errorf("listen(%q): got address %v, want loopback", addr, lis.Addr())
			}
			lis.Close()
		}
	})

	t.Run("not loopback", func(t *testing.T) {
		for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0"} {
			lis, err := listen(addr, false)
			if err == nil {
				lis.Close()
				t.Errorf("listen(%q) unguarded: got no error, want a refusal", addr)
				continue
			}
			if !strings.Contains(err.Error(), "not a loopback address") {
				t.Errorf("listen(%q): got %v, want 'not a loopback address'", addr, err)
			}
		}
		// Guarded (TLS plus a credential) the address passes the check. Tests bind loopback
		// only, so the address is one this machine does not have: the bind
		// fails, but not with the refusal.
		lis, err := listen("192.0.2.1:0", true)
		if err == nil {
			lis.Close()
		} else if strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("listen 192.0.2.1:0 guarded: got %v, want no refusal", err)
		}
	})

	t.Run("bad address", func(t *testing.T) {
		for _, addr := range []string{"unix://", "no-port", "127.0.0.1"} {
			if lis, err := listen(addr, false); err == nil {
				lis.Close()
				t.Errorf("listen(%q): got no error, want one", addr)
			}
		}
	})

	// With --listen, --http-listen, --mcp-listen and --metrics-listen, an
	// address in use must say which of them it is.
	t.Run("address in use names the flag", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		for _, addr := range []string{taken.Addr().String(), "unix://" + filepath.Join(shortTempDir(t), "missing", "s.sock")} {
			for _, flag := range []string{"--listen", "--http-listen", "--mcp-listen", "--metrics-listen"} {
				var lis net.Listener
				var err error
				if flag == "--metrics-listen" {
					lis, err = listenMetrics(addr, false, nil)
				} else {
					lis, err = listenFor(flag, addr, false)
				}
				if err == nil {
					lis.Close()
					t.Errorf("%s %s: got no error, want one", flag, addr)
					continue
				}
				if !strings.Contains(err.Error(), flag+" ") && !strings.Contains(err.Error(), flag+":") {
					t.Errorf("%s %s: got %q, want an error naming %s", flag, addr, err, flag)
				}
			}
		}
	})

	t.Run("unix socket", func(t *testing.T) {
		path := filepath.Join(shortTempDir(t), "s.sock")
		// A stale socket from a previous run is replaced.
		stale, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		stale.(*net.UnixListener).SetUnlinkOnClose(false)
		stale.Close()

		// Files created before and after listen get the same mode: the
		// umask that makes the socket 0600 is restored.
		before := createdMode(t, filepath.Join(filepath.Dir(path), "before"))
		lis, err := listen("unix://"+path, false)
		if err != nil {
			t.Fatalf("listen over a stale socket: %v", err)
		}
		defer lis.Close()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("socket mode: got %v, want a socket with 0600", fi.Mode())
		}
		if after := createdMode(t, filepath.Join(filepath.Dir(path), "after")); after != before {
			t.Errorf("file mode after listen: got %v, want %v as before (umask not restored)", after, before)
		}
	})
}

// createdMode creates a file asking for mode 0777 and returns the mode it
// got, which shows the process umask.
func createdMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestListenKeepsOtherFiles checks that --listen unix://PATH never deletes
// what is at PATH unless it is a stale socket.
func TestListenKeepsOtherFiles(t *testing.T) {
	dir := shortTempDir(t)

	t.Run("regular file", func(t *testing.T) {
		path := filepath.Join(dir, "notes.txt")
		if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		if lis, err := listen("unix://"+path, false); err == nil {
			lis.Close()
			t.Errorf("listen on a regular file: got no error, want a refusal")
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
			t.Errorf("regular file after listen: got %q, %v; want it untouched", b, err)
		}
	})

	t.Run("live socket", func(t *testing.T) {
		path := filepath.Join(dir, "live.sock")
		live, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if lis, err := listen("unix://"+path, false); err == nil {
			lis.Close()
			t.Errorf("listen on a socket that is being served: got no error, want a refusal")
		}
	})
}

// TestIsLocal checks which listeners get fixed flow-control windows: Unix
// sockets and loopback addresses, not addresses other machines reach.
func TestIsLocal(t *testing.T) {
	tcp, err := listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unix, err := listen("unix://"+filepath.Join(shortTempDir(t), "mcpd.sock"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	for _, c := range []struct {
		name string
		lis  net.Listener
		want bool
	}{
		{"loopback", tcp, true},
		{"unix socket", unix, true},
		{"other address", addrListener{&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 50051}}, false},
		{"all interfaces", addrListener{&net.TCPAddr{IP: net.IPv4zero, Port: 50051}}, false},
	} {
		if got := isLocal(c.lis); got != c.want {
			t.Errorf("%s (%v): isLocal = %v, want %v", c.name, c.lis.Addr(), got, c.want)
		}
	}
}

// addrListener is a listener that only has an address: isLocal must judge
// addresses this test may not bind.
type addrListener struct{ addr net.Addr }

func (l addrListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (l addrListener) Close() error              { return nil }
func (l addrListener) Addr() net.Addr            { return l.addr }

func TestAPITokenSources(t *testing.T) {
	dir := shortTempDir(t)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		cfg     config
		want    string
		wantErr string
	}{
		{name: "none", cfg: config{}, want: ""},
		{name: "environment", cfg: config{apiToken: "env-tok"}, want: "env-tok"},
		{name: "file wins, trimmed", cfg: config{apiToken: "env-tok", apiTokenFile: write("tok", "  file-tok\n")}, want: "file-tok"},
		{name: "empty file", cfg: config{apiTokenFile: write("empty", " \n")}, wantErr: "empty"},
		{name: "missing file", cfg: config{apiTokenFile: filepath.Join(dir, "nope")}, wantErr: "read API token file"},
		{name: "device", cfg: config{apiTokenFile: "/dev/zero"}, wantErr: "read API token file: read /dev/zero: is a character device, not a regular file"},
		{name: "too large", cfg: config{apiTokenFile: write("big", strings.Repeat("t", 1<<20+1))}, wantErr: "big: too large: more than 1 MiB"},
		// Opening a FIFO nobody writes to used to wait for a writer, for ever.
		{name: "FIFO without a writer", cfg: config{apiTokenFile: fifo}, wantErr: "API token file is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := apiToken(&tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		level, format string
		ok            bool
	}{
		{"info", "json", true},
		{"debug", "console", true},
		{"WARN", "json", true},
		{"error", "json", true},
		{"", "json", false},
		{"loud", "json", false},
		// zerolog's other levels: "disabled" would mute the audit trail.
		{"disabled", "json", false},
		{"trace", "json", false},
		{"fatal", "json", false},
		{"panic", "json", false},
		{"7", "json", false},
		{"info", "xml", false},
	} {
		if _, err := newLogger(tc.level, tc.format); (err == nil) != tc.ok {
			t.Errorf("newLogger(%q, %q): got error %v, want ok=%v", tc.level, tc.format, err, tc.ok)
		}
	}
}

// TestAllowCommandFlagOverridesEnv: for the list flag too, the command line
// wins over MCPD_ALLOW_COMMAND instead of adding to it.
func TestAllowCommandFlagOverridesEnv(t *testing.T) {
	env := func(name string) (string, bool) {
		if name == "MCPD_ALLOW_COMMAND" {
			return "npx,uvx", true
		}
		return "", false
	}
	c, err := parseFlags(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string(c.allowCommands); !slices.Equal(got, []string{"npx", "uvx"}) {
		t.Errorf("from the environment: got %q", got)
	}
	c, err = parseFlags([]string{"--allow-command", "/usr/bin/node"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string(c.allowCommands); !slices.Equal(got, []string{"/usr/bin/node"}) {
		t.Errorf("flag over environment: got %q, want only the flag's", got)
	}
}

// TestCommandPolicyFromFlags: no --allow-command allows every command,
// none allows none, and a list allows what it names.
func TestCommandPolicyFromFlags(t *testing.T) {
	for _, tc := range []struct {
		list commandList
		want server.CommandPolicy
	}{
		{nil, server.CommandPolicy{}},
		{commandList{"none"}, server.CommandPolicy{None: true}},
		{commandList{"npx", "uvx"}, server.CommandPolicy{Allowed: []string{"npx", "uvx"}}},
	} {
		got := (&config{allowCommands: tc.list}).commandPolicy()
		if diff := cmp.Diff(&tc.want, got); diff != "" {
			t.Errorf("--allow-command %q (-want +got):\n%s", tc.list, diff)
		}
	}
}

func TestToolRuleFlags(t *testing.T) {
	env := func(name string) (string, bool) {
		switch name {
		case "MCPD_DENY_TOOL":
			return "mcp__*__delete_*,mcp__a__b", true
		case "MCPD_ASK_TOOL":
			return "mcp__x__*", true
		}
		return "", false
	}
	c, err := parseFlags([]string{"--ask-tool", "mcp__y__*", "--ask-tool", "mcp__z__*", "--allow-tool", "mcp__a__*", "--tool-default", "ask", "--trace-server", "a,b"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag      string
		got, want []string
	}{
		{"deny-tool (environment)", c.denyTools, []string{"mcp__*__delete_*", "mcp__a__b"}},
		{"ask-tool (flags over environment)", c.askTools, []string{"mcp__y__*", "mcp__z__*"}},
		{"allow-tool", c.allowTools, []string{"mcp__a__*"}},
		{"trace-server", c.traceServers, []string{"a", "b"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.flag, tc.got, tc.want)
		}
	}
	if c.toolDefault != "ask" {
		t.Errorf("tool-default: got %q, want ask", c.toolDefault)
	}
	if _, err := parseFlags([]string{"--tool-default", "maybe"}, env, io.Discard); err == nil || !strings.Contains(err.Error(), "--tool-default") {
		t.Errorf("--tool-default maybe: got %v, want an error naming the flag", err)
	}
}

// TestGuards checks which settings let the gRPC and the metrics listener
// serve beyond loopback (the e2e tests bind loopback only).
func TestGuards(t *testing.T) {
	tlsOnly := config{tlsCert: "c.pem", tlsKey: "k.pem"}
	withCallers := tlsOnly
	withCallers.callersFile = "callers.json"
	mutual := tlsOnly
	mutual.tlsClientCA = "ca.pem"
	plainCallers := config{callersFile: "callers.json"}
	for _, tc := range []struct {
		name         string
		c            config
		token        string
		grpc, metric bool
	}{
		{"nothing", config{}, "", false, false},
		{"token without TLS", config{}, "tok", false, false},
		{"callers without TLS", plainCallers, "", false, false},
		{"TLS without a credential", tlsOnly, "", false, false},
		{"TLS and token", tlsOnly, "tok", true, true},
		{"TLS and callers", withCallers, "", true, false},
		{"mutual TLS", mutual, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := guardedBeyondLoopback(&tc.c, tc.token); got != tc.grpc {
				t.Errorf("gRPC listener: got guarded %v, want %v", got, tc.grpc)
			}
			if got := metricsGuarded(&tc.c, tc.token); got != tc.metric {
				t.Errorf("metrics listener: got guarded %v, want %v", got, tc.metric)
			}
		})
	}
}

// TestOwnVariables: the variables kept from servers and from state file
// references include mcpd's settings, its API token and the callers
// file's token variables, and not the state file's own references.
func TestOwnVariables(t *testing.T) {
	dir := t.TempDir()
	callers := filepath.Join(dir, "callers.json")
	if err := os.WriteFile(callers, []byte(`{"callers": [{"name": "ci", "token": "${CI_TOKEN}", "permissions": {}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	authz, err := access.New(&access.Options{CallersFile: callers, Lookup: func(k string) (string, bool) { return "ci-token", k == "CI_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	reserved, withheld := stateReserved(authz), withheldEnv(authz)
	for _, tc := range []struct {
		name               string
		reserved, withheld bool
	}{
		{"MCPD_API_TOKEN", true, true},
		{"MCPD_LISTEN", true, true},
		{"MCPD_STATE_FILE", true, true},
		{"MCPD_MCP_CONNECT", true, true},
		{"CI_TOKEN", true, true},
		{"MCPD_DOCS_AUTHORIZATION", false, true},
		{"OTEL_EXPORTER_OTLP_HEADERS", true, true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", false, false},
		{"GITHUB_TOKEN", false, false},
		{"PATH", false, false},
	} {
		if got := reserved(tc.name); got != tc.reserved {
			t.Errorf("stateReserved(%s) = %v, want %v", tc.name, got, tc.reserved)
		}
		if got := withheld(tc.name); got != tc.withheld {
			t.Errorf("withheldEnv(%s) = %v, want %v", tc.name, got, tc.withheld)
		}
	}
}

// TestDemoServerArgs: the demo server says what it is when asked for
// help first, instead of serving; other arguments are ignored, so that
// configs can tell copies apart by them.
func TestDemoServerArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		done bool
		out  string
	}{
		{nil, false, ""},
		{[]string{"--help"}, true, "usage: mcpd demo-server"},
		{[]string{"-h"}, true, "usage: mcpd demo-server"},
		{[]string{"marker", "--help"}, false, ""},
		{[]string{"marker"}, false, ""},
	} {
		var stderr strings.Builder
		code, done := demoServerArgs(tc.args, &stderr)
		if code != 0 || done != tc.done || !strings.Contains(stderr.String(), tc.out) || (!done && stderr.Len() > 0) {
			t.Errorf("demo-server %q: got code %d, done %v, stderr %q; want 0, %v, containing %q", tc.args, code, done, stderr.String(), tc.done, tc.out)
		}
	}
}

// TestStopHeapSampling: mcpd turns off the heap profile's sampling unless
// GODEBUG sets memprofilerate, which then stands.
func TestStopHeapSampling(t *testing.T) {
	was := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = was })
	for _, tc := range []struct {
		godebug string
		want    int
	}{
		{"", 0},
		{"madvdontneed=1", 0},
		{"madvdontneed=1, memprofilerate=4096", 4096},
		{"memprofilerate=1", 4096},
	} {
		runtime.MemProfileRate = 4096
		stopHeapSampling(tc.godebug)
		if runtime.MemProfileRate != tc.want {
			t.Errorf("GODEBUG=%q: MemProfileRate %d, want %d", tc.godebug, runtime.MemProfileRate, tc.want)
		}
	}
}
