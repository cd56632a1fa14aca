// Conversions without a daemon: server configurations, and approval
// requests and their replies.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ServerConfig } from "../src/index.js";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";
import * as t from "../src/types.js";

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
    // A URL without a type is Streamable HTTP, as in the file.
    assert.equal(t.serverConfigMessage(ServerConfig.fromMcpJson("u", { url: "https://example.com/mcp" })).transport.case, "http");
    assert.equal(t.serverConfigMessage(ServerConfig.fromMcpJson("s", { type: "streamable-http", url: "https://example.com/mcp" })).transport.case, "http");
    assert.equal(t.serverConfigMessage(ServerConfig.fromMcpJson("o", { type: "sse", url: "http://127.0.0.1:3001/sse" })).transport.case, "sse");
    assert.throws(() => ServerConfig.fromMcpJson("x", { type: "sdk" }), /serveTools/);
    assert.throws(() => ServerConfig.fromMcpJson("x", { type: "ws", url: "ws://x" }), /unknown type "ws"/);
    assert.throws(() => ServerConfig.fromMcpJson("x", { url: "https://x", oauth: { clientID: "typo" } }), /unknown oauth keys: clientID/);
    assert.throws(() => ServerConfig.fromMcpJson("x", { url: "https://x", oauth: { idp: { issuer: "i", audience: "a" } } }), /unknown oauth.idp keys: audience/);
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
