// Client behaviour that needs an mcpd to answer in a particular way (slowly,
// or never): a fake of a few MCPHub methods (connect-node's server, in
// process, h2c on loopback).

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type * as net from "node:net";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Cancelled, Client, DeadlineExceeded } from "../src/index.js";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";

async function withFake(routes: (router: ConnectRouter) => void, run: (target: string) => Promise<void>): Promise<void> {
  const server = http2.createServer(connectNodeAdapter({ routes }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await run(`127.0.0.1:${(server.address() as net.AddressInfo).port}`);
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
});
