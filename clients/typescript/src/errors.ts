/**
 * Errors thrown by the mcpd client.
 *
 * Every failed RPC becomes an {@link MCPDError} subclass chosen by its gRPC
 * status code ({@link NotFound}, {@link InvalidArgument},
 * {@link Unavailable}, ...). The error keeps the code and message and, when
 * an MCP server answered with a JSON-RPC error, the server name and JSON-RPC
 * code that mcpd attaches as `google.rpc.ErrorInfo` (domain `mcpd.v1`,
 * reason `UPSTREAM_JSONRPC_ERROR`).
 *
 * A tool that fails is not an error: its {@link ToolResult} has `isError`.
 */

import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** The ErrorInfo domain mcpd uses. */
export const ERROR_DOMAIN = "mcpd.v1";
/** The ErrorInfo reason of a JSON-RPC error answered by a server. */
export const REASON_UPSTREAM_JSONRPC_ERROR = "UPSTREAM_JSONRPC_ERROR";
/** The ErrorInfo reason of a call to a server that waits for a person's OAuth consent. */
export const REASON_AUTHORIZATION_REQUIRED = "AUTHORIZATION_REQUIRED";
/**
 * The ErrorInfo reason of an `UNAVAILABLE` tool call whose server went away
 * after it may have started the call; metadata `server`, `tool` and
 * `retried`. Such an error is not `retryable`: the tool may have had its
 * effect, so call it again only if that is safe.
 */
export const REASON_CALL_MAY_HAVE_RUN = "CALL_MAY_HAVE_RUN";
/**
 * The ErrorInfo reason of a `RESOURCE_EXHAUSTED` tool call that waited
 * `--queue-timeout` while `--max-inflight-calls` calls to its server were in
 * flight. Such an error is `retryable` (later, with backoff); a
 * `RESOURCE_EXHAUSTED` without it, a message over `--max-message-bytes`,
 * fails the same way again.
 */
export const REASON_QUEUE_TIMEOUT = "QUEUE_TIMEOUT";
/**
 * The ErrorInfo reason of an `UNAVAILABLE` that mcpd sent because the server
 * cannot take the request now (not `READY`, its session ended, an HTTP
 * exchange with it refused or failed); `retryable`.
 */
export const REASON_SERVER_UNAVAILABLE = "SERVER_UNAVAILABLE";
/** The ErrorInfo reason of an `UNAVAILABLE` that mcpd sent while stopping (a call refused, a stream ended); `retryable`, once mcpd is back. */
export const REASON_SHUTTING_DOWN = "SHUTTING_DOWN";

const ERROR_INFO_TYPE = "google.rpc.ErrorInfo";

/** gRPC status code names, indexed by code. */
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** The gRPC name of a status code, e.g. "NOT_FOUND". */
export type CodeName = (typeof CODE_NAMES)[number];

/** Fields of an {@link MCPDError} besides its message. */
export interface MCPDErrorInit {
  code?: Code | undefined;
  server?: string | undefined;
  jsonrpcCode?: number | undefined;
  reason?: string | undefined;
  domain?: string | undefined;
  metadata?: Record<string, string> | undefined;
  cause?: unknown;
}

/** Base of every error from mcpd. */
export class MCPDError extends Error {
  /** The gRPC status code (numerically the same as Connect's `Code`). */
  readonly code: Code;
  /** The status message, without the code. */
  readonly rawMessage: string;
  /** The MCP server that answered with a JSON-RPC error, if any. */
  readonly server: string | undefined;
  /** That server's JSON-RPC error code, if any. */
  readonly jsonrpcCode: number | undefined;
  /** The `google.rpc.ErrorInfo` reason, domain and metadata, if any. */
  readonly reason: string;
  readonly domain: string;
  readonly metadata: Record<string, string>;
  /**
   * Whether trying the same call again later may succeed: true for
   * `UNAVAILABLE` except with reason `CALL_MAY_HAVE_RUN` (the tool may have
   * had its effect), and for `RESOURCE_EXHAUSTED` with reason
   * `QUEUE_TIMEOUT` (too many calls in flight to the server); false
   * otherwise. A reason counts only in domain `mcpd.v1`.
   */
  get retryable(): boolean {
    const reason = this.domain === ERROR_DOMAIN ? this.reason : "";
    switch (this.code) {
      case Code.Unavailable:
        return reason !== REASON_CALL_MAY_HAVE_RUN;
      case Code.ResourceExhausted:
        return reason === REASON_QUEUE_TIMEOUT;
      default:
        return false;
    }
  }
  protected static defaultCode: Code = Code.Unknown;

  constructor(message = "", init: MCPDErrorInit = {}) {
    const code = init.code ?? (new.target as typeof MCPDError).defaultCode;
    const where: string[] = [];
    if (init.server) where.push(`server ${init.server}`);
    if (init.jsonrpcCode !== undefined) where.push(`JSON-RPC ${init.jsonrpcCode}`);
    super(`${CODE_NAMES[code] ?? code}: ${message}${where.length ? ` (${where.join(", ")})` : ""}`, {
      cause: init.cause,
    });
    this.name = new.target.name;
    this.code = code;
    this.rawMessage = message;
    this.server = init.server || undefined;
    this.jsonrpcCode = init.jsonrpcCode;
    this.reason = init.reason ?? "";
    this.domain = init.domain ?? "";
    this.metadata = { ...(init.metadata ?? {}) };
  }

  /** The gRPC name of the code, e.g. "NOT_FOUND". */
  get codeName(): CodeName {
    return CODE_NAMES[this.code] ?? "UNKNOWN";
  }
}

/** The call was cancelled (an aborted `signal`, a closed client, or mcpd cancelled it). */
export class Cancelled extends MCPDError {
  protected static override defaultCode = Code.Canceled;
}
/** An error with no closer code, e.g. a server-defined JSON-RPC code. */
export class UnknownError extends MCPDError {
  protected static override defaultCode = Code.Unknown;
}
/** A bad request field or bad tool arguments (JSON-RPC -32602). */
export class InvalidArgument extends MCPDError {
  protected static override defaultCode = Code.InvalidArgument;
}
/** The call's deadline (`timeoutMs`) passed. */
export class DeadlineExceeded extends MCPDError {
  protected static override defaultCode = Code.DeadlineExceeded;
}
/** An unknown server, tool, prompt or resource. */
export class NotFound extends MCPDError {
  protected static override defaultCode = Code.NotFound;
}
/** A server of that name exists (pass `replace: true`). */
export class AlreadyExists extends MCPDError {
  protected static override defaultCode = Code.AlreadyExists;
}
/** Refused by policy (a denied tool, a command not allowed). */
export class PermissionDenied extends MCPDError {
  protected static override defaultCode = Code.PermissionDenied;
}
/**
 * A limit was hit: `--max-inflight-calls` calls to the server were in flight
 * for `--queue-timeout` (`reason` "QUEUE_TIMEOUT", retryable), or a message
 * was over `--max-message-bytes` (no reason, not retryable).
 */
export class ResourceExhausted extends MCPDError {
  protected static override defaultCode = Code.ResourceExhausted;
}
/**
 * The server cannot do this now (e.g. missing client capabilities, or, with
 * `reason` "AUTHORIZATION_REQUIRED", a person's OAuth consent).
 */
export class FailedPrecondition extends MCPDError {
  protected static override defaultCode = Code.FailedPrecondition;
}
/** The operation was aborted. */
export class Aborted extends MCPDError {
  protected static override defaultCode = Code.Aborted;
}
/** A value was out of range. */
export class OutOfRange extends MCPDError {
  protected static override defaultCode = Code.OutOfRange;
}
/** The server or mcpd does not implement this (JSON-RPC -32601). */
export class Unimplemented extends MCPDError {
  protected static override defaultCode = Code.Unimplemented;
}
/** An internal error in mcpd or a server. */
export class Internal extends MCPDError {
  protected static override defaultCode = Code.Internal;
}
/**
 * mcpd or the server is not reachable right now (connecting, reconnecting,
 * crashed, shutting down). Retrying later may succeed, except after `reason`
 * "CALL_MAY_HAVE_RUN": the tool call may have had its effect (not
 * retryable).
 */
export class Unavailable extends MCPDError {
  protected static override defaultCode = Code.Unavailable;
}
/** Unrecoverable data loss. */
export class DataLoss extends MCPDError {
  protected static override defaultCode = Code.DataLoss;
}
/** A missing or wrong API token. */
export class Unauthenticated extends MCPDError {
  protected static override defaultCode = Code.Unauthenticated;
}

const BY_CODE: Record<number, new (message: string, init: MCPDErrorInit) => MCPDError> = {
  [Code.Canceled]: Cancelled,
  [Code.Unknown]: UnknownError,
  [Code.InvalidArgument]: InvalidArgument,
  [Code.DeadlineExceeded]: DeadlineExceeded,
  [Code.NotFound]: NotFound,
  [Code.AlreadyExists]: AlreadyExists,
  [Code.PermissionDenied]: PermissionDenied,
  [Code.ResourceExhausted]: ResourceExhausted,
  [Code.FailedPrecondition]: FailedPrecondition,
  [Code.Aborted]: Aborted,
  [Code.OutOfRange]: OutOfRange,
  [Code.Unimplemented]: Unimplemented,
  [Code.Internal]: Internal,
  [Code.Unavailable]: Unavailable,
  [Code.DataLoss]: DataLoss,
  [Code.Unauthenticated]: Unauthenticated,
};

/**
 * Raise from a sampling, elicitation, roots or authorization handler to
 * refuse the request with a JSON-RPC error code (default -32603, internal
 * error); from an approval handler, to deny the call with the message as
 * the reason.
 */
export class ServerRequestError extends Error {
  readonly code: number;
  constructor(message: string, code = -32603) {
    super(message);
    this.name = "ServerRequestError";
    this.code = code;
  }
}

/**
 * Throw from an agent tool's `run` (see `Client.serveTools`) when the
 * arguments do not fit: the caller gets InvalidArgument with the message,
 * instead of a result.
 */
export class ToolArgumentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolArgumentError";
  }
}

/** Errors of a connection that failed or broke, as Node names them. */
const CONNECTION_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOENT",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_INVALID_SESSION",
  "UND_ERR_SOCKET",
]);

function connectionFailed(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CONNECTION_ERRORS.has(code)) return true;
    // A stream the server refused before it processed it (RFC 9113 8.7:
    // safe to retry), as mcpd does to a stream opened during its graceful
    // shutdown; Node reports it as ERR_HTTP2_STREAM_ERROR, connect as INTERNAL.
    if (code === "ERR_HTTP2_STREAM_ERROR" && /\bNGHTTP2_REFUSED_STREAM\b/.test(String((e as { message?: unknown }).message))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Errors of a connection that was never made, or of a request that never
 * left this process: nothing reached mcpd. (A reset or closed connection
 * says nothing of the kind: mcpd may have read the request and run it.)
 */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ENOENT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_INVALID_SESSION",
]);

function neverSent(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const { code, syscall } = e as { code?: unknown; syscall?: unknown };
    // Any error of the connect call (a listener that died with connections
    // in its backlog resets them: "connect ECONNRESET").
    if (syscall === "connect" || (typeof code === "string" && NOT_SENT.has(code))) return true;
    if (code === "ERR_HTTP2_STREAM_ERROR" && /\bNGHTTP2_REFUSED_STREAM\b/.test(String((e as { message?: unknown }).message))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

const GRPC_LISTENER_HINT =
  'mcpd answered in HTTP/2 as its gRPC listener (--listen) does: use wire "grpc" for this address, or the address of mcpd\'s --http-listen for the Connect wires';

/**
 * Whether a Connect wire reached mcpd's gRPC listener: over HTTP/1.1 the
 * answer is an HTTP/2 frame (its first byte a frame length's, 0), which
 * Node's parser refuses; over HTTP/2, grpc-go refuses the Connect content
 * type with 415. (The listener may also close before the request is
 * written: that is a plain connection error.)
 */
function atGrpcListener(err: ConnectError): boolean {
  if (err.code === Code.Unknown && err.rawMessage === "HTTP 415") return true;
  for (let e: unknown = err.cause, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const { code, rawPacket } = e as { code?: unknown; rawPacket?: unknown };
    if (typeof code === "string" && code.startsWith("HPE_") && rawPacket instanceof Uint8Array && rawPacket[0] === 0) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** OpenSSL's names for a server certificate it could not verify, as Node gives them in `code`. */
const CERTIFICATE_ERRORS = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/**
 * Why a TLS handshake failed, in a few words, if err (or a cause of it)
 * says one did: OpenSSL's own text is a multi-line dump. A listener
 * without TLS answers the client's hello with plain HTTP bytes, which
 * OpenSSL calls a wrong version number.
 */
function tlsFailure(err: unknown): string | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const { code, reason, message } = e as { code?: unknown; reason?: unknown; message?: unknown };
    if (code === "ERR_SSL_WRONG_VERSION_NUMBER" || (typeof message === "string" && /wrong version number/.test(message))) {
      return "it answered without TLS (is TLS on at this address?)";
    }
    if (typeof code === "string" && CERTIFICATE_ERRORS.has(code)) return typeof message === "string" ? message : code;
    if (typeof code === "string" && (code.startsWith("ERR_SSL_") || code === "EPROTO")) {
      return typeof reason === "string" && reason !== "" ? reason : code;
    }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Whether the error came with a response: connect-es gives an error from
 * mcpd's status (grpc-status, a Connect error body) the response's headers
 * as metadata, and a reset stream or an aborted call none.
 */
function answered(err: ConnectError): boolean {
  return !err.metadata.keys().next().done;
}

/**
 * Returns the {@link MCPDError} for anything an RPC threw. `aborted` says
 * whether the caller aborted the call: a call cancelled without that and
 * without a status from mcpd was cut off with its connection (an HTTP/2
 * stream reset), which is {@link Unavailable} (as is a connection that
 * fails), so that it counts as retryable. A CANCELLED that mcpd sent stays
 * {@link Cancelled}. `toolCall` says that the call runs a tool: one cut off
 * with its connection (no status from mcpd, over a connection that was
 * made) may have run, and its Unavailable has reason
 * {@link REASON_CALL_MAY_HAVE_RUN}, as mcpd's own does, and is not
 * `retryable`; one whose connection was refused reached nothing.
 */
export function toMCPDError(reason: unknown, aborted?: boolean, toolCall = false): MCPDError {
  if (reason instanceof MCPDError) return reason;
  // A call aborted with an MCPDError as the signal's reason (close(),
  // cancel()) fails with a ConnectError around it: the reason is the error.
  if (reason instanceof ConnectError && reason.code === Code.Canceled && reason.cause instanceof MCPDError) return reason.cause;
  let err = ConnectError.from(reason);
  // Whether the call may have reached mcpd and been cut off on its way
  // back: an Unavailable that mcpd did not send, of a connection that broke.
  let cutOff = false;
  const tls = err.code === Code.Unavailable || err.code === Code.Internal || err.code === Code.Unknown ? tlsFailure(err.cause) : undefined;
  if (tls !== undefined) {
    err = new ConnectError(`could not complete a TLS handshake with mcpd: ${tls}`, Code.Unavailable, undefined, undefined, reason);
  } else if (atGrpcListener(err)) {
    err = new ConnectError(GRPC_LISTENER_HINT, Code.Unavailable, undefined, undefined, reason);
  } else {
    if (
      err.code !== Code.Unavailable &&
      (connectionFailed(err.cause) || (aborted === false && err.code === Code.Canceled && !answered(err)))
    ) {
      err = new ConnectError(err.rawMessage, Code.Unavailable, err.metadata, undefined, reason);
    }
    cutOff = err.code === Code.Unavailable && !answered(err) && !neverSent(reason);
  }
  if (toolCall && cutOff) {
    // The tool may have run, as when mcpd loses the server's session
    // during the call: the same reason, so that the call is not retryable.
    return new Unavailable(`${err.rawMessage}; the call may have run: the connection to mcpd broke while it was in flight`, {
      cause: reason,
      reason: REASON_CALL_MAY_HAVE_RUN,
      domain: ERROR_DOMAIN,
    });
  }
  const cls = BY_CODE[err.code] ?? MCPDError;
  const init: MCPDErrorInit = { code: err.code, cause: reason };
  const info = errorInfo(err);
  if (info !== undefined) {
    init.reason = info.reason;
    init.domain = info.domain;
    init.metadata = info.metadata;
    if (info.domain === ERROR_DOMAIN) {
      init.server = info.metadata["server"] || undefined;
      const code = Number.parseInt(info.metadata["jsonrpc_code"] ?? "", 10);
      if (Number.isInteger(code)) init.jsonrpcCode = code;
    }
  }
  return new cls(err.rawMessage, init);
}

interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

/**
 * Finds google.rpc.ErrorInfo among the error's details. The message is
 * small and its field numbers are fixed by google/rpc/error_details.proto,
 * so it is decoded here rather than pulling in the googleapis protos.
 */
function errorInfo(err: ConnectError): ErrorInfo | undefined {
  for (const d of err.details) {
    if (!("type" in d) || d.type !== ERROR_INFO_TYPE || !(d.value instanceof Uint8Array)) continue;
    try {
      return decodeErrorInfo(d.value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

function decodeErrorInfo(data: Uint8Array): ErrorInfo {
  // string reason = 1; string domain = 2; map<string, string> metadata = 3.
  const out: ErrorInfo = { reason: "", domain: "", metadata: {} };
  const r = new BinaryReader(data);
  while (r.pos < r.len) {
    const [num, wire] = r.tag();
    if (wire !== WireType.LengthDelimited) {
      r.skip(wire);
      continue;
    }
    if (num === 1) out.reason = r.string();
    else if (num === 2) out.domain = r.string();
    else if (num === 3) {
      const entry = new BinaryReader(r.bytes());
      let k = "";
      let v = "";
      while (entry.pos < entry.len) {
        const [enum_, ewire] = entry.tag();
        if (enum_ === 1 && ewire === WireType.LengthDelimited) k = entry.string();
        else if (enum_ === 2 && ewire === WireType.LengthDelimited) v = entry.string();
        else entry.skip(ewire);
      }
      out.metadata[k] = v;
    } else r.skip(wire);
  }
  return out;
}
