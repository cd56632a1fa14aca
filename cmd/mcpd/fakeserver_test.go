package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Fake server modes: how this test binary behaves when mcpd starts it with
// MCPD_FAKE_SERVER=<mode>. One more, fakeGated, is in gatedserver_test.go.
const (
	fakeExitAtStart    = "exit-at-start"     // one stderr line, then exit 3 before reading anything
	fakeExitMidCall    = "exit-mid-call"     // real server; its tool "crash" exits the process mid-call
	fakeIgnoreDiscover = "ignore-discover"   // real server that never answers server/discover
	fakeDieOnDiscover  = "die-on-discover"   // real server that exits if the first message is server/discover
	fakeNoisy          = "noisy"             // real server that prints non-JSON lines to stdout
	fakeSlow           = "slow"              // real server whose tool "sleep" sleeps ms milliseconds
	fakeGrandchild     = "grandchild"        // real server that spawns a long-lived grandchild
	fakeRejectAll      = "reject-all"        // raw server that answers every request with a JSON-RPC error
	fakeNoCapabilities = "no-capabilities"   // raw server, as written by hand: declares no capabilities, lists and calls "shout"
	fakeMalformed      = "malformed"         // fakeNoCapabilities declaring tools, resources and prompts, and breaking the protocol: see handMadeBroken
	fakeCrashSoon      = "crash-soon"        // real server that exits 5 shortly after every start
	fakeBig            = "big"               // real server whose tool "big" returns bytes bytes of text
	fakeFreeze         = "freeze"            // legacy-only server whose tool "freeze" stops it reading anything
	fakeFreeze2026     = "freeze-stateless"  // fakeFreeze, but a server of both eras: mcpd reaches it with 2026-07-28
	fakeRendezvous     = "rendezvous"        // real server that serves once its peers have started; tool "describe"
	fakeFlood          = "flood"             // real server whose tool "flood" writes count log notifications of bytes bytes, then answers
	fakeAskPair        = "ask-pair"          // real server whose tool "ask" waits for count calls of a group, then asks each call's client to sample its tag
	fakePidFileEnv     = "MCPD_FAKE_PIDFILE" // grandchild: where to write the grandchild's pid
	fakeStubborn       = "stubborn"          // real server that ignores SIGTERM and, once its stdin closes, creates the file fakeMarkEnv names and hangs
	fakeNote           = "note"              // real server whose resource fakeNoteURI changes only by its tool "set"; tool "subscribed" says whether anyone follows it; it refuses subscriptions while the file fakeMarkEnv names (if set) exists
	fakeCloseStdout    = "close-stdout"      // real server that closes its stdout, unanswered, when asked to call a tool, and runs on until a signal ends it
	fakeStderrFlood    = "stderr-flood"      // real server that first writes fakeFloodLines lines to stderr (fakeFloodLine), as fast as the pipe takes them
	fakeStdoutFlood    = "stdout-flood"      // real server that first writes fakeFloodLines lines that are no JSON-RPC (fakeFloodLine) to stdout, its logging on the wrong stream
	fakeLastWords      = "last-words"        // real server that, once its stdin closes, writes fakeLastWordsBytes to stdout (more than a pipe holds), creates the file fakeMarkEnv names and exits 0
	fakeSlowTerm       = "slow-term"         // real server that outlives its stdin and, on SIGTERM, once its parent is gone, cleans up a while, creates the file fakeMarkEnv names and exits 0
	fakeMarkEnv        = "MCPD_FAKE_MARK"
	// fakeStacksEnv names a directory: on SIGUSR1 a fake writes the stacks
	// of its goroutines to <mode>-<pid>.stacks there (see dumpStacks).
	fakeStacksEnv = "MCPD_FAKE_STACKS_DIR"
	// fakeQuietClock is a real server whose resource fakeClockURI changes
	// on every read, and which cannot notify (no resources.subscribe).
	fakeQuietClock = "quiet-clock"
)

// fakeClockURI is the quiet-clock fake's resource.
const fakeClockURI = "fake://clock"

// fakeNoteURI is the note fake's resource.
const fakeNoteURI = "fake://note"

// Environment of the rendezvous fake. Each one writes a file named
// MCPD_FAKE_NAME into MCPD_FAKE_RENDEZVOUS_DIR, then waits, without limit,
// until a file exists there for every name in the comma-separated
// MCPD_FAKE_PEERS. Until then it reads nothing: of servers started one
// after another, the first waits forever, so all of them get past the wait
// only when they are started side by side.
const (
	fakeNameEnv       = "MCPD_FAKE_NAME"
	fakePeersEnv      = "MCPD_FAKE_PEERS"
	fakeRendezvousEnv = "MCPD_FAKE_RENDEZVOUS_DIR"
	// fakeValueEnv is the variable the describe tool reports.
	fakeValueEnv = "MCPD_FAKE_VALUE"
)

// Messages the fake servers write, which tests look for.
const (
	fakeStartupError = "fake: cannot start: no such config"
	fakeNoise        = "Starting server... (not JSON)"
	// The slow fake's sleep tool writes these, followed by the call's tag.
	fakeSleepStarted   = "fake: sleep started"
	fakeSleepCancelled = "fake: sleep cancelled"
	methodDiscover     = "server/discover"
)

// fakeLastWordsBytes is what the last-words fake writes to stdout as it
// exits: far more than a pipe holds, so that it gets written only if
// mcpd still reads it then, whatever mcpd read before it stopped.
const fakeLastWordsBytes = 1 << 20

// fakeFloodLines is how many lines the stderr-flood fake writes: about
// 130 KB, twice what a pipe holds, so that it gets to serve only if mcpd
// reads them all.
const fakeFloodLines = 5000

// fakeFloodLine is line i (from 1) of the stderr-flood fake.
func fakeFloodLine(i int) string { return "fake: stderr flood " + strconv.Itoa(i) }

// runFakeServer runs the fake server named by mode on stdin/stdout and
// returns the process exit code.
func runFakeServer(mode string) int {
	// The fake's children must not become fakes too.
	os.Unsetenv(fakeServerEnv)
	if dir := os.Getenv(fakeStacksEnv); dir != "" {
		writeStacksOnSignal(filepath.Join(dir, mode+"-"+strconv.Itoa(os.Getpid())+".stacks"))
	}
	switch mode {
	case fakeExitAtStart:
		fmt.Fprintln(os.Stderr, fakeStartupError)
		return 3
	case fakeRejectAll:
		return rejectAll()
	case fakeNoCapabilities:
		return handMade(false)
	case fakeMalformed:
		return handMade(true)
	}
	var conn func(mcp.Connection) mcp.Connection // optional wrapper
	var opts *mcp.ServerOptions
	if mode == fakeFreeze {
		// A legacy session: keepalive checks it with pings.
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}}
	}
	var note fakeNoteState
	if mode == fakeNote {
		opts = &mcp.ServerOptions{SubscribeHandler: note.subscribe, UnsubscribeHandler: note.unsubscribe}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake-" + mode, Version: "0.0.1", Description: fakeDescription, Icons: fakeIcons}, opts)
	addEchoTool(srv)
	switch mode {
	case fakeNote:
		note.add(srv)
	case fakeExitMidCall:
		mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "exits the server process while handling the call"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				fmt.Fprintln(os.Stderr, "fake: crashing mid-call")
				os.Exit(1)
				return nil, nil, nil
			})
	case fakeIgnoreDiscover:
		conn = func(c mcp.Connection) mcp.Connection {
			return &filterConn{Connection: c, onRead: func(msg jsonrpc.Message, _ bool) bool {
				if isRequest(msg, methodDiscover) {
					fmt.Fprintln(os.Stderr, "fake: ignoring server/discover")
					return false
				}
				return true
			}}
		}
	case fakeDieOnDiscover:
		conn = func(c mcp.Connection) mcp.Connection {
			return &filterConn{Connection: c, onRead: func(msg jsonrpc.Message, first bool) bool {
				if first && isRequest(msg, methodDiscover) {
					fmt.Fprintln(os.Stderr, "fake: unknown first message server/discover, exiting")
					os.Exit(1)
				}
				return true
			}}
		}
	case fakeNoisy:
		fmt.Println(fakeNoise)
		conn = func(c mcp.Connection) mcp.Connection { return &noisyConn{Connection: c} }
	case fakeSlow:
		mcp.AddTool(srv, &mcp.Tool{Name: "sleep", Description: "sleeps ms milliseconds, or until cancelled"},
			func(ctx context.Context, _ *mcp.CallToolRequest, in sleepArgs) (*mcp.CallToolResult, any, error) {
				// The stderr lines let a test see, through the server's
				// stderr tail, that a call began and that its cancellation
				// reached the server.
				fmt.Fprintf(os.Stderr, "%s %s\n", fakeSleepStarted, in.Tag)
				timer := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
				defer timer.Stop()
				select {
				case <-timer.C:
					return textResult("slept " + strconv.Itoa(in.MS) + "ms"), nil, nil
				case <-ctx.Done():
					fmt.Fprintf(os.Stderr, "%s %s\n", fakeSleepCancelled, in.Tag)
					return nil, nil, ctx.Err()
				}
			})
	case fakeQuietClock:
		srv.AddResource(&mcp.Resource{URI: fakeClockURI, Name: "clock", MIMEType: "text/plain"},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				now := strconv.FormatInt(time.Now().UnixNano(), 10)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: fakeClockURI, MIMEType: "text/plain", Text: now}}}, nil
			})
	case fakeCrashSoon:
		go func() {
			time.Sleep(300 * time.Millisecond)
			fmt.Fprintln(os.Stderr, "fake: dying on purpose")
			os.Exit(5)
		}()
	case fakeBig:
		mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "returns bytes bytes of text"},
			func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				Bytes int `json:"bytes"`
			}) (*mcp.CallToolResult, any, error) {
				return textResult(strings.Repeat("x", in.Bytes)), nil, nil
			})
	case fakeFreeze, fakeFreeze2026:
		frozen := make(chan struct{})
		var once sync.Once
		mcp.AddTool(srv, &mcp.Tool{Name: "freeze", Description: "stops the server reading requests, for good"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				fmt.Fprintln(os.Stderr, "fake: freezing")
				once.Do(func() { close(frozen) })
				return textResult("frozen"), nil, nil
			})
		conn = func(c mcp.Connection) mcp.Connection {
			return &filterConn{Connection: c, onRead: func(jsonrpc.Message, bool) bool {
				select {
				case <-frozen:
					select {} // a hung server: reads nothing, answers nothing
				default:
					return true
				}
			}}
		}
	case fakeFlood:
		out := &floodWriter{w: bufio.NewWriterSize(os.Stdout, 64<<10)}
		conn = func(c mcp.Connection) mcp.Connection { return &lockedConn{Connection: c, mu: &out.mu} }
		mcp.AddTool(srv, &mcp.Tool{Name: "flood", Description: "writes count log notifications whose data is bytes bytes, as fast as stdout takes them, then answers"},
			func(_ context.Context, _ *mcp.CallToolRequest, in floodArgs) (*mcp.CallToolResult, any, error) {
				if err := out.flood(in.Count, in.Bytes); err != nil {
					return nil, nil, err
				}
				return textResult("flooded " + strconv.Itoa(in.Count)), nil, nil
			})
	case fakeAskPair:
		addAskPairTool(srv)
	case fakeRendezvous:
		if err := rendezvous(); err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 1
		}
		addDescribeTool(srv)
	case fakeGated:
		if err := addGatedTools(srv, os.Getenv(fakeGateDirEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 1
		}
	case fakeGrandchild:
		if err := startGrandchild(os.Getenv(fakePidFileEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 1
		}
	case fakeCloseStdout:
		conn = func(c mcp.Connection) mcp.Connection {
			return &filterConn{Connection: c, onRead: func(msg jsonrpc.Message, _ bool) bool {
				if isRequest(msg, "tools/call") {
					fmt.Fprintln(os.Stderr, "fake: closing stdout")
					_ = os.Stdout.Close()
				}
				return true
			}}
		}
	case fakeStderrFlood:
		w := bufio.NewWriter(os.Stderr)
		for i := 1; i <= fakeFloodLines; i++ {
			fmt.Fprintln(w, fakeFloodLine(i))
		}
		if err := w.Flush(); err != nil {
			return 1
		}
	case fakeStdoutFlood:
		w := bufio.NewWriter(os.Stdout)
		for i := 1; i <= fakeFloodLines; i++ {
			fmt.Fprintln(w, fakeFloodLine(i))
		}
		if err := w.Flush(); err != nil {
			return 1
		}
	case fakeLastWords:
	case fakeSlowTerm:
		// Run under a wrapper (sh -c) that SIGTERM ends at once, it is
		// left in mcpd's process group with its clean-up to do.
		parent := os.Getppid()
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM)
		go func() {
			<-terms
			for os.Getppid() == parent {
				time.Sleep(time.Millisecond)
			}
			// The clean-up: mcpd has reaped the wrapper by now, and
			// must not take that for the end of the server.
			time.Sleep(100 * time.Millisecond)
			if err := os.WriteFile(os.Getenv(fakeMarkEnv), nil, 0o600); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}()
	case fakeStubborn:
		// Nor does a write to a pipe mcpd closed end it: only SIGKILL.
		signal.Ignore(syscall.SIGTERM, syscall.SIGPIPE)
	default:
		fmt.Fprintf(os.Stderr, "fake: unknown mode %q\n", mode)
		return 2
	}

	var t mcp.Transport = &mcp.StdioTransport{}
	if conn != nil {
		t = wrapTransport{t, conn}
	}
	err := srv.Run(context.Background(), t)
	if mode == fakeStubborn {
		// Marked first: mcpd may have closed stderr already.
		_ = os.WriteFile(os.Getenv(fakeMarkEnv), nil, 0o600)
		time.Sleep(time.Hour) // until SIGKILL
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake: run:", err)
	}
	if mode == fakeSlowTerm {
		select {} // past its stdin, until SIGTERM
	}
	if mode == fakeLastWords {
		// As a server that flushes what it still has to say (answers of
		// calls that were running, a last log line) as it exits: a
		// write to a pipe nobody reads any more would end it by SIGPIPE
		// before the mark.
		line := strings.Repeat("x", 1023) + "\n"
		for range fakeLastWordsBytes / len(line) {
			if _, err := os.Stdout.WriteString(line); err != nil {
				return 1
			}
		}
		if err := os.WriteFile(os.Getenv(fakeMarkEnv), nil, 0o600); err != nil {
			return 1
		}
		return 0
	}
	if mode == fakeCloseStdout {
		time.Sleep(time.Hour) // until mcpd's SIGTERM
	}
	return 0
}

// rejectMessage starts the error message of every answer of reject-all.
const rejectMessage = "fake: refusing"

// rejectAll answers every request on stdin with a JSON-RPC error until
// stdin ends.
func rejectAll() int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil || msg.Method == "" {
			continue // not a request: nothing to answer
		}
		resp, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0",
			"id":      msg.ID,
			"error":   map[string]any{"code": -32603, "message": rejectMessage + " " + msg.Method},
		})
		fmt.Printf("%s\n", resp)
	}
	return 0
}

// handMade is an MCP server as people write one by hand for a quick
// test: a loop over stdin that answers initialize with empty capabilities,
// yet lists and calls its one tool, "shout". With broken, it declares
// tools, resources and prompts, and breaks the protocol as handMadeBroken
// says.
func handMade(broken bool) int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
			continue // a notification
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		shout := map[string]any{
			"name":        "shout",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		}
		switch {
		case msg.Method == "initialize":
			capabilities := map[string]any{}
			if broken {
				capabilities = map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "prompts": map[string]any{}}
			}
			reply["result"] = map[string]any{
				"protocolVersion": msg.Params.ProtocolVersion,
				"capabilities":    capabilities,
				"serverInfo":      map[string]any{"name": "hand-made", "version": "0"},
			}
		case msg.Method == "tools/list" && broken:
			reply["result"] = map[string]any{"tools": append([]any{shout}, handMadeBrokenTools()...)}
		case msg.Method == "tools/list":
			reply["result"] = map[string]any{"tools": []any{shout}}
		case msg.Method == "tools/call" && broken && handMadeBroken[msg.Params.Name] != "":
			fmt.Fprintln(os.Stderr, "fake: ran "+msg.Params.Name)
			reply["result"] = json.RawMessage(handMadeBroken[msg.Params.Name])
		case msg.Method == "tools/call":
			reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.ToUpper(msg.Params.Arguments.Text)}}}
		case (msg.Method == "resources/read" || msg.Method == "prompts/get") && broken:
			reply["result"] = json.RawMessage(handMadeBroken[msg.Method])
		case msg.Method == "ping":
			reply["result"] = map[string]any{}
		default:
			reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + msg.Method}
		}
		out, _ := json.Marshal(reply)
		fmt.Printf("%s\n", out)
	}
	return 0
}

// handMadeBroken are the results of the malformed fake that no MCP
// client can read, by tool name or method: image data that is not base64,
// a number beyond float64. Each tool says on stderr that it ran.
var handMadeBroken = map[string]string{
	"bad_image":      `{"content":[{"type":"image","data":"%%% not base64","mimeType":"image/png"}]}`,
	"huge_number":    `{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1e400}}`,
	"resources/read": `{"contents":[{"uri":"fake://bad","blob":"%%% not base64"}]}`,
	"prompts/get":    `{"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"_meta":{"n":1e400}}`,
}

// fakeLongToolName is a tool name of the malformed fake over MCP's 128
// characters.
var fakeLongToolName = strings.Repeat("l", 5000)

// handMadeBrokenTools are the malformed fake's tools after shout: two
// whose results break the protocol, names MCP does not allow (empty, with
// a space, too long), and shout again.
func handMadeBrokenTools() []any {
	tool := func(name string) map[string]any {
		return map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}}
	}
	return []any{tool("bad_image"), tool("huge_number"), tool(""), tool("sp ace"), tool(fakeLongToolName), tool("shout")}
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type sleepArgs struct {
	MS  int    `json:"ms" jsonschema:"milliseconds to sleep"`
	Tag string `json:"tag,omitempty" jsonschema:"names the call in the server's stderr lines"`
}

type floodArgs struct {
	Count int `json:"count" jsonschema:"how many log notifications to write"`
	Bytes int `json:"bytes" jsonschema:"size of each notification's data string"`
}

// floodWriter writes raw notifications to stdout between the SDK's own
// messages: both hold mu, so lines never interleave.
type floodWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// floodChunk is how many notifications go out per hold of the lock, so
// that answers to other calls get through during a flood.
const floodChunk = 1000

func (f *floodWriter) flood(count, size int) error {
	data, _ := json.Marshal(strings.Repeat("x", size))
	for sent := 0; sent < count; {
		f.mu.Lock()
		for n := 0; n < floodChunk && sent < count; n++ {
			fmt.Fprintf(f.w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"flood-%d","data":%s}}`+"\n", sent, data)
			sent++
		}
		err := f.w.Flush()
		f.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// lockedConn writes each message under mu.
type lockedConn struct {
	mcp.Connection
	mu *sync.Mutex
}

func (c *lockedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Connection.Write(ctx, msg)
}

// rendezvous announces this server in the rendezvous directory and waits
// until every peer has done the same.
func rendezvous() error {
	dir, self := os.Getenv(fakeRendezvousEnv), os.Getenv(fakeNameEnv)
	if dir == "" || self == "" {
		return fmt.Errorf("rendezvous needs %s and %s", fakeRendezvousEnv, fakeNameEnv)
	}
	if err := os.WriteFile(filepath.Join(dir, self), nil, 0o600); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "fake: waiting for", os.Getenv(fakePeersEnv))
	for _, peer := range strings.Split(os.Getenv(fakePeersEnv), ",") {
		for {
			if _, err := os.Stat(filepath.Join(dir, peer)); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// describe is what the describe tool reports about its process.
type describe struct {
	Args  []string `json:"args"`
	Cwd   string   `json:"cwd"`
	Value string   `json:"value"` // of MCPD_FAKE_VALUE
	Procs int      `json:"procs"` // runtime.GOMAXPROCS
}

func addDescribeTool(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "describe", Description: "reports the process's args, cwd, " + fakeValueEnv + " and GOMAXPROCS"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, describe, error) {
			cwd, err := os.Getwd()
			if err != nil {
				return nil, describe{}, err
			}
			return nil, describe{Args: os.Args[1:], Cwd: cwd, Value: os.Getenv(fakeValueEnv), Procs: runtime.GOMAXPROCS(0)}, nil
		})
}

// addAskPairTool adds the ask-pair fake's tool "ask": each call waits
// until count calls of its group have arrived, so that all of them are in
// flight at once, then asks for a sample of its tag (a 2026-07-28 input
// request, which the SDK sends a legacy client as a sampling request) and
// returns "<tag> answered by <the sample's text>".
func addAskPairTool(srv *mcp.Server) {
	var mu sync.Mutex
	arrived := map[string]int{}
	all := map[string]chan struct{}{}
	type askArgs struct {
		Group string `json:"group"`
		Count int    `json:"count"`
		Tag   string `json:"tag"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "waits for count calls of group, then asks its client to sample tag"},
		func(ctx context.Context, req *mcp.CallToolRequest, in askArgs) (*mcp.CallToolResult, any, error) {
			if len(req.Params.InputResponses) == 0 {
				mu.Lock()
				if all[in.Group] == nil {
					all[in.Group] = make(chan struct{})
				}
				group := all[in.Group]
				if arrived[in.Group]++; arrived[in.Group] == in.Count {
					close(group)
				}
				mu.Unlock()
				select {
				case <-group:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"sample": &mcp.CreateMessageParams{
					MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Tag}}},
				}}, RequestState: in.Tag}, nil, nil
			}
			text := fmt.Sprintf("%T", req.Params.InputResponses["sample"])
			switch r := req.Params.InputResponses["sample"].(type) {
			case *mcp.CreateMessageResult:
				if tc, ok := r.Content.(*mcp.TextContent); ok {
					text = tc.Text
				}
			case *mcp.CreateMessageWithToolsResult:
				if tc, ok := r.Content[0].(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			return textResult(in.Tag + " answered by " + text), nil, nil
		})
}

// fakeNoteState is the note fake's resource and its followers.
type fakeNoteState struct {
	mu          sync.Mutex
	text        string
	subscribers int
}

func (n *fakeNoteState) subscribe(context.Context, *mcp.SubscribeRequest) error {
	if mark := os.Getenv(fakeMarkEnv); mark != "" {
		if _, err := os.Stat(mark); err == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "fake: subscriptions refused"}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subscribers++
	return nil
}

func (n *fakeNoteState) unsubscribe(context.Context, *mcp.UnsubscribeRequest) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subscribers--
	return nil
}

func (n *fakeNoteState) add(srv *mcp.Server) {
	srv.AddResource(&mcp.Resource{URI: fakeNoteURI, Name: "note", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: fakeNoteURI, MIMEType: "text/plain", Text: n.text}}}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "set", Description: "sets the note"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			n.mu.Lock()
			n.text = in.Text
			n.mu.Unlock()
			_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: fakeNoteURI})
			return textResult("set"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "subscribed", Description: "says whether anyone follows the note"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			return textResult(strconv.FormatBool(n.subscribers > 0)), nil, nil
		})
}

// What every fake server says of itself, and of its echo tool.
const fakeDescription = "a fake server of the end-to-end tests"

var fakeIcons = []mcp.Icon{{Source: "data:image/png;base64,iVBORw0KGgo=", MIMEType: "image/png", Sizes: []string{"48x48"}, Theme: "dark"}}

func addEchoTool(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes text", Icons: fakeIcons},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return textResult(in.Text), nil, nil
		})
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// startGrandchild starts "sleep 1000" in the fake's process group and
// writes its pid to pidFile. Nobody waits for it: after the fake exits it
// is an orphan, and only mcpd's process-group cleanup ends it.
func startGrandchild(pidFile string) error {
	if pidFile == "" {
		return fmt.Errorf("%s is not set", fakePidFileEnv)
	}
	gc := exec.Command("sleep", "1000")
	if err := gc.Start(); err != nil {
		return fmt.Errorf("start grandchild: %w", err)
	}
	// Write then rename, so a reader never sees a partial pid.
	tmp := pidFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(gc.Process.Pid)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, pidFile)
}

func isRequest(msg jsonrpc.Message, method string) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.Method == method
}

// wrapTransport wraps the connection of another transport.
type wrapTransport struct {
	mcp.Transport
	wrap func(mcp.Connection) mcp.Connection
}

func (t wrapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return t.wrap(c), nil
}

// filterConn passes each inbound message to onRead, which may drop it by
// returning false; first is true for the first message of the connection.
type filterConn struct {
	mcp.Connection
	onRead func(msg jsonrpc.Message, first bool) bool
	seen   bool // owned by the single reading goroutine
}

func (c *filterConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		first := !c.seen
		c.seen = true
		if c.onRead(msg, first) {
			return msg, nil
		}
	}
}

// noisyConn prints a non-JSON line to stdout before every message, the way
// careless servers print banners and progress to stdout.
type noisyConn struct {
	mcp.Connection
	mu sync.Mutex // keeps the noise and the message on separate lines
}

func (c *noisyConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintln(os.Stdout, fakeNoise); err != nil {
		return err
	}
	return c.Connection.Write(ctx, msg)
}

// writeStacksOnSignal writes the stacks of every goroutine to path each
// time SIGUSR1 arrives: a test that sees a call hang asks for them.
func writeStacksOnSignal(path string) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	go func() {
		for range sigs {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(f, 2)
				f.Close()
			}
		}
	}()
}
