package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	mcpdv1 "github.com/mcpd-project/mcpd/gen/go/mcpd/v1"
)

// The documentation's examples are tested: TestDocs runs every grpcurl
// command of README.md and docs/*.md against a real daemon. The rules a
// page follows:
//
//   - A fenced block with info string "sh" holds grpcurl commands only
//     (lines ending in "\" continue a command; blank and "#" lines are
//     skipped). Each must exit 0. They run in document order, one daemon
//     per page, started with the default config (the demo server) on a
//     loopback port; the address 127.0.0.1:50051 in a command is rewritten
//     to that port.
//   - "sh everything": the same, for examples that need
//     @modelcontextprotocol/server-everything; they run only when
//     MCPD_EVERYTHING_BIN is set. The command "mcp-server-everything" is
//     rewritten to that path; 127.0.0.1:3001 and 127.0.0.1:3002 are
//     rewritten to server-everything instances the test starts in
//     streamableHttp and sse mode.
//   - "sh error": commands that must fail with a gRPC status (grpcurl exits
//     with 64 plus the status code; curl, given --fail-with-body, with 22).
//   - curl commands run as written against the daemon's --http-listen;
//     the address 127.0.0.1:8080 in a command is rewritten to it, and
//     127.0.0.1:8090 to its MCP endpoint (--mcp-listen).
//   - A Subscribe command must pass -max-time: the stream never ends by
//     itself, so grpcurl ending it with DeadlineExceeded counts as success
//     when the stream delivered at least one event.
//   - "bin/mcpd" as a JSON string (the demo server, as a user starts it
//     from the repository root) is rewritten to the binary under test.
//   - Blocks with any other info string ("bash", "json", "text", ...) are
//     not run.
//
// The pages in docsTokenPages run against a daemon that checks an API
// token; their commands see it as $MCPD_API_TOKEN.
//
// docs/security.md's daemon also serves TLS with a certificate the test
// makes, and reads the page's own callers file: the block with info string
// "json callers". Its commands see the callers' tokens as $PLANNER_TOKEN
// and $REVIEWER_TOKEN, and /etc/mcpd/ca.pem is rewritten to the CA that
// signed the daemon's certificate.

const (
	// docsAddr is the address the examples use, mcpd's default --listen.
	docsAddr = "127.0.0.1:50051"
	// docsAPIHTTPAddr is where the curl examples expect mcpd's
	// --http-listen; the test's daemons listen there on another port.
	docsAPIHTTPAddr = "127.0.0.1:8080"
	// docsMCPAddr is where the examples expect mcpd's --mcp-listen.
	docsMCPAddr = "127.0.0.1:8090"
	// docsHTTPAddr and docsSSEAddr are where the examples expect
	// server-everything in streamableHttp and sse mode.
	docsHTTPAddr = "127.0.0.1:3001"
	docsSSEAddr  = "127.0.0.1:3002"
	// docsToken is the API token of the daemons behind docsTokenPages.
	docsToken = "docs-e2e-token-7d1c"
	// grpcurlRPCError is the lowest exit code of grpcurl for an RPC that
	// ended with a status: 64 plus the code.
	grpcurlRPCError = 64
	// curlHTTPError is curl's exit code for an HTTP error status under
	// --fail or --fail-with-body.
	curlHTTPError = 22
	// grpcurlDeadlineExceeded is grpcurl's exit code for DEADLINE_EXCEEDED.
	grpcurlDeadlineExceeded = grpcurlRPCError + 4
)

// docsSecurityPage runs against a daemon with TLS and a callers file.
const docsSecurityPage = "docs/security.md"

// docsTokenPages says which pages run against a daemon with an API token.
func docsTokenPages(page string) bool {
	return page == docsSecurityPage
}

// docsSecurity sets up the daemon of docsSecurityPage: TLS, and the
// page's callers file with their tokens in the environment.
func docsSecurity(t *testing.T, page string, opts *daemonOptions, cmdEnv *[]string) (rewrite []string) {
	t.Helper()
	ca := newCA(t, "docs")
	cert, key := ca.serverCert(t, "mcpd")
	blocks, err := readDocBlocks(filepath.Join(repoRoot(), page))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(blocks, func(b docBlock) bool { return b.info == "json callers" })
	if i < 0 {
		t.Fatalf("%s has no \"json callers\" block", page)
	}
	callers := writeCallers(t, strings.Join(blocks[i].lines, "\n"))
	tokens := []string{"PLANNER_TOKEN=docs-planner-token-31ab", "REVIEWER_TOKEN=docs-reviewer-token-c7e0"}
	opts.args = append(opts.args, "--tls-cert", cert, "--tls-key", key, "--callers", callers)
	opts.env = append(opts.env, tokens...)
	opts.creds = clientTLS(t, ca, "", "")
	*cmdEnv = append(*cmdEnv, tokens...)
	return []string{"/etc/mcpd/ca.pem", ca.path}
}

// docPages returns README.md and docs/*.md, relative to the repository
// root, in a stable order.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot(), p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	slices.Sort(out[1:])
	return out
}

// docBlock is one fenced code block of a page.
type docBlock struct {
	line  int // of the opening fence, 1-based
	info  string
	lines []string
}

// readDocBlocks returns the fenced code blocks of a Markdown file.
func readDocBlocks(path string) ([]docBlock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var (
		blocks []docBlock
		cur    *docBlock
		fence  string
		indent int // of the opening fence, removed from the block's lines
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur != nil {
			if strings.TrimSpace(trimmed) == fence {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			n := min(indent, len(line)-len(trimmed))
			cur.lines = append(cur.lines, line[n:])
			continue
		}
		indent = len(line) - len(trimmed)
		if indent > 3 {
			continue // indented code, not a fence
		}
		for _, f := range []string{"```", "~~~"} {
			if strings.HasPrefix(trimmed, f) {
				run := len(trimmed) - len(strings.TrimLeft(trimmed, f[:1]))
				fence = trimmed[:run]
				cur = &docBlock{line: n, info: strings.TrimSpace(trimmed[run:])}
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: code block is never closed", cur.line)
	}
	return blocks, nil
}

// docCommand is one runnable example.
type docCommand struct {
	line       int    // where it starts in its page
	text       string // as written, continuation lines included
	everything bool   // needs server-everything
	wantError  bool   // must end with a gRPC status
}

// docCommands returns the runnable commands of a page's blocks.
func docCommands(blocks []docBlock) ([]docCommand, error) {
	var out []docCommand
	for _, b := range blocks {
		var everything, wantError bool
		switch b.info {
		case "sh":
		case "sh everything":
			everything = true
		case "sh error":
			wantError = true
		default:
			if strings.HasPrefix(b.info, "sh ") {
				return nil, fmt.Errorf("line %d: unknown info string %q (want sh, sh everything or sh error)", b.line, b.info)
			}
			continue
		}
		var cur *docCommand
		for i, line := range b.lines {
			n := b.line + 1 + i
			if cur == nil {
				if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
					continue
				}
				if !strings.HasPrefix(line, "grpcurl ") && !strings.HasPrefix(line, "curl ") {
					return nil, fmt.Errorf("line %d: an %q block holds grpcurl and curl commands only; use a bash block for %q", n, b.info, line)
				}
				cur = &docCommand{line: n, everything: everything, wantError: wantError}
				cur.text = line
			} else {
				cur.text += "\n" + line
			}
			if !strings.HasSuffix(line, "\\") {
				out = append(out, *cur)
				cur = nil
			}
		}
		if cur != nil {
			return nil, fmt.Errorf("line %d: the command continues past the end of its block", cur.line)
		}
	}
	return out, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TestDocs runs the grpcurl examples of README.md and docs/*.md; see the
// rules above.
func TestDocs(t *testing.T) {
	t.Parallel()
	grpcurl := grpcurlBinary(t)
	everything := os.Getenv(everythingEnv)
	for _, page := range docPages(t) {
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			blocks, err := readDocBlocks(filepath.Join(repoRoot(), page))
			if err != nil {
				t.Fatalf("%s: %v", page, err)
			}
			cmds, err := docCommands(blocks)
			if err != nil {
				t.Fatalf("%s: %v", page, err)
			}
			if everything == "" {
				cmds = slices.DeleteFunc(cmds, func(c docCommand) bool { return c.everything })
			}
			if len(cmds) == 0 {
				t.Skipf("%s has no examples to run here", page)
			}
			runDocCommands(t, page, grpcurl, everything, cmds)
		})
	}
}

// runDocCommands runs one page's commands, in order, against a fresh
// daemon.
func runDocCommands(t *testing.T, page, grpcurl, everything string, cmds []docCommand) {
	ctx := testContext(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	mcpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	opts := daemonOptions{listen: addr, args: []string{"--http-listen", httpAddr, "--mcp-listen", mcpAddr}}
	cmdEnv := daemonEnv()
	waitCtx := ctx
	if docsTokenPages(page) {
		opts.env = []string{"MCPD_API_TOKEN=" + docsToken}
		cmdEnv = append(cmdEnv, "MCPD_API_TOKEN="+docsToken)
		waitCtx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+docsToken)
	}
	rewrite := []string{docsAddr, addr, docsAPIHTTPAddr, httpAddr, docsMCPAddr, mcpAddr, `"bin/mcpd"`, strconv.Quote(mcpdBinary(t))}
	if page == docsSecurityPage {
		rewrite = append(rewrite, docsSecurity(t, page, &opts, &cmdEnv)...)
	}
	d := startDaemon(ctx, t, opts)
	d.waitServer(waitCtx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)

	if everything != "" {
		rewrite = append(rewrite, `"mcp-server-everything"`, strconv.Quote(everything))
		for _, remote := range []struct{ addr, mode string }{{docsHTTPAddr, "streamableHttp"}, {docsSSEAddr, "sse"}} {
			if slices.ContainsFunc(cmds, func(c docCommand) bool { return strings.Contains(c.text, remote.addr) }) {
				url := startEverythingRemote(ctx, t, remote.mode)
				rewrite = append(rewrite, remote.addr, strings.TrimPrefix(url, "http://"))
			}
		}
	}
	replacer := strings.NewReplacer(rewrite...)
	t.Logf("%s: running %d examples", page, len(cmds))

	for _, c := range cmds {
		script := replacer.Replace(c.text)
		if rest, ok := strings.CutPrefix(script, "grpcurl"); ok {
			script = shellQuote(grpcurl) + rest
		}
		isCurl := strings.HasPrefix(c.text, "curl ")
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Env = cmdEnv
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		stream := strings.Contains(c.text, "mcpd.v1.MCPHub/Subscribe")
		switch {
		case stream && !strings.Contains(c.text, "-max-time"):
			t.Errorf("%s:%d: a Subscribe example needs -max-time, or it never ends:\n%s", page, c.line, c.text)
		case stream && code == grpcurlDeadlineExceeded && strings.Contains(stderr.String(), "DeadlineExceeded"):
			// The stream ran for -max-time, as it should; every example
			// shows some events.
			if !strings.Contains(stdout.String(), `"event"`) {
				t.Errorf("%s:%d: the stream delivered no event:\n%s\nstderr:\n%s", page, c.line, c.text, stderr.String())
			}
		case isCurl && c.wantError && code != curlHTTPError:
			t.Errorf("%s:%d: got exit code %d (%v), want curl's %d for an HTTP error status (the example needs --fail or --fail-with-body):\n%s\nstdout:\n%s\nstderr:\n%s",
				page, c.line, code, err, curlHTTPError, c.text, stdout.String(), stderr.String())
		case !isCurl && c.wantError && code < grpcurlRPCError:
			t.Errorf("%s:%d: got exit code %d (%v), want a gRPC error status (exit code >= %d):\n%s\nstdout:\n%s\nstderr:\n%s",
				page, c.line, code, err, grpcurlRPCError, c.text, stdout.String(), stderr.String())
		case !c.wantError && err != nil:
			t.Errorf("%s:%d: got %v, want success:\n%s\nstdout:\n%s\nstderr:\n%s",
				page, c.line, err, c.text, stdout.String(), stderr.String())
		}
	}
}

// TestDocsFlags checks that README.md's flag table is what `mcpd -h`
// prints.
func TestDocsFlags(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	code, help := runMcpd(ctx, t, "-h")
	if code != 0 {
		t.Fatalf("mcpd -h: exit code %d:\n%s", code, help)
	}
	want, err := flagTable(help)
	if err != nil {
		t.Fatalf("mcpd -h: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- flags:begin -->\n", "<!-- flags:end -->"
	_, rest, ok := strings.Cut(string(readme), begin)
	got, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("README.md has no %q ... %q section", strings.TrimSpace(begin), end)
	}
	if got != want {
		t.Errorf("README.md's flag table is not what mcpd -h prints; want:\n%s", want)
	}
}

// flagTable renders the flags of `mcpd -h` as README.md's Markdown table.
func flagTable(help string) (string, error) {
	flagHeader := regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\w+))?$`)
	var b strings.Builder
	b.WriteString("| Flag | Environment | Default | Meaning |\n|---|---|---|---|\n")
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		m := flagHeader.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "    \t") {
			return "", fmt.Errorf("flag -%s has no usage line", m[1])
		}
		name, typ := m[1], m[2]
		usage := strings.TrimPrefix(lines[i+1], "    \t")
		i++
		def := ""
		if j := strings.LastIndex(usage, " (default "); j >= 0 && strings.HasSuffix(usage, ")") {
			def = strings.Trim(usage[j+len(" (default "):len(usage)-1], `"`)
			usage = usage[:j]
		}
		flagCell := "`--" + name + "`"
		switch typ {
		case "", "value":
		default:
			flagCell = "`--" + name + " " + typ + "`"
		}
		if def != "" {
			def = "`" + def + "`"
		}
		env := "`MCPD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "`"
		if name == "version" {
			env = "" // a request, not a setting: parseFlags reads no MCPD_VERSION
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", flagCell, env, def, strings.ReplaceAll(usage, "|", `\|`))
	}
	return b.String(), nil
}

// TestDocsLinks checks that the relative links of README.md and docs/*.md
// point at files that exist.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	mdLink := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot(), page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(repoRoot(), filepath.Dir(page), filepath.FromSlash(target))
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", page, m[1], err)
			}
		}
	}
}

// TestDocsGoAgent runs examples/go/agent, the server-request example of
// docs/server-requests.md, against server-everything: its fixed answers
// reach the server.
func TestDocsGoAgent(t *testing.T) {
	t.Parallel()
	everything := everythingBinary(t)
	ctx := testContext(t)
	agentBin := filepath.Join(shortTempDir(t), "agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", agentBin, "./examples/go/agent")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/go/agent: %v\n%s", err, out)
	}
	d := startDaemon(ctx, t, daemonOptions{config: emptyConfig(t)})
	s := d.connect(ctx, t, "everything", everything, []string{"stdio"}, nil)
	if s.GetState() != mcpdv1.ServerState_SERVER_STATE_READY {
		t.Fatalf("everything: got %v (%s), want READY", s.GetState(), s.GetLastError())
	}

	agent := exec.Command(agentBin, "-addr", "unix://"+d.sock)
	agentLog := &syncBuffer{}
	agent.Stdout, agent.Stderr = agentLog, agentLog
	agent.WaitDelay = 5 * time.Second
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = agent.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("agent output:\n%s", agentLog.String())
		}
	})
	poll(ctx, t, "the agent to register", func() (bool, error) {
		select {
		case <-exited:
			t.Fatalf("the agent exited: %s", agentLog.String())
		default:
		}
		return strings.Contains(agentLog.String(), "registered"), nil
	})

	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"trigger-sampling-request", map[string]any{"prompt": "Say hi"}, "This is a fixed reply from the example agent."},
		{"trigger-elicitation-request", nil, `"action": "accept"`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			resp := d.mustCall(ctx, t, "mcp__everything__"+tc.tool, tc.args)
			if got := text(resp); resp.GetIsError() || !strings.Contains(got, tc.want) {
				t.Errorf("got is_error=%v %q, want a result containing %q", resp.GetIsError(), got, tc.want)
			}
		})
	}
}

// TestDocsUvxVersions checks that the Python servers the documentation pins
// for uvx (`mcp-server-time==VERSION` in README.md's config example) are
// the versions the uvx end-to-end test runs, and that the Makefile's
// UVX_SERVERS, which fills uv's cache for that test, names the same ones.
func TestDocsUvxVersions(t *testing.T) {
	t.Parallel()
	tested := []string{uvxTimeServer, uvxFetchServer}
	slices.Sort(tested)

	makefile, err := os.ReadFile(filepath.Join(repoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^UVX_SERVERS\s*:?=\s*(.*)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile: no UVX_SERVERS line")
	}
	cached := strings.Fields(string(m[1]))
	slices.Sort(cached)
	if !slices.Equal(cached, tested) {
		t.Errorf("Makefile's UVX_SERVERS is %q, uvx_e2e_test.go runs %q", cached, tested)
	}
	if m := regexp.MustCompile(`(?m)^UVX_MCP1\s*:?=\s*(\S*)`).FindSubmatch(makefile); m == nil || string(m[1]) != uvxMCP1 {
		t.Errorf("Makefile's UVX_MCP1 line: got %q, uvx_e2e_test.go runs %s", m, uvxMCP1)
	}

	pin := regexp.MustCompile(`mcp-server-[a-z-]+==[0-9][0-9A-Za-z.]*`)
	pinned := 0
	for _, page := range docPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot(), page))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pin.FindAllString(string(data), -1) {
			pinned++
			if !slices.Contains(tested, p) {
				t.Errorf("%s pins %s; the uvx end-to-end test runs %q", page, p, tested)
			}
		}
	}
	if pinned == 0 {
		t.Errorf("no page pins a uvx server (README.md's config example runs %s)", uvxTimeServer)
	}
}

// docsPythonDemoCall matches a Python example's call of a demo tool with
// a literal dict of arguments, as the pages write them.
var docsPythonDemoCall = regexp.MustCompile(`(?:call_tool|call_tool_stream)\(\s*"(mcp__demo__[a-z_]+)"\s*,\s*(\{[^{}]*\})`)

// TestDocsPythonDemoCalls calls the demo tools with the arguments the
// Python examples of README.md and docs/*.md pass them (tools/doc_snippets.py,
// part of make test, type-checks those blocks and runs only some): a reader
// who copies one must not get INVALID_ARGUMENT.
func TestDocsPythonDemoCalls(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	d := startDaemon(ctx, t, daemonOptions{})
	d.waitServer(ctx, t, "demo", mcpdv1.ServerState_SERVER_STATE_READY)
	calls := 0
	for _, page := range docPages(t) {
		blocks, err := readDocBlocks(filepath.Join(repoRoot(), page))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		for _, b := range blocks {
			// "python", "python fragment", "python run", ...: see tools/doc_snippets.py.
			if f := strings.Fields(b.info); len(f) == 0 || f[0] != "python" {
				continue
			}
			for _, m := range docsPythonDemoCall.FindAllStringSubmatch(strings.Join(b.lines, "\n"), -1) {
				args := &structpb.Struct{}
				if err := protojson.Unmarshal([]byte(m[2]), args); err != nil {
					t.Errorf("%s:%d: arguments %s are not plain JSON: %v", page, b.line, m[2], err)
					continue
				}
				calls++
				res, err := d.hub.CallTool(ctx, &mcpdv1.CallToolRequest{Name: m[1], Arguments: args})
				if err != nil || res.GetIsError() {
					t.Errorf("%s:%d: %s(%s): got %v, %v; want a result", page, b.line, m[1], m[2], err, res)
				}
			}
		}
	}
	if calls == 0 {
		t.Error("found no Python call of a demo tool in the pages")
	}
}
