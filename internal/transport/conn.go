package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrWriteFailed is wrapped by the Read error of a connection that a failed
// write ended (see lineConn.Write).
var ErrWriteFailed = errors.New("connection ended by a failed write")

// ErrStdoutClosed is wrapped, with io.EOF, by the Read error of a
// connection whose server closed its stdout and had not exited a stop
// grace later.
var ErrStdoutClosed = errors.New("server closed stdout")

// ErrMessageTooLarge is wrapped by the Read error when the server sends a
// line longer than ProcessOptions.MaxLineBytes. It ends the connection.
var ErrMessageTooLarge = errors.New("message too large")

const (
	// readBufferSize holds typical messages whole, so most lines are decoded
	// straight out of the reader's buffer without a copy.
	readBufferSize = 64 << 10
	// keepLongLineBytes is the largest assembled-line buffer kept for reuse;
	// a rare huge message should not pin its memory for the connection's life.
	keepLongLineBytes = 1 << 20
	// maxSkippedLogBytes truncates a skipped stdout line in the warning.
	maxSkippedLogBytes = 200
)

// lineConn is the newline-delimited JSON-RPC connection over a Process's
// pipes. Read is called by one goroutine at a time (the SDK's read loop);
// Write and Close may be called concurrently with everything.
type lineConn struct {
	p       *Process
	r       *bufio.Reader
	maxLine int

	// Read state, owned by the reading goroutine.
	long    []byte            // assembles lines longer than the reader's buffer
	queue   []jsonrpc.Message // undelivered rest of a batch
	readErr error             // sticky: the connection is over

	// writeLock (capacity 1) is held by the one write in progress; a
	// channel rather than a mutex, so that waiting for it ends with ctx.
	writeLock chan struct{}
	// maxWriteWait bounds a write whose ctx has no deadline
	// (defaultMaxWriteWait; tests shorten it).
	maxWriteWait time.Duration

	errMu    sync.Mutex
	writeErr error // sticky, under errMu: the connection is over
	// readEnded is set (before the read deadline) when a failed write ended
	// the connection; Read then reports writeErr.
	readEnded atomic.Bool
}

var _ mcp.Connection = (*lineConn)(nil)

func newLineConn(p *Process) *lineConn {
	return &lineConn{
		p:            p,
		r:            bufio.NewReaderSize(p.stdout, readBufferSize),
		maxLine:      p.maxLine,
		writeLock:    make(chan struct{}, 1),
		maxWriteWait: defaultMaxWriteWait,
	}
}

// SessionID implements mcp.Connection; stdio has no session id.
func (c *lineConn) SessionID() string { return "" }

// Close implements mcp.Connection by stopping the process in order (see
// Process.Stop). It unblocks a pending Read at once.
func (c *lineConn) Close() error {
	return c.p.Stop(context.Background())
}

// Read implements mcp.Connection. It returns the next JSON-RPC message,
// skipping blank lines and lines that are not JSON-RPC (logged at warn), and
// delivers a batch array one message per call. ctx is observed only before
// blocking; Close unblocks a blocked Read.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		msg := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		return msg, nil
	}
	if c.readErr != nil {
		return nil, c.readErr
	}
	for {
		line, err := c.readLine()
		if err != nil {
			c.readErr = c.readError(ctx, err)
			return nil, c.readErr
		}
		msg := c.decodeLine(bytes.TrimSpace(line))
		// Decoding copies what it keeps: a huge line's buffer goes now,
		// not when the next huge line comes.
		c.dropLongBuffer()
		if msg != nil {
			return msg, nil
		}
	}
}

// decodeLine is the message of a line (the first of a batch), or nil for
// a line to skip.
func (c *lineConn) decodeLine(line []byte) jsonrpc.Message {
	if len(line) == 0 {
		return nil
	}
	switch line[0] {
	case '{':
		msg, err := decodeMessage(line)
		if err != nil {
			c.skip(line, err)
			return nil
		}
		return msg
	case '[':
		return c.decodeBatch(line)
	default:
		c.skip(line, nil)
		return nil
	}
}

// readLine returns the next line, newline included. The result aliases a
// buffer that is reused by the next call; DecodeMessage copies what it keeps.
// A final line without a newline is returned before EOF.
func (c *lineConn) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	switch {
	case err == nil || (err == io.EOF && len(line) > 0):
		return line, c.checkLen(line)
	case err != bufio.ErrBufferFull:
		return nil, err
	}
	c.long = append(c.long[:0], line...)
	for {
		// Every chunk so far ended without a newline: all of it is content.
		if len(c.long) > c.maxLine {
			return nil, c.tooLarge()
		}
		line, err = c.r.ReadSlice('\n')
		c.long = append(c.long, line...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil || err == io.EOF:
			return c.long, c.checkLen(c.long)
		default:
			return nil, err
		}
	}
}

// dropLongBuffer lets go of the buffer that assembled a line when it is
// over keepLongLineBytes.
func (c *lineConn) dropLongBuffer() {
	if cap(c.long) > keepLongLineBytes {
		c.long = nil
	}
}

func (c *lineConn) checkLen(line []byte) error {
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > c.maxLine {
		return c.tooLarge()
	}
	return nil
}

func (c *lineConn) tooLarge() error {
	return fmt.Errorf("upstream message exceeds %d bytes: %w", c.maxLine, ErrMessageTooLarge)
}

// decodeBatch decodes a JSON-RPC batch (sent by 2025-03-26 servers), returns
// its first valid message and queues the rest. Invalid elements are skipped.
func (c *lineConn) decodeBatch(line []byte) jsonrpc.Message {
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		c.skip(line, err)
		return nil
	}
	msgs := c.queue[:0]
	for _, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			c.skip(raw, err)
			continue
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		if len(raws) == 0 {
			c.skip(line, errors.New("empty batch"))
		}
		return nil
	}
	c.queue = msgs[1:]
	return msgs[0]
}

// skip logs a stdout line that is not JSON-RPC. Servers print banners such as
// "Starting..." to stdout; that must not end the session.
func (c *lineConn) skip(line []byte, err error) {
	isJSON := len(line) > 0 && (line[0] == '{' || line[0] == '[')
	if isJSON {
		c.p.skippedLine(fmt.Sprintf("a line of %d bytes that looks like JSON", len(line)))
	} else {
		c.p.skippedLine(strings.ToValidUTF8(string(line[:min(len(line), maxSkippedLogBytes)]), ""))
	}
	// A server that logs to stdout writes as fast as one that floods
	// stderr: the warnings are rate limited as its stderr lines are.
	if !c.p.skipLog.admit() {
		return
	}
	ev := c.p.log.Warn()
	if ev == nil {
		return
	}
	if err != nil {
		ev = ev.Err(err)
	}
	if isJSON {
		// JSON that is no valid message may still be one in all but a
		// detail (a bad id or version), holding a result or arguments:
		// payloads stay out of the log. Its size and the error tell enough.
		ev.Int("line_bytes", len(line)).Msg("skipping stdout line that is not JSON-RPC")
		return
	}
	if len(line) > maxSkippedLogBytes {
		line = line[:maxSkippedLogBytes]
	}
	ev.Bytes("line", line).Msg("skipping stdout line that is not JSON-RPC")
}

// readError turns a read failure into the connection's final error.
func (c *lineConn) readError(ctx context.Context, err error) error {
	if c.readEnded.Load() {
		writeErr := c.stickyErr()
		// A closed pipe most often means the server is exiting; how it
		// ended says more than the write that noticed.
		if errors.Is(writeErr, syscall.EPIPE) {
			if exited := c.exitError(ctx); exited != nil {
				return exited
			}
		}
		return fmt.Errorf("%w: %w", ErrWriteFailed, writeErr)
	}
	if c.p.outputAbandoned.Load() {
		// Abandoned only after the reap: done is closed.
		<-c.p.done
		return fmt.Errorf("read: server process exited (%w), but a process outside its process group kept its stdout open: %w", c.p.exitStatus(), io.EOF)
	}
	if c.p.closing.Load() || errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("read: %w", mcp.ErrConnectionClosed)
	}
	if !errors.Is(err, io.EOF) {
		return fmt.Errorf("read: %w", err)
	}
	// stdout closes when the child exits; the reap follows at once.
	if exited := c.exitError(ctx); exited != nil {
		return exited
	}
	return fmt.Errorf("read: %w: %w", ErrStdoutClosed, io.EOF)
}

// exitError waits, up to the stop grace, for the child to be reaped and
// says how it ended; nil if it did not end in time.
func (c *lineConn) exitError(ctx context.Context) error {
	timer := time.NewTimer(c.p.stopGrace)
	defer timer.Stop()
	select {
	case <-c.p.done:
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return nil
	}
	return fmt.Errorf("read: server process exited (%w): %w", c.p.exitStatus(), io.EOF)
}

// Write implements mcp.Connection. Each message goes out as one line in a
// single write; concurrent writes do not interleave. A write blocked on a
// server that stopped reading ends when ctx ends (cancelled, or at its
// deadline), or when Close closes the pipe; a write whose ctx has no
// deadline (the SDK's answers to the server's own requests) gives up after
// defaultMaxWriteWait.
//
// The SDK treats a write error while ctx is still live as a broken
// connection: it refuses every later request, yet keeps reading. So Write
// keeps two promises. A write that ends with ctx (while it waits for an
// earlier write, or on a full pipe) before any byte went out returns only
// once ctx reports it, with ctx's error, and the connection goes on. Any
// other failure (a line cut short, by ctx or otherwise; a closed pipe; a
// write without a deadline that waited too long) ends the connection: the
// pending Read returns, the session ends and the server is started again,
// instead of staying up with every request refused. Once any byte of the
// line went out, it marks ctx's SendRecord.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.p.closing.Load() {
		return fmt.Errorf("write: %w", mcp.ErrConnectionClosed)
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	// EncodeMessage trims the encoder's newline, so this append normally
	// reuses the spare capacity instead of copying.
	data = append(data, '\n')
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(c.maxWriteWait)
	}
	if err := c.lock(ctx, deadline, hasDeadline); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.stickyErr(); err != nil {
		return err
	}
	// A child that stops reading fills the pipe: the deadline bounds the
	// wait, and ctx's end cuts it short at once. Every write sets its own
	// deadline, and waits for its cut below, so none leaks into the next.
	_ = c.p.stdin.SetWriteDeadline(deadline)
	cutDone := make(chan struct{})
	stopCut := context.AfterFunc(ctx, func() {
		defer close(cutDone)
		_ = c.p.stdin.SetWriteDeadline(time.Now())
	})
	n, err := c.p.stdin.Write(data)
	if !stopCut() {
		<-cutDone
	}
	if n > 0 {
		// From here on the server may have read the request, even if the
		// write failed part-way.
		MarkSent(ctx)
	}
	if err == nil {
		return nil
	}
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && hasDeadline {
		// Nothing went out, and the deadline is ctx's own, or ctx ended;
		// but ctx's timer can fire a little after the pipe's. Wait for it,
		// so the SDK sees a cancelled request rather than a broken
		// connection.
		if ctxErr := waitDone(ctx, deadlineLag); ctxErr != nil {
			return fmt.Errorf("write: %w", ctxErr)
		}
	}
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		// Cancelled before any byte went out.
		return fmt.Errorf("write: %w", ctx.Err())
	}
	if c.p.closing.Load() || errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("write: %w", mcp.ErrConnectionClosed)
	}
	switch {
	case n > 0 && ctx.Err() != nil:
		err = fmt.Errorf("write: cut short after %d of %d bytes: %w (%w)", n, len(data), err, ctx.Err())
	case n > 0:
		err = fmt.Errorf("write: cut short after %d of %d bytes: %w", n, len(data), err)
	case !hasDeadline && errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("write: server read nothing for %v: %w", c.maxWriteWait, err)
	default:
		err = fmt.Errorf("write: %w", err)
	}
	c.endConnection(err)
	return err
}

// defaultMaxWriteWait bounds a write whose ctx has no deadline: the SDK
// writes its answers to the server's own requests (roots, sampling,
// elicitation, ping) that way. A server that asked and then reads nothing
// of the answer for this long is wedged; without a bound the write would
// hold the write lock for good, every later request would time out waiting
// for it, and with keepalive off the session would never end.
// Ending the connection rebuilds the session instead.
const defaultMaxWriteWait = time.Minute

// lock takes the write lock, waiting at most until ctx ends or, for a ctx
// without a deadline, until deadline. Giving up when ctx ended returns
// ctx's error (nothing went out; the connection goes on). Giving up at
// deadline with ctx live ends the connection, for the SDK would take the
// error for a broken connection anyway.
func (c *lineConn) lock(ctx context.Context, deadline time.Time, hasDeadline bool) error {
	select {
	case c.writeLock <- struct{}{}:
		return nil
	default:
	}
	var expired <-chan time.Time
	if !hasDeadline {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case c.writeLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("write: %w", ctx.Err())
	case <-expired:
		err := fmt.Errorf("write: waited %v for an earlier write to the server: %w", c.maxWriteWait, os.ErrDeadlineExceeded)
		c.endConnection(err)
		return err
	}
}

func (c *lineConn) unlock() { <-c.writeLock }

// stickyErr is the error that ended the connection, if a write did.
func (c *lineConn) stickyErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.writeErr
}

// deadlineLag bounds how long a write whose deadline has passed waits for
// its context to say so. A context's timer fires within microseconds of its
// deadline unless the machine is starved; past this, the write counts as
// failed.
const deadlineLag = time.Second

// waitDone waits up to limit for ctx to end and returns its error, or nil
// if it did not end in time.
func waitDone(ctx context.Context, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// endConnection records why writing failed, so that later writes fail at
// once and Read reports it, and unblocks the pending Read: the session
// ends and is rebuilt. A half-written line is never followed by another
// message: the write that cut it still holds the write lock here, and the
// next one checks the error first.
func (c *lineConn) endConnection(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.writeErr != nil {
		return
	}
	c.writeErr = err
	c.readEnded.Store(true)
	_ = c.p.stdout.SetReadDeadline(time.Now())
}
