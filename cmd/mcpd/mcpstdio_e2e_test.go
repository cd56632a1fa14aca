package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// TestMCPStdioErrorCodes: mcpd's JSON-RPC errors reach a host behind
// mcp-stdio with their codes and data in both eras, although the
// 2026-07-28 endpoint sends them with HTTP 400 or 404: an unknown tool is
// -32602 in either era, an unknown method -32601 (the initialize era's
// endpoint refuses it without a JSON-RPC answer), and an unsupported
// protocol version is -32022 with the versions mcpd supports. A line that
// is not JSON is a parse error, one with an object as id an invalid
// request, both with id null.
func TestMCPStdioErrorCodes(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	_, url := startGateway(ctx, t, "")
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo")
	meta := func(version string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientCapabilities":{}}`
	}
	for _, tc := range []struct {
		name, stdin string
		want        map[string]int64 // error code by request id
	}{
		{"2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__ghost__x","arguments":{}}}
{"jsonrpc":"2.0","id":3,"method":"no/such/method","params":{}}
hello
`, map[string]int64{"2": jsonrpc.CodeInvalidParams, "3": jsonrpc.CodeMethodNotFound, "null": jsonrpc.CodeParseError}},
		{"2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp__ghost__x","arguments":{},` + meta("2026-07-28") + `}}
{"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{` + meta("2026-07-28") + `}}
{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta("2099-01-01") + `}}
{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}
`, map[string]int64{"1": jsonrpc.CodeInvalidParams, "2": -32601, "3": mcp.CodeUnsupportedProtocolVersion, "null": jsonrpc.CodeInvalidRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, mcpdBinary(t), "mcp-stdio", "--connect", url)
			cmd.Env = daemonEnv()
			cmd.Stdin = strings.NewReader(tc.stdin)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("mcp-stdio: %v", err)
			}
			got := hostAnswers(t, string(out))
			for id, code := range tc.want {
				if a := got[id]; a.Error == nil || a.Error.Code != code {
					t.Errorf("request %s: got %s, want error %d", id, a.Raw, code)
				}
			}
			if a, ok := got["3"]; ok && a.Error != nil && a.Error.Code == mcp.CodeUnsupportedProtocolVersion {
				var data mcp.UnsupportedProtocolVersionData
				if err := json.Unmarshal(a.Error.Data, &data); err != nil || !slices.Contains(data.Supported, "2026-07-28") {
					t.Errorf("unsupported version: got data %s (%v), want the supported versions, 2026-07-28 among them", a.Error.Data, err)
				}
			}
		})
	}
}

// TestMCPStdioSignal: SIGTERM or SIGINT stops `mcpd mcp-stdio` while the
// host keeps stdin open: it exits 0, and the call it had in flight ends
// (the server sees it cancelled).
func TestMCPStdioSignal(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d, url := startGateway(ctx, t, "")
	d.connectFake(ctx, t, "slow", fakeSlow)
	d.waitServer(ctx, t, "slow", mcpdv1.ServerState_SERVER_STATE_READY)
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__slow__sleep")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(mcpdBinary(t), "mcp-stdio", "--connect", url)
			cmd.Env = daemonEnv()
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var out syncBuffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			defer func() {
				select {
				case <-exited:
				default:
					_ = cmd.Process.Kill()
					<-exited
				}
			}()
			send := func(line string) {
				t.Helper()
				if _, err := io.WriteString(stdin, line+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`)
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			poll(ctx, t, "the answer to initialize", func() (bool, error) {
				return strings.Contains(out.String(), `"id":1`), nil
			})
			tag := "signal-" + sig.String()
			send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp__slow__sleep","arguments":{"ms":60000,"tag":"` + tag + `"},` +
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
			d.waitStderr(ctx, t, "slow", fakeSleepStarted+" "+tag)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-ctx.Done():
				t.Fatalf("mcp-stdio did not exit after %v with stdin open", sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != stdioDone {
				t.Errorf("exit code after %v: got %d, want %d", sig, code, stdioDone)
			}
			d.waitStderr(ctx, t, "slow", fakeSleepCancelled+" "+tag)
			if strings.Contains(out.String(), `"id":2`) {
				t.Errorf("the host got %q, want no answer made up for the call ended by %v", out.String(), sig)
			}
		})
	}
}

// TestMCPStdioTLS: mcp-stdio reaches an MCP endpoint that serves TLS with
// client certificates (mcpd's --tls-cert and --tls-client-ca), on TCP
// (an https:// URL, or host:port with a TLS flag) and on a Unix socket,
// and it does not trust a certificate of a CA it was not given.
func TestMCPStdioTLS(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	serverCA := newCA(t, "server")
	clientCA := newCA(t, "clients")
	cert, key := serverCA.serverCert(t, "mcpd")
	clientCert, clientKey := clientCA.issue(t, "host", certSpec{CN: "host"})
	serve := []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", clientCA.path}
	tcp := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sock := "unix://" + filepath.Join(shortTempDir(t), "mcp.sock")
	for _, addr := range []string{tcp, sock} {
		startDaemon(ctx, t, daemonOptions{config: emptyConfig(t), args: append([]string{"--mcp-listen", addr}, serve...),
			creds: clientTLS(t, serverCA, clientCert, clientKey)})
	}
	const stdin = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`
	trusted := []string{"--tls-ca", serverCA.path, "--tls-client-cert", clientCert, "--tls-client-key", clientKey}
	for _, tc := range []struct {
		name     string
		args     []string
		wantExit int    // 0: both requests answered
		wantErr  string // in stderr for a nonzero exit, else in the answers' errors ("": results)
	}{
		{"https URL", append([]string{"--connect", "https://" + tcp + "/mcp"}, trusted...), 0, ""},
		{"host:port", append([]string{"--connect", tcp}, trusted...), 0, ""},
		{"Unix socket", append([]string{"--connect", sock}, trusted...), 0, ""},
		// The host is answered, so that it does not wait, with the reason.
		{"no CA given", []string{"--connect", "https://" + tcp + "/mcp", "--tls-client-cert", clientCert, "--tls-client-key", clientKey}, 0, "certificate signed by unknown authority"},
		{"TLS flags with an http URL", append([]string{"--connect", "http://" + tcp + "/mcp"}, trusted...), stdioUsage, "https://"},
		{"client key without its certificate", []string{"--connect", tcp, "--tls-client-key", clientKey}, stdioUsage, "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, mcpdBinary(t), append([]string{"mcp-stdio"}, tc.args...)...)
			cmd.Env = daemonEnv()
			cmd.Stdin = strings.NewReader(stdin)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			exit := 0
			if ee, ok := err.(*exec.ExitError); ok {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.wantExit != 0 {
				if exit != tc.wantExit || !strings.Contains(stderr.String(), tc.wantErr) {
					t.Fatalf("exit %d, stderr %q; want exit %d, stderr with %q", exit, stderr.String(), tc.wantExit, tc.wantErr)
				}
				return
			}
			if exit != 0 {
				t.Fatalf("exit %d, stderr %q; want 0", exit, stderr.String())
			}
			got := hostAnswers(t, string(out))
			for _, id := range []string{"1", "2"} {
				a, ok := got[id]
				switch {
				case !ok:
					t.Errorf("request %s: no answer", id)
				case tc.wantErr == "" && a.Error != nil:
					t.Errorf("request %s: got %s, want a result", id, a.Raw)
				case tc.wantErr != "" && (a.Error == nil || !strings.Contains(a.Error.Message, tc.wantErr)):
					t.Errorf("request %s: got %s, want an error with %q", id, a.Raw, tc.wantErr)
				}
			}
		})
	}
}

// TestMCPStdioSessionRenewed: when mcpd restarts, the session of an
// initialize-era host behind mcp-stdio is gone (mcpd answers 404), and a
// host that starts stdio servers cannot start a new one: it does not know
// of sessions. The bridge opens a new session with the host's initialize,
// sends the request again (mcpd never saw it), and tells the host that
// the lists may have changed.
func TestMCPStdioSessionRenewed(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	url := "http://" + addr + "/mcp"
	first := startDaemon(ctx, t, daemonOptions{args: []string{"--mcp-listen", addr}})
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo")

	changed := make(chan struct{}, 16)
	cmd := exec.Command(mcpdBinary(t), "mcp-stdio", "--connect", url)
	cmd.Env = daemonEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect through mcp-stdio: %v", err)
	}
	defer cs.Close()
	echo := func(msg string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp__demo__echo", Arguments: map[string]any{"message": msg}})
		if err != nil {
			t.Fatalf("echo %q through mcp-stdio: %v", msg, err)
		}
		if got := toolText(t, res); !strings.Contains(got, msg) {
			t.Fatalf("echo %q through mcp-stdio: got %q", msg, got)
		}
	}
	echo("before the restart")
	for len(changed) > 0 {
		<-changed
	}

	if code := first.signal(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("mcpd exit code after SIGTERM: got %d, want 0", code)
	}
	startDaemon(ctx, t, daemonOptions{args: []string{"--mcp-listen", addr}})
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo")
	echo("after the restart")
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after the session was renewed")
	}
	// The host's log of the server says why its lists changed.
	if !strings.Contains(stderr.String(), "mcpd lost the session") {
		t.Errorf("mcp-stdio's stderr: got %q, want a line about the renewed session", stderr.String())
	}
}
