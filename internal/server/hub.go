package server

import (
	"context"
	"encoding/base64"
	"slices"
	"sort"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/rs/zerolog"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
	"github.com/mcpd-project/mcpd/internal/telemetry"
)

// Page sizes of list RPCs.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// hub implements mcpd.v1.MCPHub over a Manager. Every handler returns its
// error through toStatus.
type hub struct {
	mcpdv1.UnimplementedMCPHubServer
	access *access.Authorizer // filters lists and events (see access.go)
	mgr    *mcpclient.Manager
	events *events.Bus
	broker *mcpclient.Broker
	policy *CommandPolicy
	reg    Registry
	log    zerolog.Logger
	tel    *telemetry.Telemetry
	guard  *guard // audits a refusal a handler finds on a later message of a stream
	// stopping ends when the daemon stops: long-lived streams end with it.
	stopping context.Context
	stop     context.CancelFunc
	maxSend  int // Options.MaxSendBytes
}

var _ mcpdv1.MCPHubServer = (*hub)(nil)

func (h *hub) ConnectServer(ctx context.Context, req *mcpdv1.ConnectServerRequest) (*mcpdv1.ConnectServerResponse, error) {
	cfg, err := serverConfigFromProto(req.GetServer())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := h.policy.Check(cfg); err != nil {
		return nil, toStatus(err)
	}
	logging.AddFields(ctx, logging.Fields{"server", cfg.Name})
	st, err := h.reg.Connect(ctx, cfg, req.GetReplace())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.ConnectServerResponse{Server: serverToProto(st)}, nil
}

func (h *hub) DisconnectServer(ctx context.Context, req *mcpdv1.DisconnectServerRequest) (*mcpdv1.DisconnectServerResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(invalidf("name is required"))
	}
	if err := h.reg.Disconnect(ctx, req.GetName()); err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.DisconnectServerResponse{}, nil
}

func (h *hub) RestartServer(ctx context.Context, req *mcpdv1.RestartServerRequest) (*mcpdv1.RestartServerResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(invalidf("name is required"))
	}
	st, err := h.mgr.Restart(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.RestartServerResponse{Server: serverToProto(st)}, nil
}

func (h *hub) SetServerEnabled(ctx context.Context, req *mcpdv1.SetServerEnabledRequest) (*mcpdv1.SetServerEnabledResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(invalidf("name is required"))
	}
	st, err := h.reg.SetEnabled(ctx, req.GetName(), req.GetEnabled())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.SetServerEnabledResponse{Server: serverToProto(st)}, nil
}

func (h *hub) CompleteAuthorization(ctx context.Context, req *mcpdv1.CompleteAuthorizationRequest) (*mcpdv1.CompleteAuthorizationResponse, error) {
	if req.GetServer() == "" || req.GetRedirectUrl() == "" {
		return nil, invalidf("server and redirect_url are required")
	}
	st, err := h.mgr.CompleteAuthorization(ctx, req.GetServer(), req.GetRedirectUrl())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.CompleteAuthorizationResponse{Server: serverToProto(st)}, nil
}

func (h *hub) ForgetAuthorization(ctx context.Context, req *mcpdv1.ForgetAuthorizationRequest) (*mcpdv1.ForgetAuthorizationResponse, error) {
	if req.GetServer() == "" {
		return nil, toStatus(invalidf("server is required"))
	}
	if err := h.mgr.ForgetAuthorization(ctx, req.GetServer()); err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.ForgetAuthorizationResponse{}, nil
}

func (h *hub) GetServer(ctx context.Context, req *mcpdv1.GetServerRequest) (*mcpdv1.GetServerResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(invalidf("name is required"))
	}
	st, err := h.mgr.Get(req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpdv1.GetServerResponse{Server: h.viewOf(ctx, st)}, nil
}

// viewOf is a server's status as the caller may see it: the consent URL of
// an OAuth flow only for a caller who may complete the flow anyway (manage
// the server, or answer its authorization requests). Whoever opens that
// URL and consents binds the server to their account at the authorization
// server, for every caller of mcpd.
func (h *hub) viewOf(ctx context.Context, st mcpclient.Status) *mcpdv1.Server {
	out := serverToProto(st)
	if out.AuthorizationUrl == "" {
		return out
	}
	name := st.Config.Name
	if !h.allowed(ctx, access.Action{Verb: access.ManageServers, Server: name}) &&
		!h.allowed(ctx, access.Action{Verb: access.AnswerRequests, Server: name, RequestKind: mcpclient.KindAuthorization.String()}) {
		out.AuthorizationUrl = ""
	}
	return out
}

func (h *hub) ListServers(ctx context.Context, _ *mcpdv1.ListServersRequest) (*mcpdv1.ListServersResponse, error) {
	statuses := h.mgr.List()
	out := &mcpdv1.ListServersResponse{Servers: make([]*mcpdv1.Server, 0, len(statuses))}
	for _, st := range statuses {
		if !h.allowed(ctx, access.Action{Verb: access.ViewServer, Server: st.Config.Name}) {
			continue
		}
		out.Servers = append(out.Servers, h.viewOf(ctx, st))
	}
	return out, nil
}

func (h *hub) ListTools(ctx context.Context, req *mcpdv1.ListToolsRequest) (*mcpdv1.ListToolsResponse, error) {
	tools, err := h.mgr.Tools(req.GetServer())
	if err != nil {
		return nil, toStatus(err)
	}
	tools = slices.DeleteFunc(tools, func(t mcpclient.Tool) bool {
		return !h.allowed(ctx, access.Action{Verb: access.CallTool, Server: t.Server, Tool: t.Name})
	})
	items, next, err := page(tools, req.GetPageToken(), req.GetPageSize(), func(t mcpclient.Tool) string { return t.Name })
	if err != nil {
		return nil, toStatus(err)
	}
	out := &mcpdv1.ListToolsResponse{Tools: make([]*mcpdv1.Tool, 0, len(items)), NextPageToken: next}
	for _, t := range items {
		out.Tools = append(out.Tools, toolToProto(t))
	}
	return out, nil
}

func (h *hub) CallTool(ctx context.Context, req *mcpdv1.CallToolRequest) (*mcpdv1.CallToolResponse, error) {
	if req.GetName() == "" {
		return nil, toStatus(invalidf("name is required"))
	}
	logging.AddFields(ctx, logging.Fields{"tool", req.GetName()})
	timeout, err := durationField("timeout", req.GetTimeout())
	if err != nil {
		return nil, toStatus(err)
	}
	args, err := structToMap("arguments", req.GetArguments())
	if err != nil {
		return nil, toStatus(err)
	}
	meta, err := structToMap("meta", req.GetMeta())
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := h.mgr.CallTool(ctx, req.GetName(), args, mcpclient.CallOptions{
		Timeout: timeout,
		Meta:    meta,
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out, err := callToolResultToProto(res)
	if err != nil {
		return nil, toStatus(err)
	}
	return out, nil
}

// A page token is the opaque form of the last name on the previous page.
// Resuming after a name, not an offset, keeps pages stable when servers
// come and go between calls.
func pageToken(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(last))
}

// pageBounds returns where a page starts in a list sorted by name(i), and
// its size.
func pageBounds(token string, pageSize int32, n int, name func(int) string) (start, size int, err error) {
	switch {
	case pageSize < 0:
		return 0, 0, invalidf("page_size must not be negative")
	case pageSize == 0:
		size = defaultPageSize
	default:
		size = min(int(pageSize), maxPageSize)
	}
	if token == "" {
		return 0, size, nil
	}
	last, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(last) == 0 {
		return 0, 0, invalidf("page_token is not a token this RPC returned")
	}
	start = sort.Search(n, func(i int) bool { return strings.Compare(name(i), string(last)) > 0 })
	return start, size, nil
}

// Registry carries out the requests that change which servers exist and
// run. Its methods are safe for concurrent use.
type Registry interface {
	// Connect adds (or with replace, replaces) a server and waits, up to
	// ctx, until it is ready or has failed.
	Connect(ctx context.Context, cfg config.Server, replace bool) (mcpclient.Status, error)
	// Disconnect stops a server and forgets it.
	Disconnect(ctx context.Context, name string) error
	// SetEnabled disables a server, or enables it and waits, up to ctx,
	// until it is ready or has failed.
	SetEnabled(ctx context.Context, name string, enabled bool) (mcpclient.Status, error)
	// ServeTools makes an agent's declaration the server of its name;
	// see mcpclient.Manager.ServeTools.
	ServeTools(ctx context.Context, decl mcpclient.AgentDeclaration, replace bool) (*mcpclient.AgentLink, mcpclient.Status, error)
}

// ManagerRegistry is a Registry that only acts on the Manager.
type ManagerRegistry struct {
	Manager *mcpclient.Manager
}

// Connect connects the server; see mcpclient.Manager.Connect.
func (r ManagerRegistry) Connect(ctx context.Context, cfg config.Server, replace bool) (mcpclient.Status, error) {
	return r.Manager.Connect(ctx, cfg, replace)
}

// Disconnect disconnects the server; see mcpclient.Manager.Disconnect.
func (r ManagerRegistry) Disconnect(ctx context.Context, name string) error {
	return r.Manager.Disconnect(ctx, name)
}

// SetEnabled disables or enables the server; see
// mcpclient.Manager.SetEnabled.
func (r ManagerRegistry) SetEnabled(ctx context.Context, name string, enabled bool) (mcpclient.Status, error) {
	if err := r.Manager.SetEnabled(name, enabled); err != nil {
		return mcpclient.Status{}, err
	}
	if !enabled {
		return r.Manager.Get(name)
	}
	return r.Manager.Await(ctx, name)
}

// ServeTools serves the agent's tools; see mcpclient.Manager.ServeTools.
func (r ManagerRegistry) ServeTools(ctx context.Context, decl mcpclient.AgentDeclaration, replace bool) (*mcpclient.AgentLink, mcpclient.Status, error) {
	return r.Manager.ServeTools(ctx, decl, replace)
}
