package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// serverName is the name the scenario's server gets in mcpd; its tools are
// mcp__conformance__<tool>.
const serverName = "conformance"

// scenario is what the driver does for one suite scenario once the server
// is connected. What each one does follows the suite's scenario code and
// its reference clients.
type scenario struct {
	// run performs the scenario's client actions.
	run func(ctx context.Context, s *session) error
	// elicit is the content of accepted form elicitations; nil accepts
	// with empty content, which leaves the schema's defaults to mcpd.
	elicit map[string]any
	// refuse says mcpd must not connect: the server's authorization is
	// unsafe (a wrong resource, issuer or iss), so the scenario passes
	// when the server ends FAILED and fails when it becomes READY.
	refuse bool
	// refuseAnyReason accepts a FAILED server whatever its error says.
	refuseAnyReason bool
}

// scenarios maps suite scenario names to driver actions. Authorization
// scenarios ("auth/...") share authScenario.
func scenarios() map[string]scenario {
	return map[string]scenario{
		// Connect (initialize or server/discover) and list tools.
		"initialize":               {run: listOnly},
		"request-metadata":         {run: listOnly},
		"json-schema-ref-no-deref": {run: listOnly},

		"tools_call": {run: steps(
			call("add_numbers", map[string]any{"a": 5, "b": 3}),
		)},
		// The server elicits a form whose every field has a default; the
		// agent accepts it empty and mcpd must fill in the defaults.
		"elicitation-sep1034-client-defaults": {run: steps(
			call("test_client_elicitation_defaults", nil),
		)},
		// The server closes the call's SSE stream after a priming event; the
		// result arrives only if mcpd reconnects with GET and Last-Event-ID
		// after the advertised retry delay.
		"sse-retry": {run: steps(
			call("test_reconnection", nil),
		)},
		// Multi-round-trip tool calls: each tool checks one rule of
		// requestState and inputResponses handling.
		"sep-2322-client-request-state": {
			run: steps(
				call("test_mrtr_echo_state", nil),
				call("test_mrtr_unrelated", nil),
				call("test_mrtr_no_state", nil),
				call("test_mrtr_no_result_type", nil),
			),
			elicit: map[string]any{"confirmed": true},
		},
		"json-schema-2020-12-preservation": {run: echoSchema},
		"http-standard-headers":            {run: everyNamedMethod},
		"http-custom-headers":              {run: contextToolCalls},
		"http-invalid-tool-headers":        {run: callEveryListedTool},
	}
}

// authScenario is what an OAuth-protected server expects of a client that
// got through: list the tools and call test-tool.
func authScenario() scenario {
	return scenario{run: steps(call("test-tool", nil))}
}

// refusedAuthorization lists the scenarios whose authorization server or
// resource misbehaves: a client must stop before it uses a token, and mcpd
// must say that the server's authorization is why. In scope-retry-limit
// the server refuses every scope however often it is granted; the suite
// counts the attempts, and the server's last answer may be about anything.
var refusedAuthorization = map[string]struct{ anyReason bool }{
	"auth/scope-retry-limit":        {anyReason: true},
	"auth/resource-mismatch":        {},
	"auth/metadata-issuer-mismatch": {},
	"auth/iss-supported-missing":    {},
	"auth/iss-wrong-issuer":         {},
	"auth/iss-unexpected":           {},
	"auth/iss-normalized":           {},
}

// lookupScenario returns the actions of the named scenario.
func lookupScenario(name string) (scenario, bool) {
	if sc, ok := scenarios()[name]; ok {
		return sc, true
	}
	if r, ok := refusedAuthorization[name]; ok {
		return scenario{refuse: true, refuseAnyReason: r.anyReason}, true
	}
	if strings.HasPrefix(name, "auth/") {
		return authScenario(), true
	}
	return scenario{}, false
}

// session is a connected scenario server seen through MCPHub.
type session struct {
	hub     mcpdv1.MCPHubClient
	server  string
	context map[string]any // MCP_CONFORMANCE_CONTEXT
	log     io.Writer
	tools   []*mcpdv1.Tool // from the last listTools
}

// listTools lists the server's tools, every page.
func (s *session) listTools(ctx context.Context) ([]*mcpdv1.Tool, error) {
	var tools []*mcpdv1.Tool
	token := ""
	for {
		var resp *mcpdv1.ListToolsResponse
		err := s.authorized(ctx, "ListTools", func() (err error) {
			resp, err = s.hub.ListTools(ctx, &mcpdv1.ListToolsRequest{Server: s.server, PageToken: token})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("ListTools: %w", err)
		}
		tools = append(tools, resp.GetTools()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	s.tools = tools
	return tools, nil
}

// qualified is the name mcpd exposes the server's tool under: the listed
// name when the last listing had the tool, else mcp__<server>__<tool>.
func (s *session) qualified(tool string) string {
	for _, t := range s.tools {
		if t.GetToolName() == tool {
			return t.GetName()
		}
	}
	return "mcp__" + s.server + "__" + tool
}

// callTool calls the server's tool (by its own name) with args.
func (s *session) callTool(ctx context.Context, tool string, args map[string]any) (*mcpdv1.CallToolResponse, error) {
	st, err := structpb.NewStruct(args)
	if err != nil {
		return nil, fmt.Errorf("CallTool %s: arguments: %w", tool, err)
	}
	req := &mcpdv1.CallToolRequest{Name: s.qualified(tool), Arguments: st}
	var resp *mcpdv1.CallToolResponse
	err = s.authorized(ctx, "CallTool "+tool, func() (err error) {
		resp, err = s.hub.CallTool(ctx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("CallTool %s: %w", tool, err)
	}
	fmt.Fprintf(s.log, "mcpd-conformance: CallTool %s: is_error=%v, %d content blocks\n", tool, resp.GetIsError(), len(resp.GetContent()))
	return resp, nil
}

// authorized runs call; a call refused because the server waits for
// authorization (a step-up to a wider scope) is run again once the agent's
// consent made the server READY, a bounded number of times.
func (s *session) authorized(ctx context.Context, what string, call func() error) error {
	err := call()
	for retry := 0; retry < 3 && needsAuthorization(err); retry++ {
		fmt.Fprintf(s.log, "mcpd-conformance: %s needs authorization; waiting\n", what)
		if werr := awaitReady(ctx, s.hub, s.server); werr != nil {
			return fmt.Errorf("%w (after %w)", werr, err)
		}
		err = call()
	}
	return err
}

// step is one client action of a scenario.
type step func(ctx context.Context, s *session) error

// steps lists the tools, then runs each step in order.
func steps(list ...step) func(ctx context.Context, s *session) error {
	return func(ctx context.Context, s *session) error {
		if _, err := s.listTools(ctx); err != nil {
			return err
		}
		for _, st := range list {
			if err := st(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
}

// call is a step that calls tool and needs the call to succeed.
func call(tool string, args map[string]any) step {
	return func(ctx context.Context, s *session) error {
		_, err := s.callTool(ctx, tool, args)
		return err
	}
}

func listOnly(ctx context.Context, s *session) error {
	_, err := s.listTools(ctx)
	return err
}

// echoSchema sends the inputSchema mcpd listed for the 2020-12 tool back
// through json_schema_echo, so the suite sees which keywords survived.
func echoSchema(ctx context.Context, s *session) error {
	const focal, echo = "json_schema_2020_12_tool", "json_schema_echo"
	tools, err := s.listTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if t.GetToolName() == focal {
			_, err := s.callTool(ctx, echo, map[string]any{"schema": t.GetInputSchema().AsMap()})
			return err
		}
	}
	return fmt.Errorf("ListTools: no tool %s among %d", focal, len(tools))
}

// everyNamedMethod sends each request kind that carries a name header:
// tools/call, resources/read and prompts/get, after their lists.
func everyNamedMethod(ctx context.Context, s *session) error {
	tools, err := s.listTools(ctx)
	if err != nil {
		return err
	}
	if len(tools) == 0 {
		return errors.New("ListTools: no tools")
	}
	if _, err := s.callTool(ctx, tools[0].GetToolName(), nil); err != nil {
		return err
	}
	res, err := s.hub.ListResources(ctx, &mcpdv1.ListResourcesRequest{Server: s.server})
	if err != nil {
		return fmt.Errorf("ListResources: %w", err)
	}
	if len(res.GetResources()) == 0 {
		return errors.New("ListResources: no resources")
	}
	uri := res.GetResources()[0].GetUri()
	if _, err := s.hub.ReadResource(ctx, &mcpdv1.ReadResourceRequest{Server: s.server, Uri: uri}); err != nil {
		return fmt.Errorf("ReadResource %s: %w", uri, err)
	}
	prompts, err := s.hub.ListPrompts(ctx, &mcpdv1.ListPromptsRequest{Server: s.server})
	if err != nil {
		return fmt.Errorf("ListPrompts: %w", err)
	}
	if len(prompts.GetPrompts()) == 0 {
		return errors.New("ListPrompts: no prompts")
	}
	name := prompts.GetPrompts()[0].GetName()
	if _, err := s.hub.GetPrompt(ctx, &mcpdv1.GetPromptRequest{Server: s.server, Name: name}); err != nil {
		return fmt.Errorf("GetPrompt %s: %w", name, err)
	}
	return nil
}

// contextToolCalls makes the tool calls the suite passes in the context
// ({"toolCalls": [{"name", "arguments"}]}), after a listing.
func contextToolCalls(ctx context.Context, s *session) error {
	calls, _ := s.context["toolCalls"].([]any)
	if len(calls) == 0 {
		return fmt.Errorf("%s has no toolCalls", envContext)
	}
	if _, err := s.listTools(ctx); err != nil {
		return err
	}
	for i, c := range calls {
		obj, _ := c.(map[string]any)
		name, _ := obj["name"].(string)
		if name == "" {
			return fmt.Errorf("%s: toolCalls[%d] has no name", envContext, i)
		}
		args, _ := obj["arguments"].(map[string]any)
		if _, err := s.callTool(ctx, name, args); err != nil {
			return err
		}
	}
	return nil
}

// callEveryListedTool calls each tool mcpd lists. The server also offers
// tools with malformed x-mcp-header annotations, which a client must drop:
// the suite fails the scenario if any of those is called.
func callEveryListedTool(ctx context.Context, s *session) error {
	tools, err := s.listTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if _, err := s.callTool(ctx, t.GetToolName(), map[string]any{"region": "us-west1"}); err != nil {
			// Refusing a call is a fine way to exclude a tool; the suite
			// judges which calls reached the server.
			fmt.Fprintf(s.log, "mcpd-conformance: %v\n", err)
		}
	}
	return nil
}

// run performs one scenario against a private mcpd.
func run(ctx context.Context, cfg *config, log io.Writer) (err error) {
	sc, ok := lookupScenario(cfg.scenario)
	if !ok {
		return fmt.Errorf("unknown scenario %q", cfg.scenario)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	d, conn, err := startDaemon(ctx, cfg.mcpd, cfg.logLevel, log)
	if err != nil {
		return err
	}
	defer func() {
		conn.Close()
		if stopErr := d.stop(); err == nil {
			err = stopErr
		}
	}()
	cfg.dir = d.dir
	return drive(ctx, mcpdv1.NewMCPHubClient(conn), cfg, sc, log)
}

// drive connects the scenario's server through hub and performs sc.
func drive(ctx context.Context, hub mcpdv1.MCPHubClient, cfg *config, sc scenario, log io.Writer) (err error) {
	elicit := sc.elicit
	if elicit == nil {
		elicit = map[string]any{}
	}
	ag, err := startAgent(ctx, hub, serverName, elicit, log)
	if err != nil {
		return err
	}
	defer func() {
		if agentErr := ag.close(); err == nil {
			err = agentErr
		}
	}()
	err = connect(ctx, hub, cfg)
	if sc.refuse {
		if err == nil {
			return errors.New("mcpd connected a server whose authorization it must refuse")
		}
		if msg := strings.ToLower(err.Error()); !sc.refuseAnyReason && !strings.Contains(msg, "authoriz") && !strings.Contains(msg, "resource metadata") {
			return fmt.Errorf("mcpd failed the server, but not for its authorization: %w", err)
		}
		fmt.Fprintf(log, "mcpd-conformance: mcpd refused the server, as it must: %v\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	s := &session{hub: hub, server: serverName, context: cfg.context, log: log}
	return sc.run(ctx, s)
}

// connect adds the scenario's server to mcpd and needs it READY, after
// the agent's consent where the server asks for one.
func connect(ctx context.Context, hub mcpdv1.MCPHubClient, cfg *config) error {
	endpoint := &mcpdv1.HttpConfig{Url: cfg.url}
	sc := &mcpdv1.ServerConfig{Name: serverName, ProtocolVersion: cfg.protocolVersion}
	oauth, err := oauthConfig(cfg.scenario, cfg.context, cfg.dir)
	if err != nil {
		return err
	}
	sc.Oauth = oauth
	if cfg.transport == "remote" {
		sc.Transport = &mcpdv1.ServerConfig_Remote{Remote: endpoint}
	} else {
		sc.Transport = &mcpdv1.ServerConfig_Http{Http: endpoint}
	}
	resp, err := hub.ConnectServer(ctx, &mcpdv1.ConnectServerRequest{Server: sc})
	if err != nil {
		return fmt.Errorf("ConnectServer: %w", err)
	}
	srv := resp.GetServer()
	if srv.GetState() == mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED {
		return awaitReady(ctx, hub, serverName)
	}
	if srv.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		return fmt.Errorf("ConnectServer: server is %s: %s", srv.GetState(), srv.GetLastError())
	}
	return nil
}
