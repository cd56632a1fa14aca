package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// fakeServerEnv selects a fake stdio server: the test binary re-executed.
const fakeServerEnv = "MCPD_MCPCLIENT_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		os.Exit(runFakeServer(mode))
	}
	goleak.VerifyTestMain(m)
}

// fakeStartsEnv, if set, names a file to which each fake server process
// appends a line when it starts.
const fakeStartsEnv = "MCPD_MCPCLIENT_FAKE_STARTS"

// runFakeServer serves a go-sdk server on stdio, misbehaving as mode says.
func runFakeServer(mode string) int {
	if path := os.Getenv(fakeStartsEnv); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, mode)
			f.Close()
		}
	}
	switch mode {
	case "exit-at-start":
		fmt.Fprintln(os.Stderr, "fatal: missing API key")
		return 3
	case "die-on-discover":
		// Read the first line; a server/discover ends the process, as some
		// servers do on an unknown method. Started again, it serves.
		r := bufio.NewReader(os.Stdin)
		line, _ := r.ReadString('\n')
		if strings.Contains(line, `"server/discover"`) {
			fmt.Fprintln(os.Stderr, "unknown method server/discover")
			return 1
		}
		return serveStdio(&mcp.IOTransport{
			Reader: io.NopCloser(io.MultiReader(strings.NewReader(line), r)),
			Writer: nopWriteCloser{os.Stdout},
		})
	case "crash-soon":
		// Serves, then dies shortly after, every time it is started.
		go func() {
			time.Sleep(300 * time.Millisecond)
			fmt.Fprintln(os.Stderr, "dying on purpose")
			os.Exit(5)
		}()
		return serveStdio(&mcp.StdioTransport{})
	case "ignore-discover":
		return serveStdio(&droppingStdio{drop: "server/discover"})
	case "stubborn":
		// Ignores SIGTERM, and hangs once its stdin ends: only SIGKILL
		// stops it.
		signal.Ignore(syscall.SIGTERM)
		serveStdio(&mcp.StdioTransport{})
		select {}
	case "big-tools":
		// Its tools/list answer is a line of over 64 KiB.
		srv := fakeMCPServer()
		srv.AddTool(&mcp.Tool{Name: "wordy", Description: strings.Repeat("w", 64<<10), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "fake server:", err)
			return 1
		}
		return 0
	case "stdout-logger":
		// Logs each request it reads to stdout, as a server whose logging
		// goes to the wrong stream does, and answers none.
		r := bufio.NewScanner(os.Stdin)
		for r.Scan() {
			fmt.Println("DEBUG handling a request")
		}
		return 0
	case "die-on-list":
		// Answers initialize, then exits when asked for its tools.
		return serveStdio(&droppingStdio{drop: "tools/list", exit: true})
	case "close-stdout-on-initialize", "close-stdout-on-list", "close-stdout-on-call":
		// Closes its stdout, without an answer, when asked to initialize,
		// for its tools, or to call one (once ready), then runs on
		// whatever mcpd closes, until a signal ends it.
		c := &closingStdio{method: strings.TrimPrefix(mode, "close-stdout-on-")}
		switch c.method {
		case "list":
			c.method = "tools/list"
		case "call":
			c.method = "tools/call"
		}
		go serveStdio(c)
		time.Sleep(time.Hour)
		return 0
	case "hang-on-relist":
		// Its tool add_tool adds a tool, which announces a changed tool
		// list; asked for its tools a second time, it hangs: it reads, and
		// so answers, nothing more.
		srv := fakeMCPServer()
		mcp.AddTool(srv, &mcp.Tool{Name: "add_tool"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(srv, &mcp.Tool{Name: "added"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{}, nil, nil
			})
			return &mcp.CallToolResult{}, nil, nil
		})
		if err := srv.Run(context.Background(), &hangingStdio{method: "tools/list", after: 1}); err != nil {
			fmt.Fprintln(os.Stderr, "fake server:", err)
			return 1
		}
		return 0
	case "ticking", "ticking-legacy":
		return serveTicking(mode == "ticking-legacy")
	case "freeze":
		return serveFreezing()
	case "hand-made":
		return serveHandMade()
	case "close-stdin-on-initialize":
		return closeStdinOnInitialize()
	}
	return serveStdio(&mcp.StdioTransport{})
}

// closeStdinOnInitialize reads the first request, an initialize, closes
// its stdin and only then answers it, so that the client's next write
// finds a broken pipe; it exits with status 3 on SIGTERM.
func closeStdinOnInitialize() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		os.Exit(3)
	}()
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	line, _ := bufio.NewReader(os.Stdin).ReadBytes('\n')
	os.Stdin.Close()
	fmt.Fprintln(os.Stderr, "fatal: stdin closed")
	if json.Unmarshal(line, &msg) == nil && msg.ID != nil {
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{
			"protocolVersion": msg.Params.ProtocolVersion,
			"capabilities":    map[string]any{},
			"serverInfo":      map[string]any{"name": "closing", "version": "0"},
		}})
		fmt.Printf("%s\n", out)
	}
	time.Sleep(time.Hour) // until SIGTERM
	return 0
}

func fakeMCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "0.1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(7)
		return nil, nil, nil
	})
	// hold and hold_idempotent differ only in the annotation: the first
	// call naming a marker file creates it, says so on stderr and waits
	// until cancelled; later ones answer at once.
	hold := func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
		Marker string `json:"marker"`
	}) (*mcp.CallToolResult, any, error) {
		if f, err := os.OpenFile(in.Marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			fmt.Fprintln(os.Stderr, "holding "+in.Marker)
			<-ctx.Done()
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "big_idempotent", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Size int `json:"size"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Size)}}}, nil, nil
	})
	// await creates its marker file, says so on stderr and answers once
	// the file is gone: a tool that takes as long as the test wants.
	mcp.AddTool(srv, &mcp.Tool{Name: "await"}, func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
		Marker string `json:"marker"`
	}) (*mcp.CallToolResult, any, error) {
		if err := os.WriteFile(in.Marker, nil, 0o600); err != nil {
			return nil, nil, err
		}
		fmt.Fprintln(os.Stderr, "awaiting "+in.Marker)
		for {
			if _, err := os.Stat(in.Marker); errors.Is(err, os.ErrNotExist) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
			}
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, hold)
	mcp.AddTool(srv, &mcp.Tool{Name: "hold_idempotent", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, hold)
	return srv
}

func serveStdio(t mcp.Transport) int {
	if err := fakeMCPServer().Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "fake server:", err)
		return 1
	}
	return 0
}

// serveFreezing serves on stdio, in either era, and says on stderr how
// many server/discover requests it has read ("server/discover 3"). Its
// tool freeze answers, then makes the server hang: it reads, and so
// answers, nothing more, while its process runs on.
func serveFreezing() int {
	frozen := make(chan struct{})
	var once sync.Once
	srv := fakeMCPServer()
	mcp.AddTool(srv, &mcp.Tool{Name: "freeze"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "freezing")
		once.Do(func() { close(frozen) })
		return &mcp.CallToolResult{}, nil, nil
	})
	if err := srv.Run(context.Background(), &freezingStdio{frozen: frozen}); err != nil {
		fmt.Fprintln(os.Stderr, "fake server:", err)
		return 1
	}
	return 0
}

// freezingStdio is a stdio transport whose connection counts the
// server/discover requests it reads on stderr, and stops reading for good
// once frozen is closed.
type freezingStdio struct{ frozen chan struct{} }

func (f *freezingStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := (&mcp.StdioTransport{}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &freezingConn{Connection: conn, frozen: f.frozen}, nil
}

type freezingConn struct {
	mcp.Connection
	frozen    chan struct{}
	discovers int // only Read uses it
}

func (c *freezingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	select {
	case <-c.frozen:
		time.Sleep(time.Hour) // a sleep, not a block: no deadlock to detect
	default:
	}
	if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == "server/discover" {
		c.discovers++
		fmt.Fprintf(os.Stderr, "server/discover %d\n", c.discovers)
	}
	return msg, err
}

// tickURI is the resource of a ticking fake server: it changes, and its
// subscribers are told, every 20ms.
const tickURI = "test://tick"

// serveTicking serves tickURI on stdio, in the legacy era or in both. It
// says on stderr when a resource is subscribed or unsubscribed.
func serveTicking(legacy bool) int {
	opts := &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			fmt.Fprintln(os.Stderr, "subscribed "+req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			fmt.Fprintln(os.Stderr, "unsubscribed "+req.Params.URI)
			return nil
		},
	}
	if legacy {
		opts.SupportedProtocolVersions = legacyVersions
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ticking", Version: "0.1"}, opts)
	srv.AddResource(&mcp.Resource{URI: tickURI, Name: "tick"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: tickURI, Text: time.Now().String()}}}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for range time.Tick(20 * time.Millisecond) {
			_ = srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: tickURI})
		}
	}()
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "ticking server:", err)
		return 1
	}
	return 0
}

// droppingStdio is a stdio transport whose connection never sees requests
// of one method: the server neither answers nor rejects them, or, with
// exit, exits with status 4 when one comes.
type droppingStdio struct {
	drop string
	exit bool
}

func (d *droppingStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := (&mcp.StdioTransport{}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &droppingConn{Connection: conn, drop: d.drop, exit: d.exit}, nil
}

type droppingConn struct {
	mcp.Connection
	drop string
	exit bool
}

func (c *droppingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == c.drop {
			if c.exit {
				fmt.Fprintln(os.Stderr, "exiting on "+c.drop)
				os.Exit(4)
			}
			continue
		}
		return msg, err
	}
}

// nopWriteCloser keeps stdout open when the SDK closes the connection.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// closingStdio is a stdio transport that closes stdout on the first
// request of method, or, with answer, a moment after it answered one.
type closingStdio struct {
	method string
}

func (c *closingStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := (&mcp.StdioTransport{}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &closingConn{Connection: conn, method: c.method}, nil
}

// closingConn closes stdout when it reads a request of method.
type closingConn struct {
	mcp.Connection
	method string
}

func (c *closingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == c.method {
		fmt.Fprintln(os.Stderr, "closing stdout on "+c.method)
		os.Stdout.Close()
	}
	return msg, err
}

// hangingStdio is a stdio transport whose connection stops reading, for
// good, at the request of method that follows after such requests.
type hangingStdio struct {
	method string
	after  int
}

func (h *hangingStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := (&mcp.StdioTransport{}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &hangingConn{Connection: conn, method: h.method, left: h.after}, nil
}

type hangingConn struct {
	mcp.Connection
	method string
	left   int // requests of method still read; only Read uses it
}

func (c *hangingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); err == nil && ok && req.Method == c.method {
		if c.left == 0 {
			fmt.Fprintln(os.Stderr, "hanging on "+c.method)
			time.Sleep(time.Hour) // a sleep, not a block: no deadlock to detect
		}
		c.left--
	}
	return msg, err
}
