// Package fastserver is a minimal MCP server for benchmarks: one tool, echo
// {message}, spoken as hand-written newline-delimited JSON-RPC without the
// SDK. It answers initialize, ping, tools/list and tools/call, rejects
// server/discover (and every other method) with "method not found" so that
// clients fall back to the initialize handshake, and ignores notifications.
// It is as cheap as a server can reasonably be, so that a benchmark against
// it shows the client's and mcpd's own cost rather than the server's.
package fastserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Name and Version are what the server reports as its serverInfo.
const (
	Name    = "mcpd-bench-fast"
	Version = "1.0.0"
)

// ToolName is the server's only tool.
const ToolName = "echo"

// JSON-RPC error codes the server answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// defaultProtocolVersion is offered when a client asks for a revision this
// server does not know; 2026-07-28 needs server/discover, which it rejects.
const defaultProtocolVersion = "2025-11-25"

// supported reports whether v is an initialize-based revision; the
// server's behaviour is the same in all of them.
func supported(v string) bool {
	switch v {
	case "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05":
		return true
	}
	return false
}

// bufferSize holds typical requests whole and batches many responses per
// write under load.
const bufferSize = 64 << 10

// maxLineBytes bounds one request line; a longer one ends Serve.
const maxLineBytes = 4 << 20

// Fixed parts of responses. The id and the variable parts are spliced in
// between.
const (
	responsePrefix = `{"jsonrpc":"2.0","id":`
	resultInfix    = `,"result":`
	errorInfix     = `,"error":{"code":`
	toolsList      = `{"tools":[{"name":"echo","title":"Echo","description":"Returns the given message unchanged as text.",` +
		`"inputSchema":{"type":"object","properties":{"message":{"type":"string","description":"the text to echo back"}},"required":["message"]},` +
		`"annotations":{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}]}`
	initializeHead = `{"protocolVersion":"`
	initializeTail = `","capabilities":{"tools":{}},"serverInfo":{"name":"` + Name + `","version":"` + Version + `"}}`
)

// request is the part of a JSON-RPC message the server looks at. It is
// reused from line to line; reset clears it without dropping its buffers.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Name            string          `json:"name"`
		Arguments       json.RawMessage `json:"arguments"`
	} `json:"params"`
}

func (r *request) reset() {
	r.ID = r.ID[:0]
	r.Method = ""
	r.Params.ProtocolVersion = ""
	r.Params.Name = ""
	r.Params.Arguments = r.Params.Arguments[:0]
}

// echoArgs are the echo tool's arguments.
type echoArgs struct {
	Message *string `json:"message"`
}

// Serve reads requests from r, one JSON object a line, and writes each
// response as one line to w, in order, until r reports EOF (then it returns
// nil), a read or write fails, or ctx ends. A blocked read does not observe
// ctx: close r to stop a server that is waiting for input.
//
// Responses are buffered while more complete request lines are already
// buffered, and flushed before Serve could block on reading, so a pipelining
// client gets many responses per write and a lone caller gets its answer at
// once.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, bufferSize)
	bw := bufio.NewWriterSize(w, bufferSize)
	s := &session{w: bw}
	var long []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !hasLine(br) {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxLineBytes {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			if len(long) > maxLineBytes {
				return fmt.Errorf("read: request line exceeds %d bytes", maxLineBytes)
			}
			line = long
		}
		if len(line) > 0 {
			if werr := s.handle(line); werr != nil {
				return fmt.Errorf("write: %w", werr)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			if ferr := bw.Flush(); ferr != nil {
				return fmt.Errorf("write: %w", ferr)
			}
			return nil
		case err != nil:
			return fmt.Errorf("read: %w", err)
		}
	}
}

// hasLine reports whether a whole line is already buffered, so that reading
// it cannot block.
func hasLine(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	buf, _ := br.Peek(n)
	return bytes.IndexByte(buf, '\n') >= 0
}

// session is the per-connection state of Serve.
type session struct {
	w    *bufio.Writer
	req  request
	args echoArgs
	out  []byte // the response being built, reused
}

// handle answers one line. Only write errors are returned; everything wrong
// with the request is answered on the wire.
func (s *session) handle(line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	s.req.reset()
	if err := json.Unmarshal(line, &s.req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && len(s.req.ID) > 0 && string(s.req.ID) != "null" {
			// Valid JSON with a field of the wrong type: answer the request.
			return s.writeError(s.req.ID, codeInvalidRequest, "invalid request: "+typeErr.Field+" has the wrong type")
		}
		if line[0] != '{' {
			// Batches are not spoken by any revision this server offers.
			return s.writeError(nil, codeInvalidRequest, "invalid request: want one JSON object a line")
		}
		return s.writeError(nil, codeParseError, "parse error")
	}
	id := s.req.ID
	if len(id) == 0 || string(id) == "null" {
		// A notification (notifications/initialized, cancelled, ...) or a
		// response to a request this server never sends.
		return nil
	}
	switch s.req.Method {
	case "tools/call":
		return s.callTool(id)
	case "ping":
		return s.writeResult(id, "{}")
	case "tools/list":
		return s.writeResult(id, toolsList)
	case "initialize":
		v := s.req.Params.ProtocolVersion
		if !supported(v) {
			v = defaultProtocolVersion
		}
		return s.writeResult(id, initializeHead+v+initializeTail)
	case "":
		return s.writeError(id, codeInvalidRequest, "invalid request: no method")
	}
	return s.writeError(id, codeMethodNotFound, "method not found: "+s.req.Method)
}

// callTool answers tools/call. A missing or mistyped message is a tool
// error (isError), as SDK servers report failed input validation.
func (s *session) callTool(id json.RawMessage) error {
	if s.req.Params.Name != ToolName {
		return s.writeError(id, codeInvalidParams, "unknown tool "+s.req.Params.Name)
	}
	s.args.Message = nil
	if len(s.req.Params.Arguments) > 0 {
		if err := json.Unmarshal(s.req.Params.Arguments, &s.args); err != nil {
			return s.writeToolError(id, "invalid arguments: message must be a string")
		}
	}
	if s.args.Message == nil {
		return s.writeToolError(id, "invalid arguments: message is required")
	}
	s.out = s.begin(id)
	s.out = append(s.out, resultInfix...)
	s.out = append(s.out, `{"content":[{"type":"text","text":`...)
	s.out = appendString(s.out, *s.args.Message)
	s.out = append(s.out, "}]}}\n"...)
	_, err := s.w.Write(s.out)
	return err
}

func (s *session) writeToolError(id json.RawMessage, text string) error {
	s.out = s.begin(id)
	s.out = append(s.out, resultInfix...)
	s.out = append(s.out, `{"content":[{"type":"text","text":`...)
	s.out = appendString(s.out, text)
	s.out = append(s.out, `}],"isError":true}}`+"\n"...)
	_, err := s.w.Write(s.out)
	return err
}

func (s *session) writeResult(id json.RawMessage, result string) error {
	s.out = s.begin(id)
	s.out = append(s.out, resultInfix...)
	s.out = append(s.out, result...)
	s.out = append(s.out, "}\n"...)
	_, err := s.w.Write(s.out)
	return err
}

// writeError answers with a JSON-RPC error; a nil id is written as null.
func (s *session) writeError(id json.RawMessage, code int, message string) error {
	s.out = s.begin(id)
	s.out = append(s.out, errorInfix...)
	s.out = fmt.Appendf(s.out, "%d", code)
	s.out = append(s.out, `,"message":`...)
	s.out = appendString(s.out, message)
	s.out = append(s.out, "}}\n"...)
	_, err := s.w.Write(s.out)
	return err
}

func (s *session) begin(id json.RawMessage) []byte {
	out := append(s.out[:0], responsePrefix...)
	if len(id) == 0 {
		return append(out, "null"...)
	}
	return append(out, id...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
