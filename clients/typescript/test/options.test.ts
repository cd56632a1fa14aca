// Client options without a daemon: targets, wires, tokens, TLS files.

import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Client, DEFAULT_TARGET, DEFAULT_WIRE, InvalidArgument } from "../src/index.js";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
/** Targets and what the constructor makes of them, shared with the Python client's tests. */
const TARGET_CASES = (
  JSON.parse(fs.readFileSync(path.join(REPO, "clients", "testdata", "targets.json"), "utf8")) as {
    cases: { target: string; want?: string; error?: string }[];
  }
).cases;

function withEnv<T>(env: Record<string, string | undefined>, fn: () => T): T {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe("Client options", () => {
  it("defaults to $MCPD_ADDRESS, else 127.0.0.1:50051 on gRPC; a target given, to the Connect wire", async () => {
    // The default target is mcpd's default gRPC listener, which speaks gRPC only.
    const c = withEnv({ MCPD_ADDRESS: undefined, MCPD_WIRE: undefined }, () => new Client());
    assert.equal(c.target, DEFAULT_TARGET);
    assert.equal(c.wire, "grpc");
    await c.close();
    const w = withEnv({ MCPD_ADDRESS: undefined, MCPD_WIRE: "connect" }, () => new Client());
    assert.equal(w.wire, "connect");
    await w.close();
    const t = withEnv({ MCPD_ADDRESS: "127.0.0.1:8080", MCPD_WIRE: undefined }, () => new Client());
    assert.equal(t.wire, "connect");
    assert.equal(DEFAULT_WIRE, "connect");
    await t.close();
    const a = withEnv({ MCPD_ADDRESS: undefined, MCPD_WIRE: undefined }, () => new Client("127.0.0.1:8080"));
    assert.equal(a.wire, "connect");
    await a.close();
    const e = withEnv({ MCPD_ADDRESS: "unix:///run/mcpd.sock", MCPD_WIRE: "grpc" }, () => new Client());
    assert.equal(e.target, "unix:///run/mcpd.sock");
    assert.equal(e.wire, "grpc");
    await e.close();
    const o = new Client("127.0.0.1:1", { wire: "connect-h2" });
    assert.equal(o.wire, "connect-h2");
    await o.close();
  });

  it("refuses a bad wire, a token that is not printable ASCII and half a client certificate", () => {
    assert.throws(() => new Client("127.0.0.1:1", { wire: "http3" as "grpc" }), TypeError);
    assert.throws(() => new Client("127.0.0.1:1", { token: "tök" }), (e: Error) => e instanceof TypeError && !e.message.includes("tök"));
    assert.throws(() => new Client("127.0.0.1:1", { cert: "-----BEGIN CERTIFICATE-----" }), TypeError);
    assert.throws(() => new Client("unix:", {}), TypeError);
  });

  it("refuses a keep-alive more frequent than mcpd allows, and takes 0 or false for none", async () => {
    for (const keepaliveMs of [4_999, 1, -5_000, Number.NaN, Number.POSITIVE_INFINITY, "30000" as unknown as number]) {
      assert.throws(
        () => new Client("127.0.0.1:1", { keepaliveMs }),
        (e: Error) => e instanceof TypeError && e.message.includes("keepaliveMs must be at least 5000") && e.message.includes("every 5 s"),
        String(keepaliveMs),
      );
    }
    for (const keepaliveTimeoutMs of [0, -1, Number.NaN]) {
      assert.throws(() => new Client("127.0.0.1:1", { keepaliveTimeoutMs }), (e: Error) => e instanceof TypeError && e.message.includes("keepaliveTimeoutMs"));
    }
    for (const keepaliveMs of [undefined, 0, false, 5_000, 120_000] as const) {
      for (const wire of ["grpc", "connect", "connect-h2"] as const) await new Client("127.0.0.1:1", { wire, keepaliveMs, keepaliveTimeoutMs: 500 }).close();
    }
  });

  it("refuses calls after close()", async () => {
    const c = new Client("127.0.0.1:1");
    await c.close();
    await c.close(); // idempotent
    await assert.rejects(c.servers(), (e: Error) => e.name === "Cancelled" && e.message === "CANCELLED: the client is closed");
    assert.throws(() => c.subscribe(), (e: Error) => e.name === "Cancelled");
    assert.throws(() => c.callToolStream("mcp__demo__echo"), (e: Error) => e.name === "Cancelled");
  });

  it("takes TLS from an https:// target, and refuses TLS files with an http:// one", async () => {
    // No CA given: the system roots. The call fails, but as a TLS or
    // connection failure, not as "Protocol https: not supported".
    const c = new Client("https://127.0.0.1:1", { timeoutMs: 5_000 });
    await assert.rejects(c.servers(), (e: Error) => e.name === "Unavailable" && !/protocol/i.test(e.message));
    await c.close();
    assert.throws(() => new Client("http://127.0.0.1:1", { ca: "-----BEGIN CERTIFICATE-----" }), TypeError);
  });

  it("keeps no failure of a stream nobody reads for the process to crash on", async () => {
    // mcpd is not there: the stream fails before anything reads it. Node
    // ends the process on an unhandled rejection; the test runner reports it.
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown): void => void unhandled.push(e);
    process.on("unhandledRejection", onUnhandled);
    try {
      const c = new Client("127.0.0.1:1", { timeoutMs: 5_000 });
      const cancelled = c.callToolStream("mcp__demo__echo", { message: "x" });
      cancelled.cancel();
      const failed = c.callToolStream("mcp__demo__echo", { message: "x" });
      await new Promise((r) => setTimeout(r, 200));
      await assert.rejects(failed.next(), (e: Error) => e.name === "Unavailable");
      await c.close();
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("leaves no listener on the caller's signal after calls and failed subscriptions", async () => {
    const c = new Client("127.0.0.1:1", { timeoutMs: 5_000 });
    const ac = new AbortController();
    for (let i = 0; i < 5; i++) {
      await assert.rejects(c.servers({ signal: ac.signal }));
      const sub = c.subscribe({ reconnect: false, signal: ac.signal });
      await assert.rejects(sub.next());
    }
    assert.equal(getEventListeners(ac.signal, "abort").length, 0);
    await c.close();
  });

  it("refuses a model's argument string that is no JSON object with InvalidArgument, before any call", async () => {
    // A model's malformed output is an error the agent loop catches with
    // the others and hands back, not a crash: nothing listens on port 1.
    const c = new Client("127.0.0.1:1");
    try {
      for (const text of ["[1]", "5", '"a"', "null", "not json", '{"a": 1']) {
        const invalid = (e: unknown): boolean => e instanceof InvalidArgument && /tool arguments/.test(e.rawMessage) && !e.retryable;
        await assert.rejects(c.callTool("mcp__demo__add", text), invalid, text);
        assert.throws(() => c.callToolStream("mcp__demo__add", text), invalid, text);
        await assert.rejects(c.startPoll("demo", { tool: "add", arguments: text }), invalid, text);
      }
    } finally {
      await c.close();
    }
  });

  for (const c of TARGET_CASES) {
    it(`takes the target ${JSON.stringify(c.target)} ${c.error === undefined ? `as ${c.want}` : `for a TypeError: ${c.error}`}`, async () => {
      for (const wire of ["connect", "grpc"] as const) {
        if (c.error !== undefined) {
          const error = c.error;
          assert.throws(() => new Client(c.target, { wire }), (e: unknown) => e instanceof TypeError && e.message.includes(error));
          continue;
        }
        const client = new Client(c.target, { wire });
        assert.equal(client.target, c.want);
        await client.close();
      }
    });
  }

  it("checks a target from $MCPD_ADDRESS too", () => {
    assert.throws(() => withEnv({ MCPD_ADDRESS: "localhost" }, () => new Client()), { name: "TypeError", message: /\$MCPD_ADDRESS.*has no port/ });
  });

  it("refuses a scheme it does not speak", () => {
    assert.throws(() => new Client("dns:///localhost:50051"), { name: "TypeError", message: /scheme/ });
  });
});
