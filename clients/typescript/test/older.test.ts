// The server-request stream against an mcpd older than registrations sent
// again on the stream: a fake of its HandleServerRequests (connect-node's
// server, in process, h2c on loopback) refuses a second register with
// INVALID_ARGUMENT, as those did; the client then opens a new stream with
// every kind.

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type * as net from "node:net";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Client, type Wire } from "../src/index.js";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";

function olderMcpd(registrations: number[][]): (router: ConnectRouter) => void {
  return (router) =>
    router.rpc(pb.MCPHub.method.handleServerRequests, async function* (requests) {
      let first = true;
      for await (const msg of requests) {
        if (msg.message.case !== "register") continue;
        if (!first) throw new ConnectError("after register, only reply messages are accepted", Code.InvalidArgument);
        first = false;
        registrations.push([...msg.message.value.kinds]);
        yield create(pb.HandleServerRequestsResponseSchema, { message: { case: "registered", value: msg.message.value } });
      }
    });
}

describe("an older mcpd", () => {
  for (const wire of ["grpc", "connect-h2", "connect"] as Wire[]) {
    it(`gets a new stream for a new kind (wire ${wire})`, async () => {
      const registrations: number[][] = [];
      const server = http2.createServer(connectNodeAdapter({ routes: olderMcpd(registrations) }));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as net.AddressInfo).port;
      const c = new Client(`127.0.0.1:${port}`, { wire, timeoutMs: 10_000 });
      try {
        c.onSampling(() => "x");
        assert.ok(await c.handlersReady(10_000));
        c.onRoots(() => []);
        assert.ok(await c.handlersReady(10_000), `no stream with the new kind: ${JSON.stringify(registrations)}`);
        const sorted = registrations.map((kinds) => [...kinds].sort());
        assert.deepEqual(sorted, [[pb.ServerRequestKind.SAMPLING], [pb.ServerRequestKind.SAMPLING, pb.ServerRequestKind.ROOTS].sort()]);
      } finally {
        await c.close();
        server.close();
      }
    });
  }
});
