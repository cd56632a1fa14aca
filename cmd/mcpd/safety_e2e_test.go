package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestNonLoopbackNeedsToken checks that mcpd refuses to listen beyond the
// machine without an API token.
func TestNonLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	for _, host := range []string{"0.0.0.0", ""} {
		listen := net.JoinHostPort(host, strconv.Itoa(freePort(t)))
		code, out := runMcpd(ctx, t, "--listen", listen, "--config", emptyConfig(t))
		if code == 0 {
			t.Fatalf("mcpd --listen %s without a token: got exit code 0, want non-zero\n%s", listen, out)
		}
		if !strings.Contains(out, "not a loopback address") || !strings.Contains(out, "MCPD_API_TOKEN") {
			t.Errorf("mcpd --listen %s: got output %q, want it to say the address is not loopback and how to set a token", listen, out)
		}
	}
}

// TestExitCodes checks how mcpd ends when it cannot run.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "mcpd.sock")
	malformed := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(malformed, []byte(`{"mcpServers": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"help", []string{"-h"}, 0, "-listen"},
		{"unknown flag", []string{"--bogus"}, 2, "bogus"},
		{"extra argument", []string{"serve"}, 2, `unexpected argument "serve"`},
		{"missing config", []string{"--listen", "unix://" + sock, "--config", filepath.Join(dir, "nope.json")}, 1, "nope.json"},
		{"malformed config", []string{"--listen", "unix://" + sock, "--config", malformed}, 1, "bad.json"},
		{"bad log format", []string{"--listen", "unix://" + sock, "--log-format", "xml"}, 2, "xml"},
		{"empty socket path", []string{"--listen", "unix://"}, 1, "needs a path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runMcpd(ctx, t, tc.args...)
			if code != tc.wantCode || !strings.Contains(out, tc.wantOut) {
				t.Errorf("mcpd %q: got exit code %d and output %q, want %d and %q", tc.args, code, out, tc.wantCode, tc.wantOut)
			}
			// A daemon that gave up removes the socket it had opened.
			if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket %s after exit: got %v, want it removed", sock, err)
			}
		})
	}
}

// runMcpd runs mcpd to completion and returns its exit code and output.
func runMcpd(ctx context.Context, t *testing.T, args ...string) (int, string) {
	t.Helper()
	return runMcpdWith(ctx, t, daemonEnv(), args...)
}

// runMcpdWith is runMcpd with the environment env.
func runMcpdWith(ctx context.Context, t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, mcpdBinary(t), args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run mcpd %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestAPIToken serves with a token, from the environment and from a file,
// and checks who gets in. (Beyond loopback a token also needs TLS:
// TestTLSWithToken.)
func TestAPIToken(t *testing.T) {
	t.Parallel()
	const token = "e2e-token-4f8a"
	tokenFile := filepath.Join(shortTempDir(t), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts func(listen string) daemonOptions
	}{
		{"env", func(listen string) daemonOptions {
			return daemonOptions{listen: listen, env: []string{"MCPD_API_TOKEN=" + token}}
		}},
		{"file", func(listen string) daemonOptions {
			return daemonOptions{listen: listen, args: []string{"--api-token-file", tokenFile}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			opts := tc.opts("127.0.0.1:" + strconv.Itoa(freePort(t)))
			opts.config = emptyConfig(t)
			// startDaemon's own health check runs without a token.
			d := startDaemon(ctx, t, opts)

			for _, c := range []struct {
				name string
				md   []string
				want codes.Code
			}{
				{"no token", nil, codes.Unauthenticated},
				{"wrong token", []string{"authorization", "Bearer not-" + token}, codes.Unauthenticated},
				{"wrong scheme", []string{"authorization", "Basic " + token}, codes.Unauthenticated},
				{"token", []string{"authorization", "Bearer " + token}, codes.OK},
			} {
				t.Run(c.name, func(t *testing.T) {
					callCtx := ctx
					if c.md != nil {
						callCtx = metadata.AppendToOutgoingContext(ctx, c.md...)
					}
					_, err := d.hub.ListServers(callCtx, &mcpdv1.ListServersRequest{})
					if c.want == codes.OK {
						if err != nil {
							t.Fatalf("ListServers with the token: %v", err)
						}
						return
					}
					st := wantCode(t, err, c.want)
					if strings.Contains(st.Message(), token) {
						t.Errorf("status message %q contains the token", st.Message())
					}
				})
			}
			resp, err := d.health.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health without a token: got %v, %v; want SERVING", resp.GetStatus(), err)
			}
			if strings.Contains(d.log.String(), token) {
				t.Errorf("mcpd log contains the API token")
			}
		})
	}
}

// TestSocketMode checks that the Unix socket is private to mcpd's user.
func TestSocketMode(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	fi, err := os.Stat(d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: got mode %v, want a socket with 0600", d.sock, fi.Mode())
	}
}

// TestSecretsNotEchoed connects servers with a secret in their environment
// and checks that neither the API nor mcpd's log shows its value.
func TestSecretsNotEchoed(t *testing.T) {
	t.Parallel()
	const secret = "sekret-value-123"
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: []string{"--log-level", "debug"}})
	env := map[string]string{"API_KEY": secret}

	ready := d.connect(ctx, t, "with-secret", mcpdBinary(t), []string{"demo-server"}, env)
	if ready.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("state: got %v (%s), want READY", ready.GetState(), ready.GetLastError())
	}
	if got := ready.GetEnvNames(); len(got) != 1 || got[0] != "API_KEY" {
		t.Errorf("env_names: got %q, want [API_KEY]", got)
	}
	failed := d.connect(ctx, t, "failed-secret", "/nonexistent/mcpd-e2e-secret-server", nil, env)
	if failed.GetState() != mcpdv1.ServerState_SERVER_STATE_FAILED {
		t.Errorf("state: got %v, want FAILED", failed.GetState())
	}
	d.mustCall(ctx, t, "mcp__with-secret__echo", map[string]any{"message": "hi"})
	// Header values are secrets too; nothing listens at this loopback URL.
	httpResp, err := d.hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: &mcpdv1.ServerConfig{
		Name: "http-secret",
		Transport: &mcpdv1.ServerConfig_Http{Http: &mcpdv1.HttpConfig{
			Url:     "http://127.0.0.1:" + strconv.Itoa(freePort(t)) + "/mcp",
			Headers: map[string]string{"Authorization": "Bearer " + secret},
		}},
	}})
	if err != nil {
		t.Fatalf("ConnectServer http: %v", err)
	}
	if got := httpResp.GetServer().GetHeaderNames(); len(got) != 1 || got[0] != "Authorization" {
		t.Errorf("header_names: got %q, want [Authorization]", got)
	}

	list, err := d.hub.ListServers(ctx, &mcpdv1.ListServersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for what, msg := range map[string]proto.Message{
		"ConnectServer (ready)":  ready,
		"ConnectServer (failed)": failed,
		"ConnectServer (http)":   httpResp,
		"ListServers":            list,
	} {
		b, err := protojson.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s response contains the secret: %s", what, b)
		}
	}
	// Stop mcpd so that every log line is written, then search the log.
	if code := d.signal(t, syscall.SIGTERM); code != 0 {
		t.Errorf("mcpd exit code: got %d, want 0", code)
	}
	if strings.Contains(d.log.String(), secret) {
		t.Errorf("mcpd log contains the secret")
	}
}
