package mcpclient

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/config"
)

func TestTracerRedactsAndCuts(t *testing.T) {
	var buf bytes.Buffer
	cfg := config.Server{Name: "s", Env: map[string]string{"K": "env-value-123", "SHORT": "on"}, TraceRedact: []string{"Query"}}
	tr := newTracer(cfg, zerolog.New(&buf).Level(zerolog.DebugLevel))
	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			out = append(out, m)
		}
		buf.Reset()
		return out
	}

	tr.trace("send", []byte(`{"params":{"arguments":{"password":"p4ss","query":"q-secret","text":"x env-value-123 on"}}}`))
	l := lines()[0]
	msg := l["jsonrpc"].(string)
	for _, secret := range []string{"p4ss", "q-secret", "env-value-123"} {
		if strings.Contains(msg, secret) {
			t.Errorf("trace %s holds %q", msg, secret)
		}
	}
	if !strings.Contains(msg, " on") || l["dir"] != "send" || l["logger"] != "trace" {
		t.Errorf("trace line %v: want short values kept, dir send, logger trace", l)
	}

	long := `{"text":"` + strings.Repeat("a", 2*traceMessageLimit) + `"}`
	tr.trace("recv", []byte(long))
	l = lines()[0]
	if got := len(l["jsonrpc"].(string)); got != traceMessageLimit || l["truncated"] != true || l["bytes"] != float64(len(long)) {
		t.Errorf("long message: got %d characters, truncated %v, bytes %v; want %d, true, %d", got, l["truncated"], l["bytes"], traceMessageLimit, len(long))
	}

	tr.trace("recv", []byte(`not json env-value-123`))
	if l = lines()[0]; l["jsonrpc"] != nil {
		t.Errorf("non-JSON: got %v, want its size alone", l)
	}

	quiet := newTracer(cfg, zerolog.New(&buf).Level(zerolog.InfoLevel))
	quiet.trace("send", []byte(`{}`))
	if buf.Len() != 0 {
		t.Errorf("above debug level: got %q, want nothing", buf.String())
	}
}
