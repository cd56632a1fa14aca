/**
 * The values the client returns and takes: the generated messages where
 * they are already convenient, and small plain objects (with `text` for
 * the common case, enums as lower-case strings, times as `Date`) where the
 * generated ones are not.
 */

import { create, toJson, type JsonObject, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema, type Duration, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { isAbsolute } from "node:path";
import { pathToFileURL } from "node:url";
import * as pb from "./gen/mcpd/v1/mcpd_pb.js";

export type { JsonObject, JsonValue };
/** A tool of one server; `name` is the qualified name `mcp__<server>__<tool>`. */
export type Tool = pb.Tool;
/** One block of a tool result, prompt message or sampling message. */
export type Content = pb.Content;
export type Resource = pb.Resource;
export type ResourceTemplate = pb.ResourceTemplate;
export type ResourceContents = pb.ResourceContents;
export type Prompt = pb.Prompt;
export type PromptMessage = pb.PromptMessage;

/** A server's state: "ready", "connecting", "failed", ... */
export type ServerState =
  | "unspecified"
  | "connecting"
  | "ready"
  | "reconnecting"
  | "failed"
  | "stopped"
  | "authorization_required"
  | "disabled";
/** Where a server's configuration came from: "default" (the demo server), "managed", "user", "project", "local", "flag" or "api". */
export type ConfigScope = "unspecified" | "default" | "managed" | "user" | "project" | "local" | "flag" | "api";
/** How mcpd reaches a server. */
export type Transport = "unspecified" | "stdio" | "http" | "sse" | "auto";
/** A log severity, as MCP names them. */
export type LogLevel = "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency";
/** What an event says. */
export type EventKind =
  | "resource_updated"
  | "tools_changed"
  | "prompts_changed"
  | "resources_changed"
  | "server_state"
  | "log"
  | "poll_result"
  | "gap";
/**
 * A kind of request mcpd hands an agent: servers' sampling, elicitation,
 * roots and authorization requests, and mcpd's own approval requests.
 */
export type ServerRequestKind = "sampling" | "elicitation" | "roots" | "authorization" | "approval";

// The generated enums drop the proto's value prefix (SERVER_STATE_READY is
// ServerState.READY); the client spells them in lower case ("ready").
function enumName(e: Record<number, string>, value: number): string {
  const name = e[value];
  return name === undefined ? "unspecified" : name.toLowerCase();
}

function enumValue<T extends number>(e: Record<string, string | number>, name: string, what: string): T {
  const v = e[name.toUpperCase()];
  if (typeof v !== "number" || v === 0) throw new TypeError(`unknown ${what} ${JSON.stringify(name)}`);
  return v as T;
}

/** The text blocks of some content, joined with newlines. */
export function contentText(content: readonly Content[]): string {
  return content
    .flatMap((c) => (c.kind.case === "text" ? [c.kind.value.text] : []))
    .join("\n");
}

/** A server's status. */
export interface Server extends Omit<pb.Server, "state" | "transport" | "scope" | "stateChangedTime" | "authorizationExpireTime" | "$typeName"> {
  state: ServerState;
  transport: Transport;
  scope: ConfigScope;
  stateChangedTime: Date | undefined;
  authorizationExpireTime: Date | undefined;
  /** Whether the server is ready for calls. */
  ready: boolean;
  /** Whether the server waits for a person's OAuth consent at `authorizationUrl`. */
  authorizationRequired: boolean;
}

function json(v: Value | undefined): JsonValue | undefined {
  return v === undefined ? undefined : toJson(ValueSchema, v);
}

function date(ts: Timestamp | undefined): Date | undefined {
  return ts === undefined ? undefined : timestampDate(ts);
}

function ms(d: Duration | undefined): number | undefined {
  return d === undefined ? undefined : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

export function toServer(s: pb.Server | undefined): Server {
  if (s === undefined) throw new Error("mcpd returned no server");
  const { $typeName: _, state, transport, scope, stateChangedTime, authorizationExpireTime, ...rest } = s;
  const name = enumName(pb.ServerState, state) as ServerState;
  return {
    ...rest,
    state: name,
    transport: enumName(pb.Transport, transport) as Transport,
    scope: enumName(pb.ConfigScope, scope) as ConfigScope,
    stateChangedTime: date(stateChangedTime),
    authorizationExpireTime: date(authorizationExpireTime),
    ready: name === "ready",
    authorizationRequired: name === "authorization_required",
  };
}

/** A tool's result. `isError` means the tool reported a failure. */
export interface ToolResult {
  type: "result";
  content: Content[];
  /** The structured result, when the tool returns one. */
  structured: JsonValue | undefined;
  isError: boolean;
  meta: JsonObject | undefined;
  /** The text blocks, joined with newlines. */
  text: string;
}

export function toToolResult(r: pb.CallToolResponse | undefined): ToolResult {
  if (r === undefined) throw new Error("mcpd returned no result");
  return {
    type: "result",
    content: r.content,
    structured: json(r.structuredContent),
    isError: r.isError,
    meta: r.meta,
    text: contentText(r.content),
  };
}

/** Progress of a streamed tool call. */
export interface Progress {
  type: "progress";
  progress: number;
  total: number | undefined;
  message: string;
}

/** A log message a server sent. */
export interface LogMessage {
  type: "log";
  level: LogLevel;
  logger: string;
  data: JsonValue | undefined;
}

/** One item of {@link Client.callToolStream}: progress and logs, then the result. */
export type StreamItem = Progress | LogMessage | ToolResult;

export function toLogMessage(m: pb.LogMessage): LogMessage {
  return { type: "log", level: enumName(pb.LogLevel, m.level) as LogLevel, logger: m.logger, data: json(m.data) };
}

export function toStreamItem(m: pb.CallToolStreamResponse): StreamItem | undefined {
  switch (m.kind.case) {
    case "progress":
      return { type: "progress", progress: m.kind.value.progress, total: m.kind.value.total, message: m.kind.value.message };
    case "log":
      return toLogMessage(m.kind.value);
    case "result":
      return toToolResult(m.kind.value);
    default:
      return undefined;
  }
}

/** A read resource. */
export interface ResourceResult {
  contents: ResourceContents[];
  meta: JsonObject | undefined;
  /** The text parts, joined with newlines. */
  text: string;
  /** The first binary part, undefined when there is none. */
  blob: Uint8Array | undefined;
}

export function toResourceResult(r: pb.ReadResourceResponse): ResourceResult {
  const texts: string[] = [];
  let blob: Uint8Array | undefined;
  for (const c of r.contents) {
    if (c.data.case === "text") texts.push(c.data.value);
    else if (c.data.case === "blob" && blob === undefined) blob = c.data.value;
  }
  return { contents: r.contents, meta: r.meta, text: texts.join("\n"), blob };
}

/** A rendered prompt. */
export interface PromptResult {
  description: string;
  messages: PromptMessage[];
  meta: JsonObject | undefined;
  /** The text of every message, joined with newlines. */
  text: string;
}

export function toPromptResult(r: pb.GetPromptResponse): PromptResult {
  const text = r.messages
    .map((m) => (m.content?.kind.case === "text" ? m.content.kind.value.text : ""))
    .filter((t) => t !== "")
    .join("\n");
  return { description: r.description, messages: r.messages, meta: r.meta, text };
}

/** Completion suggestions for an argument. */
export interface Completion {
  values: string[];
  total: number | undefined;
  hasMore: boolean;
}

/**
 * Something that happened on a server. Which fields are set depends on
 * `kind`: `uri` for "resource_updated", `state`/`error` for
 * "server_state", `log` for "log", and `gapFirst`..`gapLast` (the
 * sequences this stream missed) for "gap".
 */
export interface Event {
  sequence: number;
  kind: EventKind;
  server: string;
  time: Date | undefined;
  uri?: string | undefined;
  state?: ServerState | undefined;
  error?: string | undefined;
  log?: LogMessage | undefined;
  gapFirst?: number | undefined;
  gapLast?: number | undefined;
  /** For "poll_result": what a poll read (see {@link Client.startPoll}). */
  poll?: PollResult | undefined;
}

/**
 * A poll mcpd runs for a server that cannot send change notifications: a
 * resource read (`resourceUri`), or a tool call (`tool`, named as
 * startPoll got it, with `arguments`), every `intervalMs`.
 */
export interface Poll {
  id: string;
  server: string;
  resourceUri: string;
  tool: string;
  arguments: JsonObject;
  intervalMs: number;
  /** Whether it waits for its server to be ready again. */
  paused: boolean;
  /** The polls made. */
  polls: number;
  /** The "poll_result" events published, the baseline included. */
  changes: number;
  /** When the last poll ended; undefined before the first. */
  lastPollTime: Date | undefined;
  /** Why the last poll failed; empty when it succeeded. */
  lastError: string;
}

export function toPoll(p: pb.Poll | undefined): Poll {
  if (p === undefined) throw new Error("mcpd returned no poll");
  return {
    id: p.id,
    server: p.server,
    resourceUri: p.target.case === "resourceUri" ? p.target.value : "",
    tool: p.target.case === "tool" ? p.target.value.name : "",
    arguments: (p.target.case === "tool" ? p.target.value.arguments : undefined) ?? {},
    intervalMs: ms(p.interval) ?? 0,
    paused: p.paused,
    polls: Number(p.polls),
    changes: Number(p.changes),
    lastPollTime: date(p.lastPollTime),
    lastError: p.lastError,
  };
}

/** What one poll read: a resource's contents or a tool's result, or an error. */
export interface PollResult {
  pollId: string;
  /** The first read after the poll started (not a change). */
  baseline: boolean;
  resourceUri: string;
  tool: string;
  contents: ResourceContents[];
  toolResult: ToolResult | undefined;
  error: string;
}

/** A tool ranked by relevance to a search query. */
export interface ToolMatch {
  tool: Tool;
  score: number;
}

export function toEvent(e: pb.Event | undefined): Event {
  if (e === undefined) throw new Error("mcpd sent a subscription message without an event");
  const base = { sequence: Number(e.sequence), server: e.server, time: date(e.time) };
  switch (e.kind.case) {
    case "resourceUpdated":
      return { ...base, kind: "resource_updated", uri: e.kind.value.uri };
    case "toolsChanged":
      return { ...base, kind: "tools_changed" };
    case "promptsChanged":
      return { ...base, kind: "prompts_changed" };
    case "resourcesChanged":
      return { ...base, kind: "resources_changed" };
    case "serverState":
      return {
        ...base,
        kind: "server_state",
        state: enumName(pb.ServerState, e.kind.value.state) as ServerState,
        error: e.kind.value.error,
      };
    case "log":
      return { ...base, kind: "log", log: toLogMessage(e.kind.value) };
    case "pollResult": {
      const p = e.kind.value;
      return {
        ...base,
        kind: "poll_result",
        poll: {
          pollId: p.pollId,
          baseline: p.baseline,
          resourceUri: p.resourceUri,
          tool: p.tool,
          contents: p.contents,
          toolResult: p.toolResult === undefined ? undefined : toToolResult(p.toolResult),
          error: p.error,
        },
      };
    }
    case "gap":
      return {
        ...base,
        kind: "gap",
        gapFirst: Number(e.kind.value.firstSequence),
        gapLast: Number(e.kind.value.lastSequence),
      };
    default:
      throw new Error("mcpd sent an event of a kind this client does not know");
  }
}

export function eventKindToProto(kind: EventKind): pb.EventKind {
  return enumValue<pb.EventKind>(pb.EventKind as unknown as Record<string, number>, kind, "event kind");
}

export function logLevelToProto(level: LogLevel): pb.LogLevel {
  return enumValue<pb.LogLevel>(pb.LogLevel as unknown as Record<string, number>, level, "log level");
}

export const REQUEST_KINDS: Record<ServerRequestKind, pb.ServerRequestKind> = {
  sampling: pb.ServerRequestKind.SAMPLING,
  elicitation: pb.ServerRequestKind.ELICITATION,
  roots: pb.ServerRequestKind.ROOTS,
  authorization: pb.ServerRequestKind.AUTHORIZATION,
  approval: pb.ServerRequestKind.APPROVAL,
};

// -- server configuration ------------------------------------------------

/** A server configuration as the proto spells it (plain object). */
export type ServerConfigInit = Exclude<MessageInitShape<typeof pb.ServerConfigSchema>, pb.ServerConfig>;

/**
 * A private CA and a client certificate for an HTTP or SSE server (proto
 * `TlsConfig`; a config file's `tls` block): absolute paths of PEM files on
 * mcpd's machine, read again at every connect. `certFile` (the chain, leaf
 * first) and `keyFile` go together. mcpd uses them for the server's OAuth
 * requests too; while it runs with `--allow-command` it refuses a
 * `connectServer` that names them (PermissionDenied).
 */
export type TlsConfigInit = Exclude<MessageInitShape<typeof pb.TlsConfigSchema>, pb.TlsConfig>;

/** The options of a remote server: its headers and TLS files. */
export interface RemoteOptions extends ServerOptions {
  headers?: Record<string, string> | undefined;
  tls?: TlsConfigInit | undefined;
}

/** Options every kind of server takes. */
export interface ServerOptions {
  /** Bounds each tool call (ms); unset: mcpd's default. */
  callTimeoutMs?: number | undefined;
  /** Bounds connecting (ms). */
  connectTimeoutMs?: number | undefined;
  protocolVersion?: string | undefined;
  toolsAllow?: string[] | undefined;
  toolsDeny?: string[] | undefined;
  /** Tools whose calls wait for an agent's approval; only adds to mcpd's tool rules. */
  toolsAsk?: string[] | undefined;
  oauth?: MessageInitShape<typeof pb.OAuthConfigSchema> | undefined;
  /** List tools only when the server declares the tools capability. */
  strictCapabilities?: boolean | undefined;
  /**
   * Log every JSON-RPC message of the server at mcpd's debug level
   * (docs/servers.md, "Wire tracing").
   */
  trace?: boolean | undefined;
}

/**
 * The options `ServerConfig.fromMcpJson` takes beside an entry: the ones
 * an entry's keys set too (its `oauth` block is the entry's own).
 */
export type McpJsonOptions = Omit<ServerOptions, "oauth">;

/**
 * One entry of a `.mcp.json` file's `mcpServers` (or `servers`) map, as the
 * file spells it: `ServerConfig.fromMcpJson` says which keys it reads and
 * which it refuses. A key whose value is `null` counts as absent.
 */
export interface McpJsonEntry {
  /** `stdio`, `http` (also `streamable-http`, `streamable_http`, `streamableHttp`), `sse` or `auto`, in any case. */
  type?: string | undefined;
  command?: string | undefined;
  args?: string[] | undefined;
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
  url?: string | undefined;
  /** Read as `url` when `url` is empty. */
  serverUrl?: string | undefined;
  headers?: Record<string, string> | undefined;
  /** The oauth block, in the file's camelCase (`clientId`, `tokenEndpointAuthMethod`, ...). */
  oauth?: JsonObject | undefined;
  /** The tls block: `ca`, `cert`, `key` (paths). */
  tls?: JsonObject | undefined;
  /** The call timeout, in seconds (0: mcpd's default). */
  timeout?: number | undefined;
  /** In seconds (0: mcpd's default). */
  connectTimeout?: number | undefined;
  protocolVersion?: string | undefined;
  toolsAllow?: string[] | undefined;
  toolsDeny?: string[] | undefined;
  toolsAsk?: string[] | undefined;
  strictCapabilities?: boolean | undefined;
  trace?: boolean | undefined;
  [key: string]: unknown;
}

// How ServerConfig.fromMcpJson treats each key mcpd's config file reader
// knows in a server entry (internal/config's entry), as the Python client's
// ServerConfig.from_mcp_json does. The keys are listed in
// clients/testdata/mcp-json-keys.json, which tests check against the Go
// structs and against these lists.
export const MCP_JSON_READ: ReadonlySet<string> = new Set([
  "type",
  "command",
  "args",
  "env",
  "cwd",
  "url",
  "serverUrl",
  "headers",
  "oauth",
  "tls",
  "timeout",
  "connectTimeout",
  "protocolVersion",
  "toolsAllow",
  "toolsDeny",
  "disabledTools",
  "toolsAsk",
  "strictCapabilities",
  "trace",
]);
// Keys mcpd honours that ConnectServer cannot carry, and why: refused when
// they say something (disabled when true, with a message of its own).
export const MCP_JSON_REFUSED: ReadonlyMap<string, string> = new Map([
  ["permissions", "a server's own tool rules are read from config files only"],
  ["alwaysAllow", "tools that run without asking are read from config files only"],
  ["autoApprove", "tools that run without asking are read from config files only"],
  ["traceRedact", "the fields a trace redacts are read from config files only"],
  ["disabled", "a server cannot be connected disabled"],
]);
// Keys mcpd reads and leaves: an agent SDK's name for the server.
export const MCP_JSON_IGNORED: ReadonlySet<string> = new Set(["name"]);
// The entry's option keys and the options for them.
const MCP_JSON_OPTIONS: ReadonlyMap<string, keyof McpJsonOptions> = new Map([
  ["timeout", "callTimeoutMs"],
  ["connectTimeout", "connectTimeoutMs"],
  ["protocolVersion", "protocolVersion"],
  ["toolsAllow", "toolsAllow"],
  ["toolsDeny", "toolsDeny"],
  ["disabledTools", "toolsDeny"],
  ["toolsAsk", "toolsAsk"],
  ["strictCapabilities", "strictCapabilities"],
  ["trace", "trace"],
]);
const OPTION_NAMES: ReadonlySet<string> = new Set(MCP_JSON_OPTIONS.values());
// The values of "type", lower-cased, as mcpd reads them, and the builders
// of their transports.
const MCP_JSON_TYPES: ReadonlyMap<string, "stdio" | "http" | "sse" | "remote"> = new Map([
  ["stdio", "stdio"],
  ["http", "http"],
  ["streamable-http", "http"],
  ["streamable_http", "http"],
  ["streamablehttp", "http"],
  ["sse", "sse"],
  ["auto", "remote"],
]);
// mcpd's bound on a config file's timeouts: a year, in seconds.
const MAX_TIMEOUT_SECONDS = 365 * 24 * 60 * 60;

// The keys of a .mcp.json oauth block and of its idp: the proto's field
// names in camelCase, as the OAuthConfig message spells them here too.
export const OAUTH_KEYS: ReadonlySet<string> = new Set([
  "clientId",
  "clientSecret",
  "clientMetadataUrl",
  "scopes",
  "tokenEndpointAuthMethod",
  "privateKeyFile",
  "signingAlgorithm",
  "grant",
  "assertion",
  "assertionFile",
  "idp",
  "dpop",
]);
export const IDP_KEYS: ReadonlySet<string> = new Set(["issuer", "tokenEndpoint", "clientId", "clientSecret", "idToken", "idTokenFile"]);
// The keys of a .mcp.json tls block, and the TlsConfig fields they fill.
export const TLS_KEYS: ReadonlyMap<string, "caFile" | "certFile" | "keyFile"> = new Map([
  ["ca", "caFile"],
  ["cert", "certFile"],
  ["key", "keyFile"],
]);

const quote = (s: string): string => JSON.stringify(s);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** What v is, in JSON's words; never v itself, which may be a secret. */
function jsonKind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  switch (typeof v) {
    case "string":
      return "a string";
    case "number":
      return "a number";
    case "boolean":
      return "a boolean";
    case "object":
      return "an object";
    case "undefined":
      return "undefined";
    default:
      return `a ${typeof v}`;
  }
}

/** Whether a value sets anything: not false, nor an empty string, array or object. */
function saysSomething(v: unknown): boolean {
  if (typeof v === "string" || Array.isArray(v)) return v.length > 0;
  if (isObject(v)) return Object.keys(v).length > 0;
  return v !== false;
}

function unknownKeys(o: object, known: ReadonlySet<string>): string {
  return Object.keys(o)
    .filter((k) => !known.has(k))
    .sort()
    .join(", ");
}

/**
 * The typed fields of one .mcp.json entry, or of its oauth block or idp
 * (prefix "oauth.", "oauth.idp."). A field that is null or absent has its
 * type's zero value, as when mcpd decodes it; one of another JSON type is
 * refused, naming the field and the type, never the value.
 */
class McpJsonFields {
  constructor(
    private readonly server: string,
    private readonly o: Record<string, unknown>,
    private readonly prefix = "",
  ) {}

  error(problem: string): TypeError {
    return new TypeError(`server ${quote(this.server)}: ${problem}`);
  }

  /** The value of key; undefined when absent or null. */
  get(key: string): unknown {
    const v = Object.hasOwn(this.o, key) ? this.o[key] : undefined;
    return v === null ? undefined : v;
  }

  wrong(key: string, v: unknown, want: string): TypeError {
    return this.error(`field ${quote(this.prefix + key)} is ${jsonKind(v)}, want ${want}`);
  }

  string(key: string): string {
    const v = this.get(key);
    if (v === undefined) return "";
    if (typeof v !== "string") throw this.wrong(key, v, "a string");
    return v;
  }

  boolean(key: string): boolean {
    const v = this.get(key);
    if (v === undefined) return false;
    if (typeof v !== "boolean") throw this.wrong(key, v, "true or false");
    return v;
  }

  strings(key: string): string[] {
    const v = this.get(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw this.wrong(key, v, "an array of strings");
    v.forEach((s: unknown, i) => {
      if (typeof s !== "string") throw this.wrong(`${key}[${i}]`, s, "a string");
    });
    return [...(v as string[])];
  }

  stringMap(key: string): Record<string, string> {
    const v = this.get(key);
    if (v === undefined) return {};
    if (!isObject(v)) throw this.wrong(key, v, "an object with string values");
    for (const [k, s] of Object.entries(v)) {
      if (typeof s !== "string") throw this.wrong(`${key}.${k}`, s, "a string");
    }
    return { ...(v as Record<string, string>) };
  }

  object(key: string): Record<string, unknown> | undefined {
    const v = this.get(key);
    if (v !== undefined && !isObject(v)) throw this.wrong(key, v, "an object");
    return v;
  }

  /** A timeout in seconds; undefined when absent or 0 (mcpd's default). */
  seconds(key: string): number | undefined {
    const v = this.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== "number") throw this.wrong(key, v, "a number of seconds");
    const field = quote(this.prefix + key);
    if (!Number.isFinite(v)) throw new RangeError(`server ${quote(this.server)}: field ${field} is not a finite number`);
    if (v < 0) throw new RangeError(`server ${quote(this.server)}: field ${field} is negative`);
    if (v > MAX_TIMEOUT_SECONDS) throw new RangeError(`server ${quote(this.server)}: field ${field} is more than ${MAX_TIMEOUT_SECONDS} seconds`);
    return v === 0 ? undefined : v;
  }
}

/**
 * The oauth block of server's entry, in the file's camelCase, with the
 * types mcpd reads (null counts as absent); unknown keys are refused.
 */
function oauthFromMcpJson(server: string, o: Record<string, unknown>): MessageInitShape<typeof pb.OAuthConfigSchema> {
  const f = new McpJsonFields(server, o, "oauth.");
  const unknown = unknownKeys(o, OAUTH_KEYS);
  if (unknown) throw f.error(`unknown oauth keys: ${unknown}`);
  const idp = f.object("idp");
  const unknownIdp = idp === undefined ? "" : unknownKeys(idp, IDP_KEYS);
  if (unknownIdp) throw f.error(`unknown oauth.idp keys: ${unknownIdp}`);
  const i = idp === undefined ? undefined : new McpJsonFields(server, idp, "oauth.idp.");
  return {
    clientId: f.string("clientId"),
    clientSecret: f.string("clientSecret"),
    clientMetadataUrl: f.string("clientMetadataUrl"),
    scopes: f.strings("scopes"),
    tokenEndpointAuthMethod: f.string("tokenEndpointAuthMethod"),
    privateKeyFile: f.string("privateKeyFile"),
    signingAlgorithm: f.string("signingAlgorithm"),
    grant: f.string("grant"),
    assertion: f.string("assertion"),
    assertionFile: f.string("assertionFile"),
    dpop: f.boolean("dpop"),
    idp:
      i === undefined
        ? undefined
        : {
            issuer: i.string("issuer"),
            tokenEndpoint: i.string("tokenEndpoint"),
            clientId: i.string("clientId"),
            clientSecret: i.string("clientSecret"),
            idToken: i.string("idToken"),
            idTokenFile: i.string("idTokenFile"),
          },
  };
}

/**
 * The tls block of server's entry (`ca`, `cert`, `key`: strings; null
 * counts as absent); unknown keys are refused, and so is a block that
 * names no file, as mcpd refuses it.
 */
function tlsFromMcpJson(server: string, o: Record<string, unknown>): TlsConfigInit {
  const f = new McpJsonFields(server, o, "tls.");
  const unknown = unknownKeys(o, new Set(TLS_KEYS.keys()));
  if (unknown) throw f.error(`unknown tls keys: ${unknown}`);
  const out: TlsConfigInit = {};
  for (const [key, field] of TLS_KEYS) {
    const v = f.string(key);
    if (v) out[field] = v;
  }
  if (Object.keys(out).length === 0) throw f.error("tls: the block names no file (want ca, or cert and key, or all three)");
  return out;
}

function duration(ms: number | undefined): MessageInitShape<typeof import("@bufbuild/protobuf/wkt").DurationSchema> | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a timeout must be a finite number of milliseconds, not negative: got ${ms}`);
  let seconds = Math.floor(ms / 1000);
  let nanos = Math.round((ms - seconds * 1000) * 1e6);
  if (nanos >= 1e9) {
    // Just under a whole second rounds up to it: a Duration's nanos stay below 1e9.
    seconds += 1;
    nanos -= 1e9;
  }
  return { seconds: BigInt(seconds), nanos };
}

export { duration as durationFromMs };

/**
 * values, an array of strings; a lone string is refused, since the wire
 * would send its characters: toolsDeny: "rm" would deny "r" and "m".
 */
function strings(what: string, values: string[] | undefined): string[] | undefined {
  if (values === undefined) return undefined;
  if (typeof values === "string") throw new TypeError(`${what}: want an array of strings, not one string (wrap it in an array)`);
  if (!Array.isArray(values) || values.some((v) => typeof v !== "string")) throw new TypeError(`${what}: want an array of strings`);
  return values;
}

function common(name: string, o: ServerOptions): ServerConfigInit {
  const c: ServerConfigInit = { name };
  const call = duration(o.callTimeoutMs);
  const connect = duration(o.connectTimeoutMs);
  if (call) c.callTimeout = call;
  if (connect) c.connectTimeout = connect;
  if (o.protocolVersion) c.protocolVersion = o.protocolVersion;
  const allow = strings("toolsAllow", o.toolsAllow);
  const deny = strings("toolsDeny", o.toolsDeny);
  const ask = strings("toolsAsk", o.toolsAsk);
  if (allow?.length) c.toolsAllow = allow;
  if (deny?.length) c.toolsDeny = deny;
  if (ask?.length) c.toolsAsk = ask;
  if (o.oauth) c.oauth = o.oauth;
  if (o.strictCapabilities) c.strictCapabilities = true;
  if (o.trace) c.trace = true;
  return c;
}

function remoteValue(url: string, opts: RemoteOptions): MessageInitShape<typeof pb.HttpConfigSchema> {
  const v: MessageInitShape<typeof pb.HttpConfigSchema> = { url, headers: opts.headers ?? {} };
  if (opts.tls) v.tls = opts.tls;
  return v;
}

/** Builders of server configurations, like the Python client's `ServerConfig`. */
export const ServerConfig = {
  /** A server run as a child process speaking MCP on stdin and stdout. */
  stdio(
    name: string,
    command: string,
    args: string[] = [],
    opts: ServerOptions & { env?: Record<string, string> | undefined; cwd?: string | undefined } = {},
  ): ServerConfigInit {
    return {
      ...common(name, opts),
      transport: { case: "stdio", value: { command, args: strings("args", args) ?? [], env: opts.env ?? {}, cwd: opts.cwd ?? "" } },
    };
  },
  /** A server at a Streamable HTTP endpoint; `tls` names a private CA and client certificate. */
  http(name: string, url: string, opts: RemoteOptions = {}): ServerConfigInit {
    return { ...common(name, opts), transport: { case: "http", value: remoteValue(url, opts) } };
  },
  /** A server at a legacy HTTP+SSE endpoint. */
  sse(name: string, url: string, opts: RemoteOptions = {}): ServerConfigInit {
    return { ...common(name, opts), transport: { case: "sse", value: remoteValue(url, opts) } };
  },
  /** A remote server: Streamable HTTP, falling back to HTTP+SSE. */
  remote(name: string, url: string, opts: RemoteOptions = {}): ServerConfigInit {
    return { ...common(name, opts), transport: { case: "remote", value: remoteValue(url, opts) } };
  },
  /**
   * One entry of a `.mcp.json` `mcpServers` (or `servers`) map, read as
   * mcpd's config file reader reads it, for `connectServer`. The entry is
   * parsed JSON: its types are checked here, whatever TypeScript says.
   *
   * Read, with the daemon's names and spellings:
   *
   * - `type`: `stdio`; `http` (also `streamable-http`, `streamable_http`,
   *   `streamableHttp`); `sse`; `auto`; in any case. Without one, an entry
   *   with a `url` is `auto` (its transport is detected when mcpd connects:
   *   Streamable HTTP, then legacy SSE; `ServerConfig.remote`), one with a
   *   `command` is stdio, and one with both is refused.
   * - stdio: `command`, `args`, `env`, `cwd`.
   * - `http`, `sse`, `auto`: `url` (`serverUrl` when `url` is empty),
   *   `headers`, `oauth` (camelCase keys: `clientId`, `clientSecret`,
   *   `tokenEndpointAuthMethod`, ..., and an `idp` object; the keys mcpd
   *   reads there, with its types; any other is refused), `tls` (`ca`,
   *   `cert`, `key`: the `tls` option).
   * - `timeout` (`callTimeoutMs`) and `connectTimeout` (`connectTimeoutMs`),
   *   in seconds as in the file, 0 meaning the daemon's default;
   *   `protocolVersion`, `toolsAllow`, `toolsDeny` (and `disabledTools`,
   *   as Windsurf, Roo Code and Kiro write it, which adds to it),
   *   `toolsAsk`, `strictCapabilities`, `trace`.
   *
   * `${VAR}` is not expanded here: mcpd expands it only in files, and uses
   * `ConnectServer`'s values as given, so expand what you need before.
   *
   * Refused with a TypeError that names the key, since `ConnectServer` has
   * no field for it and dropping it would leave the server less guarded, or
   * otherwise, than the entry says: unless empty, `permissions`,
   * `alwaysAllow`, `autoApprove` and `traceRedact`. `"disabled": true` is refused too: a server cannot be
   * connected disabled, and connecting it would start what the entry parks
   * (leave such an entry out).
   *
   * Refused as mcpd refuses them: a value of the wrong JSON type (a string
   * where an array is expected, ...: TypeError), a field of the other
   * transport (`headers` on a stdio server, ...: TypeError) and a timeout
   * that is negative, not finite or over a year (RangeError). A key mcpd
   * does not know (`envFile`; `ToolsDeny`, as keys are read as spelled; a
   * misspelt `toolDeny`) is refused too: mcpd ignores one with a warning in
   * the server's status, which here would reach no one. An `sdk` entry is
   * refused: an agent serves it (`Client.serveTools`). Ignored as by mcpd:
   * `name` (an agent SDK's; the entry's key names the server). A known key
   * whose value is `null` counts as absent. Messages name keys and JSON
   * types, never values, which may be secrets.
   *
   * `opts` (`callTimeoutMs`, `toolsDeny`, ...) add to the entry; one the
   * entry sets too is refused rather than replace it, and one that is not
   * an option of an entry's keys (`oauth`: it is the entry's) is a
   * TypeError.
   */
  fromMcpJson(name: string, entry: McpJsonEntry, opts: McpJsonOptions = {}): ServerConfigInit {
    if (!isObject(entry)) throw new TypeError(`server ${quote(name)}: entry is ${jsonKind(entry)}, want an object`);
    const e = new McpJsonFields(name, entry);
    const unknown = Object.keys(entry)
      .filter((k) => !MCP_JSON_READ.has(k) && !MCP_JSON_REFUSED.has(k) && !MCP_JSON_IGNORED.has(k))
      .sort();
    if (unknown.length > 0) {
      throw e.error(
        `not understood by mcpd: ${unknown.map(quote).join(", ")} (mcpd's config file reader ignores such fields with ` +
          "a warning; refused here so that a misspelt setting is not lost without a word)",
      );
    }
    for (const [key, why] of MCP_JSON_REFUSED) {
      if (key === "disabled") {
        if (e.boolean(key)) {
          throw e.error(
            'the entry is "disabled": true, and ConnectServer cannot add a server disabled: connecting it would start ' +
              `what the entry parks. Leave the entry out, or remove "disabled" and call setServerEnabled(${quote(name)}, false) ` +
              "after connecting (which starts it first)",
          );
        }
        continue;
      }
      const v = e.get(key);
      if (v !== undefined && saysSomething(v)) {
        throw e.error(`${quote(key)} cannot be sent with ConnectServer, which has no field for it (${why}): connect this server from a config file`);
      }
    }
    const serverUrl = e.string("serverUrl");
    const url = e.string("url") || serverUrl;
    const [command, args, env, cwd] = [e.string("command"), e.strings("args"), e.stringMap("env"), e.string("cwd")];
    const headers = e.stringMap("headers");
    const kind = e.string("type");
    let transport: "stdio" | "http" | "sse" | "remote";
    if (kind) {
      const t = MCP_JSON_TYPES.get(kind.toLowerCase());
      if (t === undefined) {
        if (["sdk", "agent"].includes(kind.toLowerCase())) throw e.error("an sdk server is not connected but served by an agent: Client.serveTools");
        throw e.error(`unknown type ${quote(kind)} (want stdio, http, sse, auto, streamable-http or sdk)`);
      }
      transport = t;
    } else if (url && command) {
      throw e.error('entry has both command and url; set "type" or remove one');
    } else if (url) {
      transport = "remote";
    } else if (command) {
      transport = "stdio";
    } else {
      throw e.error("entry needs a command (stdio) or a url (http, sse)");
    }
    const oauth = e.object("oauth");
    const tls = e.object("tls");

    const unknownOptions = Object.keys(opts)
      .filter((k) => !OPTION_NAMES.has(k))
      .sort();
    if (unknownOptions.length > 0) throw new TypeError(`unknown server options: ${unknownOptions.join(", ")}`);
    for (const [key, option] of MCP_JSON_OPTIONS) {
      if (e.get(key) !== undefined && opts[option] !== undefined) throw e.error(`${quote(key)} is in the entry and the option ${option} is given too: give it once`);
    }
    const ms = (key: string): number | undefined => {
      const s = e.seconds(key);
      return s === undefined ? undefined : s * 1000;
    };
    const options: McpJsonOptions = {
      callTimeoutMs: ms("timeout"),
      connectTimeoutMs: ms("connectTimeout"),
      protocolVersion: e.string("protocolVersion"),
      toolsAllow: e.strings("toolsAllow"),
      // Windsurf's, Roo Code's and Kiro's disabledTools: more toolsDeny.
      toolsDeny: [...e.strings("toolsDeny"), ...e.strings("disabledTools")],
      toolsAsk: e.strings("toolsAsk"),
      strictCapabilities: e.boolean("strictCapabilities"),
      trace: e.boolean("trace"),
    };
    for (const [k, v] of Object.entries(opts)) if (v !== undefined) Object.assign(options, { [k]: v });

    if (transport === "stdio") {
      if (!command) throw e.error("stdio server needs a command");
      if (url) throw e.error("stdio server takes no url");
      if (Object.keys(headers).length > 0) throw e.error("stdio server takes no headers");
      if (oauth !== undefined) throw e.error("stdio server takes no oauth block (OAuth is for http and sse servers)");
      if (tls !== undefined) throw e.error("stdio server takes no tls block (tls is for http and sse servers)");
      return ServerConfig.stdio(name, command, args, { ...options, env, cwd });
    }
    if (!url) throw e.error("http and sse servers need a url");
    if (command || args.length > 0 || Object.keys(env).length > 0 || cwd) {
      throw e.error(`${transport === "remote" ? "auto" : transport} server takes no command, args, env or cwd`);
    }
    const remote: RemoteOptions = { ...options, headers };
    if (oauth !== undefined) remote.oauth = oauthFromMcpJson(name, oauth);
    if (tls !== undefined) remote.tls = tlsFromMcpJson(name, tls);
    return ServerConfig[transport](name, url, remote);
  },
};

export function serverConfigMessage(c: ServerConfigInit): pb.ServerConfig {
  return create(pb.ServerConfigSchema, c);
}

// -- server requests -------------------------------------------------------

/** A server asks for an LLM completion. */
export interface SamplingRequest {
  kind: "sampling";
  id: string;
  server: string;
  messages: { role: "user" | "assistant" | "unspecified"; content: Content[]; text: string }[];
  systemPrompt: string;
  maxTokens: number;
  /** The full MCP request params (model preferences, temperature, ...). */
  params: JsonObject | undefined;
  deadline: Date | undefined;
  /** The text of the last message (usually the user's question). */
  text: string;
}

/** A server asks the user for input. */
export interface ElicitationRequest {
  kind: "elicitation";
  id: string;
  server: string;
  /** "form" (answer matching requestedSchema) or "url" (open url). */
  mode: string;
  message: string;
  requestedSchema: JsonObject | undefined;
  url: string;
  elicitationId: string;
  /** The full MCP request params (`_meta` among them). */
  params: JsonObject | undefined;
  deadline: Date | undefined;
}

/** A server asks for the client's roots. */
export interface RootsRequest {
  kind: "roots";
  id: string;
  server: string;
  deadline: Date | undefined;
}

/** A server needs a person's OAuth consent at `authorizationUrl`. */
export interface AuthorizationRequest {
  kind: "authorization";
  id: string;
  server: string;
  authorizationUrl: string;
  expireTime: Date | undefined;
  deadline: Date | undefined;
}

/**
 * mcpd asks whether a tool call that an "ask" tool rule holds may run:
 * `tool` is the qualified name, `server` its server, `rule` the rule that
 * asked, `caller` who made the call.
 */
export interface ApprovalRequest {
  kind: "approval";
  id: string;
  server: string;
  tool: string;
  /** The call's arguments ({} when it has none). */
  arguments: JsonObject;
  /** The tool's annotations (readOnlyHint, destructiveHint, ...); {} when the server gives none. */
  annotations: JsonObject;
  rule: string;
  caller: string;
  deadline: Date | undefined;
  /**
   * Set (ms) when the approval is for a poll of the tool (startPoll):
   * approved, mcpd calls it with `arguments` that often until the poll
   * stops, without asking again.
   */
  pollIntervalMs: number | undefined;
}

export type ServerRequest = SamplingRequest | ElicitationRequest | RootsRequest | AuthorizationRequest | ApprovalRequest;

/** The answer to a sampling request; a handler may also return a string. */
export interface SamplingResult {
  /** One text, image or audio block (or a list of one), as an MCP sampling result holds: the client refuses anything else with a TypeError. */
  content: string | Content | Content[];
  model?: string | undefined;
  /** Default "endTurn". */
  stopReason?: string | undefined;
  /** Default "assistant". */
  role?: "assistant" | "user" | undefined;
}

/**
 * The answer to an elicitation request. A handler may also return a plain
 * object (accept with that content) or undefined/null (decline).
 */
export interface ElicitationResult {
  action: "accept" | "decline" | "cancel";
  content?: JsonObject | undefined;
}

/**
 * The answer to an approval request: `approved` (default false) lets the
 * call run; a denial's `reason` reaches the caller in its PermissionDenied.
 * A handler may also return a boolean.
 */
export interface ApprovalResult {
  approved?: boolean | undefined;
  reason?: string | undefined;
}

/** A root: a URI string (or an absolute local path), or one with a name. */
export type RootLike = string | { uri: string; name?: string | undefined };

export function rootsToProto(roots: readonly RootLike[]): pb.Root[] {
  return roots.map((r) =>
    create(pb.RootSchema, typeof r === "string" ? { uri: rootURI(r) } : { uri: rootURI(r.uri), name: r.name ?? "" }),
  );
}

/**
 * uri, or, for an absolute local path, its file:// URI: MCP's roots are
 * file:// URIs, which mcpd checks.
 */
export function rootURI(uri: string): string {
  return !uri.includes("://") && isAbsolute(uri) ? pathToFileURL(uri).href : uri;
}

function roleName(r: pb.Role): "user" | "assistant" | "unspecified" {
  return enumName(pb.Role, r) as "user" | "assistant" | "unspecified";
}

export function toServerRequest(r: pb.ServerRequest): ServerRequest | undefined {
  const base = { id: r.id, server: r.server, deadline: date(r.deadline) };
  switch (r.kind.case) {
    case "sampling": {
      const s = r.kind.value;
      const messages = s.messages.map((m) => ({ role: roleName(m.role), content: m.content, text: contentText(m.content) }));
      return {
        ...base,
        kind: "sampling",
        messages,
        systemPrompt: s.systemPrompt,
        maxTokens: s.maxTokens,
        params: s.params,
        text: messages.length ? messages[messages.length - 1]!.text : "",
      };
    }
    case "elicitation": {
      const e = r.kind.value;
      return {
        ...base,
        kind: "elicitation",
        mode: e.mode,
        message: e.message,
        requestedSchema: e.requestedSchema,
        url: e.url,
        elicitationId: e.elicitationId,
        params: e.params,
      };
    }
    case "roots":
      return { ...base, kind: "roots" };
    case "authorization":
      return {
        ...base,
        kind: "authorization",
        authorizationUrl: r.kind.value.authorizationUrl,
        expireTime: date(r.kind.value.expireTime),
      };
    case "approval": {
      const a = r.kind.value;
      return {
        ...base,
        kind: "approval",
        tool: a.tool,
        arguments: a.arguments ?? {},
        annotations: a.annotations ?? {},
        rule: a.rule,
        caller: a.caller,
        pollIntervalMs: ms(a.pollInterval),
      };
    }
    default:
      return undefined;
  }
}

function contentToProto(c: string | Content): Content {
  return typeof c === "string" ? create(pb.ContentSchema, { kind: { case: "text", value: { text: c } } }) : c;
}

/** JSON-RPC error codes of the replies a client makes on its own. */
export const METHOD_NOT_FOUND = -32601;
export const INTERNAL_ERROR = -32603;

export function errorReply(id: string, code: number, message: string): pb.ServerRequestReply {
  return create(pb.ServerRequestReplySchema, { id, result: { case: "error", value: { code, message } } });
}

export function replyFor(req: ServerRequest, result: unknown): pb.ServerRequestReply {
  const id = req.id;
  switch (req.kind) {
    case "sampling": {
      const r: SamplingResult = typeof result === "string" ? { content: result } : (result as SamplingResult);
      if (r === null || typeof r !== "object" || r.content === undefined) {
        throw new TypeError("a sampling handler must return a SamplingResult or a string");
      }
      const blocks: (string | Content)[] = Array.isArray(r.content) ? r.content : [r.content];
      // What mcpd refuses, refused here: the handler's developer sees it in
      // the handler's failure, not in a refusal later.
      if (blocks.length !== 1) {
        throw new TypeError(`a sampling result holds one text, image or audio block, not ${blocks.length === 0 ? "no content" : `${blocks.length} content blocks`}`);
      }
      const block = blocks[0];
      const blockKind = typeof block === "string" ? "text" : (block as Content | null | undefined)?.kind?.case;
      if (blockKind !== "text" && blockKind !== "image" && blockKind !== "audio") {
        throw new TypeError(`a sampling result holds a text, image or audio block, not ${blockKind ?? typeof block}`);
      }
      return create(pb.ServerRequestReplySchema, {
        id,
        result: {
          case: "sampling",
          value: {
            role: r.role === "user" ? pb.Role.USER : pb.Role.ASSISTANT,
            content: blocks.map(contentToProto),
            model: r.model ?? "",
            stopReason: r.stopReason ?? "endTurn",
          },
        },
      });
    }
    case "elicitation": {
      let r: ElicitationResult;
      if (result === undefined || result === null) r = { action: "decline" };
      else if (typeof result === "object" && "action" in result && typeof (result as ElicitationResult).action === "string") {
        r = result as ElicitationResult;
      } else if (typeof result === "object" && !Array.isArray(result)) r = { action: "accept", content: result as JsonObject };
      else throw new TypeError("an elicitation handler must return an ElicitationResult, an object or undefined");
      const action = enumValue<pb.ElicitationAction>(
        pb.ElicitationAction as unknown as Record<string, number>,
        r.action,
        "elicitation action",
      );
      return create(pb.ServerRequestReplySchema, {
        id,
        result: { case: "elicitation", value: r.content === undefined ? { action } : { action, content: r.content } },
      });
    }
    case "roots":
      return create(pb.ServerRequestReplySchema, {
        id,
        result: { case: "roots", value: { roots: rootsToProto((result ?? []) as RootLike[]) } },
      });
    case "authorization": {
      const url = result === undefined || result === null ? "" : typeof result === "string" ? result : (result as { redirectUrl?: string | undefined }).redirectUrl ?? "";
      return create(pb.ServerRequestReplySchema, { id, result: { case: "authorization", value: { redirectUrl: url } } });
    }
    case "approval": {
      const r = typeof result === "boolean" ? { approved: result } : (result as ApprovalResult);
      if (
        r === null ||
        typeof r !== "object" ||
        Array.isArray(r) ||
        (r.approved !== undefined && typeof r.approved !== "boolean") ||
        (r.reason !== undefined && typeof r.reason !== "string")
      ) {
        throw new TypeError("an approval handler must return an ApprovalResult or a boolean");
      }
      return create(pb.ServerRequestReplySchema, { id, result: { case: "approval", value: { approved: r.approved ?? false, reason: r.reason ?? "" } } });
    }
  }
}
