package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gated fake server holds every tool call until the test lets it go,
// so a test can kill the server at a moment when it knows exactly which
// calls the server has started. Each call appends "<pid> <index> <tool>
// <tag>" to <dir>/starts, index counting the calls this process started
// from 0; it finishes once <dir>/release-<pid> holds a number above its
// index. Its tools differ only in what the server says of them: "peek" is
// read-only, "put" idempotent, "append" neither.
const (
	fakeGated       = "gated"
	fakeGateDirEnv  = "MCPD_FAKE_GATE_DIR"
	gatedStartsFile = "starts"
	gatedPollEvery  = 10 * time.Millisecond
	gatedReadOnly   = "peek"
	gatedIdempotent = "put"
	gatedPlain      = "append"
)

type gateArgs struct {
	Tag string `json:"tag" jsonschema:"names the call in the starts file"`
}

// addGatedTools adds the gated tools to srv, writing to dir.
func addGatedTools(srv *mcp.Server, dir string) error {
	starts, err := os.OpenFile(filepath.Join(dir, gatedStartsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	pid := os.Getpid()
	var (
		mu       sync.Mutex // one line per write
		next     int
		released atomic.Int64
	)
	go func() {
		release := filepath.Join(dir, "release-"+strconv.Itoa(pid))
		for {
			if b, err := os.ReadFile(release); err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
					released.Store(n)
				}
			}
			time.Sleep(gatedPollEvery)
		}
	}()
	tools := []*mcp.Tool{
		{Name: gatedReadOnly, Description: "waits for the gate; read-only", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: gatedIdempotent, Description: "waits for the gate; idempotent", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		{Name: gatedPlain, Description: "waits for the gate; neither read-only nor idempotent"},
	}
	for _, tool := range tools {
		mcp.AddTool(srv, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in gateArgs) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			index := next
			next++
			_, err := fmt.Fprintf(starts, "%d %d %s %s\n", pid, index, tool.Name, in.Tag)
			mu.Unlock()
			if err != nil {
				return nil, nil, err
			}
			ticker := time.NewTicker(gatedPollEvery)
			defer ticker.Stop()
			for released.Load() <= int64(index) {
				select {
				case <-ticker.C:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return textResult(in.Tag), nil, nil
		})
	}
	return nil
}

// gatedStart is one line of the starts file.
type gatedStart struct {
	pid, index int
	tool, tag  string
}

// readGatedStarts reads the complete lines of dir's starts file.
func readGatedStarts(dir string) ([]gatedStart, error) {
	f, err := os.Open(filepath.Join(dir, gatedStartsFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []gatedStart
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return out, nil // a partial last line is read next time
		}
		var s gatedStart
		if _, err := fmt.Sscanf(line, "%d %d %s %s", &s.pid, &s.index, &s.tool, &s.tag); err != nil {
			return nil, fmt.Errorf("starts file line %q: %w", line, err)
		}
		out = append(out, s)
	}
}

// releaseGated lets the first n calls process pid started finish.
func releaseGated(dir string, pid, n int) error {
	name := filepath.Join(dir, "release-"+strconv.Itoa(pid))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
