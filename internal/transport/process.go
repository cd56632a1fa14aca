package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

const (
	// DefaultMaxLineBytes bounds one inbound JSON-RPC line when
	// ProcessOptions.MaxLineBytes is zero; it matches the SDK's own default.
	DefaultMaxLineBytes = 16 << 20
	// DefaultStderrTailLines is the number of stderr lines kept for status
	// when ProcessOptions.StderrTailLines is zero.
	DefaultStderrTailLines = 50
	// DefaultStopGrace is how long Stop waits after closing stdin, and again
	// after SIGTERM, when ProcessOptions.StopGrace is zero.
	DefaultStopGrace = 2 * time.Second

	// maxStderrLineBytes truncates stderr lines so that one runaway line (a
	// base64 blob, a minified stack) cannot bloat the log or the status tail.
	maxStderrLineBytes = 1024

	// heldOutputGrace is how long stdout may stay open after the child was
	// reaped (and its process group killed) before the connection gives up
	// on it. Only a process that left the group (setsid, a container the
	// server started) still holds it then, and it would keep a dead server
	// looking alive. The grace covers the group's last members dying;
	// output the reader has not taken yet is never dropped (see
	// abandonOutput).
	heldOutputGrace = time.Second
)

// StdioSpec describes a child process to run.
type StdioSpec struct {
	Command string
	Args    []string
	// Env is merged over os.Environ() (less what ProcessOptions.Withhold
	// keeps back); its values are secrets and are never logged or put into
	// errors.
	Env map[string]string
	// Dir is the working directory; empty inherits the daemon's.
	Dir string
}

// ProcessOptions tunes a Process. The zero value (or nil) selects defaults.
type ProcessOptions struct {
	// Logger receives lifecycle events, skipped stdout lines (warn) and the
	// child's stderr, one info event per line with "stream":"stderr", as
	// many as StderrLogLimit allows. The caller passes a logger that
	// already carries a server field.
	Logger zerolog.Logger
	// MaxLineBytes bounds one inbound JSON-RPC line; 0 selects
	// DefaultMaxLineBytes.
	MaxLineBytes int
	// StderrTailLines is the number of stderr lines kept for StderrTail; 0
	// selects DefaultStderrTailLines.
	StderrTailLines int
	// StopGrace is how long Stop waits after closing stdin, and again after
	// SIGTERM; 0 selects DefaultStopGrace. It also bounds how long Stop
	// waits for stderr to drain after the reap, and how long Read waits for
	// the reap after stdout EOF to report the exit status.
	StopGrace time.Duration
	// OnStderrLine, if set, is called for every stderr line (it counts
	// them for the metrics); it must not block.
	OnStderrLine func()
	// StderrLogLimit bounds the stderr lines that reach the log: a line
	// it does not allow goes to StderrTail only, and the lines so dropped
	// are counted in a warn event ("dropped"), once every 5s at most
	// while they go on and once when stderr ends. The successive
	// processes of one server share one limiter, so that a server that
	// crashes and restarts does not get a new burst each time. nil
	// selects a limiter of this process alone, of DefaultStderrLogRate
	// and DefaultStderrLogBurst; rate.NewLimiter(rate.Inf, 0) logs every
	// line. The limit never slows the reading of stderr.
	StderrLogLimit *rate.Limiter
	// OnStderrLineDropped, if set, is called for every stderr line that
	// StderrLogLimit kept from the log; it must not block.
	OnStderrLineDropped func()
	// SkippedLogLimit bounds the warnings of stdout lines that the
	// connection skips as no JSON-RPC (a server that logs to stdout) as
	// StderrLogLimit bounds stderr lines, with a bucket of its own: a
	// line it does not allow is still counted in SkippedOutput, and the
	// lines so kept from the log are counted in a warn event
	// ("stream":"stdout", "dropped"). nil selects a limiter of this
	// process alone, of DefaultStderrLogRate and DefaultStderrLogBurst.
	SkippedLogLimit *rate.Limiter
	// Withhold, if set, names the variables of the daemon's own
	// environment that the child does not inherit (its credentials). A
	// variable StdioSpec.Env sets reaches the child either way.
	Withhold func(name string) bool
	// Hurry, if set, ends when the process must stop at once (the daemon is
	// out of time): from then on every stop, under way or to come, skips
	// its grace periods, the stop begun by closing the connection too,
	// which has no context of its own.
	Hurry context.Context
	// Reaper, if set, is the reaper of orphans (mcpd as PID 1), which
	// must leave this process's child to it.
	Reaper *Reaper
}

// Process is a supervised stdio MCP server: a child process in its own
// process group, with pipes for stdin, stdout and stderr. It implements
// mcp.Transport; Connect may be called once.
//
// All methods are safe for concurrent use. Stop (or Close on the connection)
// must be called to release the pipes, even after the child exited.
type Process struct {
	pid       int
	log       zerolog.Logger
	maxLine   int
	stopGrace time.Duration

	cmd    *exec.Cmd
	reaper *Reaper  // nil unless mcpd reaps orphans (PID 1)
	stdin  *os.File // our write end of the child's stdin
	stdout *os.File // our read end of the child's stdout
	stderr *os.File // our read end of the child's stderr
	tail   *lineTail
	// stderrLog decides which stderr lines reach the log, skipLog which
	// warnings of skipped stdout lines do.
	stderrLog *logGate
	skipLog   *logGate

	done       chan struct{} // closed once the child is reaped
	exitErr    error         // written before done is closed
	stderrDone chan struct{} // closed when the stderr reader returns
	// drain, once the stop began, reads what the child still writes to
	// its stdout, and discards it (see closeInput); drainDone is closed
	// when it returns. Both nil until then, or if no drain could start.
	drain     *os.File
	drainDone chan struct{}
	onStderr  func() // ProcessOptions.OnStderrLine

	// heldOutput, once the child is reaped, is the timer of abandonOutput.
	heldOutput atomic.Pointer[time.Timer]
	// outputAbandoned is set when the connection was ended because stdout
	// stayed open after the child's exit.
	outputAbandoned atomic.Bool

	// skipMu guards skipped and lastSkipped: the stdout lines the
	// connection skipped as no JSON-RPC (see SkippedOutput).
	skipMu      sync.Mutex
	skipped     int
	lastSkipped string

	// closing is set when the stop sequence starts; the connection reports
	// ErrConnectionClosed from then on.
	closing atomic.Bool
	// terminating is set just before the stop sends SIGTERM to the group:
	// from then on the stop, not the reap, kills what is left of it.
	terminating    atomic.Bool
	closeInputOnce sync.Once

	connectMu sync.Mutex
	connected bool

	stopOnce  sync.Once
	stopped   chan struct{} // closed when the stop sequence has finished
	stopErr   error         // written before stopped is closed
	hurryOnce sync.Once
	hurry     chan struct{} // closed when a Stop caller's ctx or ProcessOptions.Hurry ends: skip to SIGKILL
	// unwatchHurry stops the watch of ProcessOptions.Hurry (a no-op
	// without one).
	unwatchHurry func() bool
}

var _ mcp.Transport = (*Process)(nil)

// StartProcess starts the child in its own process group with stdin, stdout
// and stderr pipes. A failure to start it (command not found, not
// executable, bad working directory) is returned as an error naming the
// command, never the environment.
func StartProcess(spec StdioSpec, opts *ProcessOptions) (*Process, error) {
	if spec.Command == "" {
		return nil, errors.New("start process: empty command")
	}
	var o ProcessOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.StderrTailLines <= 0 {
		o.StderrTailLines = DefaultStderrTailLines
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.StderrLogLimit == nil {
		o.StderrLogLimit = rate.NewLimiter(DefaultStderrLogRate, DefaultStderrLogBurst)
	}
	if o.SkippedLogLimit == nil {
		o.SkippedLogLimit = rate.NewLimiter(DefaultStderrLogRate, DefaultStderrLogBurst)
	}
	env, err := mergeEnv(os.Environ(), spec.Env, o.Withhold)
	if err != nil {
		return nil, fmt.Errorf("start process %q: %w", spec.Command, err)
	}
	if spec.Dir != "" {
		// exec reports a bad Dir as "fork/exec <command>: no such file or
		// directory", which blames the command; name the directory instead.
		if fi, err := os.Stat(spec.Dir); err != nil {
			return nil, fmt.Errorf("start process %q: working directory: %w", spec.Command, err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("start process %q: working directory %q is not a directory", spec.Command, spec.Dir)
		}
	}

	cmd := exec.Command(spec.Command, spec.Args...)
	if path, ok := spec.Env["PATH"]; ok && !strings.ContainsRune(spec.Command, filepath.Separator) {
		// The server's own PATH finds its command, as a shell or another
		// MCP client would (a config that points PATH at nvm's node, say),
		// not mcpd's.
		cmd.Path, cmd.Err = lookPathIn(spec.Command, path)
	}
	cmd.Env = env
	cmd.Dir = spec.Dir
	// Its own group, so that stopping signals the server and everything it
	// spawned, and so that a terminal's Ctrl-C aimed at the daemon does not
	// reach the servers before the daemon stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Where the OS allows it, the child dies with the daemon even when the
	// daemon cannot stop it (SIGKILL, a crash); see supervise.
	setParentDeathSignal(cmd.SysProcAttr)

	// Our own pipes (not cmd.StdoutPipe): closing our read end unblocks a
	// pending Read through the runtime poller, and exec starts no copying
	// goroutines for *os.File. os.Pipe sets O_CLOEXEC, so other children do
	// not inherit our ends and hold the pipes open.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("start process %q: stdin pipe: %w", spec.Command, err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start process %q: stdout pipe: %w", spec.Command, err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start process %q: stderr pipe: %w", spec.Command, err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW

	p := &Process{
		log:        o.Logger,
		onStderr:   o.OnStderrLine,
		maxLine:    o.MaxLineBytes,
		stopGrace:  o.StopGrace,
		cmd:        cmd,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		tail:       newLineTail(o.StderrTailLines),
		done:       make(chan struct{}),
		stderrDone: make(chan struct{}),
		stopped:    make(chan struct{}),
		hurry:      make(chan struct{}),
		reaper:     o.Reaper,
	}
	p.stderrLog = newLogGate(o.StderrLogLimit, p.stderrDropped, o.OnStderrLineDropped)
	p.skipLog = newLogGate(o.SkippedLogLimit, p.skippedDropped, nil)
	started := make(chan error)
	go p.supervise(started)
	startErr := <-started
	// The child holds its own copies now; keeping ours would hide EOF.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	if startErr != nil {
		_ = inW.Close()
		_ = outR.Close()
		_ = errR.Close()
		return nil, fmt.Errorf("start process %q: %w", spec.Command, startErr)
	}
	p.log.Debug().Int("pid", p.pid).Str("command", spec.Command).Msg("server process started")
	p.unwatchHurry = func() bool { return false }
	if o.Hurry != nil {
		p.unwatchHurry = context.AfterFunc(o.Hurry, p.hurryUp)
	}
	go p.readStderr()
	return p, nil
}

// mergeEnv returns base, less the variables withhold names (when set),
// with extra applied over it. Keys of extra are appended in sorted order
// so the child's environment is deterministic.
// lookPathIn is exec.LookPath with the directories of path rather than
// mcpd's PATH. Only absolute directories count: a relative one would find
// a program in whatever directory the server starts in.
func lookPathIn(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, file)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", &exec.Error{Name: file, Err: fmt.Errorf("%w in the server's PATH", exec.ErrNotFound)}
}

func mergeEnv(base []string, extra map[string]string, withhold func(string) bool) ([]string, error) {
	for k := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("invalid environment variable name %q", k)
		}
	}
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; !ok && (withhold == nil || !withhold(k)) {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env, nil
}

// supervise starts the child, reports the outcome on started, and then
// reaps it, all on one OS thread that it holds until the reap.
//
// The child's parent-death signal (setParentDeathSignal) is tied to the
// thread that forked it, not to the daemon's process (prctl(2)): it fires
// when that thread ends. The Go runtime ends a thread whenever a goroutine
// locked to it returns without unlocking, which any code in the daemon may
// do on whatever thread it happens to run. Locked here from before the fork
// until the child is reaped, the forking thread runs nothing else and
// outlives the child, so the signal comes only when the daemon dies. It
// costs no extra thread: the wait for the child blocks one anyway.
func (p *Process) supervise(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := p.reaper.startChild(func() (int, error) {
		if err := p.cmd.Start(); err != nil {
			return 0, err
		}
		return p.cmd.Process.Pid, nil
	})
	if err != nil {
		started <- err
		return
	}
	p.pid = p.cmd.Process.Pid
	started <- nil
	err = p.cmd.Wait()
	p.reaper.release(p.pid)
	p.reaped(err)
}

// reaped records how the child ended, then kills what is left of its
// process group, unless the stop has sent the group SIGTERM: then the
// rest of the group gets the stop's grace to exit (see stop).
func (p *Process) reaped(err error) {
	// The server is gone; a grandchild left in its group would only hold the
	// pipes open (hiding EOF) and leak. But a wrapper (sh -c) that SIGTERM
	// ended at once leaves the server it ran cleaning up.
	if !p.terminating.Load() {
		_ = signalGroup(p.pid, syscall.SIGKILL)
	}
	p.exitErr = err
	ev := p.log.Info().Int("pid", p.pid)
	if err != nil {
		ev = ev.Str("status", err.Error())
	} else {
		ev = ev.Str("status", "exit status 0")
	}
	ev.Msg("server process exited")
	if !p.closing.Load() {
		p.heldOutput.Store(time.AfterFunc(heldOutputGrace, p.abandonOutput))
	}
	close(p.done)
}

// abandonOutput runs heldOutputGrace after the reap. If stdout is still
// open then, a process outside the group holds it, and Read would wait for
// its EOF while the server is dead: close stdin and the connection's end
// of stdout, as Stop does first (closeInput), so that the connection ends
// and the session with it. Output still waiting in the pipe is left to the
// reader first.
func (p *Process) abandonOutput() {
	if p.closing.Load() {
		return
	}
	if pendingBytes(p.stdout) > 0 {
		p.heldOutput.Store(time.AfterFunc(heldOutputGrace, p.abandonOutput))
		return
	}
	p.outputAbandoned.Store(true)
	p.log.Warn().Int("pid", p.pid).Msg("server process exited, but a process outside its process group keeps its stdout open; ending the connection")
	p.closeInput()
}

// signalGroup signals every process in the group led by pgid. A group that
// no longer exists is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("signal process group %d with %v: %w", pgid, sig, err)
}

// Connect implements mcp.Transport: it returns the newline-delimited JSON-RPC
// connection over the child's pipes. It may be called once. Closing the
// connection stops the process (see Stop).
func (p *Process) Connect(ctx context.Context) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	p.connectMu.Lock()
	defer p.connectMu.Unlock()
	if p.connected {
		return nil, errors.New("connect: process already connected")
	}
	if p.closing.Load() {
		return nil, fmt.Errorf("connect: %w", mcp.ErrConnectionClosed)
	}
	p.connected = true
	return newLineConn(p), nil
}

// Pid returns the child's process id, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Done returns a channel closed once the child has exited and been reaped.
// By then whatever the child left in its process group has been sent
// SIGKILL (unless Stop had sent the group SIGTERM: Stop then gives the
// group its grace, and kills it): the server is considered gone when its
// direct child is. Should
// stdout stay open heldOutputGrace longer (a process that left the group
// holds it), the connection ends as if Stop had begun.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError returns how the child ended, once Done is closed: nil for exit
// status 0, otherwise typically an *exec.ExitError ("exit status 3",
// "signal: killed"). Before Done is closed it returns nil.
func (p *Process) ExitError() error {
	select {
	case <-p.done:
		return p.exitErr
	default:
		return nil
	}
}

// exitStatus is how the reaped child ended, "exit status 0" included;
// callers wait for done first.
func (p *Process) exitStatus() error {
	if p.exitErr != nil {
		return p.exitErr
	}
	return errors.New("exit status 0")
}

// SkippedOutput says how many stdout lines the connection skipped because
// they were no JSON-RPC message, and describes the last: its first bytes
// when it is not JSON, only its size when it is (JSON that is no valid
// message may still carry a result or arguments). A server that answers
// nothing but such lines (its logging on stdout, a line printed into its
// messages) is told apart by it from one that says nothing.
func (p *Process) SkippedOutput() (lines int, last string) {
	p.skipMu.Lock()
	defer p.skipMu.Unlock()
	return p.skipped, p.lastSkipped
}

func (p *Process) skippedLine(desc string) {
	p.skipMu.Lock()
	defer p.skipMu.Unlock()
	p.skipped++
	p.lastSkipped = desc
}

// StderrTail returns a copy of the last stderr lines, oldest first.
func (p *Process) StderrTail() []string { return p.tail.snapshot() }

// stderrDropped reports n stderr lines that the log's rate limit kept out.
func (p *Process) stderrDropped(n int) {
	p.log.Warn().Int("pid", p.pid).Int("dropped", n).
		Msg("stderr lines over the log's rate limit were dropped from the log (the stderr tail keeps the newest)")
}

// skippedDropped reports n warnings of skipped stdout lines that the
// log's rate limit kept out.
func (p *Process) skippedDropped(n int) {
	p.log.Warn().Int("pid", p.pid).Str("stream", "stdout").Int("dropped", n).
		Msg("warnings of stdout lines that are not JSON-RPC over the log's rate limit were dropped from the log")
}

// Stop stops the child in order: close stdin, wait StopGrace, SIGTERM the
// process group, wait StopGrace, SIGKILL the group, reap. The wait after
// SIGTERM is the group's: a wrapper (sh -c) that SIGTERM ends at once
// leaves the server it ran the rest of the grace to exit. Once the child
// is reaped (and, after SIGTERM, the group is gone or out of time) its
// group is SIGKILLed too, so no grandchild that stayed in the group
// survives; one that left it (setsid, a container started through a
// client such as docker) is out of reach. Stop returns after the child is
// reaped and every goroutine the Process started has returned.
//
// Stop is idempotent and safe to call concurrently. When ctx ends first, the
// remaining waits are skipped (the group is SIGKILLed at once), Stop still
// waits for the reap, and it returns ctx's error. The end of
// ProcessOptions.Hurry skips them too.
func (p *Process) Stop(ctx context.Context) error {
	first := false
	p.stopOnce.Do(func() { first = true })
	if first {
		p.stopErr = p.stop(ctx)
		close(p.stopped)
	} else {
		select {
		case <-p.stopped:
		case <-ctx.Done():
			p.hurryUp()
			<-p.stopped
		}
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(p.stopErr, fmt.Errorf("stop process %d: %w", p.pid, err))
	}
	return p.stopErr
}

func (p *Process) hurryUp() { p.hurryOnce.Do(func() { close(p.hurry) }) }

func (p *Process) stop(ctx context.Context) error {
	defer p.unwatchHurry()
	// "The client SHOULD initiate shutdown by closing the input stream."
	p.closeInput()
	var errs []error
	if !p.awaitExit(ctx) {
		p.terminating.Store(true)
		errs = append(errs, signalGroup(p.pid, syscall.SIGTERM))
		// The grace is the group's: the child's exit may come first (a
		// wrapper that SIGTERM ends at once, its server still cleaning
		// up), and the reap then leaves the group alone.
		timer := time.NewTimer(p.stopGrace)
		gone := p.awaitExitUntil(ctx, timer.C) && p.awaitGroupGone(ctx, timer.C)
		timer.Stop()
		// What the grace ran out on goes now, and so does a member that
		// holds none of the server's output.
		if err := signalGroup(p.pid, syscall.SIGKILL); !gone {
			errs = append(errs, err)
		}
		// Nothing survives SIGKILL except a process stuck in the kernel,
		// and then there is nothing better to do than wait.
		<-p.done
	}
	// (A timer that fires anyway finds the stop begun and does nothing.)
	if t := p.heldOutput.Load(); t != nil {
		t.Stop()
	}
	// After the reap the group is dead, so stderr reaches EOF, unless a
	// process that left the group still holds it: give it the grace, then cut
	// it off so the reader goroutine returns.
	timer := time.NewTimer(p.stopGrace)
	select {
	case <-p.stderrDone:
	case <-timer.C:
	case <-p.hurry:
	case <-ctx.Done():
	}
	timer.Stop()
	_ = p.stderr.Close()
	<-p.stderrDone
	// Likewise stdout: the group is dead, and a process that left it
	// had the grace above.
	if p.drain != nil {
		_ = p.drain.Close()
		<-p.drainDone
	}
	// The connection reads no more: what its skipped lines left out of
	// the log is reported now.
	p.skipLog.close()
	return errors.Join(errs...)
}

// closeInput closes stdin, which asks the server to exit, and the
// connection's read end of stdout, which unblocks a pending Read. What
// the child still writes to stdout as it exits (the answers of calls it
// was running, a last log line) is read and discarded until the stop
// ends: a child must neither block on a full pipe that nobody reads any
// more nor, while it does what closing its stdin asked, be ended by
// SIGPIPE (or fail with EPIPE) for a write.
func (p *Process) closeInput() {
	p.closeInputOnce.Do(func() {
		p.closing.Store(true)
		_ = p.stdin.Close()
		p.startDrain()
		_ = p.stdout.Close()
	})
}

// startDrain reads the child's stdout through a duplicate of our read
// end, so that closing the original ends the connection's reads while
// the pipe stays open for the child. Without a duplicate (out of file
// descriptors) the child's writes fail as the pipe closes.
func (p *Process) startDrain() {
	raw, err := p.stdout.SyscallConn()
	if err != nil {
		return
	}
	dup := -1
	if cerr := raw.Control(func(fd uintptr) {
		dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); cerr != nil || err != nil {
		p.log.Debug().Int("pid", p.pid).AnErr("error", errors.Join(cerr, err)).Msg("stdout is not read while the server stops")
		return
	}
	// The duplicate shares the pipe's non-blocking mode, so it goes
	// through the runtime poller and Close unblocks its Read.
	p.drain = os.NewFile(uintptr(dup), "stdout")
	p.drainDone = make(chan struct{})
	go func() {
		defer close(p.drainDone)
		_, _ = io.Copy(io.Discard, p.drain)
	}()
}

// awaitExit reports whether the child was reaped within the stop grace.
func (p *Process) awaitExit(ctx context.Context) bool {
	timer := time.NewTimer(p.stopGrace)
	defer timer.Stop()
	return p.awaitExitUntil(ctx, timer.C)
}

// groupPollInterval is how often awaitGroupGone looks whether the process
// group is empty: the kernel tells no one when it is.
const groupPollInterval = 10 * time.Millisecond

// awaitGroupGone reports whether the child's process group was gone
// before expired, the hurry or ctx's end: no process left in it, or none
// left that holds the server's stdout or stderr. (The second tells the
// end of a member that exited but that nobody reaped yet, as a PID 1
// slow to reap orphans leaves it; a member that closed both is killed
// with the group.)
func (p *Process) awaitGroupGone(ctx context.Context, expired <-chan time.Time) bool {
	tick := time.NewTicker(groupPollInterval)
	defer tick.Stop()
	stderrOpen, stdoutOpen := p.stderrDone, p.drainDone // nil: not waited for
	for {
		if err := syscall.Kill(-p.pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if stderrOpen == nil && stdoutOpen == nil {
			return true
		}
		select {
		case <-stderrOpen:
			stderrOpen = nil
		case <-stdoutOpen:
			stdoutOpen = nil
		case <-tick.C:
		case <-expired:
			return false
		case <-p.hurry:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// awaitExitUntil reports whether the child was reaped before expired, the
// hurry or ctx's end.
func (p *Process) awaitExitUntil(ctx context.Context, expired <-chan time.Time) bool {
	select {
	case <-p.done:
		return true
	case <-expired:
	case <-p.hurry:
	case <-ctx.Done():
	}
	// The child may have exited just as we gave up waiting.
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
