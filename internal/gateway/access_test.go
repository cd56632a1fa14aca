package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// TestGatewaySetsServerAsks: the endpoint's Authorizer holds a call of a
// tool its server's toolsAsk names, whatever else was built on it.
func TestGatewaySetsServerAsks(t *testing.T) {
	m := mcpclient.NewManager(nil)
	defer func() { _ = m.Close(context.Background()) }()
	cfg := config.Server{Name: "s", Kind: config.TransportStdio, Command: "unused", ToolsAsk: []string{"write_*"}}
	if err := m.AddStopped(cfg, mcpclient.StateDisabled, nil, false); err != nil {
		t.Fatal(err)
	}
	authz, err := access.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g := New(m, &Options{Access: authz})
	defer g.Close()
	anyone, err := authz.Authenticate(access.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	var ask *access.ApprovalRequiredError
	err = authz.Authorize(anyone, access.Action{Verb: access.CallTool, Server: "s", Tool: "mcp__s__write_file"})
	if !errors.As(err, &ask) || ask.Rule != "ask mcp__s__write_*" {
		t.Errorf("a call of a tool the server asks for: got %v, want approval required by ask mcp__s__write_*", err)
	}
	if err := authz.Authorize(anyone, access.Action{Verb: access.CallTool, Server: "s", Tool: "mcp__s__read_file"}); err != nil {
		t.Errorf("a call of another tool: got %v, want nil", err)
	}
}

// TestRecoverPanics: a handler that panics fails its request with an
// internal error instead of ending the process.
func TestRecoverPanics(t *testing.T) {
	g := &Gateway{}
	h := g.internalErrors(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("boom") })
	res, err := h(context.Background(), "tools/call", nil)
	var je *jsonrpc.Error
	if res != nil || !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || strings.Contains(je.Message, "boom") {
		t.Errorf("got %v, %v; want an internal error that does not quote the panic", res, err)
	}
}

// TestUnexpectedErrorHidden: an error no case of the table maps reaches
// the host as "internal error" (-32603), as at the gRPC edge, not with its
// text; the cause is in mcpd's log.
func TestUnexpectedErrorHidden(t *testing.T) {
	var buf syncBuffer
	g := &Gateway{log: zerolog.New(&buf)}
	h := g.internalErrors(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return nil, wireError(errors.New("open /var/lib/mcpd/x: detail"))
	})
	_, err := h(context.Background(), "prompts/get", nil)
	var je *jsonrpc.Error
	if err == nil || err.Error() != "internal error" || !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
		t.Errorf("got %v; want error -32603 \"internal error\"", err)
	}
	if log := buf.String(); !strings.Contains(log, "open /var/lib/mcpd/x: detail") || !strings.Contains(log, "prompts/get") {
		t.Errorf("the log does not name the cause and the method: %s", log)
	}
	if got := outcome(err); got != "Error" {
		t.Errorf("audited as %s, want Error", got)
	}
}

// TestMalformedResultIsAProtocolError: a tool call whose server answered
// a result mcpd cannot read ran: it is a protocol error (-32603) with the
// message saying so, not an isError result of a call that could not run.
func TestMalformedResultIsAProtocolError(t *testing.T) {
	const msg = `tools/call x: server "s" answered a result mcpd cannot read: data that is not base64`
	res, err := toolError(fmt.Errorf("%s: %w", msg, mcpclient.ErrMalformedResult))
	var je *jsonrpc.Error
	if res != nil || !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.HasPrefix(je.Message, msg) {
		t.Errorf("got %v, %v; want error -32603 %q", res, err, msg)
	}
}

// TestServerErrorsStayTheServers: a server's own error answer whose code
// mcpd also uses for its own errors (-32000 for "could not run", -32001
// for a permission) is passed on as the server's protocol error and
// audited as an error, not taken for mcpd's.
func TestServerErrorsStayTheServers(t *testing.T) {
	for _, code := range []int64{codeUnavailable, codePermissionDenied} {
		upstream := fmt.Errorf("tools/call x: %w", &mcpclient.RPCError{Server: "s", Code: code, Message: "the server's own"})
		res, err := toolError(upstream)
		var je *jsonrpc.Error
		if res != nil || !errors.As(err, &je) || je.Code != code || je.Message != "the server's own" {
			t.Errorf("toolError of the server's %d: got %v, %v; want its own error, as a protocol error", code, res, err)
		}
		if got := outcome(upstream); got != "Error" {
			t.Errorf("outcome of the server's %d: got %q, want Error", code, got)
		}
	}
	// mcpd's own: a call that could not run is a tool result; a refusal is
	// audited as one.
	if res, err := toolError(fmt.Errorf("calling: %w", mcpclient.ErrUnavailable)); err != nil || res == nil || !res.IsError {
		t.Errorf("toolError of UNAVAILABLE: got %v, %v; want an isError result", res, err)
	}
	if got := outcome(access.ErrPermissionDenied); got != "PermissionDenied" {
		t.Errorf("outcome of a refusal: got %q, want PermissionDenied", got)
	}
	if got := outcome(&mcpclient.RPCError{Code: jsonrpc.CodeInvalidParams}); got != "InvalidArgument" {
		t.Errorf("outcome of the server's -32602: got %q, want InvalidArgument", got)
	}
}

// TestSetLevelRefusesUnknownLevel: logging/setLevel with a level MCP does
// not define is invalid params (-32602), as SetLogLevel's INVALID_ARGUMENT
// over gRPC, and the session keeps no level; a level MCP defines is kept.
func TestSetLevelRefusesUnknownLevel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := New(newTestManager(t), nil)
	runGateway(ctx, t, g)
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	levels := func() []mcp.LoggingLevel {
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Collect(maps.Values(g.levels))
	}

	err = cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "loud"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, `"loud"`) {
		t.Errorf("level loud: got %v, want -32602 naming the level", err)
	}
	if got := levels(); len(got) != 0 {
		t.Errorf("levels kept after the refusal: got %v, want none", got)
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatalf("level warning: %v", err)
	}
	if got := levels(); !slices.Equal(got, []mcp.LoggingLevel{"warning"}) {
		t.Errorf("levels: got %v, want [warning]", got)
	}
}
