package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseBaseline(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    baseline
		wantErr string
	}{
		{
			name: "entries and comments",
			in:   "# why\n\nauth/a   needs OAuth\n  auth/b needs more OAuth  \n",
			want: baseline{"auth/a": "needs OAuth", "auth/b": "needs more OAuth"},
		},
		{name: "no reason", in: "auth/a\n", wantErr: "line 1: auth/a has no reason"},
		{name: "not auth", in: "# x\nsse-retry flaky\n", wantErr: "line 2: sse-retry is not an authorization scenario"},
		{name: "twice", in: "auth/a x\nauth/a y\n", wantErr: "line 2: auth/a is listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBaseline(strings.NewReader(tt.in), legClient)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseBaseline: got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseBaseline: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("baseline (-want +got):\n%s", diff)
			}
		})
	}
}

// The shape of the suite's requirements/<revision>.yaml.
const requirementsYAML = `# comment
server:
  - server-initialize
  - ping

client:
  - initialize
  - auth/metadata-default

not_scored:
  - scenario: auth/dpop
    leg: client
    reason: extension
  - scenario: json-schema-2020-12
    leg: server
    reason: pending
    note: >-
      the reference fixture cannot pass it yet
  - scenario: json-schema-2020-12-preservation
    leg: client
    reason: added-after-release
`

func TestParseRequirements(t *testing.T) {
	got, err := parseRequirements("2025-11-25", legClient, strings.NewReader(requirementsYAML))
	if err != nil {
		t.Fatalf("parseRequirements: %v", err)
	}
	want := &requirements{
		revision: "2025-11-25",
		leg:      legClient,
		// The authorization extensions are scored like required ones.
		required: []string{"initialize", "auth/metadata-default", "auth/dpop"},
		notScored: map[string]string{
			"json-schema-2020-12-preservation": "added-after-release",
		},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(requirements{})); diff != "" {
		t.Errorf("requirements (-want +got):\n%s", diff)
	}
	if _, err := parseRequirements("x", legClient, strings.NewReader("server:\n  - ping\n")); err == nil {
		t.Errorf("parseRequirements without client scenarios: got no error, want one")
	}
}

func TestOutcomeFailures(t *testing.T) {
	ok := check{ID: "a", Name: "A", Status: "SUCCESS"}
	tests := []struct {
		name    string
		checks  []check
		verdict string
		want    []string
	}{
		{name: "pass", checks: []check{ok, {Status: "INFO"}, {Status: "SKIPPED"}}, verdict: "PASS"},
		{
			name:    "failure and warning",
			checks:  []check{ok, {ID: "b", Name: "B", Status: "FAILURE", ErrorMessage: "bad\nmore"}, {ID: "c", Name: "C", Status: "WARNING", Description: "meh"}},
			verdict: "PASS",
			want:    []string{"FAILURE b (B): bad", "WARNING c (C): meh"},
		},
		{
			name:    "no checks",
			checks:  []check{{Status: "INFO"}},
			verdict: "PASS",
			want:    []string{"no passing check: the scenario server saw nothing to judge"},
		},
		{
			name:    "driver failed",
			checks:  []check{ok},
			verdict: "FAIL: ConnectServer: boom",
			want:    []string{"driver: FAIL: ConnectServer: boom"},
		},
		{
			name:   "no verdict",
			checks: []check{ok},
			want:   []string{"driver printed no verdict (killed by the suite's timeout?)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &outcome{checks: tt.checks, verdict: tt.verdict}
			if diff := cmp.Diff(tt.want, o.failures()); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
		})
	}
}

// writeResult lays out one scenario result the way the suite does.
func writeResult(t *testing.T, dir, scenario, stamp, checks, stdout string) {
	t.Helper()
	d := filepath.Join(dir, scenario+"-"+stamp)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "checks.json"), []byte(checks), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout != "" {
		if err := os.WriteFile(filepath.Join(d, "stdout.txt"), []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseRequirementsServer(t *testing.T) {
	got, err := parseRequirements("2025-11-25", legServer, strings.NewReader(requirementsYAML))
	if err != nil {
		t.Fatalf("parseRequirements: %v", err)
	}
	want := &requirements{
		revision:  "2025-11-25",
		leg:       legServer,
		required:  []string{"server-initialize", "ping"},
		notScored: map[string]string{"json-schema-2020-12": "pending"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(requirements{})); diff != "" {
		t.Errorf("requirements (-want +got):\n%s", diff)
	}
}

// TestReadResultsServer: server results are named server-<scenario>-... and
// pass on their checks alone, with no driver verdict.
func TestReadResultsServer(t *testing.T) {
	dir := t.TempDir()
	writeResult(t, dir, "server-ping", "2026-11-22T13-10-01-539Z", `[{"id":"a","name":"A","status":"SUCCESS"}]`, "")
	writeResult(t, dir, "server-tools-list", "2026-11-22T13-10-01-540Z", `[{"id":"b","name":"B","status":"FAILURE"}]`, "")
	got, err := readResults(dir, legServer)
	if err != nil {
		t.Fatalf("readResults: %v", err)
	}
	if o := got["ping"]; o == nil || len(o.failures()) != 0 {
		t.Errorf("ping: got %+v, want a passing result", o)
	}
	if o := got["tools-list"]; o == nil || len(o.failures()) == 0 {
		t.Errorf("tools-list: got %+v, want a failing result", o)
	}
}

func TestReadResults(t *testing.T) {
	dir := t.TempDir()
	pass := `[{"id":"a","name":"A","status":"SUCCESS"}]`
	writeResult(t, dir, "tools_call", "2026-11-22T13-10-01-539Z", pass, "noise\nmcpd-conformance: PASS\n")
	writeResult(t, dir, "auth/basic-cimd", "2026-11-22T13-10-01-540Z", `[]`, "mcpd-conformance: FAIL: x\n")
	// A rerun into the same directory: the newer result wins.
	writeResult(t, dir, "sse-retry", "2026-11-22T13-10-01-000Z", `[]`, "")
	writeResult(t, dir, "sse-retry", "2026-11-22T13-11-01-000Z", pass, "mcpd-conformance: PASS\n")
	got, err := readResults(dir, legClient)
	if err != nil {
		t.Fatalf("readResults: %v", err)
	}
	want := map[string]string{"tools_call": "PASS", "auth/basic-cimd": "FAIL: x", "sse-retry": "PASS"}
	gotVerdicts := make(map[string]string)
	for name, o := range got {
		gotVerdicts[name] = o.verdict
	}
	if diff := cmp.Diff(want, gotVerdicts); diff != "" {
		t.Errorf("verdicts by scenario (-want +got):\n%s", diff)
	}
	if n := len(got["sse-retry"].checks); n != 1 {
		t.Errorf("sse-retry checks: got %d, want 1 (the newer result)", n)
	}

	writeResult(t, dir, "odd", "yesterday", `[]`, "")
	if _, err := readResults(dir, legClient); err == nil || !strings.Contains(err.Error(), "not named <scenario>-<timestamp>") {
		t.Errorf("readResults with a badly named result: got %v, want a naming error", err)
	}
}

func TestJudge(t *testing.T) {
	pass := func(name string) *outcome {
		return &outcome{scenario: name, checks: []check{{ID: "a", Status: "SUCCESS"}}, verdict: "PASS"}
	}
	fail := func(name string) *outcome {
		return &outcome{scenario: name, checks: []check{{ID: "a", Status: "FAILURE"}}, verdict: "FAIL: no"}
	}
	req := &requirements{
		revision:  "2026-07-28",
		required:  []string{"tools_call", "auth/a", "auth/b"},
		notScored: map[string]string{"auth/dpop": "extension"},
	}
	tests := []struct {
		name    string
		results map[string]*outcome
		base    baseline
		wantOK  bool
		want    []string // substrings of the report
	}{
		{
			name:    "all as expected",
			results: map[string]*outcome{"tools_call": pass("tools_call"), "auth/a": fail("auth/a"), "auth/b": fail("auth/b"), "auth/dpop": fail("auth/dpop")},
			base:    baseline{"auth/a": "needs OAuth", "auth/b": "needs OAuth"},
			wantOK:  true,
			want:    []string{"PASS                tools_call", "FAIL (expected)     auth/a: needs OAuth", "fail auth/dpop (extension)", "1 required scenario runs pass, 2 fail as the baseline expects, 0 fail unexpectedly"},
		},
		{
			name:    "unexpected failure",
			results: map[string]*outcome{"tools_call": fail("tools_call"), "auth/a": fail("auth/a"), "auth/b": fail("auth/b")},
			base:    baseline{"auth/a": "x", "auth/b": "x"},
			want:    []string{"FAIL                tools_call", "driver: FAIL: no", "1 fail unexpectedly"},
		},
		{
			name:    "stale entry",
			results: map[string]*outcome{"tools_call": pass("tools_call"), "auth/a": pass("auth/a"), "auth/b": fail("auth/b")},
			base:    baseline{"auth/a": "x", "auth/b": "x"},
			want:    []string{"STALE (now passes)  auth/a", "1 baseline entries are stale"},
		},
		{
			name:    "missing result",
			results: map[string]*outcome{"auth/a": fail("auth/a"), "auth/b": fail("auth/b")},
			base:    baseline{"auth/a": "x", "auth/b": "x"},
			want:    []string{"FAIL                tools_call", "no result: the suite did not run it"},
		},
		{
			name:    "unknown entry",
			results: map[string]*outcome{"tools_call": pass("tools_call"), "auth/a": fail("auth/a"), "auth/b": fail("auth/b")},
			base:    baseline{"auth/a": "x", "auth/b": "x", "auth/dpop": "x"},
			want:    []string{"UNKNOWN baseline entry auth/dpop", "1 unknown"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			ok := judge(&buf, []revisionRun{{req: req, results: tt.results}}, tt.base)
			if ok != tt.wantOK {
				t.Errorf("judge: got %v, want %v; report:\n%s", ok, tt.wantOK, buf.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("report lacks %q; report:\n%s", w, buf.String())
				}
			}
		})
	}
}

// TestServerBaselineFile checks the server leg's baseline: it parses, and
// every entry has its reason (parseBaseline refuses one without).
func TestServerBaselineFile(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "conformance", "expected-failures-server.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := parseBaseline(f, legServer); err != nil {
		t.Fatalf("conformance/expected-failures-server.txt: %v", err)
	}
}

// TestBaselineFile checks the repository's baseline against the rules the
// report enforces.
func TestBaselineFile(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "conformance", "expected-failures.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := parseBaseline(f, legClient)
	if err != nil {
		t.Fatalf("conformance/expected-failures.txt: %v", err)
	}
	if len(b) != 0 {
		t.Errorf("conformance/expected-failures.txt: got %d entries, want none: mcpd passes every scored scenario", len(b))
	}
}
