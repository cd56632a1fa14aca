package access

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

func TestRedact(t *testing.T) {
	in := map[string]any{
		"query":    "hello",
		"apiKey":   "k1",
		"Password": "p1",
		"nested":   map[string]any{"auth_header": "h1", "page": 2.0},
		"list":     []any{map[string]any{"session_id": "s1", "n": 1.0}},
	}
	want := map[string]any{
		"query":    "hello",
		"apiKey":   Redacted,
		"Password": Redacted,
		"nested":   map[string]any{"auth_header": Redacted, "page": 2.0},
		"list":     []any{map[string]any{"session_id": Redacted, "n": 1.0}},
	}
	if diff := cmp.Diff(want, Redact(in)); diff != "" {
		t.Errorf("Redact (-want +got):\n%s", diff)
	}
	if in["apiKey"] != "k1" {
		t.Errorf("Redact changed its input")
	}
}

func TestAuditLine(t *testing.T) {
	for _, withArgs := range []bool{false, true} {
		var buf bytes.Buffer
		// An audit line is written whatever the level.
		a := NewAuditor(zerolog.New(&buf).Level(zerolog.ErrorLevel), &AuditOptions{Arguments: withArgs})
		isErr := true
		a.Log(Record{Caller: "c", Method: "CallTool", Server: "s", Tool: "mcp__s__t", Code: "OK", IsError: &isErr,
			Duration: time.Millisecond, Arguments: map[string]any{"q": "v", "token": "secret"}})
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("audit line %q: %v", buf.String(), err)
		}
		want := map[string]any{"logger": "audit", "caller": "c", "method": "CallTool", "server": "s", "tool": "mcp__s__t",
			"code": "OK", "is_error": true, "duration": 1.0, "message": "audit"}
		if withArgs {
			want["arguments"] = map[string]any{"q": "v", "token": Redacted}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("arguments %v: audit line (-want +got):\n%s", withArgs, diff)
		}
	}
	var nilAuditor *Auditor
	nilAuditor.Log(Record{}) // writes nothing, does not panic
}

// TestAuditLineAtEveryLevel: no level of the daemon's logger mutes the
// audit trail, not even Disabled; --audit=false is the one way.
func TestAuditLineAtEveryLevel(t *testing.T) {
	for _, lvl := range []zerolog.Level{zerolog.DebugLevel, zerolog.ErrorLevel, zerolog.PanicLevel, zerolog.Disabled} {
		var buf bytes.Buffer
		NewAuditor(zerolog.New(&buf).Level(lvl), nil).Log(Record{Caller: "c", Method: "ListServers", Code: "OK"})
		if !bytes.Contains(buf.Bytes(), []byte(`"logger":"audit"`)) {
			t.Errorf("logger at level %v: got audit output %q, want the line", lvl, buf.String())
		}
	}
}

// TestAuditLineWithoutCaller: a request that failed authentication has no
// caller, and its line no "caller" field (as docs/security.md says).
func TestAuditLineWithoutCaller(t *testing.T) {
	var buf bytes.Buffer
	NewAuditor(zerolog.New(&buf), nil).Log(Record{Method: "ListServers", Code: "Unauthenticated"})
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if _, ok := line["caller"]; ok {
		t.Errorf("audit line %s: want no caller field", buf.String())
	}
}
