package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
	"github.com/mcpd-project/mcpd/internal/config"
	"github.com/mcpd-project/mcpd/internal/mcpclient"
)

// serverConfigFromProto turns a request's ServerConfig into the daemon's
// own description; validation happens in the manager.
func serverConfigFromProto(pc *mcpdv1.ServerConfig) (config.Server, error) {
	if pc == nil {
		return config.Server{}, invalidf("server is required")
	}
	callTimeout, err := durationField("call_timeout", pc.GetCallTimeout())
	if err != nil {
		return config.Server{}, err
	}
	connectTimeout, err := durationField("connect_timeout", pc.GetConnectTimeout())
	if err != nil {
		return config.Server{}, err
	}
	cfg := config.Server{
		Name:            pc.GetName(),
		Source:          config.Source{Scope: config.ScopeAPI},
		CallTimeout:     callTimeout,
		ConnectTimeout:  connectTimeout,
		ProtocolVersion: pc.GetProtocolVersion(),
		ToolsAllow:      pc.GetToolsAllow(),
		ToolsDeny:       pc.GetToolsDeny(),
		ToolsAsk:        pc.GetToolsAsk(),
		Trace:           pc.GetTrace(),

		StrictCapabilities: pc.GetStrictCapabilities(),
	}
	switch t := pc.GetTransport().(type) {
	case *mcpdv1.ServerConfig_Stdio:
		cfg.Kind = config.TransportStdio
		cfg.Command = t.Stdio.GetCommand()
		cfg.Args = t.Stdio.GetArgs()
		cfg.Env = t.Stdio.GetEnv()
		cfg.Cwd = t.Stdio.GetCwd()
	case *mcpdv1.ServerConfig_Http:
		cfg.Kind = config.TransportHTTP
		cfg.URL, cfg.Headers, cfg.TLS = t.Http.GetUrl(), t.Http.GetHeaders(), tlsFromProto(t.Http.GetTls())
	case *mcpdv1.ServerConfig_Sse:
		cfg.Kind = config.TransportSSE
		cfg.URL, cfg.Headers, cfg.TLS = t.Sse.GetUrl(), t.Sse.GetHeaders(), tlsFromProto(t.Sse.GetTls())
	case *mcpdv1.ServerConfig_Remote:
		cfg.Kind = config.TransportAuto
		cfg.URL, cfg.Headers, cfg.TLS = t.Remote.GetUrl(), t.Remote.GetHeaders(), tlsFromProto(t.Remote.GetTls())
	default:
		return config.Server{}, invalidf("server %q: one of stdio, http, sse or remote is required", pc.GetName())
	}
	cfg.OAuth = oauthFromProto(pc.GetOauth())
	return cfg, nil
}

// tlsFromProto reads a tls block; config.Server.Validate checks it (an
// empty one included, as a config file's "tls": {} is refused).
func tlsFromProto(t *mcpdv1.TlsConfig) *config.TLS {
	if t == nil {
		return nil
	}
	return &config.TLS{CA: t.GetCaFile(), Cert: t.GetCertFile(), Key: t.GetKeyFile()}
}

// oauthFromProto reads an oauth block; config.Server.Validate checks it.
func oauthFromProto(o *mcpdv1.OAuthConfig) *config.OAuth {
	if o == nil {
		return nil
	}
	out := &config.OAuth{
		ClientID:          o.GetClientId(),
		ClientSecret:      o.GetClientSecret(),
		ClientMetadataURL: o.GetClientMetadataUrl(),
		Scopes:            o.GetScopes(),
		AuthMethod:        o.GetTokenEndpointAuthMethod(),
		PrivateKeyFile:    o.GetPrivateKeyFile(),
		SigningAlgorithm:  o.GetSigningAlgorithm(),
		Grant:             o.GetGrant(),
		Assertion:         o.GetAssertion(),
		AssertionFile:     o.GetAssertionFile(),
		DPoP:              o.GetDpop(),
	}
	if idp := o.GetIdp(); idp != nil {
		out.IdP = &config.IdP{
			Issuer:        idp.GetIssuer(),
			TokenEndpoint: idp.GetTokenEndpoint(),
			ClientID:      idp.GetClientId(),
			ClientSecret:  idp.GetClientSecret(),
			IDToken:       idp.GetIdToken(),
			IDTokenFile:   idp.GetIdTokenFile(),
		}
	}
	return out
}

// durationField reads an optional, non-negative duration field; unset is 0.
func durationField(name string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, invalidf("%s: %v", name, err)
	}
	if d.AsDuration() < 0 {
		return 0, invalidf("%s must not be negative", name)
	}
	return d.AsDuration(), nil
}

var (
	stateToProto = map[mcpclient.State]mcpdv1.ServerState{
		mcpclient.StateConnecting:            mcpdv1.ServerState_SERVER_STATE_CONNECTING,
		mcpclient.StateReady:                 mcpdv1.ServerState_SERVER_STATE_READY,
		mcpclient.StateReconnecting:          mcpdv1.ServerState_SERVER_STATE_RECONNECTING,
		mcpclient.StateFailed:                mcpdv1.ServerState_SERVER_STATE_FAILED,
		mcpclient.StateStopped:               mcpdv1.ServerState_SERVER_STATE_STOPPED,
		mcpclient.StateAuthorizationRequired: mcpdv1.ServerState_SERVER_STATE_AUTHORIZATION_REQUIRED,
		mcpclient.StateDisabled:              mcpdv1.ServerState_SERVER_STATE_DISABLED,
	}
	scopeToProto = map[config.Scope]mcpdv1.ConfigScope{
		config.ScopeDefault: mcpdv1.ConfigScope_CONFIG_SCOPE_DEFAULT,
		config.ScopeManaged: mcpdv1.ConfigScope_CONFIG_SCOPE_MANAGED,
		config.ScopeUser:    mcpdv1.ConfigScope_CONFIG_SCOPE_USER,
		config.ScopeProject: mcpdv1.ConfigScope_CONFIG_SCOPE_PROJECT,
		config.ScopeLocal:   mcpdv1.ConfigScope_CONFIG_SCOPE_LOCAL,
		config.ScopeFlag:    mcpdv1.ConfigScope_CONFIG_SCOPE_FLAG,
		config.ScopeAPI:     mcpdv1.ConfigScope_CONFIG_SCOPE_API,
	}
	transportToProto = map[config.TransportKind]mcpdv1.Transport{
		config.TransportStdio: mcpdv1.Transport_TRANSPORT_STDIO,
		config.TransportHTTP:  mcpdv1.Transport_TRANSPORT_HTTP,
		config.TransportSSE:   mcpdv1.Transport_TRANSPORT_SSE,
		config.TransportAuto:  mcpdv1.Transport_TRANSPORT_AUTO,
		config.TransportAgent: mcpdv1.Transport_TRANSPORT_AGENT,
	}
)

// serverToProto reports a server's status. Environment and header values
// are secrets: only their names leave the daemon.
func serverToProto(st mcpclient.Status) *mcpdv1.Server {
	out := &mcpdv1.Server{
		Name:                    st.Config.Name,
		State:                   stateToProto[st.State],
		Transport:               transportToProto[st.Transport],
		ProtocolVersion:         st.ProtocolVersion,
		Instructions:            st.Instructions,
		ToolCount:               int32(st.ToolCount),
		LastError:               st.LastError,
		Restarts:                st.Restarts,
		StderrTail:              st.StderrTail,
		Command:                 st.Config.Command,
		Args:                    st.Config.DisplayArgs(),
		Url:                     st.Config.DisplayURL(),
		EnvNames:                sortedKeys(st.Config.Env),
		HeaderNames:             sortedKeys(st.Config.Headers),
		ConfigWarnings:          st.Config.Warnings,
		Pid:                     int32(st.Pid),
		StateChangedTime:        timestamp(st.StateChanged),
		AuthorizationUrl:        st.AuthorizationURL,
		AuthorizationExpireTime: timestamp(st.AuthorizationExpires),
		Scope:                   scopeToProto[st.Config.Source.Scope],
		Source:                  st.Config.Source.Name,
		Notes:                   st.Notes,
	}
	if info := st.ServerInfo; info != nil {
		out.ServerInfo = &mcpdv1.Implementation{Name: info.Name, Version: info.Version, Title: info.Title,
			Description: info.Description, WebsiteUrl: info.WebsiteURL, Icons: iconsToProto(info.Icons)}
	}
	if st.Capabilities != nil {
		out.Capabilities, _ = jsonStruct(st.Capabilities)
	}
	return out
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func toolToProto(t mcpclient.Tool) *mcpdv1.Tool {
	out := &mcpdv1.Tool{
		Name:        t.Name,
		Server:      t.Server,
		ToolName:    t.Tool.Name,
		Title:       t.Tool.Title,
		Description: t.Tool.Description,
		Icons:       iconsToProto(t.Tool.Icons),
	}
	// Schemas and _meta are open-ended JSON; a value that is not an object
	// is dropped rather than failing the whole listing.
	out.InputSchema, _ = jsonStruct(t.Tool.InputSchema)
	out.OutputSchema, _ = jsonStruct(t.Tool.OutputSchema)
	out.Meta, _ = metaStruct(t.Tool.Meta)
	if a := t.Tool.Annotations; a != nil {
		out.Annotations = &mcpdv1.ToolAnnotations{
			Title:           a.Title,
			DestructiveHint: a.DestructiveHint,
			OpenWorldHint:   a.OpenWorldHint,
		}
		// The SDK decodes these two as plain bools, so only true is known
		// to have been sent.
		if a.ReadOnlyHint {
			out.Annotations.ReadOnlyHint = &a.ReadOnlyHint
		}
		if a.IdempotentHint {
			out.Annotations.IdempotentHint = &a.IdempotentHint
		}
	}
	return out
}

func callToolResultToProto(res *mcp.CallToolResult) (*mcpdv1.CallToolResponse, error) {
	out := &mcpdv1.CallToolResponse{IsError: res.IsError}
	var err error
	if out.Content, err = contentsToProto(res.Content); err != nil {
		return nil, err
	}
	if res.StructuredContent != nil {
		if out.StructuredContent, err = jsonValue(res.StructuredContent); err != nil {
			return nil, fmt.Errorf("structured content: %w", err)
		}
	}
	if out.Meta, err = metaStruct(res.Meta); err != nil {
		return nil, err
	}
	return out, nil
}

func contentsToProto(blocks []mcp.Content) ([]*mcpdv1.Content, error) {
	out := make([]*mcpdv1.Content, 0, len(blocks))
	for _, b := range blocks {
		c, err := contentToProto(b)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// contentToProto converts one block. Kinds that the API has no field for
// (sampling's tool_use and tool_result) return nil and are skipped.
func contentToProto(b mcp.Content) (*mcpdv1.Content, error) {
	var (
		out  = &mcpdv1.Content{}
		meta mcp.Meta
		ann  *mcp.Annotations
	)
	switch c := b.(type) {
	case *mcp.TextContent:
		out.Kind = &mcpdv1.Content_Text{Text: &mcpdv1.TextContent{Text: c.Text}}
		meta, ann = c.Meta, c.Annotations
	case *mcp.ImageContent:
		out.Kind = &mcpdv1.Content_Image{Image: &mcpdv1.MediaContent{Data: c.Data, MimeType: c.MIMEType}}
		meta, ann = c.Meta, c.Annotations
	case *mcp.AudioContent:
		out.Kind = &mcpdv1.Content_Audio{Audio: &mcpdv1.MediaContent{Data: c.Data, MimeType: c.MIMEType}}
		meta, ann = c.Meta, c.Annotations
	case *mcp.ResourceLink:
		out.Kind = &mcpdv1.Content_ResourceLink{ResourceLink: &mcpdv1.ResourceLink{
			Uri: c.URI, Name: c.Name, Title: c.Title, Description: c.Description, MimeType: c.MIMEType, Size: c.Size,
			Icons: iconsToProto(c.Icons),
		}}
		meta, ann = c.Meta, c.Annotations
	case *mcp.EmbeddedResource:
		rc, err := resourceContentsToProto(c.Resource)
		if err != nil {
			return nil, err
		}
		out.Kind = &mcpdv1.Content_Resource{Resource: rc}
		meta, ann = c.Meta, c.Annotations
	default:
		return nil, nil
	}
	var err error
	if out.Meta, err = metaStruct(meta); err != nil {
		return nil, err
	}
	out.Annotations = annotationsToProto(ann)
	return out, nil
}

func resourceContentsToProto(rc *mcp.ResourceContents) (*mcpdv1.ResourceContents, error) {
	if rc == nil {
		return nil, nil
	}
	out := &mcpdv1.ResourceContents{Uri: rc.URI, MimeType: rc.MIMEType}
	if rc.Blob != nil {
		out.Data = &mcpdv1.ResourceContents_Blob{Blob: rc.Blob}
	} else {
		out.Data = &mcpdv1.ResourceContents_Text{Text: rc.Text}
	}
	var err error
	out.Meta, err = metaStruct(rc.Meta)
	return out, err
}

var roleToProto = map[mcp.Role]mcpdv1.Role{
	"user":      mcpdv1.Role_ROLE_USER,
	"assistant": mcpdv1.Role_ROLE_ASSISTANT,
}

func annotationsToProto(a *mcp.Annotations) *mcpdv1.Annotations {
	if a == nil {
		return nil
	}
	out := &mcpdv1.Annotations{LastModified: a.LastModified}
	for _, r := range a.Audience {
		if pr, ok := roleToProto[r]; ok {
			out.Audience = append(out.Audience, pr)
		}
	}
	if a.Priority != 0 {
		p := a.Priority
		out.Priority = &p
	}
	return out
}

func iconsToProto(icons []mcp.Icon) []*mcpdv1.Icon {
	if len(icons) == 0 {
		return nil
	}
	out := make([]*mcpdv1.Icon, 0, len(icons))
	for _, i := range icons {
		out = append(out, &mcpdv1.Icon{Src: i.Source, MimeType: i.MIMEType, Sizes: i.Sizes, Theme: string(i.Theme)})
	}
	return out
}

func metaStruct(m mcp.Meta) (*structpb.Struct, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return jsonStruct(map[string]any(m))
}

// jsonStruct converts any JSON-marshalable value that encodes as an object.
// Going through JSON accepts whatever Go types the SDK decoded into.
func jsonStruct(v any) (*structpb.Struct, error) {
	if v == nil {
		return nil, nil
	}
	// Values the SDK decoded from JSON convert directly, much faster than
	// through JSON text (this runs for the _meta of every result).
	if m, ok := v.(map[string]any); ok {
		if s, err := structpb.NewStruct(m); err == nil {
			return s, nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// jsonValue converts any JSON-marshalable value.
func jsonValue(v any) (*structpb.Value, error) {
	if val, err := structpb.NewValue(v); err == nil {
		return val, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	val := &structpb.Value{}
	if err := protojson.Unmarshal(b, val); err != nil {
		return nil, err
	}
	return val, nil
}

func resourceToProto(r mcpclient.Resource) *mcpdv1.Resource {
	res := r.Resource
	out := &mcpdv1.Resource{
		Server:      r.Server,
		Uri:         res.URI,
		Name:        res.Name,
		Title:       res.Title,
		Description: res.Description,
		MimeType:    res.MIMEType,
		Annotations: annotationsToProto(res.Annotations),
		Icons:       iconsToProto(res.Icons),
	}
	if res.Size > 0 {
		size := res.Size
		out.Size = &size
	}
	out.Meta, _ = metaStruct(res.Meta)
	return out
}

func resourceTemplateToProto(t mcpclient.ResourceTemplate) *mcpdv1.ResourceTemplate {
	tpl := t.Template
	out := &mcpdv1.ResourceTemplate{
		Server:      t.Server,
		UriTemplate: tpl.URITemplate,
		Name:        tpl.Name,
		Title:       tpl.Title,
		Description: tpl.Description,
		MimeType:    tpl.MIMEType,
		Annotations: annotationsToProto(tpl.Annotations),
		Icons:       iconsToProto(tpl.Icons),
	}
	out.Meta, _ = metaStruct(tpl.Meta)
	return out
}

func promptToProto(p mcpclient.Prompt) *mcpdv1.Prompt {
	out := &mcpdv1.Prompt{
		Server:      p.Server,
		Name:        p.Prompt.Name,
		Title:       p.Prompt.Title,
		Description: p.Prompt.Description,
		Icons:       iconsToProto(p.Prompt.Icons),
	}
	for _, a := range p.Prompt.Arguments {
		out.Arguments = append(out.Arguments, &mcpdv1.PromptArgument{
			Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required,
		})
	}
	out.Meta, _ = metaStruct(p.Prompt.Meta)
	return out
}

var logLevelFromProto = map[mcpdv1.LogLevel]mcp.LoggingLevel{
	mcpdv1.LogLevel_LOG_LEVEL_DEBUG:     "debug",
	mcpdv1.LogLevel_LOG_LEVEL_INFO:      "info",
	mcpdv1.LogLevel_LOG_LEVEL_NOTICE:    "notice",
	mcpdv1.LogLevel_LOG_LEVEL_WARNING:   "warning",
	mcpdv1.LogLevel_LOG_LEVEL_ERROR:     "error",
	mcpdv1.LogLevel_LOG_LEVEL_CRITICAL:  "critical",
	mcpdv1.LogLevel_LOG_LEVEL_ALERT:     "alert",
	mcpdv1.LogLevel_LOG_LEVEL_EMERGENCY: "emergency",
}

// logLevelToProto maps an MCP level; an unknown one is UNSPECIFIED.
func logLevelToProto(level string) mcpdv1.LogLevel {
	for pl, l := range logLevelFromProto {
		if string(l) == level {
			return pl
		}
	}
	return mcpdv1.LogLevel_LOG_LEVEL_UNSPECIFIED
}

func logMessageToProto(level, logger string, data any) *mcpdv1.LogMessage {
	out := &mcpdv1.LogMessage{Level: logLevelToProto(level), Logger: logger}
	// Log data is any JSON value; one that cannot be converted is dropped
	// rather than losing the message.
	out.Data, _ = jsonValue(data)
	return out
}
