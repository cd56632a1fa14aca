// Client behaviour that needs an mcpd to answer in a particular way (slowly,
// or never): a fake of a few MCPHub methods (connect-node's server, in
// process, h2c on loopback).

import assert from "node:assert/strict";
import * as http from "node:http";
import * as http2 from "node:http2";
import type * as net from "node:net";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Cancelled, Client, DeadlineExceeded, Unavailable, type Wire } from "../src/index.js";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";

function port(server: net.Server): number {
  return (server.address() as net.AddressInfo).port;
}

async function withFake(routes: (router: ConnectRouter) => void, run: (target: string) => Promise<void>): Promise<void> {
  const server = http2.createServer(connectNodeAdapter({ routes }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await run(`127.0.0.1:${port(server)}`);
  } finally {
    server.close();
  }
}

describe("against a fake mcpd", () => {
  it("gives a listing of many pages one deadline, not one per page", () =>
    withFake(
      (router) =>
        router.rpc(pb.MCPHub.method.listTools, async (req) => {
          await sleep(300);
          const page = Number(req.pageToken || "0");
          return create(pb.ListToolsResponseSchema, { tools: [{ name: `mcp__s__t${page}` }], nextPageToken: page < 3 ? String(page + 1) : "" });
        }),
      async (target) => {
        const c = new Client(target, { wire: "grpc", timeoutMs: 10_000 });
        try {
          assert.equal((await c.listTools()).length, 4);
          // Each page takes 300 ms: four of them do not fit in 700.
          await assert.rejects(c.listTools(undefined, { timeoutMs: 700 }), DeadlineExceeded);
        } finally {
          await c.close();
        }
      },
    ));

  it("cancels the name lookup of a call with the call's signal", () =>
    withFake(
      (router) => {
        router.rpc(pb.MCPHub.method.callTool, () => {
          throw new ConnectError("no tool of that name", Code.NotFound);
        });
        // The lookup of provider-safe names never answers.
        router.rpc(pb.MCPHub.method.listTools, (_req, ctx) => new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason))));
      },
      async (target) => {
        const c = new Client(target, { wire: "grpc", timeoutMs: 30_000 });
        try {
          const ac = new AbortController();
          const call = c.callTool("mcp__s__t", {}, { signal: ac.signal });
          setTimeout(() => ac.abort(), 300);
          await assert.rejects(call, Cancelled);
        } finally {
          await c.close();
        }
      },
    ));

  it("turns a stream the server refused (REFUSED_STREAM, as during a graceful shutdown) into Unavailable", async () => {
    const h2 = http2.createServer();
    h2.on("stream", (stream) => {
      stream.on("error", () => undefined); // the fake's own side of the reset
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    });
    await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
    try {
      for (const wire of ["grpc", "connect-h2"] as Wire[]) {
        const c = new Client(`127.0.0.1:${port(h2)}`, { wire, timeoutMs: 10_000 });
        try {
          await assert.rejects(c.servers(), (e) => e instanceof Unavailable && e.retryable, wire);
          // A resumable stream reconnects instead of ending with INTERNAL.
          const sub = c.subscribe({ reconnectTimeoutMs: 300 });
          await assert.rejects(sub.next(), (e) => e instanceof Unavailable && sub.reconnects > 0, wire);
        } finally {
          await c.close();
        }
      }
    } finally {
      h2.close();
    }
  });

  it("keeps a CANCELLED status mcpd sent, on every wire, and a reset stream Unavailable", async () => {
    const cancelled = JSON.stringify({ code: "canceled", message: "stopped by mcpd" });
    // Connect over HTTP/1.1: HTTP 499 with the error.
    const h1 = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(499, { "content-type": "application/json" }).end(cancelled));
    });
    // HTTP/2: grpc-status 1 or HTTP 499; GetServer's stream is reset with CANCEL instead.
    const h2 = http2.createServer();
    h2.on("stream", (stream, headers) => {
      stream.resume();
      stream.on("end", () => {
        if (String(headers[":path"]).endsWith("/GetServer")) stream.close(http2.constants.NGHTTP2_CANCEL);
        else if (String(headers["content-type"]).startsWith("application/grpc")) {
          stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": "1", "grpc-message": "stopped by mcpd" }, { endStream: true });
        } else {
          stream.respond({ ":status": 499, "content-type": "application/json" });
          stream.end(cancelled);
        }
      });
    });
    await new Promise<void>((resolve) => h1.listen(0, "127.0.0.1", resolve));
    await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
    try {
      for (const [wire, server] of [["connect", h1], ["connect-h2", h2], ["grpc", h2]] as [Wire, net.Server][]) {
        const c = new Client(`127.0.0.1:${port(server)}`, { wire, timeoutMs: 10_000 });
        try {
          await assert.rejects(c.servers(), (e) => e instanceof Cancelled && e.rawMessage === "stopped by mcpd", wire);
          if (wire !== "connect") await assert.rejects(c.getServer("demo"), Unavailable, wire);
        } finally {
          await c.close();
        }
      }
    } finally {
      h1.closeAllConnections();
      h1.close();
      h2.close();
    }
  });
});
