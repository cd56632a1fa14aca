/**
 * The mcpd client: every MCPHub RPC as a method, results as plain objects,
 * errors as {@link MCPDError} subclasses.
 */

import { create, fromJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type CallOptions as ConnectCallOptions, type Client as HubClient } from "@connectrpc/connect";
import { setMaxListeners } from "node:events";
import { DurationSchema, ValueSchema } from "@bufbuild/protobuf/wkt";
import * as pb from "./gen/mcpd/v1/mcpd_pb.js";
import { Cancelled, InvalidArgument, NotFound, ServerRequestError, ToolArgumentError, toMCPDError, type MCPDError } from "./errors.js";
import {
  anthropicTool,
  aiSchema,
  openaiTool,
  providerNames,
  type AISDKSchema,
  type AnthropicTool,
  type OpenAIChatTool,
  type OpenAIResponsesTool,
} from "./names.js";
import {
  openTransport,
  resolveKeepalive,
  resolveKeepaliveTimeout,
  resolveTarget,
  resolveToken,
  resolveWire,
  ENV_ADDRESS,
  tlsMaterial,
  type OpenTransport,
  type TlsOptions,
  type Wire,
} from "./transport.js";
import * as t from "./types.js";

/** Extra deadline on top of a tool call's own timeout, so that mcpd's DEADLINE_EXCEEDED (with its message) arrives first. */
const CALL_TIMEOUT_GRACE_MS = 5_000;
/** Resumable streams wait this long before the first reconnect, doubling up to RECONNECT_MAX_MS. */
const RECONNECT_INITIAL_MS = 100;
const RECONNECT_MAX_MS = 2_000;
/** A stream that mcpd answered this long before it failed counts as a fresh outage. */
const STABLE_STREAM_MS = 5_000;
/** The longest delay setTimeout takes (2^31-1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** JSON-RPC "invalid params": what callers of an agent tool see as InvalidArgument. */
const INVALID_PARAMS = -32602;

export interface ClientOptions extends TlsOptions {
  /** `host:port`, `unix:///path.sock` or a URL; default $MCPD_ADDRESS, else 127.0.0.1:50051. */
  target?: string | undefined;
  /** How the RPCs travel (default $MCPD_WIRE, else "connect", which needs mcpd's --http-listen address); see {@link Wire}. */
  wire?: Wire | undefined;
  /** The API token, sent as `authorization: Bearer <token>`; default $MCPD_API_TOKEN. */
  token?: string | undefined;
  /** A default deadline (ms) for every unary call. */
  timeoutMs?: number | undefined;
  /**
   * Checks that mcpd still answers once a connection has been quiet this
   * long (ms; default 30000; at least 5000, as often as mcpd lets a client
   * ping; 0 or false: never). On HTTP/2 (the "grpc" and "connect-h2" wires,
   * and the HandleServerRequests and serveTools streams of "connect") a PING
   * unanswered for `keepaliveTimeoutMs` fails every call and stream on the
   * connection with Unavailable, whether mcpd froze or the network path
   * died. The HTTP/1.1 sockets of "connect" get TCP keep-alive probes after
   * this long, which find a dead path (about 10 s later) but not a frozen mcpd.
   */
  keepaliveMs?: number | false | undefined;
  /** How long an HTTP/2 PING may go unanswered (ms; default 20000). */
  keepaliveTimeoutMs?: number | undefined;
  /**
   * Where handler failures are reported, and mcpd's refusals of a handler's
   * answer (the message names the request; `error` is mcpd's reason, a
   * string). Default: console.error.
   */
  log?: ((message: string, error: unknown) => void) | undefined;
}

/** Options of one call. */
export interface CallOptions {
  /** Aborting cancels the call (and the MCP request upstream). */
  signal?: AbortSignal | undefined;
  /** The call's deadline in ms (default: the client's `timeoutMs`). */
  timeoutMs?: number | undefined;
}

/** Options of a tool call. */
export interface ToolCallOptions {
  signal?: AbortSignal | undefined;
  /** Bounds the tool call at mcpd (ms); the RPC's deadline is this plus a grace period. */
  timeoutMs?: number | undefined;
  /** `_meta` sent with the MCP request. */
  meta?: JsonObject | undefined;
}

/** Tool arguments: an object, or the JSON string a model returned. */
export type ToolArguments = JsonObject | string | undefined | null;

export interface SubscribeOptions {
  servers?: string[] | undefined;
  /** `[server, uri]` pairs or `{server, uri}`: updates arrive only for these. */
  resources?: ([string, string] | { server: string; uri: string })[] | undefined;
  kinds?: t.EventKind[] | undefined;
  /** "poll_result" events of these polls only (see {@link Client.startPoll}). */
  pollIds?: string[] | undefined;
  /** Start with the buffered events after this sequence (0: all that mcpd keeps). */
  afterSequence?: number | undefined;
  /**
   * Poll the `resources` of servers that cannot notify (no
   * resources.subscribe capability) every this many ms (at least 1000)
   * instead of failing: a change of the contents is a "resource_updated"
   * event. Unset: mcpd subscribes upstream whatever the server declares.
   */
  fallbackPollIntervalMs?: number | undefined;
  /** Reopen a dropped stream, resuming after the last event (default true). */
  reconnect?: boolean | undefined;
  /** Give up with Unavailable after this long without mcpd (ms; default 30000; null: never). */
  reconnectTimeoutMs?: number | null | undefined;
  signal?: AbortSignal | undefined;
}

/** The context of one call of an agent's own tool (see {@link Client.serveTools}). */
export interface AgentToolContext {
  /** Aborts when the caller cancels the call or the serving stops. */
  signal: AbortSignal;
  /** Reports progress; callers of callToolStream receive it. */
  progress(progress: number, total?: number, message?: string): void;
  /** The caller's `_meta`, and the time by which mcpd needs the result. */
  meta: JsonObject | undefined;
  deadline: Date | undefined;
}

/**
 * A tool the agent serves through mcpd. `run` returns a string (one text
 * block), a {@link ToolResultInit}, or any other JSON value (structured
 * content, with its JSON as text). A thrown error becomes a result with
 * `isError` and the error's message: a tool that fails is data. A thrown
 * {@link ToolArgumentError} is the caller's InvalidArgument instead.
 */
export interface AgentTool {
  description: string;
  title?: string | undefined;
  /** The JSON Schema of the arguments (default: any object). */
  inputSchema?: JsonObject | undefined;
  /** The JSON Schema of the structured result, for a tool that returns one. */
  outputSchema?: JsonObject | undefined;
  /** Hints about the tool, as MCP spells them. */
  annotations?: { title?: string | undefined; readOnlyHint?: boolean | undefined; destructiveHint?: boolean | undefined; idempotentHint?: boolean | undefined; openWorldHint?: boolean | undefined } | undefined;
  /** The tool's `_meta`. */
  meta?: JsonObject | undefined;
  run: (args: JsonObject, context: AgentToolContext) => unknown;
}

/**
 * A tool result an agent tool may return. A block of `content` is a
 * string (text), a {@link t.Content}, or a block in MCP's JSON shape
 * (`{ type: "text", text: "..." }`; `image` and `audio` with base64
 * `data` and `mimeType`; `resource_link`; `resource`).
 */
export interface ToolResultInit {
  content: (string | t.Content | JsonObject)[];
  structured?: JsonValue | undefined;
  isError?: boolean | undefined;
}

/** Options of {@link Client.serveTools}. */
export interface ServeToolsOptions {
  /** Take over the name from another agent that serves it. */
  replace?: boolean | undefined;
  /** Shown to models in the server's status. */
  instructions?: string | undefined;
  /** The version in the server's `serverInfo` (whose name is the server's). */
  version?: string | undefined;
}

/** The context of one server request, the second argument of its handler. */
export interface ServerRequestContext {
  /**
   * Aborts when mcpd stops waiting for the reply (the server withdrew the
   * request, the call it belongs to ended, or its deadline passed) or the
   * client closes; `signal.reason` is a {@link Cancelled} saying why. Pass
   * it to the model call (`fetch(url, { signal })`) or close the form. A
   * reply after it is not sent.
   */
  signal: AbortSignal;
}

/** A handler of server requests; it may be async. */
export type Handler<Req, Res> = (request: Req, context: ServerRequestContext) => Res | Promise<Res>;
export type SamplingHandler = Handler<t.SamplingRequest, t.SamplingResult | string>;
export type ElicitationHandler = Handler<t.ElicitationRequest, t.ElicitationResult | JsonObject | undefined | null>;
export type RootsHandler = Handler<t.RootsRequest, t.RootLike[]>;
export type AuthorizationHandler = Handler<t.AuthorizationRequest, string | { redirectUrl: string } | undefined | null>;
export type ApprovalHandler = Handler<t.ApprovalRequest, t.ApprovalResult | boolean>;

/**
 * A tool in the Vercel AI SDK's tool-set shape (what its `tool({...})`
 * returns); Schema is the type of `inputSchema`.
 */
export interface AISDKTool<Schema = AISDKSchema> {
  description: string;
  inputSchema: Schema;
  execute: (input: any, options: { abortSignal?: AbortSignal | undefined }) => Promise<string>;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** An AbortController that also aborts when any of the given signals does. */
function linked(...signals: (AbortSignal | undefined)[]): { controller: AbortController; dispose: () => void } {
  const controller = new AbortController();
  const cleanups: (() => void)[] = [];
  for (const s of signals) {
    if (s === undefined) continue;
    if (s.aborted) {
      controller.abort(s.reason);
      continue;
    }
    const onAbort = (): void => controller.abort(s.reason);
    s.addEventListener("abort", onAbort, { once: true });
    cleanups.push(() => s.removeEventListener("abort", onAbort));
  }
  return { controller, dispose: () => cleanups.forEach((c) => c()) };
}

/**
 * Tool arguments as given, or parsed from the JSON string a model returned.
 * A string that is no JSON object throws InvalidArgument, as mcpd does for
 * arguments a tool refuses: a model's malformed output is an error the
 * agent loop catches with the others and hands back.
 */
function argumentsObject(args: ToolArguments): JsonObject | undefined {
  if (args === undefined || args === null) return undefined;
  if (typeof args === "string") {
    let parsed: unknown;
    try {
      parsed = args.trim() ? JSON.parse(args) : {};
    } catch {
      // Not the parser's message: V8's quotes the text, which may hold secrets.
      throw new InvalidArgument("tool arguments are not valid JSON");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      const type = parsed === null ? "null" : Array.isArray(parsed) ? "array" : typeof parsed;
      throw new InvalidArgument(`tool arguments must be a JSON object, not a JSON ${type}`);
    }
    return parsed as JsonObject;
  }
  return args;
}

/** Whether a resumable stream that ended with err (undefined: cleanly) may be opened again. */
function resumable(err: MCPDError | undefined): boolean {
  return err === undefined || err.code === Code.Unavailable;
}

/** When to reopen a dropped resumable stream; see the Python client's ReconnectPolicy. */
class ReconnectPolicy {
  private outage = false;
  private giveUp: number | undefined;
  private delay = RECONNECT_INITIAL_MS;
  constructor(private readonly timeoutMs: number | null) {}

  /**
   * Ms to wait before reopening a stream that mcpd answered at answeredAt
   * (undefined: never) and that dropped now; undefined when the budget is
   * spent. How long a stream stayed open says nothing: one to an mcpd that
   * stopped answering stays open until the connection is given up on (a
   * keep-alive PING unanswered, the system's connect timeout).
   */
  nextWait(now: number, answeredAt: number | undefined): number | undefined {
    if (!this.outage || (answeredAt !== undefined && now - answeredAt >= STABLE_STREAM_MS)) {
      this.outage = true;
      this.giveUp = this.timeoutMs === null ? undefined : now + this.timeoutMs;
      this.delay = RECONNECT_INITIAL_MS;
    }
    if (this.giveUp !== undefined && now >= this.giveUp) return undefined;
    const wait = this.giveUp === undefined ? this.delay : Math.min(this.delay, this.giveUp - now);
    this.delay = Math.min(this.delay * 2, RECONNECT_MAX_MS);
    return wait;
  }
}

/** A client of one mcpd daemon. */
export class Client {
  /** Where the client connects. */
  readonly target: string;
  /** How the RPCs travel. */
  readonly wire: Wire;
  private readonly conn: OpenTransport;
  private readonly hub: HubClient<typeof pb.MCPHub>;
  private readonly timeoutMs: number | undefined;
  private readonly closing = new AbortController();
  private readonly toQualified = new Map<string, string>();
  private readonly handlers = new Map<t.ServerRequestKind, Handler<never, unknown>>();
  private worker: RequestWorker | undefined;
  readonly log: (message: string, error: unknown) => void;

  /**
   * `new Client()` reads $MCPD_ADDRESS, $MCPD_API_TOKEN and $MCPD_WIRE (with no
   * address, mcpd's default gRPC listener, spoken to in gRPC);
   * `new Client("unix:///run/mcpd.sock", { token })` names the target.
   */
  constructor(target?: string | ClientOptions, options: ClientOptions = {}) {
    const o = typeof target === "object" ? target : { ...options, target: target ?? options.target };
    this.target = resolveTarget(o.target);
    this.wire = resolveWire(o.wire, !o.target && !process.env[ENV_ADDRESS]);
    this.timeoutMs = o.timeoutMs;
    this.log = o.log ?? ((message, error) => console.error(`mcpd-client: ${message}:`, error));
    this.conn = openTransport({
      target: this.target,
      wire: this.wire,
      token: resolveToken(o.token),
      tls: tlsMaterial(o),
      keepaliveMs: resolveKeepalive(o.keepaliveMs),
      keepaliveTimeoutMs: resolveKeepaliveTimeout(o.keepaliveTimeoutMs),
    });
    this.hub = createClient(pb.MCPHub, this.conn.transport);
    // Every call in flight listens on it.
    setMaxListeners(0, this.closing.signal);
  }

  /**
   * Stops the request handlers and open streams and closes the connections.
   * Idempotent. A handler still running (a person's answer, a model call)
   * is not waited for: it finishes on its own, and its reply goes nowhere.
   */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new Cancelled("the client is closed"));
    const worker = this.worker;
    this.worker = undefined;
    try {
      await worker?.stop();
    } finally {
      this.conn.close();
    }
  }

  /** Whether close() was called. */
  get closed(): boolean {
    return this.closing.signal.aborted;
  }

  // -- plumbing -------------------------------------------------------------

  /** toolCall: the call runs a tool, which a connection cut off during it may have run (see {@link toMCPDError}). */
  private async rpc<T>(
    call: (opts: ConnectCallOptions) => Promise<T>,
    opts: CallOptions = {},
    timeoutMs = opts.timeoutMs ?? this.timeoutMs,
    toolCall = false,
  ): Promise<T> {
    if (this.closed) throw new Cancelled("the client is closed");
    // The call's signal: the caller's, if any, and the client's close().
    // Not AbortSignal.any, which keeps every combined signal alive for as
    // long as the client's own (nodejs/node#55351): the listener goes when
    // the call does.
    const l = opts.signal === undefined ? undefined : linked(opts.signal, this.closing.signal);
    const signal = l?.controller.signal ?? this.closing.signal;
    try {
      const callOpts: ConnectCallOptions = { signal };
      if (timeoutMs !== undefined) callOpts.timeoutMs = timeoutMs;
      return await call(callOpts);
    } catch (e) {
      throw toMCPDError(e, signal.aborted, toolCall);
    } finally {
      l?.dispose();
    }
  }

  private async pages<T>(
    list: (req: { server: string; pageToken: string }, o: ConnectCallOptions) => Promise<{ nextPageToken: string } & T>,
    server: string | undefined,
    opts: CallOptions | undefined,
  ): Promise<T[]> {
    const out: T[] = [];
    let pageToken = "";
    // One deadline for the whole listing, not a fresh one per page.
    const timeoutMs = opts?.timeoutMs ?? this.timeoutMs;
    const end = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    do {
      const left = end === undefined ? undefined : Math.max(1, Math.ceil(end - performance.now()));
      const resp = await this.rpc((o) => list({ server: server ?? "", pageToken }, o), opts, left);
      out.push(resp);
      pageToken = resp.nextPageToken;
    } while (pageToken);
    return out;
  }

  // -- servers ----------------------------------------------------------------

  /** Every server, sorted by name. */
  async servers(opts?: CallOptions): Promise<t.Server[]> {
    return (await this.rpc((o) => this.hub.listServers({}, o), opts)).servers.map(t.toServer);
  }

  /** One server's status. Throws NotFound. */
  async getServer(name: string, opts?: CallOptions): Promise<t.Server> {
    return t.toServer((await this.rpc((o) => this.hub.getServer({ name }, o), opts)).server);
  }

  /** Connects a server and waits until it is ready or has failed (check `state` and `lastError`). */
  async connectServer(config: t.ServerConfigInit, options: CallOptions & { replace?: boolean | undefined } = {}): Promise<t.Server> {
    const req = { server: t.serverConfigMessage(config), replace: options.replace ?? false };
    return t.toServer((await this.rpc((o) => this.hub.connectServer(req, o), options)).server);
  }

  /** Disconnects a server, stops its process and forgets it. */
  async disconnectServer(name: string, opts?: CallOptions): Promise<void> {
    await this.rpc((o) => this.hub.disconnectServer({ name }, o), opts);
  }

  /** Stops a server and connects it again with the same configuration. */
  async restartServer(name: string, opts?: CallOptions): Promise<t.Server> {
    return t.toServer((await this.rpc((o) => this.hub.restartServer({ name }, o), opts)).server);
  }

  /** Disables a server, or enables it and waits until it is ready or has failed. */
  async setServerEnabled(name: string, enabled: boolean, opts?: CallOptions): Promise<t.Server> {
    return t.toServer((await this.rpc((o) => this.hub.setServerEnabled({ name, enabled }, o), opts)).server);
  }

  /** Completes a server's pending OAuth consent with the URL the browser was redirected to. */
  async completeAuthorization(server: string, redirectUrl: string, opts?: CallOptions): Promise<t.Server> {
    return t.toServer((await this.rpc((o) => this.hub.completeAuthorization({ server, redirectUrl }, o), opts)).server);
  }

  /** Deletes a server's OAuth tokens and client registration. */
  async forgetAuthorization(server: string, opts?: CallOptions): Promise<void> {
    await this.rpc((o) => this.hub.forgetAuthorization({ server }, o), opts);
  }

  // -- tools ------------------------------------------------------------------

  /** The tools of one server, or of all ready servers (every page). */
  async listTools(server?: string, opts?: CallOptions): Promise<t.Tool[]> {
    return (await this.pages((r, o) => this.hub.listTools(r, o), server, opts)).flatMap((p) => p.tools);
  }

  private callRequest(name: string, args: ToolArguments, opts: ToolCallOptions): pb.CallToolRequest {
    const req = create(pb.CallToolRequestSchema, { name: this.toQualified.get(name) ?? name });
    const a = argumentsObject(args);
    if (a !== undefined) req.arguments = a;
    if (opts.timeoutMs !== undefined) req.timeout = create(DurationSchema, t.durationFromMs(opts.timeoutMs));
    if (opts.meta !== undefined) req.meta = opts.meta;
    return req;
  }

  /**
   * Calls a tool by its qualified name, a server's own tool name, or the
   * provider-safe name a model called (see {@link toolsForOpenAI}).
   * `args` may be the model's JSON argument string (InvalidArgument if it
   * is no JSON object). A tool that fails returns a result with `isError`;
   * only protocol and transport failures throw.
   */
  async callTool(name: string, args?: ToolArguments, opts: ToolCallOptions = {}): Promise<t.ToolResult> {
    const req = this.callRequest(name, args, opts);
    const deadline = opts.timeoutMs !== undefined ? opts.timeoutMs + CALL_TIMEOUT_GRACE_MS : this.timeoutMs;
    const call = async (): Promise<t.ToolResult> =>
      t.toToolResult(await this.rpc((o) => this.hub.callTool(req, o), { signal: opts.signal }, deadline, true));
    try {
      return await call();
    } catch (e) {
      // mcpd's own refusal of an unknown name carries no JSON-RPC code.
      if (!(e instanceof NotFound || e instanceof InvalidArgument) || e.jsonrpcCode !== undefined) throw e;
      const retry = await this.retryName(name, req.name, opts.signal);
      if (retry === undefined) throw e;
      req.name = retry;
      return await call();
    }
  }

  private async retryName(name: string, tried: string, signal: AbortSignal | undefined): Promise<string | undefined> {
    if (tried !== name) return undefined;
    const names = providerNames((await this.listTools(undefined, signal === undefined ? undefined : { signal })).map((x) => x.name));
    for (const [q, p] of names) this.toQualified.set(p, q);
    const q = this.toQualified.get(name);
    return q !== undefined && q !== name ? q : undefined;
  }

  /**
   * Calls a tool and iterates its progress and log messages, then its
   * result. Breaking out of the loop, `cancel()` or the signal cancel the
   * call upstream.
   */
  callToolStream(name: string, args?: ToolArguments, opts: ToolCallOptions = {}): ToolCallStream {
    if (this.closed) throw new Cancelled("the client is closed");
    const req = this.callRequest(name, args, opts);
    const deadline = opts.timeoutMs !== undefined ? opts.timeoutMs + CALL_TIMEOUT_GRACE_MS : undefined;
    return new ToolCallStream((signal) => {
      const o: ConnectCallOptions = { signal };
      if (deadline !== undefined) o.timeoutMs = deadline;
      return this.hub.callToolStream({ name: req.name, arguments: req.arguments, timeout: req.timeout, meta: req.meta }, o);
    }, linked(opts.signal, this.closing.signal));
  }

  private async definitions<D>(server: string | undefined, make: (tool: t.Tool, name: string) => D, opts?: CallOptions): Promise<D[]> {
    const tools = await this.listTools(server, opts);
    const names = providerNames(tools.map((x) => x.name));
    for (const [q, p] of names) this.toQualified.set(p, q);
    return tools.map((x) => make(x, names.get(x.name)!));
  }

  /** The tools (of one server or all) in OpenAI's Chat Completions format, with provider-safe names. */
  toolsForOpenAI(server?: string, options?: { api?: "chat" | undefined } & CallOptions): Promise<OpenAIChatTool[]>;
  /** The tools in OpenAI's Responses API format. */
  toolsForOpenAI(server: string | undefined, options: { api: "responses" } & CallOptions): Promise<OpenAIResponsesTool[]>;
  toolsForOpenAI(server?: string, options: { api?: "chat" | "responses" | undefined } & CallOptions = {}): Promise<(OpenAIChatTool | OpenAIResponsesTool)[]> {
    const api = options.api ?? "chat";
    if (api !== "chat" && api !== "responses") throw new TypeError(`api must be "chat" or "responses", got ${JSON.stringify(api)}`);
    return this.definitions(server, (x, n) => (api === "chat" ? openaiTool(x, n) : openaiTool(x, n, "responses")), options);
  }

  /** The tools in Anthropic's Messages API format, with provider-safe names. */
  toolsForAnthropic(server?: string, opts?: CallOptions): Promise<AnthropicTool[]> {
    return this.definitions(server, anthropicTool, opts);
  }

  /**
   * The tools as a Vercel AI SDK (`ai`) tool set: `{ [providerSafeName]:
   * { description, inputSchema, execute } }`, to pass as `tools` to
   * `generateText` or `streamText`. `execute` calls the tool through mcpd
   * and returns its text (a failed tool's text too, for the model to read).
   * Pass the SDK's own `jsonSchema` (`import { jsonSchema } from "ai"`) for
   * its types; without it the schemas are built in the same shape.
   */
  async toolsForAISDK<Schema = AISDKSchema>(
    server?: string,
    opts: CallOptions & { timeoutMs?: number | undefined; jsonSchema?: ((schema: JsonObject) => Schema) | undefined } = {},
  ): Promise<Record<string, AISDKTool<Schema>>> {
    const out: Record<string, AISDKTool<Schema>> = {};
    const wrap = opts.jsonSchema ?? (aiSchema as unknown as (schema: JsonObject) => Schema);
    const callTimeout = opts.timeoutMs;
    const entries = await this.definitions(server, (x, n) => [n, x] as const, { signal: opts.signal });
    for (const [name, tool] of entries) {
      out[name] = {
        description: tool.description || tool.title || tool.toolName,
        inputSchema: wrap(anthropicTool(tool, name).input_schema),
        execute: async (input, options) => {
          const o: ToolCallOptions = {};
          if (options.abortSignal) o.signal = options.abortSignal;
          if (callTimeout !== undefined) o.timeoutMs = callTimeout;
          return (await this.callTool(tool.name, input as JsonObject, o)).text;
        },
      };
    }
    return out;
  }

  /** Ranks the tools of ready servers by relevance to a query (best first). */
  async searchTools(query: string, options: CallOptions & { limit?: number | undefined; servers?: string[] | undefined } = {}): Promise<t.ToolMatch[]> {
    const r = await this.rpc((o) => this.hub.searchTools({ query, limit: options.limit ?? 0, servers: options.servers ?? [] }, o), options);
    return r.matches.flatMap((m) => (m.tool === undefined ? [] : [{ tool: m.tool, score: m.score }]));
  }

  /**
   * Serves tools the agent itself defines as the server `server`, to every
   * caller of mcpd (as `mcp__<server>__<tool>`), until `stop()` or close().
   * Resolves once mcpd serves them; throws AlreadyExists when the name is
   * taken and `replace` is not set.
   */
  async serveTools(
    server: string,
    tools: Record<string, AgentTool>,
    options: ServeToolsOptions = {},
  ): Promise<ToolServing> {
    if (this.closed) throw new Cancelled("the client is closed");
    const serving = new ToolServing(createClient(pb.MCPHub, this.conn.bidi()), server, tools, options, linked(this.closing.signal));
    await serving.ready;
    return serving;
  }

  // -- polls ------------------------------------------------------------------

  /**
   * Starts polling a server that cannot send change notifications: a
   * resource (`resourceUri`) or a tool call (`tool`, `arguments`), every
   * `intervalMs`. Changes arrive as "poll_result" events (subscribe with
   * `pollIds`).
   */
  async startPoll(
    server: string,
    options: CallOptions & { resourceUri?: string | undefined; tool?: string | undefined; arguments?: ToolArguments | undefined; intervalMs?: number | undefined },
  ): Promise<t.Poll> {
    if ((options.resourceUri === undefined) === (options.tool === undefined)) {
      throw new TypeError("pass exactly one of resourceUri and tool");
    }
    const req = create(pb.StartPollRequestSchema, { server });
    if (options.resourceUri !== undefined) req.target = { case: "resourceUri", value: options.resourceUri };
    else {
      const tool = create(pb.PollToolCallSchema, { name: options.tool! });
      const a = argumentsObject(options.arguments ?? null);
      if (a !== undefined) tool.arguments = a;
      req.target = { case: "tool", value: tool };
    }
    if (options.intervalMs !== undefined) req.interval = create(DurationSchema, t.durationFromMs(options.intervalMs));
    return t.toPoll((await this.rpc((o) => this.hub.startPoll(req, o), options)).poll);
  }

  /** Stops a poll. */
  async stopPoll(id: string, opts?: CallOptions): Promise<void> {
    await this.rpc((o) => this.hub.stopPoll({ id }, o), opts);
  }

  /** The polls, sorted by id. */
  async listPolls(opts?: CallOptions): Promise<t.Poll[]> {
    return (await this.rpc((o) => this.hub.listPolls({}, o), opts)).polls.map(t.toPoll);
  }

  // -- resources, prompts, completion -----------------------------------------

  /** The resources of one server or of all ready servers. */
  async listResources(server?: string, opts?: CallOptions): Promise<t.Resource[]> {
    return (await this.pages((r, o) => this.hub.listResources(r, o), server, opts)).flatMap((p) => p.resources);
  }

  /** The resource templates of one server or of all ready servers. */
  async listResourceTemplates(server?: string, opts?: CallOptions): Promise<t.ResourceTemplate[]> {
    return (await this.pages((r, o) => this.hub.listResourceTemplates(r, o), server, opts)).flatMap((p) => p.resourceTemplates);
  }

  /** Reads one resource. */
  async readResource(server: string, uri: string, opts?: CallOptions): Promise<t.ResourceResult> {
    return t.toResourceResult(await this.rpc((o) => this.hub.readResource({ server, uri }, o), opts));
  }

  /** The prompts of one server or of all ready servers. */
  async listPrompts(server?: string, opts?: CallOptions): Promise<t.Prompt[]> {
    return (await this.pages((r, o) => this.hub.listPrompts(r, o), server, opts)).flatMap((p) => p.prompts);
  }

  /** Renders a prompt with string arguments. */
  async getPrompt(server: string, name: string, args: Record<string, string> = {}, opts?: CallOptions): Promise<t.PromptResult> {
    return t.toPromptResult(await this.rpc((o) => this.hub.getPrompt({ server, name, arguments: args }, o), opts));
  }

  /** Completions of a prompt's or resource template's argument. */
  async complete(
    server: string,
    argument: string,
    value = "",
    options: CallOptions & { prompt?: string | undefined; resourceTemplate?: string | undefined; context?: Record<string, string> | undefined } = {},
  ): Promise<t.Completion> {
    if ((options.prompt === undefined) === (options.resourceTemplate === undefined)) {
      throw new TypeError("pass exactly one of prompt and resourceTemplate");
    }
    const ref =
      options.prompt !== undefined
        ? ({ case: "prompt", value: options.prompt } as const)
        : ({ case: "resourceTemplate", value: options.resourceTemplate! } as const);
    const req = { server, ref, argument: { name: argument, value }, context: options.context ?? {} };
    const r = await this.rpc((o) => this.hub.complete(req, o), options);
    return { values: r.values, total: r.total, hasMore: r.hasMore };
  }

  /** Sets the minimum level of log messages a server sends. */
  async setLogLevel(server: string, level: t.LogLevel, opts?: CallOptions): Promise<void> {
    await this.rpc((o) => this.hub.setLogLevel({ server, level: t.logLevelToProto(level) }, o), opts);
  }

  /** Sets the roots offered to one server, or to all. */
  async setRoots(roots: t.RootLike[], options: CallOptions & { server?: string | undefined } = {}): Promise<void> {
    await this.rpc((o) => this.hub.setRoots({ server: options.server ?? "", roots: t.rootsToProto(roots) }, o), options);
  }

  // -- events -----------------------------------------------------------------

  /**
   * Follows events with `for await`. When the stream drops, it reconnects
   * with `afterSequence` set to the last event it returned: once an event
   * arrived, every event mcpd still buffers arrives exactly once, and
   * events that fell out of the buffer arrive as one "gap" event. Until the
   * first event arrives, a reconnect resumes from where the stream started
   * (mcpd sends it at once in the `mcpd-after-sequence` header), or from
   * `afterSequence` if given, so nothing mcpd buffers is lost then either.
   */
  subscribe(options: SubscribeOptions = {}): Subscription {
    if (this.closed) throw new Cancelled("the client is closed");
    const request = create(pb.SubscribeRequestSchema, {
      servers: options.servers ?? [],
      resources: (options.resources ?? []).map((r) => (Array.isArray(r) ? { server: r[0], uri: r[1] } : r)),
      kinds: (options.kinds ?? []).map(t.eventKindToProto),
      pollIds: options.pollIds ?? [],
    });
    if (options.fallbackPollIntervalMs !== undefined) {
      request.fallbackPollInterval = create(DurationSchema, t.durationFromMs(options.fallbackPollIntervalMs));
    }
    return new Subscription(
      (req, signal, onHeader) => this.hub.subscribe(req, { signal, onHeader }),
      request,
      options,
      linked(options.signal, this.closing.signal),
    );
  }

  // -- server requests -------------------------------------------------------

  /** Answers servers' sampling requests (an LLM completion). */
  onSampling(handler: SamplingHandler): SamplingHandler {
    return this.on("sampling", handler);
  }

  /** Answers elicitation requests: return an object to accept, undefined to decline. */
  onElicitation(handler: ElicitationHandler): ElicitationHandler {
    return this.on("elicitation", handler);
  }

  /** Answers roots/list (without it, mcpd answers from setRoots). */
  onRoots(handler: RootsHandler): RootsHandler {
    return this.on("roots", handler);
  }

  /** Handles servers' needs for a person's OAuth consent. */
  onAuthorization(handler: AuthorizationHandler): AuthorizationHandler {
    return this.on("authorization", handler);
  }

  /**
   * Decides tool calls that an "ask" tool rule holds: return true (or
   * `{ approved: true }`) to let the call run, false or `{ reason }` to deny
   * it. A handler that throws denies it too. Without an approval handler
   * attached anywhere, such calls are denied.
   */
  onApproval(handler: ApprovalHandler): ApprovalHandler {
    return this.on("approval", handler);
  }

  private on<H>(kind: t.ServerRequestKind, handler: H): H {
    if (typeof handler !== "function") throw new TypeError(`${kind} handler must be a function`);
    if (this.closed) throw new Cancelled("the client is closed");
    const isNew = !this.handlers.has(kind);
    this.handlers.set(kind, handler as Handler<never, unknown>);
    if (this.worker === undefined) {
      this.worker = new RequestWorker(this.conn, this.handlers, this.log);
    } else if (isNew) this.worker.reregister();
    return handler;
  }

  /**
   * Waits until mcpd routes requests of every registered kind to this
   * client; false on timeout. `Infinity` waits without a bound (until
   * ready, the handler stream fails for good, or close()).
   */
  async handlersReady(timeoutMs = 10_000): Promise<boolean> {
    if (this.closed) return false;
    return this.worker === undefined ? true : this.worker.waitReady(timeoutMs);
  }
}

/**
 * Async iterator over a streamed tool call; `result` keeps the ToolResult.
 * Concurrent next() calls share one read (see {@link Subscription}).
 */
export class ToolCallStream implements AsyncIterableIterator<t.StreamItem> {
  /** The result, once it arrived. */
  result: t.ToolResult | undefined;
  private readonly it: AsyncIterator<pb.CallToolStreamResponse>;
  private pending: Promise<IteratorResult<pb.CallToolStreamResponse>>;
  /** The next() in flight, which a next() called meanwhile shares. */
  private reading: Promise<IteratorResult<t.StreamItem>> | undefined;
  private done = false;

  constructor(
    open: (signal: AbortSignal) => AsyncIterable<pb.CallToolStreamResponse>,
    private readonly abort: { controller: AbortController; dispose: () => void },
  ) {
    this.it = open(abort.controller.signal)[Symbol.asyncIterator]();
    // The call starts now, and a failure before the first next() (mcpd
    // down, a cancel()) is kept for it rather than left unhandled.
    this.pending = this.read();
  }

  private read(): Promise<IteratorResult<pb.CallToolStreamResponse>> {
    const p = this.it.next();
    p.catch(() => undefined); // read (and thrown) by next()
    return p;
  }

  [Symbol.asyncIterator](): ToolCallStream {
    return this;
  }

  next(): Promise<IteratorResult<t.StreamItem>> {
    this.reading ??= this.nextItem().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async nextItem(): Promise<IteratorResult<t.StreamItem>> {
    while (!this.done) {
      let r: IteratorResult<pb.CallToolStreamResponse>;
      try {
        r = await this.pending;
      } catch (e) {
        const aborted = this.abort.controller.signal.aborted;
        this.finish();
        throw toMCPDError(e, aborted, true);
      }
      if (r.done) break;
      this.pending = this.read();
      const item = t.toStreamItem(r.value);
      if (item === undefined) continue;
      if (item.type === "result") this.result = item;
      return { value: item, done: false };
    }
    this.finish();
    return { value: undefined, done: true };
  }

  /** Ends the iteration early (a `break` calls this): cancels the call upstream. */
  async return(): Promise<IteratorResult<t.StreamItem>> {
    this.cancel();
    return { value: undefined, done: true };
  }

  /** Cancels the call (and the MCP request upstream). */
  cancel(): void {
    if (!this.done) this.abort.controller.abort(new Cancelled("the call was cancelled"));
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.abort.dispose();
    // Ends the HTTP stream if the server has not (nothing to wait for).
    this.abort.controller.abort(new Cancelled("the call ended"));
  }
}

/** Subscribe's response header: the sequence the stream's events follow. */
const AFTER_SEQUENCE_HEADER = "mcpd-after-sequence";

/**
 * Async iterator of events that reconnects and resumes; `close()` ends it.
 *
 * Concurrent next() calls share one read and resolve with the same event,
 * so a next() given up on (a Promise.race with a timer) loses nothing when
 * next() is called again while it is in flight; once it has settled, its
 * event was its own (to wait again later, await the same promise). After
 * next() threw or returned done the subscription is over: later next()
 * calls return done and open no stream.
 */
export class Subscription implements AsyncIterableIterator<t.Event> {
  /** The sequence of the last event returned. */
  lastSequence: number | undefined;
  /** How often the stream was opened again. */
  reconnects = 0;
  private resume: number | undefined;
  /** Where the open stream started (its mcpd-after-sequence header). */
  private startedAfter: number | undefined;
  private it: AsyncIterator<pb.SubscribeResponse> | undefined;
  private pending: Promise<IteratorResult<pb.SubscribeResponse>> | undefined;
  /** The next() in flight, which a next() called meanwhile shares. */
  private reading: Promise<IteratorResult<t.Event>> | undefined;
  private stream: AbortController | undefined;
  private streamDispose: (() => void) | undefined;
  /** When mcpd answered the open stream (its response header); undefined until then. */
  private answeredAt: number | undefined;
  private readonly reconnect: boolean;
  private readonly reconnectTimeoutMs: number | null;

  constructor(
    private readonly open: (
      req: pb.SubscribeRequest,
      signal: AbortSignal,
      onHeader: (headers: Headers) => void,
    ) => AsyncIterable<pb.SubscribeResponse>,
    private readonly request: pb.SubscribeRequest,
    options: SubscribeOptions,
    private readonly life: { controller: AbortController; dispose: () => void },
  ) {
    this.resume = options.afterSequence;
    this.reconnect = options.reconnect ?? true;
    this.reconnectTimeoutMs = options.reconnectTimeoutMs === undefined ? 30_000 : options.reconnectTimeoutMs;
    this.openStream();
  }

  /**
   * Opens the stream now, so that mcpd starts the subscription before the
   * first next(). Never once the subscription is over: its signal and the
   * client's close() would not reach the stream.
   */
  private openStream(): void {
    if (this.closed) return;
    const req = create(pb.SubscribeRequestSchema, this.request);
    if (this.resume !== undefined) req.afterSequence = BigInt(this.resume);
    this.streamDispose?.();
    const l = linked(this.life.controller.signal);
    this.stream = l.controller;
    this.streamDispose = l.dispose;
    this.startedAfter = undefined;
    this.answeredAt = undefined;
    this.it = this.open(req, this.stream.signal, (headers) => {
      this.answeredAt = performance.now();
      const after = Number(headers.get(AFTER_SEQUENCE_HEADER) ?? NaN);
      if (Number.isSafeInteger(after)) this.startedAfter = after;
    })[Symbol.asyncIterator]();
    this.pending = this.it.next();
    this.pending.catch(() => undefined); // read (and thrown) by next()
  }

  /** Whether the subscription is over: close(), its signal, the client's close(), or a next() that threw or returned done. */
  get closed(): boolean {
    return this.life.controller.signal.aborted;
  }

  [Symbol.asyncIterator](): Subscription {
    return this;
  }

  next(): Promise<IteratorResult<t.Event>> {
    this.reading ??= this.nextEvent().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async nextEvent(): Promise<IteratorResult<t.Event>> {
    try {
      return await this.readEvent();
    } catch (e) {
      this.end();
      throw e;
    }
  }

  private async readEvent(): Promise<IteratorResult<t.Event>> {
    const policy = new ReconnectPolicy(this.reconnectTimeoutMs);
    for (;;) {
      if (this.closed) return this.ended();
      if (this.pending === undefined) this.openStream();
      let err: MCPDError | undefined;
      const stream = this.stream;
      try {
        const r = await this.pending!;
        if (!r.done) {
          this.pending = this.it!.next();
          this.pending.catch(() => undefined);
          const ev = t.toEvent(r.value.event);
          this.resume = this.lastSequence = ev.sequence;
          return { value: ev, done: false };
        }
      } catch (e) {
        err = toMCPDError(e, stream?.signal.aborted ?? false);
      }
      this.pending = undefined;
      stream?.abort();
      // No event yet: resume where the stream started, not from a later "now".
      this.resume ??= this.startedAfter;
      if (this.closed) return this.ended();
      const wait = this.reconnect && resumable(err) ? policy.nextWait(performance.now(), this.answeredAt) : undefined;
      if (wait === undefined) {
        if (err === undefined) return this.ended();
        throw err;
      }
      await sleep(wait, this.life.controller.signal);
      this.reconnects++;
    }
  }

  /** Ends the subscription; a pending next() returns done. */
  close(): void {
    this.end(new Cancelled("the subscription is closed"));
  }

  /** The end of the iteration. */
  private ended(): IteratorResult<t.Event> {
    this.end();
    return { value: undefined, done: true };
  }

  /**
   * Ends the subscription for good, so that no later next() reopens a
   * stream; nothing listens on the client's or the caller's signal any more.
   */
  private end(reason: MCPDError = new Cancelled("the subscription ended")): void {
    this.life.controller.abort(reason);
    this.life.dispose();
    this.streamDispose?.();
    this.streamDispose = undefined;
  }

  async return(): Promise<IteratorResult<t.Event>> {
    this.close();
    return { value: undefined, done: true };
  }
}

/** Tools an agent serves through mcpd; see {@link Client.serveTools}. */
export class ToolServing {
  /** The server as mcpd serves it, once ready. */
  server: t.Server | undefined;
  /** Resolves once mcpd serves the tools; rejects if it refused them. */
  readonly ready: Promise<t.Server>;
  /** Resolves when the serving ended (stop(), close(), or the stream broke; then with its error). */
  readonly done: Promise<MCPDError | undefined>;
  private readonly outbox = new Outbox<pb.ServeToolsRequest>();
  private readonly calls = new Map<string, AbortController>();

  constructor(
    hub: HubClient<typeof pb.MCPHub>,
    serverName: string,
    private readonly tools: Record<string, AgentTool>,
    options: ServeToolsOptions,
    private readonly life: { controller: AbortController; dispose: () => void },
  ) {
    const definitions = Object.entries(tools).map(([name, tool]) => {
      const d = create(pb.ToolDefinitionSchema, {
        name,
        title: tool.title ?? "",
        description: tool.description,
        inputSchema: tool.inputSchema ?? { type: "object" },
      });
      if (tool.outputSchema !== undefined) d.outputSchema = tool.outputSchema;
      // create() leaves out a field given as undefined, as one not given.
      if (tool.annotations !== undefined) d.annotations = create(pb.ToolAnnotationsSchema, tool.annotations as MessageInitShape<typeof pb.ToolAnnotationsSchema>);
      if (tool.meta !== undefined) d.meta = tool.meta;
      return d;
    });
    const declare = create(pb.ToolServerDeclarationSchema, {
      server: serverName,
      tools: definitions,
      replace: options.replace ?? false,
      instructions: options.instructions ?? "",
    });
    // Without a version, mcpd names the server itself (version "agent").
    if (options.version !== undefined) declare.serverInfo = create(pb.ImplementationSchema, { name: serverName, version: options.version });
    this.outbox.push(create(pb.ServeToolsRequestSchema, { message: { case: "declare", value: declare } }));
    let resolveReady!: (s: t.Server) => void;
    let rejectReady!: (e: unknown) => void;
    this.ready = new Promise((res, rej) => {
      resolveReady = res;
      rejectReady = rej;
    });
    this.ready.catch(() => undefined);
    this.done = (async () => {
      let error: MCPDError | undefined;
      try {
        for await (const msg of hub.serveTools(this.outbox, { signal: life.controller.signal })) {
          if (msg.message.case === "serving") {
            this.server = t.toServer(msg.message.value);
            resolveReady(this.server);
          } else if (msg.message.case === "call") {
            void this.run(msg.message.value);
          } else if (msg.message.case === "cancel") {
            this.calls.get(msg.message.value.id)?.abort(new Cancelled(msg.message.value.reason || "the call was cancelled"));
          }
        }
      } catch (e) {
        if (!life.controller.signal.aborted) error = toMCPDError(e, false);
      } finally {
        this.outbox.end();
        for (const c of this.calls.values()) c.abort(new Cancelled("the serving stopped"));
        life.dispose();
      }
      rejectReady(error ?? new Cancelled("the serving stopped before mcpd served the tools"));
      return error;
    })();
  }

  private send(m: MessageInit): void {
    try {
      this.outbox.push(create(pb.ServeToolsRequestSchema, m));
    } catch {
      // The stream ended; mcpd fails the call itself.
    }
  }

  private async run(call: pb.ToolCall): Promise<void> {
    const tool = this.tools[call.tool];
    if (tool === undefined) {
      this.send({ message: { case: "result", value: { id: call.id, outcome: { case: "error", value: { code: INVALID_PARAMS, message: `unknown tool ${JSON.stringify(call.tool)}` } } } } });
      return;
    }
    const controller = new AbortController();
    this.calls.set(call.id, controller);
    const context: AgentToolContext = {
      signal: controller.signal,
      progress: (progress, total, message = "") =>
        this.send({ message: { case: "progress", value: { id: call.id, progress: total === undefined ? { progress, message } : { progress, total, message } } } }),
      meta: call.meta,
      deadline: call.deadline === undefined ? undefined : new Date(Number(call.deadline.seconds) * 1000 + call.deadline.nanos / 1e6),
    };
    let outcome: pb.ToolCallResult["outcome"];
    try {
      outcome = { case: "result", value: agentResult(await tool.run(call.arguments ?? {}, context)) };
    } catch (e) {
      if (e instanceof ToolArgumentError) outcome = { case: "error", value: create(pb.ReplyErrorSchema, { code: INVALID_PARAMS, message: e.message }) };
      else {
        const text = e instanceof Error ? e.message || e.name : String(e);
        outcome = { case: "result", value: create(pb.CallToolResponseSchema, { isError: true, content: [{ kind: { case: "text", value: { text } } }] }) };
      }
    } finally {
      this.calls.delete(call.id);
    }
    this.send({ message: { case: "result", value: { id: call.id, outcome } } });
  }

  /** Stops serving: mcpd stops the server. */
  async stop(): Promise<void> {
    this.life.controller.abort(new Cancelled("the serving stopped"));
    await this.done;
  }
}

type MessageInit = Parameters<typeof create<typeof pb.ServeToolsRequestSchema>>[1];

function agentResult(value: unknown): pb.CallToolResponse {
  const text = (s: string): t.Content => create(pb.ContentSchema, { kind: { case: "text", value: { text: s } } });
  if (typeof value === "string") return create(pb.CallToolResponseSchema, { content: [text(value)] });
  if (value !== null && typeof value === "object" && "content" in value && Array.isArray((value as ToolResultInit).content)) {
    const r = value as ToolResultInit;
    const out = create(pb.CallToolResponseSchema, {
      content: r.content.map((c, i) => contentBlock(c, i)),
      isError: r.isError ?? false,
    });
    if (r.structured !== undefined) out.structuredContent = fromJson(ValueSchema, r.structured);
    return out;
  }
  const json = (value ?? null) as JsonValue;
  const out = create(pb.CallToolResponseSchema, { content: [text(JSON.stringify(json))] });
  if (json !== null && typeof json === "object" && !Array.isArray(json)) out.structuredContent = fromJson(ValueSchema, json);
  return out;
}

/**
 * One block of an agent tool's result: a string, a {@link t.Content}, or a
 * block in MCP's JSON shape (`{ type: "text", text }`, `image`, `audio`,
 * `resource_link`, `resource`), as an MCP server would return it.
 */
function contentBlock(c: unknown, i: number): t.Content {
  if (typeof c === "string") return create(pb.ContentSchema, { kind: { case: "text", value: { text: c } } });
  if (c === null || typeof c !== "object") throw new TypeError(`content[${i}] is not a content block`);
  if ("kind" in c) return create(pb.ContentSchema, c as t.Content);
  const b = c as Record<string, unknown>;
  const str = (k: string): string => {
    const v = b[k];
    if (v === undefined) return "";
    if (typeof v !== "string") throw new TypeError(`content[${i}].${k} must be a string`);
    return v;
  };
  const bytes = (k: string): Uint8Array => Buffer.from(str(k), "base64");
  switch (b.type) {
    case "text":
      return create(pb.ContentSchema, { kind: { case: "text", value: { text: str("text") } } });
    case "image":
    case "audio":
      return create(pb.ContentSchema, { kind: { case: b.type, value: { data: bytes("data"), mimeType: str("mimeType") } } });
    case "resource_link": {
      const link = create(pb.ResourceLinkSchema, { uri: str("uri"), name: str("name"), title: str("title"), description: str("description"), mimeType: str("mimeType") });
      if (typeof b.size === "number") link.size = BigInt(b.size);
      return create(pb.ContentSchema, { kind: { case: "resourceLink", value: link } });
    }
    case "resource": {
      const r = b.resource as Record<string, unknown> | undefined;
      if (r === null || typeof r !== "object") throw new TypeError(`content[${i}].resource must be an object`);
      const data: pb.ResourceContents["data"] =
        typeof r.blob === "string" ? { case: "blob", value: Buffer.from(r.blob, "base64") } : { case: "text", value: typeof r.text === "string" ? r.text : "" };
      return create(pb.ContentSchema, { kind: { case: "resource", value: { uri: typeof r.uri === "string" ? r.uri : "", mimeType: typeof r.mimeType === "string" ? r.mimeType : "", data } } });
    }
  }
  throw new TypeError(`content[${i}] is not a content block: its type is ${JSON.stringify(b.type)}`);
}

/** A queue read as an async iterable: the request side of a bidirectional stream. */
class Outbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private ended = false;

  push(item: T): void {
    if (this.ended) throw new Cancelled("the stream ended");
    this.items.push(item);
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}

/**
 * Owns the HandleServerRequests stream: registers the handlers' kinds,
 * runs each request's handler and writes its reply, and reopens the
 * stream when it drops.
 */
class RequestWorker {
  private want = 0;
  private have = -1;
  private error: MCPDError | undefined;
  private stopped = false;
  private stream: AbortController | undefined;
  /** The open stream's outbox, and the generations of the registrations sent on it not yet confirmed. */
  private outbox: Outbox<pb.HandleServerRequestsRequest> | undefined;
  private unconfirmed: number[] = [];
  /** Whether a registration went out again on the open stream (an mcpd older than that refuses it; the stream is then opened anew). */
  private again = false;
  private readonly stopping = new AbortController();
  private readonly waiters = new Set<() => void>();
  private readonly running: Promise<void>;
  /** The requests whose handlers have not answered yet, by id: a cancel from mcpd aborts their signal. */
  private readonly pending = new Map<string, AbortController>();

  constructor(
    private readonly conn: OpenTransport,
    private readonly handlers: Map<t.ServerRequestKind, Handler<never, unknown>>,
    private readonly log: (message: string, error: unknown) => void,
  ) {
    this.running = this.run();
  }

  /** A handler of a new kind: registered on the open stream, whose pending requests keep it for their replies. */
  reregister(): void {
    this.want++;
    if (this.outbox === undefined) return;
    this.again = true;
    this.register(this.outbox);
  }

  /** Sends the current kinds; mcpd confirms each registration in turn. */
  private register(outbox: Outbox<pb.HandleServerRequestsRequest>): void {
    this.unconfirmed.push(this.want);
    const kinds = [...this.handlers.keys()].sort().map((k) => t.REQUEST_KINDS[k]);
    outbox.push(create(pb.HandleServerRequestsRequestSchema, { message: { case: "register", value: { kinds } } }));
  }

  private notify(): void {
    for (const w of this.waiters) w();
  }

  async waitReady(timeoutMs: number): Promise<boolean> {
    const ready = (): boolean => this.have === this.want || this.error !== undefined || this.stopped;
    if (!ready()) {
      await new Promise<void>((resolve) => {
        const finish = (): void => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve();
        };
        const waiter = (): void => {
          if (ready()) finish();
        };
        // A timer longer than 2^31-1 ms fires at once (Node's
        // TimeoutOverflowWarning): longer than that, as Infinity, is no bound.
        const timer = timeoutMs <= MAX_TIMER_MS ? setTimeout(finish, timeoutMs) : undefined;
        this.waiters.add(waiter);
      });
    }
    if (this.error !== undefined) throw this.error;
    return !this.stopped && this.have === this.want;
  }

  /** Ends the stream; handlers still running see their signal abort, and their replies go nowhere. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelPending("the client closed");
    this.stopping.abort();
    this.stream?.abort();
    this.notify();
    await this.running;
  }

  private async run(): Promise<void> {
    let delay = RECONNECT_INITIAL_MS;
    const hub = createClient(pb.MCPHub, this.conn.bidi());
    while (!this.stopped) {
      const outbox = new Outbox<pb.HandleServerRequestsRequest>();
      const stream = (this.stream = new AbortController());
      this.unconfirmed = [];
      this.again = false;
      this.register(outbox);
      this.outbox = outbox;
      let err: unknown;
      try {
        for await (const msg of hub.handleServerRequests(outbox, { signal: stream.signal })) {
          if (msg.message.case === "registered") {
            delay = RECONNECT_INITIAL_MS;
            const gen = this.unconfirmed.shift();
            if (gen !== undefined) this.have = gen;
            this.notify();
          } else if (msg.message.case === "request") {
            // handle() catches the handler's failures; only a log callback
            // that throws is left, and must not end the process.
            this.handle(msg.message.value, outbox).catch(() => undefined);
          } else if (msg.message.case === "cancel") {
            const { id, reason } = msg.message.value;
            this.cancel(id, reason || "mcpd stopped waiting for the reply");
          } else if (msg.message.case === "replyRefused") {
            // The server got an error instead of the handler's answer: the
            // handler's developer learns why here.
            const { id, reason } = msg.message.value;
            this.log(`mcpd refused the reply to request ${id} (the server got an error instead)`, reason);
          }
        }
      } catch (e) {
        err = e;
      } finally {
        outbox.end();
        this.outbox = undefined;
        this.have = -1;
        // No reply reaches mcpd after the stream: the handlers still running may stop.
        this.cancelPending("the server-request stream ended");
      }
      if (this.stopped) break;
      if (err !== undefined) {
        const code = toMCPDError(err, stream.signal.aborted).code;
        if (code === Code.InvalidArgument && this.again) continue; // an older mcpd: a new stream with every kind
        if (code !== Code.Unavailable && code !== Code.Canceled) {
          this.error = toMCPDError(err);
          this.notify();
          this.log("server-request stream failed", this.error);
          return;
        }
      }
      await sleep(delay, this.stopping.signal);
      delay = Math.min(delay * 2, RECONNECT_MAX_MS);
    }
  }

  private cancel(id: string, reason: string): void {
    const controller = this.pending.get(id);
    this.pending.delete(id);
    controller?.abort(new Cancelled(reason));
  }

  private cancelPending(reason: string): void {
    for (const id of [...this.pending.keys()]) this.cancel(id, reason);
  }

  private async handle(msg: pb.ServerRequest, outbox: Outbox<pb.HandleServerRequestsRequest>): Promise<void> {
    const req = t.toServerRequest(msg);
    let reply: pb.ServerRequestReply;
    if (req === undefined) {
      reply = t.errorReply(msg.id, t.METHOD_NOT_FOUND, "this client does not know the request kind");
    } else {
      const handler = this.handlers.get(req.kind) as Handler<t.ServerRequest, unknown> | undefined;
      const controller = new AbortController();
      this.pending.set(req.id, controller);
      const { signal } = controller;
      try {
        if (handler === undefined) throw new ServerRequestError(`no ${req.kind} handler is registered`, t.METHOD_NOT_FOUND);
        reply = t.replyFor(req, await handler(req, { signal }));
      } catch (e) {
        // A handler that stopped at its signal (a fetch's AbortError) did
        // what it was asked: no failure to log, no reply to send.
        if (signal.aborted) return;
        if (e instanceof ServerRequestError) reply = t.errorReply(req.id, e.code, e.message);
        else {
          this.log(`${req.kind} handler failed for server ${req.server}`, e);
          // The error text stays here: a handler wraps model calls whose
          // errors may carry ids or URLs the server must not get.
          const name = e instanceof Error ? e.name : typeof e;
          reply = t.errorReply(req.id, t.INTERNAL_ERROR, `${req.kind} handler failed: ${name}`);
        }
      } finally {
        if (this.pending.get(req.id) === controller) this.pending.delete(req.id);
      }
      if (signal.aborted) return; // mcpd no longer waits for it
    }
    try {
      outbox.push(create(pb.HandleServerRequestsRequestSchema, { message: { case: "reply", value: reply } }));
    } catch {
      // The stream ended; mcpd declines the request.
    }
  }
}

export type { JsonValue };
