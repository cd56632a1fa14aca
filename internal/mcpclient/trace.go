package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/access"
	"github.com/mcpd-project/mcpd/internal/config"
)

// Wire tracing logs every JSON-RPC message of a server whose config says
// "trace" (or that --trace-server names) at debug level. Stdio and legacy
// SSE sessions are traced on their connection; Streamable HTTP sessions on
// their HTTP requests and responses, since the SDK's connection cannot be
// wrapped. Untraced servers take none of these paths.
const (
	// traceMessageLimit bounds the text of one traced message; the rest is
	// cut and the line says so.
	traceMessageLimit = 4096
	// traceBodyLimit bounds how much of one HTTP body is held to be traced;
	// a longer body is traced by its size alone.
	traceBodyLimit = 1 << 20
	// traceSecretMin is the shortest env or header value replaced in
	// traces: shorter values are not secrets worth the noise of redacting
	// every "1" or "on".
	traceSecretMin = 4
)

// tracer writes the trace lines of one server.
type tracer struct {
	log     zerolog.Logger
	cfg     config.Server
	secrets []string        // env and header values, raw and JSON-escaped
	keys    map[string]bool // configured argument fields, lower case
}

func newTracer(cfg config.Server, log zerolog.Logger) *tracer {
	t := &tracer{log: log.With().Str("logger", "trace").Logger(), cfg: cfg, keys: make(map[string]bool)}
	for _, m := range []map[string]string{cfg.Env, cfg.Headers} {
		for _, v := range m {
			if len(v) < traceSecretMin {
				continue
			}
			t.secrets = append(t.secrets, v)
			if q, err := json.Marshal(v); err == nil && string(q[1:len(q)-1]) != v {
				t.secrets = append(t.secrets, string(q[1:len(q)-1]))
			}
		}
	}
	for _, k := range cfg.TraceRedact {
		t.keys[strings.ToLower(k)] = true
	}
	return t
}

// trace logs one message that went dir ("send" or "recv"). Only text that
// parses as JSON is logged, after redaction: anything else is logged by
// its size alone, since it cannot be redacted field by field.
func (t *tracer) trace(dir string, data []byte) {
	if !t.log.Debug().Enabled() {
		return
	}
	ev := t.log.Debug().Str("dir", dir).Int("bytes", len(data))
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		ev.Msg("jsonrpc message (not JSON; content not shown)")
		return
	}
	out, err := json.Marshal(t.redact(v))
	if err != nil {
		ev.Msg("jsonrpc message (content not shown)")
		return
	}
	text := string(out)
	for _, s := range t.secrets {
		text = strings.ReplaceAll(text, s, access.Redacted)
	}
	text = t.cfg.Redact(text)
	if len(text) > traceMessageLimit {
		text = strings.ToValidUTF8(text[:traceMessageLimit], "")
		ev = ev.Bool("truncated", true)
	}
	ev.Str("jsonrpc", text).Msg("jsonrpc message")
}

// redact replaces the values of secret-looking and configured fields, at
// any depth.
func (t *tracer) redact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if access.LooksSecret(k) || t.keys[strings.ToLower(k)] {
				out[k] = access.Redacted
				continue
			}
			out[k] = t.redact(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = t.redact(e)
		}
		return out
	}
	return v
}

// traceMessage logs a message the SDK reads or writes.
func (t *tracer) traceMessage(dir string, msg jsonrpc.Message) {
	if !t.log.Debug().Enabled() {
		return
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return
	}
	t.trace(dir, data)
}

// tracedConn traces the messages of a connection.
type tracedConn struct {
	mcp.Connection
	t *tracer
}

func (c *tracedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.t.traceMessage("recv", msg)
	}
	return msg, err
}

func (c *tracedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.t.traceMessage("send", msg)
	return c.Connection.Write(ctx, msg)
}

// traceRoundTripper traces the JSON-RPC messages in Streamable HTTP
// requests and responses: request bodies, JSON response bodies, and the
// data of server-sent events.
type traceRoundTripper struct {
	base http.RoundTripper
	t    *tracer
}

func (rt *traceRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength <= traceBodyLimit {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		rt.t.trace("send", body)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &tappedBody{ReadCloser: resp.Body, t: rt.t, events: true}
	case strings.HasPrefix(ct, "application/json"):
		resp.Body = &tappedBody{ReadCloser: resp.Body, t: rt.t}
	}
	return resp, nil
}

// tappedBody traces a response body as it is read: each "data:" line of an
// event stream, or a JSON body once it has been read to its end.
type tappedBody struct {
	io.ReadCloser
	t      *tracer
	events bool

	mu   sync.Mutex
	buf  []byte
	over bool // buf outgrew traceBodyLimit
	done bool
}

func (b *tappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.over {
		b.buf = append(b.buf, p[:n]...)
		if len(b.buf) > traceBodyLimit {
			b.buf, b.over = nil, true
		}
	}
	if b.events {
		for {
			i := bytes.IndexByte(b.buf, '\n')
			if i < 0 {
				break
			}
			line := bytes.TrimRight(b.buf[:i], "\r")
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				b.t.trace("recv", bytes.TrimSpace(data))
			}
			b.buf = b.buf[i+1:]
		}
		if b.over && err == nil {
			b.over = false // skip the long line, trace the ones after it
		}
	} else if err == io.EOF && !b.done {
		b.done = true
		if !b.over {
			b.t.trace("recv", b.buf)
		}
		b.buf = nil
	}
	return n, err
}
