// The "connect" wire's keep-alive sockets against a server that closes idle
// connections, as mcpd does after 2 minutes: a scripted HTTP/1.1 server on
// loopback drops a connection, unread, when a request arrives on it after it
// sat idle too long (the server's idle close crossing the request).

import assert from "node:assert/strict";
import * as http from "node:http";
import type * as net from "node:net";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";
import { openTransport } from "../src/transport.js";

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
