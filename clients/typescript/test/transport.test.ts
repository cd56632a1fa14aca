// The "connect" wire's keep-alive sockets against a server that closes idle
// connections, as mcpd does after 2 minutes: a scripted HTTP/1.1 server on
// loopback drops a connection, unread, when a request arrives on it after it
// sat idle too long (the server's idle close crossing the request); and
// against one that closes or resets a reused connection at a request, before
// or after it began to answer.

import assert from "node:assert/strict";
import * as http from "node:http";
import type * as net from "node:net";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";
import { openTransport } from "../src/transport.js";
import { Cancelled, Client, DeadlineExceeded, Unavailable } from "../src/index.js";

const SERVER_IDLE_MS = 150;
const CLIENT_IDLE_MS = 50;
/** Longer than both: the pauses between calls, a slow call, the silences of a stream. */
const QUIET_MS = 300;

/** One message of a Connect stream: flags, length, data. */
function envelope(flags: number, data: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

describe("the connect wire's keep-alive sockets", () => {
  it("closes an idle one before the server does, and no busy one", async () => {
    const idleSince = new WeakMap<net.Socket, number>();
    const server = http.createServer((req, res) => {
      const since = idleSince.get(req.socket);
      idleSince.delete(req.socket);
      if (since !== undefined && performance.now() - since > SERVER_IDLE_MS) {
        req.socket.destroy();
        return;
      }
      res.on("finish", () => idleSince.set(req.socket, performance.now()));
      req.resume();
      req.on("end", async () => {
        if (req.url?.endsWith("/Subscribe")) {
          res.writeHead(200, { "content-type": "application/connect+proto" });
          await sleep(QUIET_MS);
          res.write(envelope(0, toBinary(pb.SubscribeResponseSchema, create(pb.SubscribeResponseSchema, { event: { sequence: 7n } }))));
          await sleep(QUIET_MS);
          res.end(envelope(2, Buffer.from("{}")));
          return;
        }
        if (req.url?.endsWith("/GetServer")) await sleep(QUIET_MS);
        res.writeHead(200, { "content-type": "application/proto" }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const target = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const conn = openTransport({ target, wire: "connect", token: "", tls: undefined, idleSocketTimeoutMs: CLIENT_IDLE_MS });
    const hub = createClient(pb.MCPHub, conn.transport);
    try {
      for (let i = 0; i < 3; i++) {
        await hub.listServers({});
        await sleep(QUIET_MS);
      }
      // Busy sockets stay: a call and a stream quiet for longer than the idle timeout.
      await hub.getServer({ name: "slow" });
      const sequences: bigint[] = [];
      for await (const r of hub.subscribe({})) sequences.push(r.event!.sequence);
      assert.deepEqual(sequences, [7n]);
    } finally {
      conn.close();
      server.closeAllConnections();
      server.close();
    }
  });
});

/** What a scripted server saw: connections, requests, and how it ended each connection it cut. */
interface Seen {
  connections: number;
  requests: string[];
  cut: number;
}

/**
 * A scripted HTTP/1.1 server on loopback: `answer` gets each request, with
 * its number on its connection (1 for a connection's first), once the
 * request's body has been read.
 */
async function scripted(
  answer: (nth: number, req: http.IncomingMessage, res: http.ServerResponse, seen: Seen) => void,
  run: (target: string, seen: Seen) => Promise<void>,
): Promise<void> {
  const seen: Seen = { connections: 0, requests: [], cut: 0 };
  const count = new WeakMap<net.Socket, number>();
  const server = http.createServer((req, res) => {
    const nth = (count.get(req.socket) ?? 0) + 1;
    count.set(req.socket, nth);
    req.resume();
    req.on("end", () => {
      seen.requests.push(req.url ?? "");
      answer(nth, req, res, seen);
    });
  });
  server.on("connection", () => seen.connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await run(`127.0.0.1:${(server.address() as net.AddressInfo).port}`, seen);
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

/** An empty answer of a unary call, on a keep-alive connection. */
function ok(res: http.ServerResponse): void {
  res.writeHead(200, { "content-type": "application/proto" }).end();
}

/** A script that answers a connection's first request and cuts each later one with `cut`. */
function cutAfterFirst(cut: (req: http.IncomingMessage) => void) {
  return (nth: number, req: http.IncomingMessage, res: http.ServerResponse, seen: Seen): void => {
    if (nth > 1) {
      seen.cut++;
      cut(req);
      return;
    }
    ok(res);
  };
}

/** Runs `body` with a Client of `target`, closed after. */
async function withClient(target: string, body: (c: Client) => Promise<void>): Promise<void> {
  const c = new Client(target, { timeoutMs: 10_000 });
  try {
    await body(c);
  } finally {
    await c.close();
  }
}

describe("the connect wire on a reused connection that breaks at a request", () => {
  // The idle close crossing the request: read, then dropped unanswered.
  // Only calls declared free of side effects or idempotent (here
  // ListServers) are sent again.
  for (const [how, cut] of [
    ["closed", (req: http.IncomingMessage) => req.socket.destroy()],
    ["reset", (req: http.IncomingMessage) => req.socket.resetAndDestroy()],
  ] as const) {
    it(`sends a unary call again on a new connection when the reused one was ${how} before a byte of the answer came`, () =>
      scripted(cutAfterFirst(cut), (target, seen) =>
        withClient(target, async (c) => {
          await c.servers();
          await c.servers();
          assert.equal(seen.cut, 1, "the second call went out on the reused connection");
          assert.equal(seen.requests.length, 3);
          assert.equal(seen.connections, 2, "the call was sent again on a new connection");
        }),
      ));
  }

  it("does not send a tool call again: mcpd may have run it", () =>
    // mcpd answers a unary call only when it ends: a call it ran and then
    // cut off looks the same as one it never read.
    scripted(
      cutAfterFirst((req) => req.socket.destroy()),
      (target, seen) =>
        withClient(target, async (c) => {
          await c.servers();
          await assert.rejects(c.callTool("mcp__x__echo", {}), Unavailable);
          assert.deepEqual([seen.cut, seen.requests.length, seen.connections], [1, 2, 1]);
          assert.match(seen.requests[1] ?? "", /\/CallTool$/);
        }),
    ));

  it("sends it again on a new connection, not on another idle one", () =>
    // Every connection is cut at its second request, as when mcpd restarted.
    scripted(
      cutAfterFirst((req) => req.socket.destroy()),
      (target, seen) =>
        withClient(target, async (c) => {
          // Two calls at once: two connections, both idle after.
          await Promise.all([c.servers(), c.servers()]);
          assert.equal(seen.connections, 2);
          await c.servers();
          assert.deepEqual([seen.cut, seen.requests.length, seen.connections], [1, 4, 3]);
        }),
    ));

  for (const [what, begun] of [
    ["the status line", "HTTP/1.1 200 OK\r\n"],
    ["the head and part of the body", "HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ncontent-length: 10\r\n\r\n\x0a\x02"],
  ] as const) {
    it(`does not send a unary call again once ${what} came and the connection was reset`, () =>
      scripted(
        cutAfterFirst((req) => req.socket.write(begun, () => setTimeout(() => req.socket.resetAndDestroy(), 20))),
        (target, seen) =>
          withClient(target, async (c) => {
            await c.servers();
            await assert.rejects(c.servers(), Unavailable);
            assert.equal(seen.cut, 1, "the second call went out on the reused connection");
            assert.equal(seen.requests.length, 2, "the call, which may have run, was not sent again");
            assert.equal(seen.connections, 1);
          }),
      ));
  }

  it("does not send a stream again", () =>
    scripted(
      cutAfterFirst((req) => req.socket.destroy()),
      (target, seen) =>
        withClient(target, async (c) => {
          await c.servers();
          const sub = c.subscribe({ reconnect: false });
          await assert.rejects(sub.next(), Unavailable);
          assert.deepEqual([seen.cut, seen.requests.length], [1, 2]);
          assert.match(seen.requests[1] ?? "", /\/Subscribe$/);
        }),
    ));

  it("ends a call sent again at the call's deadline", () =>
    scripted(
      (nth, req, res, seen) => {
        // The reused connection is cut late; the new one never answers.
        if (nth > 1) {
          seen.cut++;
          setTimeout(() => req.socket.destroy(), 400);
          return;
        }
        if (seen.connections === 1) ok(res);
      },
      (target, seen) =>
        withClient(target, async (c) => {
          await c.servers();
          // The second send shares the call's signal, and so its deadline
          // (transport.ts, resendOnReusedSocket).
          await assert.rejects(c.servers({ timeoutMs: 700 }), DeadlineExceeded);
          assert.deepEqual([seen.cut, seen.requests.length, seen.connections], [1, 3, 2]);
        }),
    ));

  it("does not send a call again once its signal aborted", () =>
    scripted(
      cutAfterFirst((req) => setTimeout(() => req.socket.destroy(), 200)),
      (target, seen) =>
        withClient(target, async (c) => {
          await c.servers();
          const ac = new AbortController();
          setTimeout(() => ac.abort(), 100);
          await assert.rejects(c.servers({ signal: ac.signal }), Cancelled);
          await sleep(300);
          assert.deepEqual([seen.cut, seen.requests.length], [1, 2]);
        }),
    ));
});
