// Conversions without a daemon: server configurations, and approval
// requests and their replies.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ServerConfig, type McpJsonEntry, type McpJsonOptions, type ServerConfigInit } from "../src/index.js";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";
import * as t from "../src/types.js";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
/** The keys mcpd's config file reader knows, shared with internal/config's and the Python client's tests. */
const KEYS = JSON.parse(fs.readFileSync(path.join(REPO, "clients", "testdata", "mcp-json-keys.json"), "utf8")) as Record<"entry" | "oauth" | "oauth.idp" | "tls", string[]>;

describe("ServerConfig", () => {
  it("sets strictCapabilities", () => {
    assert.equal(t.serverConfigMessage(ServerConfig.stdio("s", "cmd", [], { strictCapabilities: true })).strictCapabilities, true);
    assert.equal(t.serverConfigMessage(ServerConfig.http("h", "https://example.com/mcp")).strictCapabilities, false);
  });

  it("sets trace", () => {
    assert.equal(t.serverConfigMessage(ServerConfig.stdio("s", "cmd", [], { trace: true })).trace, true);
    assert.equal(t.serverConfigMessage(ServerConfig.remote("r", "https://example.com/mcp", { trace: true })).trace, true);
    assert.equal(t.serverConfigMessage(ServerConfig.http("h", "https://example.com/mcp")).trace, false);
  });

  it("refuses a lone string for args and the tool filters", () => {
    // The wire would send its characters: a deny list of "r" and "m" instead of "rm".
    const lone = "rm" as unknown as string[];
    assert.throws(() => ServerConfig.stdio("fs", "npx", [], { toolsDeny: lone }), { name: "TypeError", message: /toolsDeny/ });
    assert.throws(() => ServerConfig.http("h", "https://example.com/mcp", { toolsAllow: lone }), { name: "TypeError", message: /toolsAllow/ });
    assert.throws(() => ServerConfig.sse("h", "https://example.com/sse", { toolsAsk: lone }), { name: "TypeError", message: /toolsAsk/ });
    assert.throws(() => ServerConfig.stdio("fs", "npx", "-y" as unknown as string[]), { name: "TypeError", message: /args/ });
    assert.throws(() => ServerConfig.stdio("fs", "npx", ["-y", 1 as unknown as string]), { name: "TypeError", message: /args/ });
    assert.deepEqual(t.serverConfigMessage(ServerConfig.stdio("fs", "npx", [], { toolsDeny: ["rm"] })).toolsDeny, ["rm"]);
  });

  it("reads an entry of a .mcp.json file", () => {
    const stdio = t.serverConfigMessage(ServerConfig.fromMcpJson("fs", { command: "npx", args: ["-y", "server-fs"], env: { A: "1" }, cwd: "/srv" }, { toolsAsk: ["write_*"] }));
    assert.equal(stdio.transport.case, "stdio");
    assert.deepEqual(stdio.transport.case === "stdio" && [stdio.transport.value.command, stdio.transport.value.args, stdio.transport.value.env, stdio.transport.value.cwd], ["npx", ["-y", "server-fs"], { A: "1" }, "/srv"]);
    assert.deepEqual(stdio.toolsAsk, ["write_*"]);
    const http = t.serverConfigMessage(
      ServerConfig.fromMcpJson("api", {
        type: "http",
        url: "https://example.com/mcp",
        headers: { "X-Team": "a" },
        oauth: { clientId: "mcpd", scopes: ["read"], tokenEndpointAuthMethod: "none", idp: { issuer: "https://idp.example.com", idTokenFile: "/run/token" } },
      }),
    );
    assert.equal(http.transport.case, "http");
    assert.deepEqual(http.transport.case === "http" && http.transport.value.headers, { "X-Team": "a" });
    assert.equal(http.oauth?.clientId, "mcpd");
    assert.deepEqual(http.oauth?.scopes, ["read"]);
    assert.equal(http.oauth?.tokenEndpointAuthMethod, "none");
    assert.equal(http.oauth?.idp?.idTokenFile, "/run/token");
    // A URL without a type is detected when mcpd connects, as in the file.
    assert.equal(t.serverConfigMessage(ServerConfig.fromMcpJson("u", { url: "https://example.com/mcp" })).transport.case, "remote");
    assert.equal(t.serverConfigMessage(ServerConfig.fromMcpJson("s", { type: "streamable-http", url: "https://example.com/mcp" })).transport.case, "http");
    assert.equal(t.serverConfigMessage(ServerConfig.fromMcpJson("o", { type: "sse", url: "http://127.0.0.1:3001/sse" })).transport.case, "sse");
    assert.throws(() => ServerConfig.fromMcpJson("x", { type: "sdk" }), /serveTools/);
    assert.throws(() => ServerConfig.fromMcpJson("x", { type: "ws", url: "ws://x" }), /unknown type "ws"/);
    assert.throws(() => ServerConfig.fromMcpJson("x", { url: "https://x", oauth: { clientID: "typo" } }), /unknown oauth keys: clientID/);
    assert.throws(() => ServerConfig.fromMcpJson("x", { url: "https://x", oauth: { idp: { issuer: "i", audience: "a" } } }), /unknown oauth.idp keys: audience/);
  });
});

// ServerConfig.fromMcpJson: a .mcp.json server entry read as mcpd's config
// file reader reads it, or refused by name where ConnectServer cannot carry
// what the entry says; case for case the Python client's test_mcp_json.py.
describe("ServerConfig.fromMcpJson", () => {
  const URL = "https://h.example/mcp";
  /** An entry as JSON.parse gives it: TypeScript's types prove nothing about it. */
  const read = (entry: unknown, opts?: McpJsonOptions): ServerConfigInit => ServerConfig.fromMcpJson("x", entry as McpJsonEntry, opts);
  const message = (entry: unknown, opts?: McpJsonOptions): pb.ServerConfig => t.serverConfigMessage(read(entry, opts));
  /** Asserts that entry is refused with an error of type whose message matches; returns the message. */
  function refused(entry: unknown, match: RegExp, opts?: McpJsonOptions, type: ErrorConstructor = TypeError): string {
    let got = "";
    assert.throws(
      () => read(entry, opts),
      (e: unknown) => {
        assert.ok(e instanceof Error && e.constructor === type, `got ${String(e)}, want a ${type.name}`);
        got = e.message;
        return true;
      },
    );
    assert.match(got, match);
    assert.ok(got.startsWith('server "x": '), got);
    return got;
  }

  it("reads, refuses or ignores every key mcpd knows", () => {
    const known = new Set<string>();
    for (const keys of [t.MCP_JSON_READ, new Set(t.MCP_JSON_REFUSED.keys()), t.MCP_JSON_IGNORED]) {
      for (const k of keys) {
        assert.ok(!known.has(k), `${k} is in two lists`);
        known.add(k);
      }
    }
    assert.deepEqual([...known].sort(), [...KEYS.entry].sort());
    assert.deepEqual([...t.OAUTH_KEYS].sort(), [...KEYS.oauth].sort());
    assert.deepEqual([...t.IDP_KEYS].sort(), [...KEYS["oauth.idp"]].sort());
    assert.deepEqual([...t.TLS_KEYS.keys()].sort(), [...KEYS.tls].sort());
    // And when reading: none is refused as unknown (null counts as absent).
    for (const key of KEYS.entry) {
      const [entry, want] = key === "command" ? [{ url: URL }, ServerConfig.remote("x", URL)] : [{ command: "srv" }, ServerConfig.stdio("x", "srv")];
      assert.deepEqual(read({ ...entry, [key]: null }), want, key);
    }
    for (const key of KEYS.oauth) assert.ok(message({ url: URL, oauth: { [key]: null } }).oauth, key);
    for (const key of KEYS["oauth.idp"]) assert.ok(message({ url: URL, oauth: { idp: { [key]: null } } }).oauth?.idp, key);
  });

  it("turns milliseconds into a valid Duration", () => {
    // Just under two seconds must not round to nanos = 1e9 (out of range).
    for (const [ms, seconds, nanos] of [
      [1999.9999999, 2n, 0],
      [0.0000001, 0n, 0],
      [1500, 1n, 500_000_000],
      [0, 0n, 0],
    ] as const) {
      const d = t.durationFromMs(ms);
      assert.deepEqual([d?.seconds, d?.nanos], [seconds, nanos], String(ms));
    }
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) assert.throws(() => t.durationFromMs(bad), RangeError, String(bad));
  });

  it("reads the options, with timeouts in seconds", () => {
    const c = message({ command: "npx", toolsDeny: ["delete_*"], toolsAllow: ["get_*"], toolsAsk: ["put_*"], timeout: 30, connectTimeout: 2.5 });
    assert.deepEqual([c.toolsDeny, c.toolsAllow, c.toolsAsk], [["delete_*"], ["get_*"], ["put_*"]]);
    assert.deepEqual([c.callTimeout?.seconds, c.callTimeout?.nanos, c.connectTimeout?.seconds, c.connectTimeout?.nanos], [30n, 0, 2n, 500_000_000]);
    const d = message({ command: "npx", protocolVersion: "2025-06-18", strictCapabilities: true, trace: true });
    assert.deepEqual([d.protocolVersion, d.strictCapabilities, d.trace], ["2025-06-18", true, true]);
    // The file's seconds are the options' milliseconds.
    assert.deepEqual(
      read({ command: "npx", toolsDeny: ["delete_*"], timeout: 30, connectTimeout: 2.5, trace: true }),
      ServerConfig.stdio("x", "npx", [], { toolsDeny: ["delete_*"], callTimeoutMs: 30_000, connectTimeoutMs: 2_500, trace: true }),
    );
    // Unset, null and empty mean the daemon's defaults, as in a config file.
    const e = read({ command: "npx", timeout: 0, connectTimeout: null, toolsDeny: null, toolsAllow: [], protocolVersion: "", trace: false });
    assert.deepEqual(e, ServerConfig.stdio("x", "npx"));
    assert.deepEqual([t.serverConfigMessage(e).callTimeout, t.serverConfigMessage(e).connectTimeout], [undefined, undefined]);
  });

  it("reads disabledTools (Windsurf, Roo Code, Kiro) as more toolsDeny", () => {
    assert.deepEqual(message({ command: "srv", toolsDeny: ["rm_*"], disabledTools: ["delete_repo", "push"] }).toolsDeny, ["rm_*", "delete_repo", "push"]);
    assert.deepEqual(message({ command: "srv", disabledTools: ["push"] }).toolsDeny, ["push"]);
    refused({ command: "srv", disabledTools: ["push"] }, /"disabledTools" is in the entry and the option toolsDeny/, { toolsDeny: ["rm"] });
    refused({ command: "srv", disabledTools: "push" }, /"disabledTools" is a string, want an array of strings/);
  });

  for (const key of ["timeout", "connectTimeout"]) {
    it(`reads ${key} in seconds within the daemon's bound`, () => {
      assert.match(refused({ command: "npx", [key]: -1 }, new RegExp(`"${key}"`), undefined, RangeError), /negative/);
      assert.match(refused({ command: "npx", [key]: 365 * 24 * 3600 + 1 }, new RegExp(`"${key}"`), undefined, RangeError), /31536000 seconds/);
      for (const bad of [NaN, Infinity]) refused({ command: "npx", [key]: bad }, new RegExp(`"${key}" is not a finite number`), undefined, RangeError);
      refused({ command: "npx", [key]: "30" }, new RegExp(`"${key}" is a string, want a number of seconds`));
      refused({ command: "npx", [key]: true }, new RegExp(`"${key}" is a boolean, want a number of seconds`));
      const year = message({ command: "npx", [key]: 365 * 24 * 3600 });
      assert.equal((key === "timeout" ? year.callTimeout : year.connectTimeout)?.seconds, 31_536_000n);
    });
  }

  it("reads the types as mcpd spells them, in any case", () => {
    // docs/remote-and-resilience.md's table.
    const remote: Record<string, string> = {
      http: "http",
      HTTP: "http",
      "streamable-http": "http",
      streamable_http: "http",
      streamableHttp: "http",
      StreamableHTTP: "http",
      sse: "sse",
      SSE: "sse",
      auto: "remote",
      Auto: "remote",
    };
    for (const [kind, want] of Object.entries(remote)) {
      const c = read({ type: kind, url: URL, headers: { Authorization: "Bearer t" } });
      assert.deepEqual(c.transport, { case: want, value: { url: URL, headers: { Authorization: "Bearer t" } } }, kind);
    }
    for (const stdio of ["stdio", "STDIO", "", null]) {
      const c = read({ type: stdio, command: "srv", args: ["a"], env: { A: "b" }, cwd: "/w" });
      assert.deepEqual(c, ServerConfig.stdio("x", "srv", ["a"], { env: { A: "b" }, cwd: "/w" }), String(stdio));
    }
  });

  it("detects the transport of a url without type", () => {
    const c = read({ url: URL });
    assert.deepEqual(c, ServerConfig.remote("x", URL));
    assert.equal(t.serverConfigMessage(c).transport.case, "remote");
  });

  it("reads serverUrl", () => {
    assert.deepEqual(read({ serverUrl: URL }), ServerConfig.remote("x", URL));
    assert.deepEqual(read({ type: "sse", serverUrl: "https://h.example/sse" }), ServerConfig.sse("x", "https://h.example/sse"));
    // As in mcpd, url wins when both are set.
    assert.deepEqual(read({ url: "https://a.example/mcp", serverUrl: "https://b.example/mcp" }), ServerConfig.remote("x", "https://a.example/mcp"));
  });

  it("refuses types without a transport", () => {
    refused({ type: "websocket", url: "wss://h.example" }, /unknown type "websocket"/);
    for (const kind of ["sdk", "agent", "SDK"]) refused({ type: kind }, /serveTools/);
    refused({ command: "srv", url: URL }, /both command and url/);
    refused({}, /needs a command/);
    refused({ type: "stdio" }, /needs a command/);
    refused({ type: "http" }, /need a url/);
  });

  it("refuses fields of the other transport", () => {
    refused({ type: "stdio", command: "srv", url: URL }, /takes no url/);
    refused({ command: "srv", headers: { A: "b" } }, /takes no headers/);
    refused({ command: "srv", oauth: { clientId: "app" } }, /takes no oauth/);
    for (const [key, value] of [["command", "srv"], ["args", ["a"]], ["env", { A: "b" }], ["cwd", "/w"]] as const) {
      refused({ type: "http", url: URL, [key]: value }, /takes no command, args, env or cwd/);
    }
    // Empty ones say nothing.
    assert.deepEqual(read({ command: "srv", url: "", headers: {} }), ServerConfig.stdio("x", "srv"));
    assert.deepEqual(read({ url: URL, command: "", args: [], env: {}, cwd: "" }), ServerConfig.remote("x", URL));
  });

  it("reads a tls block", () => {
    const tls = { caFile: "/etc/mcpd/ca.pem", certFile: "/etc/mcpd/client.pem", keyFile: "/run/creds/client-key.pem" };
    const got = read({ url: URL, tls: { ca: tls.caFile, cert: tls.certFile, key: tls.keyFile } });
    assert.deepEqual(got, ServerConfig.remote("x", URL, { tls }));
    const m = create(pb.ServerConfigSchema, got);
    assert.equal(m.transport.case, "remote");
    assert.deepEqual(
      m.transport.case === "remote" ? [m.transport.value.tls?.caFile, m.transport.value.tls?.certFile, m.transport.value.tls?.keyFile] : [],
      [tls.caFile, tls.certFile, tls.keyFile],
    );
    assert.deepEqual(message({ type: "sse", url: URL, tls: { ca: "/ca.pem", cert: null } }).transport, {
      case: "sse",
      value: create(pb.HttpConfigSchema, { url: URL, tls: { caFile: "/ca.pem" } }),
    });
    assert.deepEqual(read({ url: URL, tls: null }), ServerConfig.remote("x", URL));
    refused({ url: URL, tls: {} }, /tls: the block names no file/);
    refused({ url: URL, tls: { ca: "/ca.pem", crt: "/c.pem" } }, /unknown tls keys: crt/);
    refused({ url: URL, tls: { ca: 1 } }, /"tls.ca" is a number, want a string/);
    refused({ url: URL, tls: "/ca.pem" }, /"tls" is a string, want an object/);
    refused({ command: "srv", tls: { ca: "/ca.pem" } }, /takes no tls/);
  });

  for (const [key, value, empty] of [
    ["permissions", { deny: ["delete_*"] }, {}],
    ["alwaysAllow", ["read_file"], []],
    ["autoApprove", ["read_file"], []],
    ["traceRedact", ["query"], []],
  ] as const) {
    it(`refuses ${key}, which ConnectServer cannot carry`, () => {
      const got = refused({ url: URL, [key]: value }, new RegExp(`"${key}" cannot be sent with ConnectServer`));
      assert.match(got, /config file/);
      // One that says nothing is read as absent (Cline writes "autoApprove": []).
      assert.deepEqual(read({ url: URL, [key]: empty }), ServerConfig.remote("x", URL));
    });
  }

  it("refuses a disabled entry", () => {
    const got = refused({ command: "npx", toolsDeny: ["delete_*"], toolsAllow: ["get_*"], timeout: 30, disabled: true }, /disabled/);
    assert.match(got, /setServerEnabled\("x", false\)/);
    refused({ command: "srv", disabled: "yes" }, /"disabled" is a string, want true or false/);
    assert.deepEqual(message({ command: "srv", disabled: false, toolsDeny: ["rm"] }).toolsDeny, ["rm"]);
  });

  it("refuses keys mcpd does not know", () => {
    assert.match(refused({ command: "npx", toolDeny: ["delete_*"], envFile: ".env" }, /"envFile", "toolDeny"/), /not understood/);
    // Keys are read as spelled, as mcpd reads them.
    refused({ command: "npx", ToolsDeny: ["delete_*"] }, /"ToolsDeny"/);
    refused({ Command: "npx" }, /"Command"/);
    refused({ url: URL, oauth: { clientID: "app" } }, /unknown oauth keys: clientID/);
    refused({ url: URL, oauth: { idp: { issuer: "i", audience: "a" } } }, /unknown oauth.idp keys: audience/);
    // An agent SDK's name for the server is read and left, as by mcpd.
    assert.deepEqual(read({ command: "srv", name: "other" }), ServerConfig.stdio("x", "srv"));
  });

  for (const [key, value, want] of [
    ["command", ["npx"], /"command" is an array, want a string/],
    ["args", "-y pkg", /"args" is a string, want an array of strings/],
    ["args", ["-y", 1], /"args\[1\]" is a number, want a string/],
    ["toolsDeny", "delete_*", /"toolsDeny" is a string, want an array of strings/],
    ["toolsAllow", "get_*", /"toolsAllow" is a string, want an array of strings/],
    ["toolsAsk", "put_*", /"toolsAsk" is a string, want an array of strings/],
    ["toolsDeny", { 0: "rm" }, /"toolsDeny" is an object, want an array of strings/],
    ["env", ["A=b"], /"env" is an array, want an object with string values/],
    ["env", { A: 1 }, /"env.A" is a number, want a string/],
    ["cwd", 1, /"cwd" is a number, want a string/],
    ["protocolVersion", 20250618, /"protocolVersion" is a number, want a string/],
    ["strictCapabilities", "yes", /"strictCapabilities" is a string, want true or false/],
    ["trace", 1, /"trace" is a number, want true or false/],
    ["type", 1, /"type" is a number, want a string/],
  ] as const) {
    it(`refuses ${key} of the wrong type (${JSON.stringify(value)})`, () => {
      refused({ command: "srv", [key]: value }, want);
    });
  }

  it("refuses remote fields of the wrong type, without their values", () => {
    refused({ url: 1 }, /"url" is a number, want a string/);
    refused({ serverUrl: ["https://h.example"] }, /"serverUrl" is an array, want a string/);
    assert.ok(!refused({ url: URL, headers: { Authorization: ["Bearer s3cret"] } }, /"headers.Authorization" is an array, want a string/).includes("s3cret"));
    refused({ url: URL, headers: "Authorization: Bearer t" }, /"headers" is a string, want an object with string values/);
    refused({ url: URL, oauth: "client" }, /"oauth" is a string, want an object/);
    for (const [entry, kind] of [["command", "a string"], [null, "null"], [["command"], "an array"], [1, "a number"]] as const) {
      refused(entry, new RegExp(`entry is ${kind}, want an object`));
    }
  });

  it("reads the oauth block and its idp with the types mcpd reads, and refuses others without their values", () => {
    const oauth = {
      clientId: "app",
      clientSecret: "cs",
      clientMetadataUrl: "https://app.example/client.json",
      scopes: ["read", "write"],
      tokenEndpointAuthMethod: "private_key_jwt",
      privateKeyFile: "/run/key.pem",
      signingAlgorithm: "ES384",
      grant: "token_exchange",
      assertion: "jwt",
      assertionFile: "/run/jwt",
      dpop: true,
      idp: { issuer: "https://idp.example", tokenEndpoint: "https://idp.example/token", clientId: "mcpd", clientSecret: "ics", idToken: "it", idTokenFile: "/run/id" },
    };
    assert.deepEqual(message({ url: URL, oauth }).oauth, create(pb.OAuthConfigSchema, oauth));
    // null counts as absent, as when mcpd reads the block; an empty block is a block.
    const empty = create(pb.OAuthConfigSchema, {});
    assert.deepEqual(message({ url: URL, oauth: {} }).oauth, empty);
    assert.deepEqual(message({ url: URL, oauth: { clientId: null, scopes: null, dpop: null, idp: null } }).oauth, empty);
    assert.deepEqual(message({ url: URL, oauth: { idp: { issuer: null } } }).oauth, create(pb.OAuthConfigSchema, { idp: {} }));
    assert.equal(message({ url: URL, oauth: null }).oauth, undefined);
    for (const [bad, want] of [
      [{ scopes: "read" }, /"oauth.scopes" is a string, want an array of strings/],
      [{ scopes: ["read", 1] }, /"oauth.scopes\[1\]" is a number, want a string/],
      [{ clientSecret: 12345 }, /"oauth.clientSecret" is a number, want a string/],
      [{ dpop: "yes" }, /"oauth.dpop" is a string, want true or false/],
      [{ idp: "https://idp.example" }, /"oauth.idp" is a string, want an object/],
      [{ idp: ["https://idp.example"] }, /"oauth.idp" is an array, want an object/],
      [{ idp: { idToken: ["s3cret"] } }, /"oauth.idp.idToken" is an array, want a string/],
    ] as const) {
      const got = refused({ url: URL, oauth: bad }, want);
      for (const value of ["s3cret", "12345", "idp.example", '"read"']) assert.ok(!got.includes(value), got);
    }
  });

  it("does not expand variables", () => {
    // As documented: ConnectServer's values are used as given.
    assert.deepEqual(
      read({ command: "${BIN}", args: ["${DIR:-/srv}"], env: { TOKEN: "${TOKEN}" }, cwd: "${HOME}" }),
      ServerConfig.stdio("x", "${BIN}", ["${DIR:-/srv}"], { env: { TOKEN: "${TOKEN}" }, cwd: "${HOME}" }),
    );
    assert.deepEqual(
      read({ url: "https://${HOST}/mcp", headers: { Authorization: "Bearer ${KEY}" } }),
      ServerConfig.remote("x", "https://${HOST}/mcp", { headers: { Authorization: "Bearer ${KEY}" } }),
    );
  });

  it("adds the options beside the entry to it", () => {
    assert.deepEqual(
      read({ command: "srv", toolsDeny: ["delete_*"] }, { callTimeoutMs: 5_000, toolsAsk: ["put_*"] }),
      ServerConfig.stdio("x", "srv", [], { toolsDeny: ["delete_*"], callTimeoutMs: 5_000, toolsAsk: ["put_*"] }),
    );
    // An option the entry sets too would replace it: say so instead.
    refused({ command: "srv", toolsDeny: ["delete_*"] }, /"toolsDeny" is in the entry and the option toolsDeny is given too/, { toolsDeny: [] });
    refused({ command: "srv", timeout: 30 }, /"timeout" is in the entry and the option callTimeoutMs is given too/, { callTimeoutMs: 5_000 });
    refused({ command: "srv", trace: false }, /"trace" is in the entry and the option trace/, { trace: true });
    // A null in the entry is no setting.
    assert.deepEqual(read({ command: "srv", timeout: null }, { callTimeoutMs: 5_000 }), ServerConfig.stdio("x", "srv", [], { callTimeoutMs: 5_000 }));
    assert.throws(() => read({ command: "srv" }, { bogus: 1 } as McpJsonOptions), { name: "TypeError", message: /unknown server options: bogus/ });
    // The oauth block is the entry's.
    assert.throws(() => read({ url: URL }, { oauth: { clientId: "app" } } as McpJsonOptions), { name: "TypeError", message: /unknown server options: oauth/ });
    assert.throws(() => read({ command: "srv" }, { toolsDeny: "rm" as unknown as string[] }), { name: "TypeError", message: /toolsDeny/ });
  });
});

describe("approval requests", () => {
  const request = (approval: MessageInitShape<typeof pb.ApprovalRequestSchema>): t.ServerRequest | undefined =>
    t.toServerRequest(create(pb.ServerRequestSchema, { id: "r1", server: "gh", kind: { case: "approval", value: approval } }));

  it("become ApprovalRequest objects", () => {
    const call = request({ tool: "mcp__gh__merge", arguments: { pr: 7 }, annotations: { destructiveHint: true }, rule: "ask mcp__gh__*", caller: "ci" });
    assert.deepEqual(call, {
      kind: "approval",
      id: "r1",
      server: "gh",
      deadline: undefined,
      tool: "mcp__gh__merge",
      arguments: { pr: 7 },
      annotations: { destructiveHint: true },
      rule: "ask mcp__gh__*",
      caller: "ci",
      pollIntervalMs: undefined,
    });
    // Unset arguments and annotations are empty objects; a poll's interval is in ms.
    const poll = request({ tool: "mcp__gh__status", pollInterval: { seconds: 7n, nanos: 500_000_000 } });
    assert.ok(poll?.kind === "approval");
    assert.deepEqual([poll.arguments, poll.annotations, poll.pollIntervalMs], [{}, {}, 7_500]);
  });

  it("are answered with a boolean or an ApprovalResult", () => {
    const req = request({ tool: "mcp__gh__merge" })!;
    const answer = (result: unknown): pb.ApprovalResult | undefined => {
      const r = t.replyFor(req, result).result;
      return r.case === "approval" ? r.value : undefined;
    };
    assert.deepEqual([answer(true)?.approved, answer(true)?.reason], [true, ""]);
    assert.equal(answer(false)?.approved, false);
    assert.deepEqual([answer({ approved: true })?.approved, answer({ reason: "not now" })?.approved, answer({ reason: "not now" })?.reason], [true, false, "not now"]);
    for (const bad of [undefined, null, "yes", 1, [], { approved: "yes" }, { reason: 3 }]) {
      assert.throws(() => t.replyFor(req, bad), TypeError, JSON.stringify(bad));
    }
  });

  it("are registered by name", () => {
    assert.equal(t.REQUEST_KINDS.approval, pb.ServerRequestKind.APPROVAL);
  });
});

describe("sampling replies", () => {
  const req: t.ServerRequest = { kind: "sampling", id: "s1", server: "ev", deadline: undefined, messages: [], systemPrompt: "", maxTokens: 0, params: {}, text: "" };
  const block = (init: MessageInitShape<typeof pb.ContentSchema>): pb.Content => create(pb.ContentSchema, init);

  it("hold one text, image or audio block", () => {
    const content = (result: unknown): pb.Content[] | undefined => {
      const r = t.replyFor(req, result).result;
      return r.case === "sampling" ? r.value.content : undefined;
    };
    assert.equal(content("plain")?.[0]?.kind.case, "text");
    assert.equal(content({ content: ["in a list"] })?.[0]?.kind.case, "text");
    assert.equal(content({ content: block({ kind: { case: "image", value: { data: new Uint8Array([1]), mimeType: "image/png" } } }) })?.[0]?.kind.case, "image");
    assert.equal(content({ content: [block({ kind: { case: "audio", value: { data: new Uint8Array([1]), mimeType: "audio/wav" } } })] })?.length, 1);
  });

  it("refuse what mcpd would, where the handler returned it", () => {
    const link = block({ kind: { case: "resourceLink", value: { uri: "file:///x", name: "x" } } });
    for (const [bad, why] of [
      [{ content: [] }, /not no content/],
      [{ content: ["one", "two"] }, /not 2 content blocks/],
      [{ content: link }, /not resourceLink/],
      [{ content: [link] }, /not resourceLink/],
      [{ content: [42] }, /not number/],
    ] as const) {
      assert.throws(() => t.replyFor(req, bad), (e) => e instanceof TypeError && why.test(e.message), JSON.stringify(bad));
    }
  });
});

describe("roots", () => {
  it("sends an absolute local path as its file:// URI, and a URI as it is", () => {
    const roots = t.rootsToProto(["/srv/my app", { uri: "/srv/b", name: "b" }, "file:///kept", "https://example.com/x"]);
    assert.deepEqual(
      roots.map((r) => r.uri),
      ["file:///srv/my%20app", "file:///srv/b", "file:///kept", "https://example.com/x"],
    );
    assert.equal(roots[1]?.name, "b");
  });
});
