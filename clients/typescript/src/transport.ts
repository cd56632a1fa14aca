/**
 * Targets, wires and TLS: how the client reaches mcpd.
 *
 * A target is `host:port`, `unix:///path/to/mcpd.sock` (or `unix:/path`), or
 * an `http://` / `https://` URL. The wire is how the RPCs travel:
 *
 * - "connect" (the default): the Connect protocol over HTTP/1.1
 *   (keep-alive), for `--http-listen`;
 * - "grpc": gRPC over HTTP/2, for mcpd's `--listen` address;
 * - "connect-h2": the Connect protocol over HTTP/2 (h2c without TLS), for
 *   `--http-listen`.
 */

import * as fs from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import * as tls from "node:tls";
import type * as stream from "node:stream";
import type { DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createAsyncIterable, validateReadWriteMaxBytes, type UniversalClientFn, type UniversalClientResponse } from "@connectrpc/connect/protocol";
import { createTransport } from "@connectrpc/connect/protocol-connect";
import {
  compressionBrotli,
  compressionGzip,
  createConnectTransport,
  createGrpcTransport,
  createNodeHttpClient,
  Http2SessionManager,
  type Http2SessionOptions,
} from "@connectrpc/connect-node";

/** mcpd's default listen address. */
export const DEFAULT_TARGET = "127.0.0.1:50051";
export const ENV_ADDRESS = "MCPD_ADDRESS";
export const ENV_TOKEN = "MCPD_API_TOKEN";
export const ENV_WIRE = "MCPD_WIRE";

/** How the RPCs travel; see the module doc. */
export type Wire = "grpc" | "connect" | "connect-h2";
export const WIRES: readonly Wire[] = ["grpc", "connect", "connect-h2"];
/**
 * The wire used when none is given: Connect over HTTP/1.1, the fastest from
 * Node in `make bench-typescript` (docs/performance.md#typescript). It
 * needs mcpd's --http-listen address; "grpc" speaks to --listen.
 */
export const DEFAULT_WIRE: Wire = "connect";

/** Accept large resources and images (the Python client's limit too). */
const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/**
 * How long a keep-alive socket of the "connect" wire may sit idle before
 * the client closes it: well below mcpd's 2 minutes (httpIdleTimeout), so
 * that a call never goes out on a socket mcpd is closing.
 */
export const IDLE_SOCKET_TIMEOUT_MS = 60_000;

/**
 * How long a connection may carry nothing before the client checks that
 * mcpd is still there (HTTP/2 PING on "grpc" and "connect-h2", and on the
 * HTTP/2 streams "connect" uses for HandleServerRequests and ServeTools;
 * TCP keep-alive probes on the HTTP/1.1 sockets of "connect"). Half a
 * minute: six times what mcpd permits, and with the PING timeout a quiet
 * stream to a frozen mcpd still fails within a minute.
 */
export const DEFAULT_KEEPALIVE_MS = 30_000;
/**
 * How often mcpd lets a client ping (its clientPingMinInterval): a client
 * that pings more often gets its connection closed (GOAWAY too_many_pings).
 */
export const MIN_KEEPALIVE_MS = 5_000;
/**
 * How long an HTTP/2 PING may go unanswered before the connection, and every
 * call and stream on it, fails with Unavailable. gRPC's own default: long
 * enough for a busy machine or a slow link, short against a frozen mcpd.
 */
export const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20_000;

/**
 * connect-node's session manager, guarded against connectrpc/connect-es#1768:
 * a GOAWAY on an idle session makes it destroy the session with an error
 * that Node raises only once the socket has closed; a call made meanwhile
 * moves the manager on and removes its "error" listeners, and the error then
 * crashes the process. A listener of our own on every session swallows it
 * (the manager's own listeners still see every error while they are there).
 */
class GuardedSessionManager extends Http2SessionManager {
  private readonly guarded = new WeakSet<object>();

  override async request(...args: Parameters<Http2SessionManager["request"]>): Promise<import("node:http2").ClientHttp2Stream> {
    const stream = await super.request(...args);
    const session = stream.session;
    if (session !== undefined && !this.guarded.has(session)) {
      this.guarded.add(session);
      session.on("error", () => undefined);
    }
    return stream;
  }
}

/** One send of a unary call on the "connect" wire, as its agent saw it. */
interface Send {
  /** It went out on a keep-alive socket that an earlier request used. */
  reused: boolean;
  /** A byte came on that socket after the request got it: mcpd began to answer. */
  answered: boolean;
}

/**
 * What the "connect" wire adds to Node's keep-alive agent: it tells the
 * send being started whether its request got a reused socket and whether a
 * byte of the answer came, and it can start a request on a new connection.
 */
interface ResendAgent extends http.Agent {
  /**
   * The send whose request is being created. The agent takes it at once:
   * connect-node's HTTP/1.1 client calls http.request before it returns,
   * and http.request picks a free socket before it does. (Were that to
   * change, no send would be seen as reused, and none sent again.)
   */
  starting: Send | undefined;
  /** Runs `start` with the idle sockets hidden, so that its request gets a new connection. */
  withoutIdleSockets<T>(start: () => T): T;
}

/** Errors of a socket the peer closed or reset, as Node names them. */
const CLOSED_SOCKET = new Set(["ECONNRESET", "EPIPE"]);

function socketClosed(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CLOSED_SOCKET.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

function resendAgent(secure: boolean, options: https.AgentOptions): ResendAgent {
  const Base = secure ? https.Agent : http.Agent;
  class Agent extends Base implements ResendAgent {
    starting: Send | undefined;

    override reuseSocket(socket: stream.Duplex, request: http.ClientRequest): void {
      super.reuseSocket(socket, request);
      const send = this.starting;
      this.starting = undefined;
      if (send === undefined) return;
      send.reused = true;
      // Node reads the answer from the socket's "data" events while the
      // request has it (its own listener is on before "socket" is emitted,
      // and the request goes out after): one more listener sees whether a
      // byte came, and goes with the first byte or the request.
      let done = false;
      const onData = (): void => {
        send.answered = true;
        socket.off("data", onData);
      };
      request.once("socket", () => {
        if (!done) socket.on("data", onData);
      });
      request.once("close", () => {
        done = true;
        socket.off("data", onData);
      });
    }

    withoutIdleSockets<T>(start: () => T): T {
      // addRequest takes a socket from freeSockets, or creates one, before
      // it returns, and puts nothing in freeSockets meanwhile.
      const agent = this as { freeSockets: http.Agent["freeSockets"] };
      const idle = agent.freeSockets;
      agent.freeSockets = Object.create(null) as http.Agent["freeSockets"];
      try {
        return start();
      } finally {
        agent.freeSockets = idle;
      }
    }
  }
  return new Agent(options);
}

/**
 * The HTTP/1.1 client of the "connect" wire's unary calls that are safe to
 * repeat (see {@link safeToResend}). A keep-alive socket that mcpd (or a
 * proxy) closes just as a request goes out on it fails the request with
 * ECONNRESET or EPIPE although mcpd never read it (Node's docs,
 * `request.reusedSocket`). A call whose request went out on a reused socket
 * and failed so before a byte of the answer came is sent once more, on a
 * new connection, with the same signal (its deadline and abort); once a
 * byte came, it fails. Streams do not come here: a stream is never sent
 * again.
 */
function resendOnReusedSocket(client: UniversalClientFn, agent: ResendAgent): UniversalClientFn {
  return async (req) => {
    // A unary request is one message, sent again as it was.
    let chunks: Uint8Array[] | undefined;
    if (req.body !== undefined) {
      chunks = [];
      for await (const chunk of req.body) chunks.push(chunk);
    }
    const start = (): Promise<UniversalClientResponse> => client(chunks === undefined ? req : { ...req, body: createAsyncIterable(chunks) });
    const send: Send = { reused: false, answered: false };
    agent.starting = send;
    let first: Promise<UniversalClientResponse>;
    try {
      first = start();
    } finally {
      agent.starting = undefined;
    }
    try {
      return await first;
    } catch (e) {
      if (!send.reused || send.answered || req.signal?.aborted || !socketClosed(e)) throw e;
    }
    // The idle sockets sat idle at least as long as the one that was closed
    // (the agent reuses the most recently used first): a new one.
    return agent.withoutIdleSockets(start);
  };
}

/**
 * Whether a failed call of method may be sent again: only a method the
 * proto declares free of side effects or idempotent. No byte of an answer
 * does not prove that mcpd never read a request: mcpd answers a unary call
 * only when it ends, so a tool call it ran and then cut off (a shutdown
 * past its drain) looks the same, and sending it again, to another mcpd
 * behind the same address, would run the tool twice.
 */
export function safeToResend(method: DescMethod): boolean {
  return (
    method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS ||
    method.idempotency === MethodOptions_IdempotencyLevel.IDEMPOTENT
  );
}

/** PEM data, or the path of a PEM file. */
export type PemSource = string | Buffer | { file: string };

export interface TlsOptions {
  /** The CA that signed mcpd's certificate (default: the system roots). */
  ca?: PemSource | undefined;
  /** A client certificate for mutual TLS; goes with `key`. */
  cert?: PemSource | undefined;
  key?: PemSource | undefined;
  /** Files instead of data, as the Python client names them. */
  caFile?: string | undefined;
  certFile?: string | undefined;
  keyFile?: string | undefined;
}

interface ParsedTarget {
  /** The URL the requests go to (for a Unix socket, an http://localhost URL). */
  baseUrl: string;
  socketPath: string | undefined;
}

/** The target argument, else $MCPD_ADDRESS, else 127.0.0.1:50051, checked (see {@link checkTarget}). */
export function resolveTarget(target: string | undefined): string {
  if (target) return checkTarget(target, "target");
  const env = process.env[ENV_ADDRESS];
  if (env) return checkTarget(env, `$${ENV_ADDRESS}`);
  return DEFAULT_TARGET;
}

const TARGET_FORMS = "want host:port (mcpd's gRPC listener is 127.0.0.1:50051 by default), unix:///path.sock or an http(s):// URL";

/**
 * The target, or a TypeError that says what is wrong with it where a call
 * would fail obscurely later (an invalid URL) or dial what nobody meant:
 * white space, a host:port without its port (port 80 or 443), a scheme
 * this client does not speak. A host:port's trailing slashes, left from a
 * URL, are dropped. clients/testdata/targets.json holds the cases, shared
 * with the Python client.
 */
export function checkTarget(target: string, source: string): string {
  const what = `${source} ${JSON.stringify(target)}`;
  if (/\s/.test(target)) throw new TypeError(`${what} has white space`);
  if (target.startsWith("unix:")) {
    if (target.slice("unix:".length).replace(/^\/+/, "") === "") throw new TypeError(`${what} has no socket path`);
    return target;
  }
  if (/^https?:\/\//.test(target)) {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new TypeError(`${what} is no valid URL`);
    }
    if (!url.hostname) throw new TypeError(`${what} has no host`);
    return target;
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target) || /^(dns|ipv4|ipv6|unix-abstract|vsock):/.test(target)) {
    throw new TypeError(`${what} has a scheme this client does not speak; ${TARGET_FORMS}`);
  }
  const hostport = target.replace(/\/+$/, "");
  if (hostport.includes("/")) throw new TypeError(`${what}: a host:port target has no path; ${TARGET_FORMS}`);
  let host: string;
  let port: string;
  if (hostport.startsWith("[")) {
    const close = hostport.indexOf("]");
    const after = close < 0 ? "" : hostport.slice(close + 1);
    if (close < 0 || (after !== "" && !after.startsWith(":"))) throw new TypeError(`${what} is no host:port; ${TARGET_FORMS}`);
    host = hostport.slice(1, close);
    port = after.slice(1);
  } else {
    const colon = hostport.lastIndexOf(":");
    host = colon < 0 ? hostport : hostport.slice(0, colon);
    port = colon < 0 ? "" : hostport.slice(colon + 1);
    if (host.includes(":")) throw new TypeError(`${what}: an IPv6 address goes in brackets, as in [::1]:50051`);
  }
  if (port === "") throw new TypeError(`${what} has no port; ${TARGET_FORMS}`);
  if (host === "") throw new TypeError(`${what} has no host; ${TARGET_FORMS}`);
  if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535) throw new TypeError(`${what} has no valid port (1 to 65535)`);
  return hostport;
}

/** The wire argument, else $MCPD_WIRE, else the default. */
export function resolveWire(wire: Wire | undefined, defaultTarget = false): Wire {
  // The default target is mcpd's default gRPC listener, which speaks gRPC
  // only: with no target given, no wire given means "grpc".
  const w = wire ?? (process.env[ENV_WIRE] as Wire | undefined) ?? (defaultTarget ? "grpc" : DEFAULT_WIRE);
  if (!WIRES.includes(w)) throw new TypeError(`wire must be one of ${WIRES.join(", ")}, got ${JSON.stringify(w)}`);
  return w;
}

/** The keep-alive interval in ms (0: off) from the client's `keepaliveMs`; see {@link DEFAULT_KEEPALIVE_MS}. */
export function resolveKeepalive(keepaliveMs: number | false | undefined): number {
  if (keepaliveMs === undefined) return DEFAULT_KEEPALIVE_MS;
  if (keepaliveMs === false || keepaliveMs === 0) return 0;
  if (typeof keepaliveMs !== "number" || !Number.isFinite(keepaliveMs) || keepaliveMs < MIN_KEEPALIVE_MS) {
    throw new TypeError(
      `keepaliveMs must be at least ${MIN_KEEPALIVE_MS} (mcpd closes the connection of a client that pings more often than every 5 s), or 0 or false for no keep-alive; got ${String(keepaliveMs)}`,
    );
  }
  return keepaliveMs;
}

/** How long a PING may go unanswered (ms), from the client's `keepaliveTimeoutMs`. */
export function resolveKeepaliveTimeout(timeoutMs: number | undefined): number {
  if (timeoutMs === undefined) return DEFAULT_KEEPALIVE_TIMEOUT_MS;
  if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError(`keepaliveTimeoutMs must be a positive number of ms; got ${String(timeoutMs)}`);
  }
  return timeoutMs;
}

/** The bearer token: the argument, else $MCPD_API_TOKEN; "" for none. */
export function resolveToken(token: string | undefined): string {
  const t = (token ?? process.env[ENV_TOKEN] ?? "").trim();
  // Header values are printable ASCII; anything else would fail later with
  // the token in the error text.
  if (/[^\x20-\x7e]/.test(t)) throw new TypeError("the API token has a character that is not printable ASCII (0x20-0x7E)");
  return t;
}

export function parseTarget(target: string, secure: boolean): ParsedTarget {
  const scheme = secure ? "https" : "http";
  if (target.startsWith("unix:")) {
    let path = target.slice("unix:".length);
    if (path.startsWith("//")) path = path.slice(2);
    if (!path) throw new TypeError(`no socket path in target ${JSON.stringify(target)}`);
    return { baseUrl: `${scheme}://localhost`, socketPath: path };
  }
  if (/^https?:\/\//.test(target)) return { baseUrl: target.replace(/\/+$/, ""), socketPath: undefined };
  return { baseUrl: `${scheme}://${target}`, socketPath: undefined };
}

function pem(src: PemSource | undefined, file: string | undefined): Buffer | string | undefined {
  if (file !== undefined) return fs.readFileSync(file);
  if (src === undefined) return undefined;
  if (typeof src === "object" && !Buffer.isBuffer(src)) return fs.readFileSync(src.file);
  return src;
}

/** The TLS material, or undefined for plaintext. */
export function tlsMaterial(o: TlsOptions): { ca?: Buffer | string | undefined; cert?: Buffer | string | undefined; key?: Buffer | string | undefined } | undefined {
  const ca = pem(o.ca, o.caFile);
  const cert = pem(o.cert, o.certFile);
  const key = pem(o.key, o.keyFile);
  if (ca === undefined && cert === undefined && key === undefined) return undefined;
  if ((cert === undefined) !== (key === undefined)) {
    throw new TypeError("cert and key go together (a client certificate and its key)");
  }
  const out: { ca?: Buffer | string | undefined; cert?: Buffer | string | undefined; key?: Buffer | string | undefined } = {};
  if (ca !== undefined) out.ca = ca;
  if (cert !== undefined) out.cert = cert;
  if (key !== undefined) out.key = key;
  return out;
}

/** A transport and what closing the client must release. */
export interface OpenTransport {
  transport: Transport;
  /** The transport for the bidirectional HandleServerRequests stream. */
  bidi: () => Transport;
  close(): void;
}

export interface TransportOptions {
  target: string;
  wire: Wire;
  token: string;
  tls: ReturnType<typeof tlsMaterial>;
  /** Request HTTP/1.1 keep-alive sockets per origin (Connect over HTTP/1.1). */
  maxSockets?: number | undefined;
  /** Close a keep-alive socket idle this long (ms; Connect over HTTP/1.1; default {@link IDLE_SOCKET_TIMEOUT_MS}). */
  idleSocketTimeoutMs?: number | undefined;
  /** Check mcpd after this long without traffic (ms; 0: never; default {@link DEFAULT_KEEPALIVE_MS}); see {@link resolveKeepalive}. */
  keepaliveMs?: number | undefined;
  /** How long an HTTP/2 PING may go unanswered (ms; default {@link DEFAULT_KEEPALIVE_TIMEOUT_MS}). */
  keepaliveTimeoutMs?: number | undefined;
}

export function openTransport(o: TransportOptions): OpenTransport {
  // https:// needs no TLS material (the system roots then); TLS material
  // makes a host:port or unix: target TLS.
  if (o.tls !== undefined && o.target.startsWith("http://")) {
    throw new TypeError("ca, cert and key need an https:// target (or a host:port or unix: one)");
  }
  const secure = o.tls !== undefined || o.target.startsWith("https://");
  const { baseUrl, socketPath } = parseTarget(o.target, secure);
  const interceptors: Interceptor[] = [];
  if (o.token) {
    const value = `Bearer ${o.token}`;
    interceptors.push((next) => (req) => {
      req.header.set("authorization", value);
      return next(req);
    });
  }
  const common = { baseUrl, interceptors, readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES };
  const keepaliveMs = o.keepaliveMs ?? DEFAULT_KEEPALIVE_MS;
  // connect-node pings a connection with calls or streams open once it has
  // read nothing from mcpd for pingIntervalMs; a PING unanswered for
  // pingTimeoutMs destroys the connection, and its calls and streams fail
  // with Unavailable ("PING timed out"), which a subscription resumes from.
  // An idle connection is not pinged: one idle that long gets a PING before
  // a call uses it, and a new connection if that goes unanswered.
  const pings: Http2SessionOptions =
    keepaliveMs > 0 ? { pingIntervalMs: keepaliveMs, pingTimeoutMs: o.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE_TIMEOUT_MS } : {};
  const sessions: Http2SessionManager[] = [];
  const h2 = (): Http2SessionManager => {
    const options: import("node:http2").SecureClientSessionOptions = { ...(o.tls ?? {}) };
    if (socketPath !== undefined) {
      options.createConnection = () =>
        secure
          ? tls.connect({ path: socketPath, ALPNProtocols: ["h2"], servername: "localhost", ...(o.tls ?? {}) })
          : net.connect(socketPath);
    }
    const m = new GuardedSessionManager(baseUrl, { idleConnectionTimeoutMs: 60_000, ...pings }, options);
    sessions.push(m);
    return m;
  };
  let agent: http.Agent | undefined;
  let transport: Transport;
  if (o.wire === "grpc") {
    transport = createGrpcTransport({ ...common, sessionManager: h2() });
  } else if (o.wire === "connect-h2") {
    transport = createConnectTransport({ ...common, httpVersion: "2", sessionManager: h2() });
  } else {
    // No cap on sockets by default, as Node's own agent: a stream holds its
    // socket for as long as it runs, and capped sockets would make every
    // other call wait behind the streams.
    // The agent's `timeout` closes only sockets in its free list: a quiet
    // stream or a slow call keeps its socket.
    // HTTP/1.1 has no PING. The agent turns on TCP keep-alive on its
    // sockets with keepAliveMsecs as the idle time before the first probe
    // (Node's default: 1 s), and libuv sends up to 10 probes 1 s apart:
    // a connection whose network path died fails about 10 s after the
    // keep-alive interval. It cannot tell a frozen mcpd, whose kernel
    // answers the probes, nor reach a Unix socket.
    const agentOptions = {
      keepAlive: true,
      ...(keepaliveMs > 0 ? { keepAliveMsecs: keepaliveMs } : {}),
      maxSockets: o.maxSockets ?? Infinity,
      timeout: o.idleSocketTimeoutMs ?? IDLE_SOCKET_TIMEOUT_MS,
      ...(o.tls ?? {}),
    };
    const resending = resendAgent(secure, agentOptions);
    agent = resending;
    const nodeOptions: http.RequestOptions = { agent };
    if (socketPath !== undefined) nodeOptions.socketPath = socketPath;
    // createConnectTransport with an HTTP client of our own for unary
    // calls: the same options and defaults (connect-node's
    // validateNodeTransportOptions), and its HTTP/1.1 client underneath.
    const h1 = createNodeHttpClient({ httpVersion: "1.1", nodeOptions });
    const options = {
      ...common,
      httpClient: h1,
      useBinaryFormat: true,
      acceptCompression: [compressionGzip, compressionBrotli],
      sendCompression: null,
      ...validateReadWriteMaxBytes(common.readMaxBytes, common.writeMaxBytes, undefined),
    };
    const resendable = createTransport({ ...options, httpClient: resendOnReusedSocket(h1, resending) });
    const once = createTransport(options);
    transport = {
      unary: (method, ...rest) => (safeToResend(method) ? resendable : once).unary(method, ...rest),
      stream: (...args) => once.stream(...args),
    };
  }
  let bidi: Transport | undefined;
  return {
    transport,
    // HTTP/1.1 cannot carry a bidirectional stream: that one stream goes
    // over HTTP/2 to the same address (h2c without TLS).
    bidi: () => {
      if (o.wire !== "connect") return transport;
      bidi ??= createConnectTransport({ ...common, httpVersion: "2", sessionManager: h2() });
      return bidi;
    },
    close() {
      for (const m of sessions) m.abort();
      agent?.destroy();
    },
  };
}
