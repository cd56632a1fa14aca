// Command mcpd is a sidecar daemon that connects to MCP servers and exposes
// them to agent runtimes over the gRPC service mcpd.v1.MCPHub.
//
// Usage:
//
//	mcpd [flags]          run the daemon
//	mcpd --version        print the version and exit
//	mcpd demo-server      run the demo MCP server on stdio
//	mcpd health [flags]   check a running mcpd's grpc.health.v1 (for probes)
//	mcpd mcp-stdio --connect TARGET
//	                      bridge stdio to a running mcpd's MCP endpoint
//
// Every flag also reads an environment variable, MCPD_ plus the flag name in
// upper case with '-' as '_' (for example MCPD_LISTEN); a flag on the
// command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpd-project/mcpd/internal/demoserver"
	"github.com/mcpd-project/mcpd/internal/events"
	"github.com/mcpd-project/mcpd/internal/gateway"
	"github.com/mcpd-project/mcpd/internal/transport"
)

func main() {
	stopHeapSampling(os.Getenv("GODEBUG"))
	if len(os.Args) > 1 && os.Args[1] == "demo-server" {
		if code, done := demoServerArgs(os.Args[2:], os.Stderr); done {
			os.Exit(code)
		}
		os.Exit(runDemoServer())
	}
	if len(os.Args) > 1 && os.Args[1] == "health" {
		os.Exit(runHealth(os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "mcp-stdio" {
		os.Exit(runMCPStdio(os.Args[2:], os.LookupEnv, os.Stdin, os.Stdout, os.Stderr))
	}
	// Take SIGHUP (reload) before anything else: its default action would
	// kill a daemon that is still starting.
	reload := make(chan os.Signal, 1)
	signal.Notify(reload, syscall.SIGHUP)
	cfg, err := parseFlags(os.Args[1:], os.LookupEnv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpd:", err)
		os.Exit(2)
	}
	if cfg.showVersion {
		fmt.Println("mcpd", buildVersion())
		os.Exit(0)
	}
	tuneGC()
	setMemoryLimit(cfg.memoryLimit)
	setMaxProcs(cfg.maxProcs)
	ctx, now, release := shutdownSignals()
	stopStacks := dumpStacksOnSignal(os.Stderr)
	err = run(ctx, now, cfg, reload)
	stopStacks()
	release()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpd:", err)
		os.Exit(1)
	}
}

// gcPercent is mcpd's garbage collection target unless GOGC is set. A
// relayed call leaves about 80 KiB of short-lived garbage (the SDK's JSON
// decoder allocates two 32 KiB buffers per result) over a live heap of a
// few MiB, and a collection costs about the same however much it frees, so
// fewer, larger cycles cost less. At 64 callers against the demo server,
// mcpd's CPU per call fell from about 115 µs at 400 to about 96 µs, and its
// resident memory under that load rose from about 36 to 59 MiB
// (docs/performance.md).
const gcPercent = 1000

// stopHeapSampling turns off the heap profile's sampling
// (runtime.MemProfileRate), unless GODEBUG sets memprofilerate: mcpd serves
// no heap profile, and the runtime records a stack trace for about every
// 512 KiB allocated, which the SDK's 32 KiB decoder buffer per message
// makes frequent: at 64 callers against the demo server, 3% of mcpd's
// CPU samples were taking those traces (docs/performance.md). Called
// first in main: the rate must be set before the allocations it samples.
func stopHeapSampling(godebug string) {
	for _, setting := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(setting), "memprofilerate=") {
			return
		}
	}
	runtime.MemProfileRate = 0
}

// tuneGC sets gcPercent unless GOGC is set.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// defaultMemoryLimit is mcpd's soft memory limit unless --memory-limit or
// GOMEMLIMIT says otherwise. With gcPercent the heap may grow to about 11
// times what is live before a collection; the limit caps that growth, so
// bursts of garbage (large results, floods of notifications) cost CPU near
// the limit instead of memory without bound. mcpd's live heap is a few MiB
// plus the messages in flight, far below it (docs/performance.md#memory).
const defaultMemoryLimit = 128 << 20

// setMemoryLimit sets Go's soft memory limit: a size in bytes, noMemoryLimit
// for none, or keepGoMemoryLimit to leave what GOMEMLIMIT set.
func setMemoryLimit(l byteSize) {
	if l != keepGoMemoryLimit {
		debug.SetMemoryLimit(int64(l))
	}
}

// maxProcsLimit bounds --max-procs, which sets GOMAXPROCS. Go starts
// work for every P (a garbage collection worker each, among others), and
// each may take a thread of its own; Go ends the process at 10000 threads
// (debug.SetMaxThreads), which --max-procs 100000 reached within a minute.
// 1024 stays far below that, is what Go itself allowed until 1.10, and is
// more than the CPUs of any machine mcpd, a relay that runs best on one
// (setMaxProcs), could use; --max-procs 0 takes one per CPU, however many.
const maxProcsLimit = 1024

// setMaxProcs caps the threads that run Go code at once; 0 leaves Go's
// default. mcpd is a relay: each call is a few short steps handed from
// goroutine to goroutine. With one thread they run in turn on it; with more,
// each hand-off may wake another thread, and that costs more CPU than it
// saves (docs/performance.md has the numbers). It is set in process, not
// through the environment, which the servers mcpd starts inherit.
func setMaxProcs(n int) {
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
}

// runDemoServer serves the demo MCP server on stdin and stdout until the
// client goes away or a signal arrives. Its logs go to stderr, which mcpd
// re-emits with the server's name.
// demoServerArgs reads the demo server's command line: -h or --help first
// says what it is (done, exit 0) instead of serving. Other arguments are
// ignored, so that a config can tell two copies apart by their args, or
// restart one by changing them.
func demoServerArgs(args []string, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 || !slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		return 0, false
	}
	fmt.Fprint(stderr, `usage: mcpd demo-server [ignored arguments]

Serves the demo MCP server on stdin and stdout, for mcpd or any MCP client
to start: tools (echo, add, slow, ...), resources, prompts and completions.
It takes no flags; other arguments are ignored (a config may use them to
tell two copies apart).
`)
	return 0, true
}

func runDemoServer() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(os.Stderr).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	stdio, polled := demoStdio()
	if _, set := os.LookupEnv("GOMAXPROCS"); polled && !set {
		setMaxProcs(1)
	}
	srv := demoserver.New(&demoserver.Options{Logger: log})
	defer srv.Close()
	log.Info().Bool("polled", polled).Int("procs", runtime.GOMAXPROCS(0)).Msg("demo server serving on stdio")
	if err := srv.Run(ctx, stdio); err != nil && ctx.Err() == nil {
		log.Error().Err(err).Msg("demo server stopped")
		return 1
	}
	return 0
}

// demoStdio returns the demo server's transport on stdin and stdout, and
// whether the two are read and written through Go's poller.
//
// By default Go reads stdin with a blocking read that holds a thread in the
// kernel, and each message it returns is handed to a goroutine that another
// thread must be woken to run. When stdin and stdout are pipes, as when mcpd
// starts the server, they are opened again, non-blocking, through
// /proc/self/fd: a read with nothing to read, or a write to a full pipe,
// then parks its goroutine instead of a thread, and on one thread the read,
// the tool and the reply run in turn, as in mcpd itself
// (docs/performance.md has the numbers). The new descriptors have their own
// mode, so whoever else holds the pipes (stderr too, after 2>&1) never sees
// them non-blocking. Without /proc, or for anything but pipes, stdio is used
// the default way.
func demoStdio() (t mcp.Transport, polled bool) {
	blocking := &mcp.StdioTransport{}
	if !isPipe(os.Stdin) || !isPipe(os.Stdout) {
		return blocking, false
	}
	stdin, err := os.OpenFile("/proc/self/fd/0", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return blocking, false
	}
	stdout, err := os.OpenFile("/proc/self/fd/1", os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		stdin.Close()
		return blocking, false
	}
	return &mcp.IOTransport{Reader: stdin, Writer: stdout}, true
}

func isPipe(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeNamedPipe != 0
}

// config is the daemon's settings, from flags and MCPD_* variables.
type config struct {
	listen          string
	configs         configList // --config: files or inline JSON, in order
	managedConfig   string
	claudeManaged   string // --claude-managed-dir
	scopes          string // the scopes read besides --config, comma-separated
	project         string
	stateFile       string
	apiTokenFile    string
	apiToken        string // from MCPD_API_TOKEN only: a flag would show in ps
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
	callTimeout     time.Duration
	connectTimeout  time.Duration
	probeTimeout    time.Duration
	stopGrace       time.Duration
	allowCommands   commandList
	eventBuffer     int
	eventBytes      int
	requestTimeout  time.Duration
	maxMessageBytes int
	restartBackoff  time.Duration
	restartMax      time.Duration
	crashRestarts   int
	crashWindow     time.Duration
	keepAlive       time.Duration
	keepAliveFails  int
	clientKeepalive time.Duration
	maxInFlight     int
	maxPolls        int
	queueTimeout    time.Duration
	stderrLogRate   int // lines a second; 0: no limit
	stderrLogBurst  int
	maxCallTimeout  time.Duration
	maxProcs        int
	memoryLimit     byteSize
	tlsCert         string
	tlsKey          string
	tlsClientCA     string
	callersFile     string
	audit           bool
	auditArguments  bool
	metricsListen   string
	httpListen      string
	mcpListen       string
	mcpToolSearch   bool
	mcpMaxSessions  int
	mcpIdleTimeout  time.Duration
	showVersion     bool // --version: print the version instead of serving
	oauthStateDir   string
	// oauthStateDirDefault: oauthStateDir is the per-user default, not
	// given by the operator, so a directory that cannot be made does not
	// stop mcpd (see startOAuth).
	oauthStateDirDefault bool
	oauthRedirect        string
	strict               bool       // exit 1 when a configured server fails its first start
	allowTools           stringList // tool rules from the command line
	askTools             stringList
	denyTools            stringList
	toolDefault          string
	traceServers         stringList
}

// listFlags are the repeatable flags: an MCPD_* variable sets one only when
// the command line does not, and an empty one counts as unset.
var listFlags = []string{"allow-command", "allow-tool", "ask-tool", "deny-tool", "trace-server"}

// byteSize is a size in bytes, written as GOMEMLIMIT is: an integer with
// an optional unit B, KiB, MiB, GiB or TiB; or off.
type byteSize int64

const (
	noMemoryLimit     byteSize = math.MaxInt64 // "off"
	keepGoMemoryLimit byteSize = -1            // GOMEMLIMIT is honoured
)

var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

func (b *byteSize) String() string {
	switch *b {
	case noMemoryLimit:
		return "off"
	case keepGoMemoryLimit:
		return "GOMEMLIMIT"
	}
	for _, u := range byteUnits {
		if n := int64(*b); n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(*b), 10) + "B"
}

func (b *byteSize) Set(v string) error {
	if v == "off" {
		*b = noMemoryLimit
		return nil
	}
	num, shift := v, uint(0)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(v, u.suffix); ok {
			num, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return fmt.Errorf("%q: want a positive size such as 512MiB (units B, KiB, MiB, GiB, TiB) or off", v)
	}
	*b = byteSize(n << shift)
	return nil
}

// configList is the repeatable --config: each value is a file or inline
// JSON, kept whole (JSON has commas).
type configList []string

func (s *configList) String() string { return strings.Join(*s, " ") }
func (s *configList) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("empty: want a file or inline JSON")
	}
	*s = append(*s, v)
	return nil
}

// stringList is a repeatable flag that also splits on commas. Empty parts
// are dropped ("a,b," is a and b), but a value with none left ("", ",")
// is refused: --deny-tool "$LIST" with LIST unset is likelier a mistake
// than a request for no rule.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	n := len(*s)
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	if len(*s) == n {
		return errors.New("names nothing: leave the flag out for none")
	}
	return nil
}

// commandList is --allow-command, a stringList whose empty value would be
// read the wrong way round: no list allows every command, while
// --allow-command "$LIST" with LIST empty means to allow none. The value
// none allows none.
type commandList []string

func (s *commandList) String() string { return (*stringList)(s).String() }
func (s *commandList) Set(v string) error {
	if err := (*stringList)(s).Set(v); err != nil {
		return errors.New("names no command: leave --allow-command out to allow every command, or give --allow-command none to allow none")
	}
	return nil
}

// allowNoCommand is the --allow-command value that allows no command.
const allowNoCommand = "none"

func parseFlags(args []string, lookup func(string) (string, bool), out io.Writer) (*config, error) {
	c := &config{}
	fs := newFlagSet(c, out)
	return parseFlagSet(fs, c, args, lookup)
}

// newFlagSet defines mcpd's flags over c.
func newFlagSet(c *config, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("mcpd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:50051", "address to serve gRPC on: host:port or unix:///path/to.sock (mode 0600); a non-loopback address needs TLS plus a token (or callers file), or mutual TLS")
	fs.Var(&c.configs, "config", "a .mcp.json file, or inline JSON ('{\"mcpServers\": {...}}'), read after the scope files; repeatable, a later one wins per server")
	fs.StringVar(&c.managedConfig, "managed-config", "/etc/mcpd/managed-mcp.json", "the operator's config file, read first (every later scope overrides it per server); a missing file is skipped")
	fs.StringVar(&c.claudeManaged, "claude-managed-dir", "/etc/claude-code", "the directory of Claude Code's managed settings, read with the managed scope: managed-mcp.json, when it exists, takes exclusive control, and the allowedMcpServers and deniedMcpServers of managed-settings.json (and managed-settings.d/*.json) hold for every server; empty reads none")
	fs.StringVar(&c.scopes, "scopes", "managed,user,project,local", "the config scopes read before --config, comma-separated; empty reads only --config (and the built-in default when there is none)")
	fs.StringVar(&c.project, "project", "", "the project directory whose .mcp.json and .mcp.local.json are read, and whose servers in ~/.claude.json, all started in it (it must exist); default the working directory")
	fs.StringVar(&c.stateFile, "state-file", "", "file mcpd owns (mode 0600) that keeps servers added with ConnectServer and the servers enabled or disabled with SetServerEnabled across restarts; secret values are kept only as ${VAR} references; empty keeps none")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "file holding the API token that every RPC but health and reflection must present as 'authorization: Bearer <token>' (or set MCPD_API_TOKEN)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "json", "log format: json or console")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight RPCs may run on after SIGTERM or SIGINT, and the calls of a server that a reload or a replacing ConnectServer stops; a second signal cuts them off and kills the servers at once")
	fs.DurationVar(&c.callTimeout, "call-timeout", 60*time.Second, "default deadline of a tool call (a server's or a call's own timeout wins)")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 30*time.Second, "how long starting a server and opening its session may take")
	fs.DurationVar(&c.probeTimeout, "probe-timeout", 5*time.Second, "how long to wait for a server to answer the 2026-07-28 server/discover probe before falling back to initialize")
	fs.DurationVar(&c.stopGrace, "stop-grace", 2*time.Second, "how long a stdio server gets to exit after its stdin closes, and again after SIGTERM; how long a remote server gets to let its session close")
	fs.IntVar(&c.eventBuffer, "event-buffer", 4096, "how many recent events mcpd keeps for Subscribe streams that fall behind or resume with after_sequence")
	fs.IntVar(&c.eventBytes, "event-buffer-bytes", events.DefaultBufferBytes, "about how many bytes of recent events mcpd keeps (it drops the oldest first, but always keeps the newest event)")
	fs.DurationVar(&c.requestTimeout, "server-request-timeout", 60*time.Second, "how long a server's sampling, elicitation or roots request waits for an agent's reply")
	fs.IntVar(&c.maxMessageBytes, "max-message-bytes", 16<<20, "largest message mcpd accepts or sends, on gRPC and from a server (one stdio line, HTTP body or SSE event)")
	fs.DurationVar(&c.restartBackoff, "restart-backoff", 250*time.Millisecond, "first wait before reconnecting a server whose session ended; it doubles per failure")
	fs.DurationVar(&c.restartMax, "restart-backoff-max", 30*time.Second, "longest wait between reconnect attempts")
	fs.IntVar(&c.crashRestarts, "crash-loop-restarts", 5, "failures within --crash-loop-window after which a server is FAILED instead of retried")
	fs.DurationVar(&c.crashWindow, "crash-loop-window", time.Minute, "window in which --crash-loop-restarts failures end retrying")
	fs.DurationVar(&c.keepAlive, "keepalive-interval", 30*time.Second, "interval of keepalive probes: ping on legacy (initialize-based) sessions, server/discover on 2026-07-28 stdio sessions (at least 1s; 0 disables them)")
	fs.IntVar(&c.keepAliveFails, "keepalive-failures", 3, "consecutive failed keepalive probes after which a session is rebuilt (once the requests sent before them have ended)")
	fs.DurationVar(&c.clientKeepalive, "client-keepalive", 30*time.Second, "ping a client's HTTP/2 or gRPC connection that brought nothing for this long, and close it, ending its calls and streams, when the ping goes unanswered as long again (at least 1s; 0 disables)")
	fs.IntVar(&c.maxInFlight, "max-inflight-calls", 128, "tool calls in flight to one server at most; 0 means no cap")
	fs.IntVar(&c.maxPolls, "max-polls", 64, "polls (StartPoll, and fallback polls of Subscribe) running at once at most")
	fs.IntVar(&c.stderrLogRate, "stderr-log-rate", transport.DefaultStderrLogRate, "stderr lines of one stdio server that mcpd logs per second, after a burst of --stderr-log-burst; a warning counts the lines over it, which the server's stderr tail still shows; 0 logs every line; the warnings of its stdout lines that are no JSON-RPC have the same limit, apart")
	fs.IntVar(&c.stderrLogBurst, "stderr-log-burst", transport.DefaultStderrLogBurst, "stderr lines of one stdio server that mcpd logs at once before --stderr-log-rate holds them back")
	fs.DurationVar(&c.queueTimeout, "queue-timeout", 5*time.Second, "how long a call waits for a free slot under --max-inflight-calls before RESOURCE_EXHAUSTED (0: no wait)")
	fs.DurationVar(&c.maxCallTimeout, "max-call-timeout", 0, "if longer than a call's default timeout, the call's progress notifications restart that timeout, up to this in all (mcpd then asks every call for progress); 0 turns it off; a call's own timeout is never extended")
	fs.IntVar(&c.maxProcs, "max-procs", 1, "how many threads run mcpd's Go code at once, at most 1024; 0 means one per available CPU; without this flag a GOMAXPROCS variable is honoured; servers mcpd starts keep their own default")
	c.memoryLimit = defaultMemoryLimit
	fs.Var(&c.memoryLimit, "memory-limit", "soft limit on mcpd's memory, a `size` like 512MiB (B, KiB, MiB, GiB or TiB), or off: near it the garbage collector works harder instead of letting the heap grow; without this flag a GOMEMLIMIT variable is honoured")
	fs.StringVar(&c.oauthStateDir, "oauth-state-dir", "", "directory where OAuth tokens and client registrations persist (mode 0700, files 0600); default $XDG_STATE_HOME/mcpd/oauth or ~/.local/state/mcpd/oauth")
	fs.StringVar(&c.oauthRedirect, "oauth-redirect-addr", "127.0.0.1:0", "loopback host:port of the listener that receives the browser's redirect after an OAuth consent (a fixed port for clients registered beforehand); off disables it")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate chain the gRPC listener serves TLS with (needs --tls-key); re-read when it changes")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM CA certificates that client certificates must chain to: turns on mutual TLS (needs --tls-cert)")
	fs.StringVar(&c.callersFile, "callers", "", "JSON (or, named *.yaml or *.yml, YAML) file naming the callers (by token hash, token file, ${VAR} or client certificate) and what each may do; re-read on SIGHUP")
	fs.BoolVar(&c.audit, "audit", true, "write an audit line (logger=audit) for every tool call, resource read, prompt get, server change and refused request")
	fs.BoolVar(&c.auditArguments, "audit-arguments", false, "add tool and prompt arguments to audit lines, with values of keys that look secret redacted")
	fs.StringVar(&c.httpListen, "http-listen", "", "address to serve the MCPHub API on over HTTP as well (Connect protocol with JSON or binary, gRPC-Web and gRPC; HTTP/1.1 and h2c, or HTTPS with --tls-cert): host:port or unix:///path; empty serves none; the rules of --listen apply")
	fs.StringVar(&c.mcpListen, "mcp-listen", "", "address to serve every connected server as one MCP server on, at /mcp (Streamable HTTP, both protocol eras; HTTPS with --tls-cert): host:port or unix:///path; empty serves none; the rules of --listen apply")
	fs.IntVar(&c.mcpMaxSessions, "mcp-max-sessions", gateway.DefaultMaxSessions, "sessions of initialize-era hosts and 2026-07-28 listen streams the MCP endpoint keeps open at once at most; an initialize or listen stream beyond it is refused (an idle session closes after --mcp-session-timeout)")
	fs.DurationVar(&c.mcpIdleTimeout, "mcp-session-timeout", 30*time.Minute, "close an initialize-era host's MCP endpoint session after this long without a request or an open stream of its (the host then starts a new one); at least 1s")
	fs.BoolVar(&c.mcpToolSearch, "mcp-tool-search", false, "the MCP endpoint lists one tool, search_tools, instead of every server's tools; the tools a search finds (or a host calls by name) are then listed, for every host, until mcpd stops, their server is disconnected, or it no longer lists them")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "address to serve Prometheus metrics on, at /metrics: host:port or unix:///path; empty serves none; served with TLS when --tls-cert is set; a non-loopback address needs TLS plus an API token (which scrapes then present) or mutual TLS")
	fs.BoolVar(&c.showVersion, "version", false, "print mcpd's version and exit (after checking the other flags)")
	fs.BoolVar(&c.strict, "strict", false, "exit with status 1, naming them, when configured servers do not come up on their first start (for CI and simulations)")
	fs.Var(&c.allowCommands, "allow-command", "a command ConnectServer may start (repeatable or comma-separated; 'none' allows none); without the flag every command is allowed")
	fs.Var(&c.allowTools, "allow-tool", "tool rule: allow calls of the qualified tool names this pattern matches, e.g. 'mcp__github__get_*' (repeatable or comma-separated; the most specific rule wins)")
	fs.Var(&c.askTools, "ask-tool", "tool rule: calls of matching tools wait for an agent's approval (an APPROVAL server request), e.g. 'mcp__*__write_*' (repeatable or comma-separated)")
	fs.Var(&c.denyTools, "deny-tool", "tool rule: refuse and hide matching tools, e.g. 'mcp__*__delete_*' (repeatable or comma-separated)")
	fs.StringVar(&c.toolDefault, "tool-default", "", "effect on tool calls no rule matches: allow, ask or deny; empty means the config's permissions.default, else allow")
	fs.Var(&c.traceServers, "trace-server", "log every JSON-RPC message of this server at debug level, secrets redacted (repeatable or comma-separated; '*' traces all)")
	return fs
}

// flagVariable is the environment variable that sets flag name.
func flagVariable(name string) string {
	return "MCPD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// ownVariables are the environment variables mcpd and its subcommands
// read settings and credentials from.
var ownVariables = sync.OnceValue(func() map[string]bool {
	vars := map[string]bool{"MCPD_API_TOKEN": true, "MCPD_MCP_CONNECT": true}
	newFlagSet(&config{}, io.Discard).VisitAll(func(f *flag.Flag) { vars[flagVariable(f.Name)] = true })
	return vars
})

// parseFlagSet sets c from lookup's MCPD_* variables, then from args.
func parseFlagSet(fs *flag.FlagSet, c *config, args []string, lookup func(string) (string, bool)) (*config, error) {
	// Environment first, so that the command line overrides it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := flagVariable(f.Name)
		switch {
		case f.Name == "config", slices.Contains(listFlags, f.Name):
			return // a list: set below, unless the command line sets it
		case f.Name == "version":
			return // a request, not a setting
		}
		if v, ok := lookup(name); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = envError(name, v, f, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, name := range listFlags {
		// Empty, the variable is as unset (as MCPD_CONFIG and
		// MCPD_API_TOKEN are): a container clears one that way.
		if v, ok := lookup(flagVariable(name)); ok && v != "" && !onCommandLine[name] {
			if err := fs.Lookup(name).Value.Set(v); err != nil {
				return nil, fmt.Errorf("%s %q: %v (--%s)", flagVariable(name), v, err, name)
			}
		}
	}
	if slices.Contains(c.allowCommands, allowNoCommand) && len(c.allowCommands) > 1 {
		return nil, fmt.Errorf("--allow-command %s allows no command: it cannot go with a command (%s)", allowNoCommand, c.allowCommands.String())
	}
	switch c.toolDefault {
	case "", "allow", "ask", "deny":
	default:
		return nil, fmt.Errorf("--tool-default %q: want allow, ask or deny", c.toolDefault)
	}
	if v, ok := lookup("MCPD_CONFIG"); ok && v != "" && !onCommandLine["config"] {
		if err := c.configs.Set(v); err != nil {
			return nil, fmt.Errorf("MCPD_CONFIG %q: %v (--config)", v, err)
		}
	}
	// GOMAXPROCS is Go's own setting: an operator who sets it, and not
	// --max-procs, gets what they asked for.
	if _, procsFromEnv := lookup("MCPD_MAX_PROCS"); !procsFromEnv && !onCommandLine["max-procs"] {
		if _, ok := lookup("GOMAXPROCS"); ok {
			c.maxProcs = 0
		}
	}
	// So is GOMEMLIMIT, which the runtime has already applied.
	if _, limitFromEnv := lookup("MCPD_MEMORY_LIMIT"); !limitFromEnv && !onCommandLine["memory-limit"] {
		if v, _ := lookup("GOMEMLIMIT"); v != "" {
			c.memoryLimit = keepGoMemoryLimit
		}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (the subcommands are demo-server, health and mcp-stdio)", fs.Arg(0))
	}
	if _, err := parseScopes(c.scopes); err != nil {
		return nil, err
	}
	// A ceiling the operator did not set follows the start up, as the
	// Manager always did; one they set below it is refused.
	if _, fromEnv := lookup(flagVariable("restart-backoff-max")); !fromEnv && !onCommandLine["restart-backoff-max"] {
		c.restartMax = max(c.restartMax, c.restartBackoff)
	}
	if err := c.checkRanges(); err != nil {
		return nil, err
	}
	if c.maxProcs < 0 || c.maxProcs > maxProcsLimit {
		return nil, fmt.Errorf("--max-procs %d: want 0 (one per CPU) to %d", c.maxProcs, maxProcsLimit)
	}
	if c.maxInFlight < 0 {
		return nil, fmt.Errorf("--max-inflight-calls %d: want 0 (no cap) or more", c.maxInFlight)
	}
	if c.stderrLogRate < 0 {
		return nil, fmt.Errorf("--stderr-log-rate %d: want 0 (no limit) or more", c.stderrLogRate)
	}
	if c.oauthStateDir == "" {
		c.oauthStateDir = defaultOAuthStateDir(lookup)
		c.oauthStateDirDefault = true
	}
	c.apiToken, _ = lookup("MCPD_API_TOKEN")
	if err := checkAPIToken(c.apiToken); err != nil {
		return nil, err
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.tlsClientCA != "" && c.tlsCert == "" {
		return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS first")
	}
	if _, err := newLogger(c.logLevel, c.logFormat); err != nil {
		return nil, err
	}
	return c, nil
}

// envError is why variable name's value v does not set flag f. The flag
// package's own values say only "parse error", and a variable gets no
// usage text to show what the flag takes: say it, with the value (no
// MCPD_* flag variable holds a secret; the API token is read apart).
func envError(name, v string, f *flag.Flag, err error) error {
	var want string
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			want = "true or false"
		case time.Duration:
			want = "a duration such as 30s or 2m"
		case int:
			want = "a whole number"
		}
	}
	if want == "" {
		return fmt.Errorf("%s: %w", name, err) // a value of mcpd's own, which says what it wants
	}
	return fmt.Errorf("%s %q: want %s (--%s)", name, v, want, f.Name)
}

// checkRanges refuses numbers and durations that mean nothing: a negative
// one anywhere, and zero where zero is no setting (a zero call timeout
// would otherwise be the default, a zero message limit would refuse every
// RPC); and the periods that break every connection when they are short:
// a keepalive probe waits half of --keepalive-interval, so at a few ms
// every probe failed and every server went FAILED; --client-keepalive
// would close clients that are merely slow to answer a ping; and a host's
// MCP session would close between its initialize and its next request.
func (c *config) checkRanges() error {
	for _, d := range []struct {
		flag   string
		v      time.Duration
		zeroOK bool          // zero is a setting: off, or no wait
		least  time.Duration // the shortest setting but zero
	}{
		{"call-timeout", c.callTimeout, false, 0},
		{"connect-timeout", c.connectTimeout, false, 0},
		{"probe-timeout", c.probeTimeout, false, 0},
		{"server-request-timeout", c.requestTimeout, false, 0},
		{"restart-backoff", c.restartBackoff, false, 0},
		{"restart-backoff-max", c.restartMax, false, 0},
		{"crash-loop-window", c.crashWindow, false, 0},
		{"stop-grace", c.stopGrace, false, 0},
		{"shutdown-timeout", c.shutdownTimeout, true, 0},
		{"queue-timeout", c.queueTimeout, true, 0},
		{"keepalive-interval", c.keepAlive, true, time.Second},
		{"client-keepalive", c.clientKeepalive, true, time.Second},
		{"max-call-timeout", c.maxCallTimeout, true, 0},
		{"mcp-session-timeout", c.mcpIdleTimeout, false, time.Second},
	} {
		switch {
		case d.v < 0:
			return fmt.Errorf("--%s %v: want a duration of 0 or more", d.flag, d.v)
		case d.v == 0 && !d.zeroOK:
			return fmt.Errorf("--%s 0: want a duration above 0", d.flag)
		case d.v > 0 && d.v < d.least && d.zeroOK:
			return fmt.Errorf("--%s %v: want 0 (off) or at least %v", d.flag, d.v, d.least)
		case d.v > 0 && d.v < d.least:
			return fmt.Errorf("--%s %v: want at least %v", d.flag, d.v, d.least)
		}
	}
	if c.restartMax < c.restartBackoff {
		return fmt.Errorf("--restart-backoff-max %v is below --restart-backoff %v", c.restartMax, c.restartBackoff)
	}
	for _, n := range []struct {
		flag     string
		v, least int
	}{
		{"max-message-bytes", c.maxMessageBytes, 1},
		{"event-buffer", c.eventBuffer, 1},
		{"event-buffer-bytes", c.eventBytes, 1},
		{"crash-loop-restarts", c.crashRestarts, 1},
		{"keepalive-failures", c.keepAliveFails, 1},
		{"mcp-max-sessions", c.mcpMaxSessions, 1},
		{"max-polls", c.maxPolls, 1},
		{"stderr-log-burst", c.stderrLogBurst, 1},
	} {
		if n.v < n.least {
			return fmt.Errorf("--%s %d: want at least %d", n.flag, n.v, n.least)
		}
	}
	return nil
}

// queueTimeoutOption is --queue-timeout as mcpclient.Options takes it:
// there 0 selects the default, and a negative timeout means no wait.
func (c *config) queueTimeoutOption() time.Duration {
	if c.queueTimeout == 0 {
		return -1
	}
	return c.queueTimeout
}

// stderrLogRateOption is --stderr-log-rate as mcpclient.Options takes it:
// there 0 selects the default, and a negative rate means no limit.
func (c *config) stderrLogRateOption() float64 {
	if c.stderrLogRate == 0 {
		return -1
	}
	return float64(c.stderrLogRate)
}

// checkAPIToken refuses an MCPD_API_TOKEN with whitespace, without quoting
// it. Empty means no token, as unset; a " " token would turn
// authentication on and match "Bearer  ".
func checkAPIToken(token string) error {
	switch {
	case token != "" && strings.TrimSpace(token) == "":
		return errors.New("MCPD_API_TOKEN is empty but for whitespace: set the token, or unset the variable for none")
	case strings.ContainsFunc(token, unicode.IsSpace):
		return errors.New("MCPD_API_TOKEN contains whitespace: a bearer token cannot")
	}
	return nil
}
