package toolsearch

import (
	"slices"
	"testing"
)

func TestTokenize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"get-tiny-image", []string{"tiny", "image"}},
		{"getTinyImage", []string{"tiny", "image"}},
		{"gzip_file_as_resource", []string{"gzip", "file", "resource"}},
		{"Returns the sum of two numbers", []string{"return", "sum", "two", "number"}},
		{"queries, boxes and classes", []string{"query", "box", "class"}},
		{"status analysis", []string{"status", "analysis"}},
		// A word of letters and digits counts whole too, so that s3,
		// ipv4 and ipv6 stay apart.
		{"delay_ms utf8", []string{"delay", "ms", "utf", "utf8"}},
		{"list_s3_buckets k8s", []string{"list", "s3", "bucket", "k8s"}},
		{"ipv4Address S3Bucket", []string{"ipv", "ipv4", "address", "s3", "bucket"}},
		// An acronym ends where the next capitalised word begins.
		{"getHTTPServer parseJSON", []string{"http", "server", "parse", "json"}},
		{"XMLHttpRequest IOError URLs", []string{"xml", "http", "request", "io", "error", "url"}},
		// -izes is a verb's -ize, not a -z plural.
		{"summarizes sizes buzzes", []string{"summarize", "size", "buzz"}},
		// Combining marks belong to their word: Devanagari vowel signs and
		// viramas, decomposed accents.
		{"फ़ाइल पढ़ें", []string{"फ़ाइल", "पढ़ें"}},
		{"cafe\u0301 menu", []string{"cafe\u0301", "menu"}},
		{"", nil},
		{"a I of", nil},
	} {
		if got := Tokenize(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Tokenize(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

var tools = []Document{
	{ID: "mcp__demo__add", Name: "add", Title: "Add", Description: "Adds two numbers; returns the sum.", Parameters: []string{"a", "b"}},
	{ID: "mcp__demo__echo", Name: "echo", Title: "Echo", Description: "Returns the given message unchanged as text.", Parameters: []string{"message"}},
	{ID: "mcp__demo__weather", Name: "weather", Title: "Weather", Description: "Returns made-up weather for a city.", Parameters: []string{"city"}},
	{ID: "mcp__fs__read_file", Name: "read_file", Title: "Read file", Description: "Reads a file from disk.", Parameters: []string{"path"}},
	{ID: "mcp__fs__write_file", Name: "write_file", Title: "Write file", Description: "Writes text to a file on disk.", Parameters: []string{"path", "content"}},
	{ID: "mcp__other__echo", Name: "echo", Title: "Echo", Description: "Returns the given message unchanged as text.", Parameters: []string{"message"}},
}

func ids(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, tools[m.Index].ID)
	}
	return out
}

func TestRank(t *testing.T) {
	for _, tt := range []struct {
		query string
		limit int
		want  []string
	}{
		{"what is the weather in Paris", 0, []string{"mcp__demo__weather"}},
		{"sum two numbers", 0, []string{"mcp__demo__add"}},
		{"write some text to a file", 1, []string{"mcp__fs__write_file"}},
		// A name match beats a description match.
		{"read", 0, []string{"mcp__fs__read_file"}},
		// Identical tools tie and are ordered by ID.
		{"echo a message", 0, []string{"mcp__demo__echo", "mcp__other__echo"}},
		// Parameter names count.
		{"path", 0, []string{"mcp__fs__read_file", "mcp__fs__write_file"}},
		{"nothing matches xyzzy", 0, nil},
		{"the of a", 0, nil},
	} {
		got := ids(Rank(tools, tt.query, tt.limit))
		if !slices.Equal(got, tt.want) {
			t.Errorf("Rank(%q, %d): got %q, want %q", tt.query, tt.limit, got, tt.want)
		}
	}
}

func TestRankScoresDecrease(t *testing.T) {
	ms := Rank(tools, "file text message", 0)
	if len(ms) < 3 {
		t.Fatalf("got %d matches, want at least 3", len(ms))
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].Score > ms[i-1].Score {
			t.Errorf("match %d scores %v, more than match %d (%v)", i, ms[i].Score, i-1, ms[i-1].Score)
		}
	}
	// The same query gives the same answer.
	again := Rank(tools, "file text message", 0)
	if !slices.Equal(ms, again) {
		t.Errorf("a second search: got %v, want %v", again, ms)
	}
}

// TestRankBM25 checks one score against the formula by hand: one term,
// in one document of two, once in a name field of weight 3.
func TestRankBM25(t *testing.T) {
	docs := []Document{{ID: "x", Name: "alpha"}, {ID: "y", Name: "beta"}}
	ms := Rank(docs, "alpha", 0)
	if len(ms) != 1 || ms[0].Index != 0 {
		t.Fatalf("got %v, want document 0 alone", ms)
	}
	// N=2, n=1: idf = ln(1 + 1.5/1.5) = ln 2; tf = 3, len = avglen = 3.
	want := 0.6931471805599453 * 3 * 2.2 / (3 + 1.2)
	if diff := ms[0].Score - want; diff > 1e-12 || diff < -1e-12 {
		t.Errorf("score: got %v, want %v", ms[0].Score, want)
	}
}
