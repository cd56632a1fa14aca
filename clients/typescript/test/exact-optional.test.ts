// The option bags a user builds take undefined for a field left out, as
// code compiled with `exactOptionalPropertyTypes` writes it
// (`{ token: process.env.MCPD_API_TOKEN }`, an optional parameter passed
// on): the package's tsconfig turns that option on, so this file does not
// compile when a public type refuses an undefined, and the client treats
// every such undefined as absent.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  Client,
  DEFAULT_WIRE,
  ServerConfig,
  type AgentTool,
  type ApprovalResult,
  type CallOptions,
  type ClientOptions,
  type ElicitationResult,
  type Event,
  type McpJsonEntry,
  type McpJsonOptions,
  type MCPDErrorInit,
  type RootLike,
  type SamplingResult,
  type ServeToolsOptions,
  type SubscribeOptions,
  type ToolCallOptions,
  type ToolResultInit,
} from "../src/index.js";
import * as t from "../src/types.js";
import { Daemon, MCPD_BIN, RPC_TIMEOUT_MS, SUITE_TIMEOUT_MS, testWires } from "./harness.js";

/** A value of T, or undefined, as an unset environment variable or option gives it. */
function unset<T>(): T | undefined {
  return undefined;
}

// Type-level: each bag with every optional field set to undefined.
const clientOptions: ClientOptions = {
  target: unset<string>(),
  wire: unset<ClientOptions["wire"]>(),
  token: process.env["MCPD_EXACT_OPTIONAL_UNSET"],
  timeoutMs: unset<number>(),
  keepaliveMs: unset<number | false>(),
  keepaliveTimeoutMs: unset<number>(),
  log: unset<(message: string, error: unknown) => void>(),
  ca: unset<string>(),
  cert: unset<string>(),
  key: unset<string>(),
  caFile: unset<string>(),
  certFile: unset<string>(),
  keyFile: unset<string>(),
};
const callOptions: CallOptions = { signal: unset<AbortSignal>(), timeoutMs: unset<number>() };
const toolCallOptions: ToolCallOptions = { signal: unset<AbortSignal>(), timeoutMs: unset<number>(), meta: unset<t.JsonObject>() };
const subscribeOptions: SubscribeOptions = {
  servers: unset<string[]>(),
  resources: unset<[string, string][]>(),
  kinds: unset<t.EventKind[]>(),
  pollIds: unset<string[]>(),
  afterSequence: unset<number>(),
  fallbackPollIntervalMs: unset<number>(),
  reconnect: unset<boolean>(),
  reconnectTimeoutMs: unset<number | null>(),
  signal: unset<AbortSignal>(),
};
const serveOptions: ServeToolsOptions = { replace: unset<boolean>(), instructions: unset<string>(), version: unset<string>() };
const tool: AgentTool = {
  description: "Echoes.",
  title: unset<string>(),
  inputSchema: unset<t.JsonObject>(),
  outputSchema: unset<t.JsonObject>(),
  annotations: { title: unset<string>(), readOnlyHint: unset<boolean>() },
  meta: unset<t.JsonObject>(),
  run: (args) => ({ content: [String(args["message"])], structured: unset<t.JsonValue>(), isError: unset<boolean>() }) satisfies ToolResultInit,
};
const serverOptions: McpJsonOptions = {
  callTimeoutMs: unset<number>(),
  connectTimeoutMs: unset<number>(),
  protocolVersion: unset<string>(),
  toolsAllow: unset<string[]>(),
  toolsDeny: unset<string[]>(),
  toolsAsk: unset<string[]>(),
  strictCapabilities: unset<boolean>(),
  trace: unset<boolean>(),
};
const entry: McpJsonEntry = { command: "mcpd", args: unset<string[]>(), env: unset<Record<string, string>>(), cwd: unset<string>(), timeout: unset<number>() };
const replies: [SamplingResult, ElicitationResult, ApprovalResult, RootLike] = [
  { content: "hi", model: unset<string>(), stopReason: unset<string>(), role: unset<"assistant">() },
  { action: "accept", content: unset<t.JsonObject>() },
  { approved: unset<boolean>(), reason: unset<string>() },
  { uri: "file:///srv", name: unset<string>() },
];
const errorInit: MCPDErrorInit = { server: unset<string>(), jsonrpcCode: unset<number>(), reason: unset<string>() };
void [callOptions, toolCallOptions, replies, errorInit];

describe("undefined options count as absent", () => {
  it("in the client's options", async () => {
    const c = new Client("127.0.0.1:1", clientOptions);
    assert.equal(c.target, "127.0.0.1:1");
    assert.equal(c.wire, DEFAULT_WIRE);
    await c.close();
  });

  it("in server configurations and .mcp.json entries", () => {
    const want = t.serverConfigMessage(ServerConfig.stdio("s", "mcpd"));
    assert.deepEqual(t.serverConfigMessage(ServerConfig.stdio("s", "mcpd", [], { ...serverOptions, env: unset(), cwd: unset() })), want);
    assert.deepEqual(t.serverConfigMessage(ServerConfig.fromMcpJson("s", entry, serverOptions)), want);
  });
});

const skip = MCPD_BIN === undefined ? "no mcpd binary (MCPD_BIN)" : false;
let daemon: Daemon;

before(async () => {
  if (skip) return;
  daemon = await new Daemon().start();
  await daemon.demoReady();
});

after(async () => {
  await daemon?.stop();
});

for (const wire of testWires()) {
  describe(`undefined options against mcpd, wire ${wire}`, { skip, timeout: SUITE_TIMEOUT_MS }, () => {
    it("calls, streams, subscriptions and served tools", async () => {
      const c = new Client(daemon.target(wire), { ...clientOptions, target: unset(), wire, timeoutMs: RPC_TIMEOUT_MS });
      try {
        assert.ok((await c.servers({ signal: unset(), timeoutMs: unset() })).some((s) => s.name === "demo"));
        assert.equal((await c.callTool("mcp__demo__add", { a: 2, b: 3 }, toolCallOptions)).text, "5");
        let last: unknown;
        for await (const item of c.callToolStream("mcp__demo__slow", { steps: 1, delay_ms: 1 }, toolCallOptions)) last = item;
        assert.equal((last as { type: string }).type, "result");

        const serving = await c.serveTools("exact", { echo: tool }, serveOptions);
        try {
          assert.equal((await c.callTool("mcp__exact__echo", { message: "hi" }, toolCallOptions)).text, "hi");
        } finally {
          await serving.stop();
        }

        // A subscription from the start of the buffer sees the serving's server come and go.
        const events = c.subscribe({ ...subscribeOptions, afterSequence: 0 });
        let first: Event | undefined;
        for await (const ev of events) {
          first = ev;
          break;
        }
        assert.ok(first !== undefined && first.sequence > 0);
      } finally {
        await c.close();
      }
    });
  });
}
