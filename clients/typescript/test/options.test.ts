// Client options without a daemon: targets, wires, tokens, TLS files.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Client, DEFAULT_TARGET, DEFAULT_WIRE } from "../src/index.js";

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
  it("defaults to $MCPD_ADDRESS, else 127.0.0.1:50051, and the Connect wire", async () => {
    const c = withEnv({ MCPD_ADDRESS: undefined, MCPD_WIRE: undefined }, () => new Client());
    assert.equal(c.target, DEFAULT_TARGET);
    assert.equal(c.wire, "connect");
    assert.equal(DEFAULT_WIRE, "connect");
    await c.close();
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

  it("refuses calls after close()", async () => {
    const c = new Client("127.0.0.1:1");
    await c.close();
    await c.close(); // idempotent
    await assert.rejects(c.servers(), (e: Error) => e.name === "Cancelled");
    assert.throws(() => c.subscribe(), (e: Error) => e.name === "Cancelled");
  });
});
