package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/credentials"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// runMCPD runs bin/mcpd with args and env (on top of daemonEnv) to the end
// and returns its exit code, stdout and stderr.
func runMCPD(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(testContext(t), mcpdBinary(t), args...)
	cmd.Env = daemonEnv(env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run mcpd %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// TestVersion checks `mcpd --version`: one line on stdout, exit 0, and the
// other flags still checked so that a probe or manifest can validate its
// flags with it.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := runMCPD(t, nil, "--version")
	if code != 0 {
		t.Fatalf("mcpd --version: exit %d, stderr %q", code, errOut)
	}
	v, ok := strings.CutPrefix(out, "mcpd ")
	if !ok || !strings.HasSuffix(v, "\n") || strings.TrimSpace(v) == "" || strings.Count(out, "\n") != 1 {
		t.Errorf("mcpd --version printed %q, want one line \"mcpd <version>\"", out)
	}
	// MCPD_VERSION is not a setting: the daemon must not turn into
	// --version because of it. With a config file that does not exist it
	// must try to run, and fail to.
	missing := filepath.Join(t.TempDir(), "missing.mcp.json")
	if code, out, _ := runMCPD(t, []string{"MCPD_VERSION=true"}, "--config", missing); code != 1 || out != "" {
		t.Errorf("MCPD_VERSION=true mcpd --config %s: exit %d, stdout %q; want exit 1 and no version", missing, code, out)
	}
	if code, out, _ := runMCPD(t, nil, "--version", "--no-such-flag"); code != 2 || out != "" {
		t.Errorf("mcpd --version --no-such-flag: exit %d, stdout %q; want exit 2", code, out)
	}
	if code, _, errOut := runMCPD(t, nil, "--listen", "unix:///run/mcpd/mcpd.sock", "--max-inflight-calls", "64", "--version"); code != 0 {
		t.Errorf("mcpd --listen ... --version: exit %d, stderr %q; want 0", code, errOut)
	}
}

// TestHealthCommand checks `mcpd health`, the exec probe of a mcpd on a
// Unix socket, against a real daemon on a socket and on TCP.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	sock := "unix://" + d.sock

	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"daemon", nil, []string{"--listen", sock}, 0, "SERVING\n"},
		{"listen from MCPD_LISTEN", []string{"MCPD_LISTEN=" + sock}, nil, 0, "SERVING\n"},
		{"flag beats MCPD_LISTEN", []string{"MCPD_LISTEN=unix:///nonexistent/mcpd.sock"}, []string{"--listen", sock}, 0, "SERVING\n"},
		{"server", nil, []string{"--listen", sock, "--service", "mcpd.server/demo"}, 0, "SERVING\n"},
		{"unknown server", nil, []string{"--listen", sock, "--service", "mcpd.server/nope"}, 1, ""}, // NOT_FOUND
		{"nothing listening", nil, []string{"--listen", "unix://" + filepath.Join(shortTempDir(t), "none.sock"), "--timeout", "200ms"}, 1, ""},
		{"daemon's TLS variables ignored", []string{"MCPD_TLS_CERT=/nonexistent.pem", "MCPD_TLS_KEY=/nonexistent.pem", "MCPD_TLS_CA=/nonexistent.pem"}, []string{"--listen", sock}, 0, "SERVING\n"},
		{"bad flag", nil, []string{"--listen", sock, "--nope"}, 2, ""},
		{"extra argument", nil, []string{"--listen", sock, "extra"}, 2, ""},
		// A probe that cannot succeed is a usage error, not "mcpd is down".
		{"zero timeout", nil, []string{"--listen", sock, "--timeout", "0"}, 2, ""},
		{"negative timeout", nil, []string{"--listen", sock, "--timeout", "-1s"}, 2, ""},
		{"empty address", nil, []string{"--listen", ""}, 2, ""},
		{"socket without a path", nil, []string{"--listen", "unix://"}, 2, ""},
		{"address without a port", nil, []string{"--listen", "127.0.0.1"}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"health"}, tc.args...)
			code, out, errOut := runMCPD(t, tc.env, args...)
			if code != tc.wantCode || out != tc.wantOut {
				t.Errorf("mcpd %q: exit %d, stdout %q (stderr %q); want exit %d, stdout %q", args, code, out, errOut, tc.wantCode, tc.wantOut)
			}
		})
	}

	t.Run("tcp", func(t *testing.T) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		startDaemon(ctx, t, daemonOptions{listen: addr})
		if code, out, errOut := runMCPD(t, nil, "health", "--listen", addr); code != 0 || out != "SERVING\n" {
			t.Errorf("mcpd health --listen %s: exit %d, stdout %q (stderr %q); want 0, SERVING", addr, code, out, errOut)
		}
	})

	t.Run("stopped", func(t *testing.T) {
		if code := d.signal(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("mcpd exit code %d after SIGTERM", code)
		}
		if code, out, _ := runMCPD(t, nil, "health", "--listen", sock); code != 1 || out != "" {
			t.Errorf("mcpd health after mcpd stopped: exit %d, stdout %q; want exit 1", code, out)
		}
	})
}

// TestHealthTLS checks `mcpd health` against a mcpd serving TLS, with a
// token and with mutual TLS: the exec probe of the shared Deployment. The
// token is not needed (health is exempt), the certificate is checked.
func TestHealthTLS(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	serverCA, otherCA, clientCA := newCA(t, "server"), newCA(t, "other"), newCA(t, "clients")
	// Only the name "mcpd": dialing 127.0.0.1 needs --tls-server-name.
	cert, key := serverCA.issue(t, "mcpd", certSpec{CN: "mcpd", DNS: []string{"mcpd"}, Server: true})
	clientCert, clientKey := clientCA.issue(t, "probe", certSpec{CN: "probe"})
	notPEM := filepath.Join(shortTempDir(t), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The harness's client checks the name "mcpd" too.
	harnessTLS := func(certPath, keyPath string) credentials.TransportCredentials {
		cfg := clientTLSConfig(t, serverCA, certPath, keyPath)
		cfg.ServerName = "mcpd"
		return credentials.NewTLS(cfg)
	}
	tokenAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	startDaemon(ctx, t, daemonOptions{
		listen: tokenAddr,
		args:   []string{"--tls-cert", cert, "--tls-key", key},
		env:    []string{"MCPD_API_TOKEN=health-tls-token-5e1a"},
		creds:  harnessTLS("", ""),
	}) // SERVING once the demo server has started
	mutualAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	startDaemon(ctx, t, daemonOptions{
		listen: mutualAddr,
		config: emptyConfig(t),
		args:   []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA.path},
		creds:  harnessTLS(clientCert, clientKey),
	})
	verified := []string{"--tls-ca", serverCA.path, "--tls-server-name", "mcpd"}

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string // in stderr
	}{
		{"verified, no token", append([]string{"--listen", tokenAddr}, verified...), 0, ""},
		{"one server", append([]string{"--listen", tokenAddr, "--service", "mcpd.server/demo"}, verified...), 0, ""},
		{"plaintext to TLS", []string{"--listen", tokenAddr, "--timeout", "500ms"}, 1, ""},
		{"name not in the certificate", []string{"--listen", tokenAddr, "--tls-ca", serverCA.path}, 1, "127.0.0.1"},
		{"another CA", []string{"--listen", tokenAddr, "--tls-ca", otherCA.path, "--tls-server-name", "mcpd"}, 1, "certificate"},
		{"system CAs", []string{"--listen", tokenAddr, "--tls", "--tls-server-name", "mcpd"}, 1, "certificate"},
		{"mutual TLS", append([]string{"--listen", mutualAddr, "--tls-client-cert", clientCert, "--tls-client-key", clientKey}, verified...), 0, ""},
		{"mutual TLS without a client certificate", append([]string{"--listen", mutualAddr}, verified...), 1, ""},
		{"missing CA file", []string{"--listen", tokenAddr, "--tls-ca", filepath.Join(shortTempDir(t), "none.pem")}, 2, "--tls-ca"},
		{"CA file without certificates", []string{"--listen", tokenAddr, "--tls-ca", notPEM}, 2, "no PEM certificates"},
		{"client certificate without key", append([]string{"--listen", mutualAddr, "--tls-client-cert", clientCert}, verified...), 2, "go together"},
		{"client key that does not load", append([]string{"--listen", mutualAddr, "--tls-client-cert", clientCert, "--tls-client-key", notPEM}, verified...), 2, "--tls-client-cert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"health"}, tc.args...)
			code, out, errOut := runMCPD(t, nil, args...)
			wantOut := ""
			if tc.wantCode == 0 {
				wantOut = "SERVING\n"
			}
			if code != tc.wantCode || out != wantOut || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("mcpd %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q", args, code, out, errOut, tc.wantCode, wantOut, tc.wantErr)
			}
		})
	}
}
