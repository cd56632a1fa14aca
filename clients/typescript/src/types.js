/**
 * The values the client returns and takes: the generated messages where
 * they are already convenient, and small plain objects (with `text` for
 * the common case, enums as lower-case strings, times as `Date`) where the
 * generated ones are not.
 */
import { create, toJson } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import * as pb from "./gen/mcpd/v1/mcpd_pb.js";
// The generated enums drop the proto's value prefix (SERVER_STATE_READY is
// ServerState.READY); the client spells them in lower case ("ready").
function enumName(e, value) {
    const name = e[value];
    return name === undefined ? "unspecified" : name.toLowerCase();
}
function enumValue(e, name, what) {
    const v = e[name.toUpperCase()];
    if (typeof v !== "number" || v === 0)
        throw new TypeError(`unknown ${what} ${JSON.stringify(name)}`);
    return v;
}
/** The text blocks of some content, joined with newlines. */
export function contentText(content) {
    return content
        .flatMap((c) => (c.kind.case === "text" ? [c.kind.value.text] : []))
        .join("\n");
}
function json(v) {
    return v === undefined ? undefined : toJson(ValueSchema, v);
}
function date(ts) {
    return ts === undefined ? undefined : timestampDate(ts);
}
export function toServer(s) {
    if (s === undefined)
        throw new Error("mcpd returned no server");
    const { $typeName: _, state, transport, stateChangedTime, authorizationExpireTime, ...rest } = s;
    const name = enumName(pb.ServerState, state);
    return {
        ...rest,
        state: name,
        transport: enumName(pb.Transport, transport),
        stateChangedTime: date(stateChangedTime),
        authorizationExpireTime: date(authorizationExpireTime),
        ready: name === "ready",
        authorizationRequired: name === "authorization_required",
    };
}
export function toToolResult(r) {
    if (r === undefined)
        throw new Error("mcpd returned no result");
    return {
        type: "result",
        content: r.content,
        structured: json(r.structuredContent),
        isError: r.isError,
        meta: r.meta,
        text: contentText(r.content),
    };
}
export function toLogMessage(m) {
    return { type: "log", level: enumName(pb.LogLevel, m.level), logger: m.logger, data: json(m.data) };
}
export function toStreamItem(m) {
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
export function toResourceResult(r) {
    const texts = [];
    let blob;
    for (const c of r.contents) {
        if (c.data.case === "text")
            texts.push(c.data.value);
        else if (c.data.case === "blob" && blob === undefined)
            blob = c.data.value;
    }
    return { contents: r.contents, meta: r.meta, text: texts.join("\n"), blob };
}
export function toPromptResult(r) {
    const text = r.messages
        .map((m) => (m.content?.kind.case === "text" ? m.content.kind.value.text : ""))
        .filter((t) => t !== "")
        .join("\n");
    return { description: r.description, messages: r.messages, meta: r.meta, text };
}
export function toEvent(e) {
    if (e === undefined)
        throw new Error("mcpd sent a subscription message without an event");
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
                state: enumName(pb.ServerState, e.kind.value.state),
                error: e.kind.value.error,
            };
        case "log":
            return { ...base, kind: "log", log: toLogMessage(e.kind.value) };
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
export function eventKindToProto(kind) {
    return enumValue(pb.EventKind, kind, "event kind");
}
export function logLevelToProto(level) {
    return enumValue(pb.LogLevel, level, "log level");
}
export const REQUEST_KINDS = {
    sampling: pb.ServerRequestKind.SAMPLING,
    elicitation: pb.ServerRequestKind.ELICITATION,
    roots: pb.ServerRequestKind.ROOTS,
    authorization: pb.ServerRequestKind.AUTHORIZATION,
};
function duration(ms) {
    if (ms === undefined)
        return undefined;
    if (ms < 0)
        throw new RangeError("a timeout must not be negative");
    const seconds = Math.floor(ms / 1000);
    return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}
export { duration as durationFromMs };
function common(name, o) {
    const c = { name };
    const call = duration(o.callTimeoutMs);
    const connect = duration(o.connectTimeoutMs);
    if (call)
        c.callTimeout = call;
    if (connect)
        c.connectTimeout = connect;
    if (o.protocolVersion)
        c.protocolVersion = o.protocolVersion;
    if (o.toolsAllow)
        c.toolsAllow = o.toolsAllow;
    if (o.toolsDeny)
        c.toolsDeny = o.toolsDeny;
    if (o.oauth)
        c.oauth = o.oauth;
    return c;
}
/** Builders of server configurations, like the Python client's `ServerConfig`. */
export const ServerConfig = {
    /** A server run as a child process speaking MCP on stdin and stdout. */
    stdio(name, command, args = [], opts = {}) {
        return {
            ...common(name, opts),
            transport: { case: "stdio", value: { command, args, env: opts.env ?? {}, cwd: opts.cwd ?? "" } },
        };
    },
    /** A server at a Streamable HTTP endpoint. */
    http(name, url, opts = {}) {
        return { ...common(name, opts), transport: { case: "http", value: { url, headers: opts.headers ?? {} } } };
    },
    /** A server at a legacy HTTP+SSE endpoint. */
    sse(name, url, opts = {}) {
        return { ...common(name, opts), transport: { case: "sse", value: { url, headers: opts.headers ?? {} } } };
    },
    /** A remote server: Streamable HTTP, falling back to HTTP+SSE. */
    remote(name, url, opts = {}) {
        return { ...common(name, opts), transport: { case: "remote", value: { url, headers: opts.headers ?? {} } } };
    },
};
export function serverConfigMessage(c) {
    return create(pb.ServerConfigSchema, c);
}
export function rootsToProto(roots) {
    return roots.map((r) => create(pb.RootSchema, typeof r === "string" ? { uri: r } : { uri: r.uri, name: r.name ?? "" }));
}
function roleName(r) {
    return enumName(pb.Role, r);
}
export function toServerRequest(r) {
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
                text: messages.length ? messages[messages.length - 1].text : "",
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
        default:
            return undefined;
    }
}
function contentToProto(c) {
    return typeof c === "string" ? create(pb.ContentSchema, { kind: { case: "text", value: { text: c } } }) : c;
}
/** JSON-RPC error codes of the replies a client makes on its own. */
export const METHOD_NOT_FOUND = -32601;
export const INTERNAL_ERROR = -32603;
export function errorReply(id, code, message) {
    return create(pb.ServerRequestReplySchema, { id, result: { case: "error", value: { code, message } } });
}
export function replyFor(req, result) {
    const id = req.id;
    switch (req.kind) {
        case "sampling": {
            const r = typeof result === "string" ? { content: result } : result;
            if (r === null || typeof r !== "object" || r.content === undefined) {
                throw new TypeError("a sampling handler must return a SamplingResult or a string");
            }
            const blocks = Array.isArray(r.content) ? r.content : [r.content];
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
            let r;
            if (result === undefined || result === null)
                r = { action: "decline" };
            else if (typeof result === "object" && "action" in result && typeof result.action === "string") {
                r = result;
            }
            else if (typeof result === "object" && !Array.isArray(result))
                r = { action: "accept", content: result };
            else
                throw new TypeError("an elicitation handler must return an ElicitationResult, an object or undefined");
            const action = enumValue(pb.ElicitationAction, r.action, "elicitation action");
            return create(pb.ServerRequestReplySchema, {
                id,
                result: { case: "elicitation", value: r.content === undefined ? { action } : { action, content: r.content } },
            });
        }
        case "roots":
            return create(pb.ServerRequestReplySchema, {
                id,
                result: { case: "roots", value: { roots: rootsToProto((result ?? [])) } },
            });
        case "authorization": {
            const url = result === undefined || result === null ? "" : typeof result === "string" ? result : result.redirectUrl ?? "";
            return create(pb.ServerRequestReplySchema, { id, result: { case: "authorization", value: { redirectUrl: url } } });
        }
    }
}
//# sourceMappingURL=types.js.map