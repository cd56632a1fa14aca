// The client against the real bin/mcpd, on every wire the daemon serves:
// every RPC, streams, cancellation, resumed subscriptions, server requests
// answered by callbacks, typed errors and the provider adapters.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import {
  Cancelled,
  Client,
  DeadlineExceeded,
  FailedPrecondition,
  InvalidArgument,
  MCPDError,
  NotFound,
  PermissionDenied,
  ServerConfig,
  ServerRequestError,
  ToolArgumentError,
  Unauthenticated,
  Unavailable,
  isProviderSafe,
  type ApprovalRequest,
  type ElicitationRequest,
  type Event,
  type SamplingRequest,
  type SubscribeOptions,
  type Subscription,
  type Wire,
} from "../src/index.js";
import { Daemon, EVERYTHING_BIN, MCPD_BIN, RPC_TIMEOUT_MS, SUITE_TIMEOUT_MS, UnixProxy, connectEverything, freePort, linesOf, poll, tempDir, testWires } from "./harness.js";

const RECORDING_SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "recording-server.js");
const QUIET_SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "quiet-server.js");
const skip = MCPD_BIN === undefined ? "no mcpd binary (MCPD_BIN)" : false;
const skipEverything = skip || (EVERYTHING_BIN === undefined ? "no server-everything (MCPD_EVERYTHING_BIN)" : false);

let daemon: Daemon;

before(async () => {
  if (skip) return;
  daemon = await new Daemon().start();
  await daemon.demoReady();
});

after(async () => {
  await daemon?.stop();
});

/** The replies mcpd ignored (late, or for a request it no longer waits for), from its log. */
async function lateReplies(d: Daemon): Promise<string[]> {
  return (await fs.promises.readFile(d.log, "utf8")).split("\n").filter((l) => l.includes("server request reply ignored"));
}

async function withClient<T>(wire: Wire, fn: (c: Client) => Promise<T>, target?: string): Promise<T> {
  const c = target ? new Client(target, { wire, timeoutMs: RPC_TIMEOUT_MS }) : daemon.client(wire);
  try {
    return await fn(c);
  } finally {
    await c.close();
  }
}

/**
 * Reads until n resource_updated events of demo://clock; returns their
 * sequences. The clock ticks every second, so each event has RPC_TIMEOUT_MS
 * to come: a subscription that gets none fails here, not at the runner's
 * timeout.
 */
async function ticks(it: AsyncIterator<Event>, n: number): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no resource_updated event within ${RPC_TIMEOUT_MS} ms; got ${out}`)), RPC_TIMEOUT_MS);
    });
    const r = await Promise.race([it.next(), late]).finally(() => clearTimeout(timer));
    assert.ok(!r.done, `stream ended after ${out}`);
    assert.equal(r.value.kind, "resource_updated");
    out.push(r.value.sequence);
  }
  return out;
}

/** The next value of an iterator; a read that gets none within RPC_TIMEOUT_MS fails here, not at the runner's timeout. */
async function nextOf<T>(it: AsyncIterator<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${RPC_TIMEOUT_MS} ms`)), RPC_TIMEOUT_MS);
  });
  const r = await Promise.race([it.next(), late]).finally(() => clearTimeout(timer));
  assert.ok(!r.done, `the stream ended before ${what}`);
  return r.value;
}

const CLOCK: [string, string] = ["demo", "demo://clock"];
/**
 * How long a test waits for the keep-alive to fail what a frozen mcpd holds
 * open (about 6 s per try with a 5 s keep-alive and a 1 s PING timeout): a
 * hang fails the test instead of stalling the suite.
 */
const HANG_MS = 60_000;
/** What a timer that won a race against next() resolves with. */
const TIMED_OUT = Symbol("timed out");

for (const wire of testWires()) {
  describe(`wire ${wire}`, { skip, timeout: SUITE_TIMEOUT_MS }, () => {
    it("lists servers and tools and calls them", () =>
      withClient(wire, async (c) => {
        const servers = await c.servers();
        const demo = servers.find((s) => s.name === "demo");
        assert.ok(demo?.ready, JSON.stringify(servers.map((s) => [s.name, s.state])));
        assert.equal(demo.scope, "default", "enums are lower-case strings");
        assert.equal((await c.getServer("demo")).transport, "stdio");
        const tools = await c.listTools("demo");
        assert.ok(tools.some((t) => t.name === "mcp__demo__add"));
        const r = await c.callTool("mcp__demo__add", { a: 2, b: 3 });
        assert.equal(r.text, "5");
        assert.deepEqual(r.structured, { sum: 5 });
        assert.equal(r.isError, false);
        // A model's JSON argument string goes straight in; so does a server's own tool name.
        assert.equal((await c.callTool("mcp__demo__echo", '{"message": "hi"}')).text, "hi");
        assert.equal((await c.callTool("echo", { message: "bare" })).text, "bare");
        const image = (await c.callTool("mcp__demo__image")).content[0]!;
        assert.equal(image.kind.case, "image");
        assert.equal(image.kind.case === "image" && image.kind.value.mimeType, "image/png");
        const failed = await c.callTool("mcp__demo__fail", {});
        assert.equal(failed.isError, true, "a failing tool is data, not an exception");
      }));

    it("streams progress, then the result", () =>
      withClient(wire, async (c) => {
        const items = [];
        const stream = c.callToolStream("mcp__demo__slow", { steps: 3, delay_ms: 20 });
        for await (const item of stream) items.push(item);
        assert.deepEqual(
          items.map((i) => i.type),
          ["progress", "progress", "progress", "result"],
        );
        assert.deepEqual(
          items.flatMap((i) => (i.type === "progress" ? [i.progress] : [])),
          [1, 2, 3],
        );
        assert.equal(stream.result?.isError, false);
      }));

    it("reads resources, prompts and completions", () =>
      withClient(wire, async (c) => {
        const resources = await c.listResources("demo");
        assert.ok(resources.some((r) => r.uri === "demo://readme"));
        assert.ok((await c.listResourceTemplates("demo")).some((t) => t.uriTemplate === "demo://greeting/{name}"));
        assert.match((await c.readResource("demo", "demo://readme")).text, /demo server/);
        const logo = await c.readResource("demo", "demo://logo.png");
        assert.ok(logo.blob && logo.blob.length > 0);
        assert.ok((await c.listPrompts("demo")).some((p) => p.name === "greet"));
        assert.match((await c.getPrompt("demo", "greet", { name: "Ada" })).text, /Ada/);
        assert.deepEqual((await c.complete("demo", "style", "pi", { prompt: "greet" })).values, ["pirate"]);
      }));

    it("connects, restarts and disconnects a server; sets log level and roots", () =>
      withClient(wire, async (c) => {
        const name = `demo2-${wire}`;
        const s = await c.connectServer(ServerConfig.stdio(name, MCPD_BIN!, ["demo-server"]), { replace: true });
        assert.ok(s.ready, `${s.state} ${s.lastError}`);
        await assert.rejects(c.connectServer(ServerConfig.stdio(name, MCPD_BIN!, ["demo-server"])), (e) => e instanceof MCPDError && e.codeName === "ALREADY_EXISTS");
        const r = await c.restartServer(name);
        assert.ok(r.restarts >= 1 || r.ready, `${r.state}`);
        await c.setLogLevel(name, "debug");
        await c.setRoots(["file:///srv/project", { uri: "file:///tmp", name: "tmp" }], { server: name });
        await c.disconnectServer(name);
        await assert.rejects(c.getServer(name), NotFound);
      }));

    it("connects a server whose tools ask for approval", () =>
      withClient(wire, async (c) => {
        const name = `asking-${wire.replace(/[^a-z0-9]/g, "")}`;
        assert.ok((await c.connectServer(ServerConfig.stdio(name, MCPD_BIN!, ["demo-server"], { toolsAsk: ["ech*"] }), { replace: true })).ready);
        try {
          // No agent answers approval requests here: the call is refused, naming the ask.
          await assert.rejects(
            c.callTool(`mcp__${name}__echo`, { message: "x" }),
            (e) => e instanceof MCPDError && e.codeName === "PERMISSION_DENIED" && e.message.includes(`ask mcp__${name}__ech*`),
          );
          assert.equal((await c.callTool(`mcp__${name}__add`, { a: 1, b: 2 })).text, "3");
        } finally {
          await c.disconnectServer(name);
        }
      }));

    it("connects a .mcp.json entry, whose tool filters hide and refuse tools", () =>
      withClient(wire, async (c) => {
        const name = `fromjson-${wire.replace(/[^a-z0-9]/g, "")}`;
        // As a file's JSON.parse gives it.
        const entry = JSON.parse(JSON.stringify({ command: MCPD_BIN, args: ["demo-server"], toolsAllow: ["ech*", "fail"], toolsDeny: ["fail"], timeout: 30 }));
        const s = await c.connectServer(ServerConfig.fromMcpJson(name, entry), { replace: true });
        try {
          assert.ok(s.ready, `${s.state} ${s.lastError}`);
          assert.deepEqual((await c.listTools(name)).map((x) => x.toolName), ["echo"]);
          await assert.rejects(c.callTool(`mcp__${name}__fail`), PermissionDenied);
        } finally {
          await c.disconnectServer(name);
        }
      }));

    it("disables and enables a server", () =>
      withClient(wire, async (c) => {
        const name = `toggled-${wire.replace(/[^a-z0-9]/g, "")}`;
        assert.ok((await c.connectServer(ServerConfig.stdio(name, MCPD_BIN!, ["demo-server"]), { replace: true })).ready);
        try {
          const off = await c.setServerEnabled(name, false);
          assert.equal(off.state, "disabled");
          await assert.rejects(c.callTool(`mcp__${name}__echo`, { message: "x" }), FailedPrecondition);
          const on = await c.setServerEnabled(name, true);
          assert.ok(on.ready, `${on.state} ${on.lastError}`);
        } finally {
          await c.disconnectServer(name);
        }
      }));

    it("searches tools and polls a resource and a tool", () =>
      withClient(wire, async (c) => {
        const matches = await c.searchTools("weather for a city", { limit: 2 });
        assert.equal(matches[0]?.tool.name, "mcp__demo__weather");
        assert.ok(matches[0]!.score > 0 && matches.length <= 2);
        await assert.rejects(c.startPoll("demo", { resourceUri: "demo://clock", intervalMs: 500 }), InvalidArgument);
        await assert.rejects(c.startPoll("demo", {}), TypeError);
        const p = await c.startPoll("demo", { resourceUri: "demo://clock", intervalMs: 1000 });
        try {
          assert.deepEqual([p.server, p.resourceUri, p.tool, p.intervalMs], ["demo", "demo://clock", "", 1000]);
          const listed = (await c.listPolls()).find((x) => x.id === p.id);
          assert.ok(listed, "the poll is not listed");
          assert.ok(listed.lastPollTime === undefined || listed.lastPollTime instanceof Date, String(listed.lastPollTime));
          assert.equal(typeof listed.polls, "number");
          const sub = c.subscribe({ pollIds: [p.id], afterSequence: 0, kinds: ["poll_result"] });
          const seen = [];
          for await (const ev of sub) {
            assert.equal(ev.kind, "poll_result");
            seen.push(ev.poll!);
            if (seen.length === 2) break;
          }
          assert.equal(seen[0]!.pollId, p.id);
          assert.ok(seen[0]!.baseline && seen[0]!.contents[0]?.data.case === "text");
          assert.ok(!seen[1]!.baseline);
        } finally {
          await c.stopPoll(p.id);
        }
        await assert.rejects(c.stopPoll(p.id), NotFound);
        const t = await c.startPoll("demo", { tool: "echo", arguments: { message: "hi" }, intervalMs: 1000 });
        try {
          assert.deepEqual([t.resourceUri, t.tool, t.arguments], ["", "echo", { message: "hi" }]);
          const sub = c.subscribe({ pollIds: [t.id], afterSequence: 0, kinds: ["poll_result"] });
          const first = (await sub.next()).value!;
          sub.close();
          assert.equal(first.poll?.tool, "mcp__demo__echo");
          assert.equal(first.poll?.toolResult?.text, "hi");
        } finally {
          await c.stopPoll(t.id);
        }
      }));

    it("serves the agent's own tools through mcpd", () =>
      withClient(wire, async (c) => {
        const name = `agent-${wire.replace(/[^a-z0-9]/g, "")}`;
        let cancelled: (() => void) | undefined;
        const wasCancelled = new Promise<void>((r) => (cancelled = r));
        const serving = await c.serveTools(name, {
          shout: {
            description: "Shouts the text.",
            inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
            run: async (args, ctx) => {
              ctx.progress(1, 2, "half way");
              return String(args["text"]).toUpperCase();
            },
          },
          sum: {
            description: "Adds.",
            outputSchema: { type: "object", properties: { sum: { type: "number" } } },
            annotations: { readOnlyHint: true, openWorldHint: false },
            meta: { "example.com/team": "ts" },
            run: (args) => ({ sum: Number(args["a"]) + Number(args["b"]) }),
          },
          fails: { description: "Fails.", run: () => { throw new Error("no luck"); } },
          picky: { description: "Refuses its arguments.", run: () => { throw new ToolArgumentError("b must be a number"); } },
          blocks: {
            description: "Returns MCP-shaped content blocks.",
            run: () => ({
              content: [
                { type: "text", text: "as MCP says" },
                { type: "image", data: Buffer.from("png!").toString("base64"), mimeType: "image/png" },
                { type: "resource_link", uri: "demo://r", name: "r", size: 4 },
              ],
            }),
          },
          badBlock: { description: "Returns a block of no known type.", run: () => ({ content: [{ type: "video" }] }) },
          hangs: {
            description: "Waits until cancelled.",
            run: (_args, ctx) => new Promise((_, reject) => ctx.signal.addEventListener("abort", () => { cancelled!(); reject(new Error("cancelled")); })),
          },
        }, { version: "1.2.3" });
        try {
          assert.ok(serving.server?.ready, serving.server?.state);
          assert.deepEqual([serving.server?.serverInfo?.name, serving.server?.serverInfo?.version], [name, "1.2.3"]);
          const sum = (await c.listTools(name)).find((x) => x.toolName === "sum");
          assert.deepEqual(sum?.outputSchema, { type: "object", properties: { sum: { type: "number" } } });
          assert.deepEqual([sum?.annotations?.readOnlyHint, sum?.annotations?.openWorldHint], [true, false]);
          assert.deepEqual(sum?.meta, { "example.com/team": "ts" });
          await withClient(wire, async (other) => {
            assert.equal((await other.callTool(`mcp__${name}__shout`, { text: "hi" })).text, "HI");
            assert.deepEqual((await other.callTool(`mcp__${name}__sum`, { a: 2, b: 3 })).structured, { sum: 5 });
            const failed = await other.callTool(`mcp__${name}__fails`, {});
            assert.ok(failed.isError && failed.text.includes("no luck"), failed.text);
            await assert.rejects(other.callTool(`mcp__${name}__picky`, { b: "x" }), (e) => e instanceof InvalidArgument && e.message.includes("b must be a number"));
            const blocks = await other.callTool(`mcp__${name}__blocks`, {});
            assert.deepEqual(blocks.content.map((b) => b.kind.case), ["text", "image", "resourceLink"]);
            assert.equal(blocks.text, "as MCP says");
            const image = blocks.content[1]!.kind;
            assert.ok(image.case === "image" && Buffer.from(image.value.data).toString() === "png!" && image.value.mimeType === "image/png");
            const link = blocks.content[2]!.kind;
            assert.ok(link.case === "resourceLink" && link.value.uri === "demo://r" && link.value.size === 4n);
            const bad = await other.callTool(`mcp__${name}__badBlock`, {});
            assert.ok(bad.isError && bad.text.includes("content[0]"), bad.text);
            const items = [];
            for await (const item of other.callToolStream(`mcp__${name}__shout`, { text: "yo" })) items.push(item);
            assert.deepEqual(items.map((i) => i.type), ["progress", "result"]);
            const ac = new AbortController();
            const call = other.callTool(`mcp__${name}__hangs`, {}, { signal: ac.signal });
            setTimeout(() => ac.abort(), 200);
            await assert.rejects(call, Cancelled);
            await wasCancelled; // the tool's signal aborted
          });
        } finally {
          await serving.stop();
        }
        assert.equal(await serving.done, undefined);
        await poll("the agent server to stop", async () => {
          try {
            return (await c.getServer(name)).state !== "ready";
          } catch (e) {
            return e instanceof NotFound;
          }
        });
      }));

    it("refuses authorization calls for a server without OAuth with typed errors", () =>
      withClient(wire, async (c) => {
        await assert.rejects(c.completeAuthorization("demo", "http://127.0.0.1:1/cb?code=x&state=y"), (e) => e instanceof FailedPrecondition || e instanceof InvalidArgument);
        await assert.rejects(c.completeAuthorization("nope", "http://127.0.0.1:1/cb"), NotFound);
        await c.forgetAuthorization("demo").catch((e: unknown) => {
          assert.ok(e instanceof MCPDError && !["UNKNOWN", "INTERNAL"].includes(e.codeName), String(e));
        });
      }));

    it("throws typed errors", () =>
      withClient(wire, async (c) => {
        await assert.rejects(c.getServer("nope"), (e) => e instanceof NotFound && e.code === 5 && e.codeName === "NOT_FOUND");
        await assert.rejects(c.callTool("mcp__demo__nope"), NotFound);
        // The server's own JSON-RPC error keeps the server name and code.
        await assert.rejects(c.readResource("demo", "demo://missing"), (e) => {
          assert.ok(e instanceof MCPDError, String(e));
          assert.equal(e.server, "demo");
          assert.equal(typeof e.jsonrpcCode, "number");
          return true;
        });
        // A model's argument string that is no JSON object is refused before it is sent.
        await assert.rejects(c.callTool("mcp__demo__add", "[1]"), (e) => e instanceof InvalidArgument && e.jsonrpcCode === undefined);
      }));

    it("turns a deadline into DeadlineExceeded and an abort into Cancelled", () =>
      withClient(wire, async (c) => {
        await assert.rejects(c.callTool("mcp__demo__slow", { steps: 100, delay_ms: 100 }, { timeoutMs: 200 }), DeadlineExceeded);
        const ac = new AbortController();
        const call = c.callTool("mcp__demo__slow", { steps: 100, delay_ms: 100 }, { signal: ac.signal });
        setTimeout(() => ac.abort(), 100);
        await assert.rejects(call, Cancelled);
      }));

    it("is refused without the token by a daemon that wants one", async () => {
      const tokenFile = path.join(tempDir(), "token");
      fs.writeFileSync(tokenFile, "s3cret-token\n", { mode: 0o600 });
      const d = await new Daemon(["--api-token-file", tokenFile]).start();
      try {
        const bad = d.client(wire, { token: "wrong" });
        await assert.rejects(bad.servers(), Unauthenticated);
        await bad.close();
        const good = d.client(wire, { token: "s3cret-token" });
        assert.ok(Array.isArray(await good.servers()));
        await good.close();
      } finally {
        await d.stop();
      }
    });

    it("reports an unreachable mcpd as Unavailable", async () => {
      const c = new Client(`unix://${path.join(tempDir(), "none.sock")}`, { wire, timeoutMs: 5_000 });
      await assert.rejects(c.servers(), Unavailable);
      await c.close();
    });

    it("gives tools to models with provider-safe names it maps back", () =>
      withClient(wire, async (c) => {
        const longName = "a-very-long-server-name-" + "x".repeat(36);
        await c.connectServer(ServerConfig.stdio(longName, MCPD_BIN!, ["demo-server"]), { replace: true });
        try {
          const openai = await c.toolsForOpenAI(longName);
          const names = openai.map((t) => t.function.name);
          assert.equal(names.length, 8);
          assert.ok(names.every(isProviderSafe), String(names));
          assert.ok(!names.some((n) => n.startsWith(`mcp__${longName}__`)), "want shortened names");
          const echo = openai.find((t) => t.function.description.includes("Returns the given message"))!.function.name;
          assert.equal((await c.callTool(echo, { message: "round trip" })).text, "round trip");
          const responses = await c.toolsForOpenAI(longName, { api: "responses" });
          assert.deepEqual(responses.map((t) => t.name), names);
          // Another client, which never listed the tools, maps the name too.
          await withClient(wire, async (fresh) => {
            assert.equal((await fresh.callTool(echo, '{"message": "fresh"}')).text, "fresh");
            const anthropic = await fresh.toolsForAnthropic(longName);
            assert.deepEqual(new Set(anthropic.map((t) => t.name)), new Set(names));
            assert.ok(anthropic.every((t) => t.input_schema["type"] === "object"));
          });
          const add = (await c.toolsForOpenAI("demo")).find((t) => t.function.name === "mcp__demo__add")!;
          assert.deepEqual(add.function.parameters["required"], ["a", "b"]);
        } finally {
          await c.disconnectServer(longName);
        }
      }));

    it("gives the Vercel AI SDK a tool set that generateText runs", () =>
      withClient(wire, async (c) => {
        const { generateText, jsonSchema, stepCountIs } = await import("ai");
        const { MockLanguageModelV3 } = await import("ai/test");
        const tools = await c.toolsForAISDK("demo", { jsonSchema });
        // Without the SDK's jsonSchema, the built-in schemas pass its check too.
        const plain = await c.toolsForAISDK("demo");
        const { asSchema } = await import("ai");
        assert.deepEqual(asSchema(plain["mcp__demo__add"]!.inputSchema as never).jsonSchema, tools["mcp__demo__add"]!.inputSchema.jsonSchema);
        assert.ok(tools["mcp__demo__add"]);
        let step = 0;
        const model = new MockLanguageModelV3({
          doGenerate: async () => {
            step++;
            const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
            if (step === 1) {
              return {
                content: [{ type: "tool-call", toolCallId: "call-1", toolName: "mcp__demo__add", input: JSON.stringify({ a: 19, b: 23 }) }],
                finishReason: { unified: "tool-calls", raw: "tool_calls" },
                usage,
                warnings: [],
              };
            }
            return { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
          },
        });
        const result = await generateText({ model, tools, prompt: "What is 19 + 23?", stopWhen: stepCountIs(3) });
        const toolResults = result.steps.flatMap((s) => s.toolResults);
        assert.equal(toolResults.length, 1, JSON.stringify(result.steps.map((s) => s.content)));
        assert.equal(toolResults[0]!.output, "42");
      }));

    it("resumes a subscription across a dropped connection without losing events", async () => {
      const proxy = await new UnixProxy(path.join(tempDir(), "proxy.sock"), wire === "grpc" ? daemon.socket : daemon.httpSocket).start();
      const direct = daemon.client(wire);
      const viaProxy = new Client(proxy.target, { wire, timeoutMs: RPC_TIMEOUT_MS });
      try {
        // The reference stream keeps the upstream subscription of
        // demo://clock alive while the proxied one is cut off.
        const ref = direct.subscribe({ resources: [CLOCK], kinds: ["resource_updated"] });
        await ticks(ref, 1);
        const sub = viaProxy.subscribe({ resources: [CLOCK], kinds: ["resource_updated"] });
        const [before] = await ticks(sub, 1);
        let seq = 0;
        while (seq < before!) [seq] = (await ticks(ref, 1)) as [number];
        proxy.cut();
        const during = await ticks(ref, 2);
        assert.ok(during[0]! > before!);
        proxy.allow();
        const afterCut = await ticks(sub, 3);
        const want = [...during, ...(await ticks(ref, 1))];
        assert.deepEqual(afterCut, want, "nothing lost, nothing twice");
        assert.ok(sub.reconnects >= 1, "the stream never reconnected");
        assert.equal(sub.lastSequence, afterCut[2]);
        sub.close();
        ref.close();
        assert.equal((await sub.next()).done, true);
      } finally {
        await viaProxy.close();
        await direct.close();
        await proxy.close();
      }
    });

    it("resumes where the stream started when it drops before its first event", async () => {
      // mcpd's own metrics say when the stream is in place at mcpd.
      const metrics = await freePort();
      const own = await new Daemon(["--metrics-listen", `127.0.0.1:${metrics}`]).start();
      const subscribers = async (): Promise<number> => {
        const body = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
        return Number(/^mcpd_event_subscribers (\S+)$/m.exec(body)?.[1] ?? 0);
      };
      const c = own.client(wire);
      try {
        await own.demoReady();
        const sub = c.subscribe({ servers: ["demo"], kinds: ["server_state"], reconnectTimeoutMs: RPC_TIMEOUT_MS });
        await poll("the stream to be open at mcpd", async () => (await subscribers()) === 1);
        const first = sub.next(); // drives the reconnect
        await own.stop();
        await own.start();
        await own.demoReady();
        await poll("the stream to be open again", async () => (await subscribers()) === 1);
        const admin = own.client("grpc");
        await admin.restartServer("demo"); // an event after the reconnect, either way
        await admin.close();
        // From where it started, the new run says with a gap that events
        // were missed; "from now" would have said nothing.
        const ev = (await first).value;
        assert.equal(ev?.kind, "gap", JSON.stringify(ev));
        sub.close();
      } finally {
        await c.close();
        await own.stop();
      }
    });

    it("fails its calls and streams with Unavailable when mcpd stops answering", async () => {
      // A frozen mcpd (SIGSTOP) closes nothing, and its kernel acknowledges
      // what is sent: only a PING left unanswered tells the client. HTTP/1.1
      // has none, so on "connect" only its HTTP/2 streams (serveTools) can
      // tell; its subscriptions and calls wait (see the README).
      const h2 = wire !== "connect";
      const metrics = await freePort();
      const own = await new Daemon(["--metrics-listen", `127.0.0.1:${metrics}`]).start();
      const subscribers = async (): Promise<number> => {
        const body = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
        return Number(/^mcpd_event_subscribers (\S+)$/m.exec(body)?.[1] ?? 0);
      };
      // No timeoutMs: nothing but the keep-alive ends the calls.
      const c = new Client(own.target(wire), { wire, keepaliveMs: 5_000, keepaliveTimeoutMs: 1_000 });
      try {
        await own.demoReady();
        const serving = await c.serveTools("frozen", { noop: { description: "Does nothing.", run: () => "ok" } });
        const sub = h2 ? c.subscribe({ servers: ["demo"], kinds: ["server_state"], reconnectTimeoutMs: 1_000 }) : undefined;
        if (sub) await poll("the stream to be open at mcpd", async () => (await subscribers()) === 1);
        await own.freeze();
        const failure = (p: Promise<unknown>): Promise<unknown> => p.then((v) => new Error(`no failure: ${JSON.stringify(v)}`), (e: unknown) => e);
        let timer: NodeJS.Timeout | undefined;
        const hang = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`still waiting ${HANG_MS} ms after mcpd froze`)), HANG_MS);
        });
        const [served, subscribed, called] = await Promise.race([
          Promise.all([serving.done, sub ? failure(sub.next()) : undefined, h2 ? failure(c.servers()) : undefined]),
          hang,
        ]).finally(() => clearTimeout(timer));
        assert.ok(served instanceof Unavailable, `serveTools ended with ${String(served)}`);
        if (h2) {
          assert.ok(subscribed instanceof Unavailable, `the subscription ended with ${String(subscribed)}`);
          assert.ok(sub!.reconnects >= 1, "the subscription gave up without reconnecting");
          assert.ok(called instanceof Unavailable, `the call ended with ${String(called)}`);
        }
      } finally {
        own.signal("SIGCONT");
        await c.close();
        await own.stop();
      }
    });

    it("polls the resources of a server that cannot notify with fallbackPollIntervalMs", () =>
      withClient(wire, async (c) => {
        const name = `quiet-${wire.replace(/[^a-z0-9]/g, "")}`;
        const s = await c.connectServer(ServerConfig.stdio(name, process.execPath, [QUIET_SERVER]), { replace: true });
        assert.ok(s.ready, `${s.state} ${s.lastError}`);
        const clock: [string, string] = [name, "quiet://clock"];
        try {
          // Without it, mcpd subscribes upstream, and the server's refusal ends the stream.
          const refused = c.subscribe({ resources: [clock], kinds: ["resource_updated"] });
          await assert.rejects(refused.next(), (e) => e instanceof MCPDError && e.server === name && !(e instanceof Unavailable));
          // mcpd refuses less than a second; the client, a negative interval.
          await assert.rejects(c.subscribe({ resources: [clock], fallbackPollIntervalMs: 500 }).next(), InvalidArgument);
          assert.throws(() => c.subscribe({ resources: [clock], fallbackPollIntervalMs: -1 }), RangeError);
          const sub = c.subscribe({ resources: [clock], kinds: ["resource_updated"], fallbackPollIntervalMs: 1000 });
          for (let i = 0; i < 2; i++) {
            const ev = await nextOf(sub, "an update of quiet://clock");
            assert.deepEqual([ev.kind, ev.server, ev.uri], ["resource_updated", name, "quiet://clock"]);
          }
          sub.close();
        } finally {
          await c.disconnectServer(name);
        }
      }));

    it("replays buffered events with afterSequence", () =>
      withClient(wire, async (c) => {
        const sub = c.subscribe({ resources: [CLOCK], kinds: ["resource_updated"] });
        const seqs = await ticks(sub, 3);
        sub.close();
        const replay = c.subscribe({ resources: [CLOCK], kinds: ["resource_updated"], afterSequence: seqs[0]! });
        const got = await ticks(replay, 2);
        replay.close();
        assert.deepEqual(got, seqs.slice(1));
      }));

    it("gives the event of a next() abandoned by a timeout to the next next()", () =>
      withClient(wire, async (c) => {
        const ref = c.subscribe({ resources: [CLOCK], kinds: ["resource_updated"] });
        await ticks(ref, 1);
        const sub = c.subscribe({ resources: [CLOCK], kinds: ["resource_updated"] });
        const [first] = await ticks(sub, 1);
        // The clock ticks every second: the timer wins.
        assert.equal(await Promise.race([sub.next(), sleep(100, TIMED_OUT)]), TIMED_OUT);
        const got = await ticks(sub, 3);
        let seq = 0;
        while (seq < first!) [seq] = (await ticks(ref, 1)) as [number];
        assert.deepEqual(got, await ticks(ref, 3), "each event once, in order");
        assert.equal(sub.lastSequence, got[2]);
        sub.close();
        ref.close();
      }));

    it("keeps the items and the result of a tool stream whose reads time out", () =>
      withClient(wire, async (c) => {
        const stream = c.callToolStream("mcp__demo__slow", { steps: 4, delay_ms: 300 });
        const items: (number | string)[] = [];
        let timeouts = 0;
        for (;;) {
          const r = await Promise.race([stream.next(), sleep(100, TIMED_OUT)]);
          if (r === TIMED_OUT) {
            timeouts++;
            continue;
          }
          if (r.done) break;
          items.push(r.value.type === "progress" ? r.value.progress : r.value.type);
        }
        assert.ok(timeouts > 0, "no read timed out");
        assert.deepEqual(items, [1, 2, 3, 4, "result"]);
        assert.equal(stream.result?.isError, false);
      }));

    it("ends a subscription whose next() threw: later next() calls return done and open no stream", async () => {
      const proxy = await new UnixProxy(path.join(tempDir(), "proxy.sock"), wire === "grpc" ? daemon.socket : daemon.httpSocket).start();
      const c = new Client(proxy.target, { wire, timeoutMs: RPC_TIMEOUT_MS });
      const ac = new AbortController();
      const clock = (o: SubscribeOptions): Subscription => c.subscribe({ resources: [CLOCK], kinds: ["resource_updated"], signal: ac.signal, ...o });
      try {
        // One gives up at once, the other once its reconnect budget is spent.
        const once = clock({ reconnect: false });
        const budget = clock({ reconnectTimeoutMs: 300 });
        await ticks(once, 1);
        await ticks(budget, 1);
        proxy.cut();
        await assert.rejects(once.next(), Unavailable);
        await assert.rejects(budget.next(), Unavailable);
        proxy.allow();
        const opened = proxy.accepted;
        for (const sub of [once, budget]) {
          assert.deepEqual(await sub.next(), { value: undefined, done: true });
          assert.ok(sub.closed);
        }
        ac.abort();
        await c.close();
        assert.deepEqual(await budget.next(), { value: undefined, done: true });
        await sleep(200);
        assert.equal(proxy.accepted, opened, "a stream was opened again");
      } finally {
        await c.close();
        await proxy.close();
      }
    });

    it("cancels a call at the MCP server on abort, on a deadline and on break", async () => {
      const dir = tempDir();
      const record = path.join(dir, "record.txt");
      await withClient(wire, async (c) => {
        const name = `rec-${wire.replace(/[^a-z0-9]/g, "")}`;
        const s = await c.connectServer(ServerConfig.stdio(name, process.execPath, [RECORDING_SERVER], { env: { RECORD_FILE: record } }), { replace: true });
        assert.ok(s.ready, `${s.state} ${s.lastError}`);
        const tool = `mcp__${name}__wait`;
        try {
          // An aborted signal.
          const ac = new AbortController();
          const call = c.callTool(tool, {}, { signal: ac.signal });
          const [called] = await linesOf(record, "called ", 1);
          ac.abort();
          await assert.rejects(call, Cancelled);
          const [cancelled] = await linesOf(record, "cancelled ", 1);
          assert.equal(cancelled!.split(" ")[1], called!.split(" ")[1]);
          // A stream left by break.
          const stream = c.callToolStream(tool, {});
          const pending = stream.next();
          await linesOf(record, "called ", 2);
          await stream.return();
          await pending.catch(() => undefined);
          await linesOf(record, "cancelled ", 2);
          // A deadline.
          await assert.rejects(c.callTool(tool, {}, { timeoutMs: 300 }), DeadlineExceeded);
          const called3 = await linesOf(record, "called ", 3);
          const cancelled3 = await linesOf(record, "cancelled ", 3);
          assert.equal(cancelled3[2]!.split(" ")[1], called3[2]!.split(" ")[1]);
        } finally {
          await c.disconnectServer(name);
        }
      });
    });

    it("keeps calls retryable and the process alive while mcpd shuts down under load", async () => {
      // A graceful shutdown sends GOAWAY: a stream opened in that window is
      // refused (REFUSED_STREAM), and an idle session is torn down while
      // new calls reconnect. Every failure must be Unavailable, and nothing
      // may escape as an uncaught exception.
      const errors = new Map<string, number>();
      for (let round = 0; round < 8; round++) {
        const own = await new Daemon().start();
        const c = own.client(wire);
        try {
          await c.servers();
          let stop = false;
          const callers = Array.from({ length: 16 }, async () => {
            while (!stop) {
              try {
                await c.servers();
                await new Promise((r) => setImmediate(r)); // lets the session go idle now and then
              } catch (e) {
                const key = e instanceof MCPDError ? `${e.codeName} retryable=${e.retryable}` : String(e);
                errors.set(key, (errors.get(key) ?? 0) + 1);
                await sleep(5);
              }
            }
          });
          await sleep(100);
          await own.stop();
          await sleep(100);
          stop = true;
          await Promise.all(callers);
        } finally {
          await c.close();
          await own.stop();
        }
      }
      assert.deepEqual([...errors.keys()], ["UNAVAILABLE retryable=true"], JSON.stringify(Object.fromEntries(errors)));
    });

    describe("approvals", () => {
      // mcpd with an ask rule: calls of mcp__demo__echo wait for an agent's approval.
      let asking: Daemon;
      before(async () => {
        asking = await new Daemon(["--ask-tool", "mcp__demo__echo"]).start();
        await asking.demoReady();
      });
      after(async () => {
        await asking?.stop();
      });

      it("approves and denies the calls an ask rule holds with a handler", async () => {
        const logged: unknown[] = [];
        const c = asking.client(wire, { log: (_message, error) => logged.push(error) });
        try {
          await assert.rejects(c.callTool("mcp__demo__echo", { message: "unasked" }), (e) => e instanceof PermissionDenied && /no agent/.test(e.message));
          const seen: ApprovalRequest[] = [];
          c.onApproval(async (req) => {
            seen.push(req);
            if (req.arguments["message"] === "yes") return { approved: true };
            if (req.arguments["message"] === "true") return true;
            return { reason: "not this one" };
          });
          assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the handler");
          assert.equal((await c.callTool("mcp__demo__echo", { message: "yes" })).text, "yes");
          assert.equal((await c.callTool("mcp__demo__echo", { message: "true" })).text, "true");
          await assert.rejects(c.callTool("mcp__demo__echo", { message: "no" }), (e) => e instanceof PermissionDenied && e.message.includes("not this one"));
          const req = seen[0]!;
          assert.equal(req.kind, "approval");
          assert.equal(req.server, "demo");
          assert.equal(req.tool, "mcp__demo__echo");
          assert.equal(req.rule, "ask mcp__demo__echo");
          assert.deepEqual(req.arguments, { message: "yes" });
          assert.equal(req.annotations["readOnlyHint"], true);
          assert.equal(typeof req.caller, "string");
          assert.ok(req.deadline instanceof Date);
          assert.equal(req.pollIntervalMs, undefined);
          // Tools no rule holds are not asked about.
          assert.equal((await c.callTool("mcp__demo__add", { a: 1, b: 2 })).text, "3");
          assert.equal(seen.length, 3);
          // A poll of the tool is asked about once, saying how often it calls.
          const p = await c.startPoll("demo", { tool: "echo", arguments: { message: "yes" }, intervalMs: 7_000 });
          await c.stopPoll(p.id);
          assert.equal(seen.length, 4);
          assert.equal(seen[3]!.pollIntervalMs, 7_000);
          assert.deepEqual(seen[3]!.arguments, { message: "yes" });
          assert.deepEqual(logged, []);
        } finally {
          await c.close();
        }
      });

      it("denies a call whose approval handler throws, without telling the caller the error's text", async () => {
        const logged: [string, unknown][] = [];
        const c = asking.client(wire, { log: (message, error) => logged.push([message, error]) });
        try {
          c.onApproval(() => {
            throw new Error("a secret of the handler");
          });
          assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the handler");
          await assert.rejects(
            c.callTool("mcp__demo__echo", { message: "x" }),
            (e) => e instanceof PermissionDenied && e.message.includes("approval handler failed: Error") && !e.message.includes("secret"),
          );
          assert.equal(logged.length, 1);
          assert.equal(logged[0]![0], "approval handler failed for server demo");
          assert.equal((logged[0]![1] as Error).message, "a secret of the handler");
          // A ServerRequestError is a refusal, with its message as the reason; nothing is logged.
          c.onApproval(() => {
            throw new ServerRequestError("ask again tomorrow", -32001);
          });
          await assert.rejects(c.callTool("mcp__demo__echo", { message: "x" }), (e) => e instanceof PermissionDenied && e.message.includes("ask again tomorrow"));
          assert.equal(logged.length, 1);
          // An answer that is neither a boolean nor an ApprovalResult fails the handler.
          c.onApproval(() => "yes" as unknown as boolean);
          await assert.rejects(c.callTool("mcp__demo__echo", { message: "x" }), (e) => e instanceof PermissionDenied && e.message.includes("approval handler failed: TypeError"));
          assert.equal(logged.length, 2);
        } finally {
          await c.close();
        }
      });

      it("aborts a handler's signal when mcpd stops waiting, and sends no reply after it", async () => {
        const c = asking.client(wire);
        try {
          let asked!: () => void;
          const handlerRuns = new Promise<void>((r) => (asked = r));
          let answered!: (reason: unknown) => void;
          const aborted = new Promise<unknown>((r) => (answered = r));
          c.onApproval(async (req, { signal }) => {
            if (req.arguments["message"] !== "slow") return true;
            asked();
            await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
            answered(signal.reason);
            return true; // too late: not sent
          });
          assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the handler");
          const before = (await lateReplies(asking)).length;
          const call = new AbortController();
          const slow = c.callTool("mcp__demo__echo", { message: "slow" }, { signal: call.signal }).catch((e: unknown) => e);
          await handlerRuns;
          call.abort();
          assert.ok((await slow) instanceof Cancelled);
          const reason = await aborted;
          assert.ok(reason instanceof Cancelled && reason.message !== "", `the signal's reason: ${String(reason)}`);
          // The next reply goes out after the late one would have: mcpd has
          // read both once the call returns.
          assert.equal((await c.callTool("mcp__demo__echo", { message: "next" })).text, "next");
          assert.deepEqual((await lateReplies(asking)).slice(before), []);
        } finally {
          await c.close();
        }
      });

      it("aborts the signal of a handler still running when the client closes, and logs no failure after it", async () => {
        const logged: string[] = [];
        const c = asking.client(wire, { log: (message) => logged.push(message) });
        let asked!: () => void;
        const handlerRuns = new Promise<void>((r) => (asked = r));
        let aborted = false;
        c.onApproval(async (_req, { signal }) => {
          asked();
          await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
          aborted = signal.reason instanceof Cancelled && /closed/.test(signal.reason.message);
          throw new Error("the model call stopped"); // as a fetch given the signal would
        });
        assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the handler");
        const call = c.callTool("mcp__demo__echo", { message: "x" }).catch((e: unknown) => e);
        await handlerRuns;
        await c.close();
        assert.ok(aborted, "the handler's signal did not abort with the client's close()");
        assert.ok((await call) instanceof MCPDError);
        await sleep(0); // the handler's rejection is handled
        assert.deepEqual(logged, []);
      });
    });

    it("answers sampling, elicitation and roots with callbacks", { skip: skipEverything }, () =>
      withClient(wire, async (c) => {
        const ev = await connectEverything(c, `ev-${wire.replace(/[^a-z0-9]/g, "")}`);
        const seen: (SamplingRequest | ElicitationRequest)[] = [];
        c.onSampling(async (req) => {
          seen.push(req);
          await new Promise((r) => setTimeout(r, 1));
          return { content: "answer to: " + req.text, model: "ts-model" };
        });
        c.onElicitation(async (req) => {
          seen.push(req);
          return { name: "Ada Lovelace" };
        });
        assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the handlers");
        let r = await c.callTool(`mcp__${ev}__trigger-sampling-request`, { prompt: "a haiku", maxTokens: 20 });
        assert.match(r.text, /ts-model/);
        assert.match(r.text, /answer to: .*a haiku/);
        const sampling = seen[0] as SamplingRequest;
        assert.equal(sampling.kind, "sampling");
        assert.equal(sampling.server, ev);
        assert.equal(sampling.maxTokens, 20);
        assert.equal(sampling.messages[0]!.role, "user");
        assert.ok(sampling.deadline instanceof Date);
        r = await c.callTool(`mcp__${ev}__trigger-elicitation-request`);
        assert.match(r.text, /Ada Lovelace/);
        const elicitation = seen[1] as ElicitationRequest;
        assert.equal(elicitation.mode, "form");
        assert.ok(elicitation.requestedSchema && "properties" in elicitation.requestedSchema);
        // Registering roots later adds the kind on the open stream.
        let asked = false;
        c.onRoots(() => {
          asked = true;
          return [{ uri: "file:///from/ts-handler", name: "handler" }, "file:///second"];
        });
        assert.ok(await c.handlersReady(RPC_TIMEOUT_MS));
        await c.setRoots(["file:///ignored/ts"], { server: ev });
        const text = await poll("the handler's roots", async () => {
          const t = (await c.callTool(`mcp__${ev}__get-roots-list`)).text;
          return t.includes("from/ts-handler") ? t : "";
        });
        assert.match(text, /file:\/\/\/second/);
        assert.ok(asked);
        // A refusal reaches the server as a JSON-RPC error.
        c.onSampling(() => {
          throw new ServerRequestError("no model here", -32001);
        });
        const refused = await c.callTool(`mcp__${ev}__trigger-sampling-request`, { prompt: "x", maxTokens: 5 }).catch((e: unknown) => e);
        const refusedText = refused instanceof MCPDError ? refused.message : (refused as { text: string }).text;
        assert.match(refusedText, /no model here|-32001/);
        await c.disconnectServer(ev);
      }),
    );

    it("reports mcpd's refusal of a reply to the log option", { skip: skipEverything }, async () => {
      const logged: [string, unknown][] = [];
      const c = daemon.client(wire, { log: (message, error) => logged.push([message, error]) });
      try {
        const ev = await connectEverything(c, `evrefused-${wire.replace(/[^a-z0-9]/g, "")}`);
        // mcpd refuses a root that is not a file:// URI: the server gets an
        // error, and the stream says so.
        c.onRoots(() => ["https://example.com/not-a-root"]);
        assert.ok(await c.handlersReady(RPC_TIMEOUT_MS));
        await c.setRoots(["file:///ignored/ts-refused"], { server: ev });
        const [message, reason] = await poll("the refusal in the log", async () => logged.find(([m]) => m.includes("refused the reply")));
        assert.match(message, /^mcpd refused the reply to request \S+ /);
        assert.equal(typeof reason, "string");
        assert.match(reason as string, /roots\[0\] is not a file:\/\/ URI/);
        assert.doesNotMatch(reason as string, /example\.com/);
        assert.match((await c.callTool(`mcp__${ev}__echo`, { message: "still here" })).text, /still here/);
        await c.disconnectServer(ev);
      } finally {
        await c.close();
      }
    });

    it("keeps a reply under way when a handler of a new kind is registered", { skip: skipEverything }, () =>
      withClient(wire, async (c) => {
        const ev = await connectEverything(c, `evkind-${wire.replace(/[^a-z0-9]/g, "")}`);
        let asked!: () => void;
        const handlerRuns = new Promise<void>((r) => (asked = r));
        let release!: () => void;
        const released = new Promise<void>((r) => (release = r));
        c.onSampling(async () => {
          asked();
          await released;
          return { content: "late answer", model: "ts-model" };
        });
        assert.ok(await c.handlersReady(RPC_TIMEOUT_MS));
        const call = c.callTool(`mcp__${ev}__trigger-sampling-request`, { prompt: "p", maxTokens: 5 });
        await handlerRuns;
        c.onRoots(() => ["file:///while-sampling"]);
        assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the new kind");
        release();
        assert.match((await call).text, /late answer/);
        await c.disconnectServer(ev);
      }),
    );

    it("waits without a bound for handlersReady(Infinity)", async () => {
      const c = daemon.client(wire);
      const warnings: string[] = [];
      const onWarning = (w: Error): void => void warnings.push(w.name);
      process.on("warning", onWarning);
      try {
        c.onRoots(() => []);
        assert.equal(await c.handlersReady(Infinity), true, "handlersReady(Infinity) gave up");
        assert.equal(await c.handlersReady(2 ** 40), true);
        await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
        assert.deepEqual(warnings, []);
      } finally {
        process.off("warning", onWarning);
        await c.close();
      }
    });

    it("closes without waiting for a handler that is still running", { skip: skipEverything }, async () => {
      const c = daemon.client(wire);
      const ev = await connectEverything(c, `evclose-${wire.replace(/[^a-z0-9]/g, "")}`);
      let asked!: () => void;
      const handlerRuns = new Promise<void>((r) => (asked = r));
      c.onSampling(() => {
        asked();
        return new Promise<never>(() => undefined); // a person who never answers
      });
      assert.ok(await c.handlersReady(RPC_TIMEOUT_MS), "mcpd did not confirm the handler");
      const call = c.callTool(`mcp__${ev}__trigger-sampling-request`, { prompt: "x", maxTokens: 5 }).catch((e: unknown) => e);
      await handlerRuns;
      const closed = await Promise.race([c.close().then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), RPC_TIMEOUT_MS))]);
      assert.ok(closed, "close() waited for the running handler");
      assert.equal(await c.handlersReady(100), false, "a closed client's handlers are not ready");
      assert.ok((await call) instanceof MCPDError);
      const other = daemon.client(wire);
      try {
        await other.disconnectServer(ev);
      } finally {
        await other.close();
      }
    });
  });
}

// Keep the file list honest: a fixture the tests need must be built.
assert.ok(fs.existsSync(RECORDING_SERVER) || skip, `missing ${RECORDING_SERVER}`);
assert.ok(fs.existsSync(QUIET_SERVER) || skip, `missing ${QUIET_SERVER}`);
