// Error classes from a ConnectError, with the ErrorInfo mcpd attaches;
// retryable against the cases the Python client tests too, and from a
// real mcpd.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { fileURLToPath } from "node:url";
import {
  Cancelled,
  Client,
  MCPDError,
  NotFound,
  REASON_CALL_MAY_HAVE_RUN,
  REASON_SERVER_UNAVAILABLE,
  ResourceExhausted,
  ServerConfig,
  Unavailable,
  UnknownError,
  toMCPDError,
} from "../src/index.js";
import { Daemon, MCPD_BIN, REPO, SUITE_TIMEOUT_MS, linesOf, tempDir, testWires } from "./harness.js";

const RECORDING_SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "recording-server.js");

function field(num: number, payload: Uint8Array): number[] {
  return [(num << 3) | 2, payload.length, ...payload];
}
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

function errorInfo(reason: string, domain: string, metadata: Record<string, string>): Uint8Array {
  const out = [...field(1, utf8(reason)), ...field(2, utf8(domain))];
  for (const [k, v] of Object.entries(metadata)) out.push(...field(3, new Uint8Array([...field(1, utf8(k)), ...field(2, utf8(v))])));
  return new Uint8Array(out);
}

describe("toMCPDError", () => {
  it("picks the class by code and reads the server and JSON-RPC code", () => {
    const err = new ConnectError("unknown tool", Code.NotFound);
    err.details.push({
      type: "google.rpc.ErrorInfo",
      value: errorInfo("UPSTREAM_JSONRPC_ERROR", "mcpd.v1", { server: "demo", jsonrpc_code: "-32602" }),
    });
    const e = toMCPDError(err);
    assert.ok(e instanceof NotFound && e instanceof MCPDError);
    assert.equal(e.code, Code.NotFound);
    assert.equal(e.codeName, "NOT_FOUND");
    assert.equal(e.server, "demo");
    assert.equal(e.jsonrpcCode, -32602);
    assert.equal(e.reason, "UPSTREAM_JSONRPC_ERROR");
    assert.equal(e.rawMessage, "unknown tool");
    assert.equal(e.message, "NOT_FOUND: unknown tool (server demo, JSON-RPC -32602)");
    assert.equal(e.retryable, false);
  });

  it("ignores another domain's metadata", () => {
    const err = new ConnectError("x", Code.Unavailable);
    err.details.push({ type: "google.rpc.ErrorInfo", value: errorInfo("R", "other", { server: "s", jsonrpc_code: "1" }) });
    const e = toMCPDError(err);
    assert.ok(e instanceof Unavailable && e.retryable);
    assert.equal(e.server, undefined);
    assert.equal(e.jsonrpcCode, undefined);
    assert.equal(e.domain, "other");
  });

  it("keeps a CANCELLED mcpd sent, and makes one nobody sent Unavailable", () => {
    // From a response (grpc-status 1, a Connect "canceled" body): its headers are the metadata.
    const sent = new ConnectError("stopped by mcpd", Code.Canceled, { "grpc-status": "1" });
    assert.ok(toMCPDError(sent, false) instanceof Cancelled);
    // An HTTP/2 stream reset: no response.
    const reset = new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);
    assert.ok(toMCPDError(reset, false) instanceof Unavailable);
    assert.ok(toMCPDError(reset, true) instanceof Cancelled);
  });

  it("makes a tool call cut off with its connection CALL_MAY_HAVE_RUN, not one that never reached mcpd", () => {
    const reset = new ConnectError("http/2 stream closed with error code CANCEL (0x8)", Code.Canceled);
    const cut = toMCPDError(reset, false, true);
    assert.ok(cut instanceof Unavailable && cut.reason === REASON_CALL_MAY_HAVE_RUN && !cut.retryable, String(cut));
    assert.ok(toMCPDError(reset, false).retryable, "a call that runs no tool stays retryable");
    const refused = new ConnectError("connect ECONNREFUSED", Code.Unavailable, undefined, undefined, Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));
    const down = toMCPDError(refused, false, true);
    assert.ok(down instanceof Unavailable && down.reason === "" && down.retryable, String(down));
    // A listener that died with the connection in its backlog: reset while connecting.
    const backlog = Object.assign(new Error("connect ECONNRESET /run/mcpd.sock"), { code: "ECONNRESET", syscall: "connect" });
    assert.ok(toMCPDError(new ConnectError(backlog.message, Code.Aborted, undefined, undefined, backlog), false, true).retryable);
    const midCall = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    assert.ok(!toMCPDError(new ConnectError(midCall.message, Code.Aborted, undefined, undefined, midCall), false, true).retryable);
    // mcpd's own UNAVAILABLE (a server not ready) is as mcpd sent it, with
    // its reason (an older mcpd's had none).
    const sent = new ConnectError("server is reconnecting", Code.Unavailable, { "grpc-status": "14" });
    const notReady = toMCPDError(sent, false, true);
    assert.ok(notReady instanceof Unavailable && notReady.reason === "" && notReady.retryable, String(notReady));
    const withReason = new ConnectError("server is reconnecting", Code.Unavailable, { "grpc-status": "14" });
    withReason.details.push({ type: "google.rpc.ErrorInfo", value: errorInfo(REASON_SERVER_UNAVAILABLE, "mcpd.v1", {}) });
    const told = toMCPDError(withReason, false, true);
    assert.ok(told instanceof Unavailable && told.reason === REASON_SERVER_UNAVAILABLE && told.retryable, String(told));
  });

  it("survives garbage details and plain errors", () => {
    const err = new ConnectError("x", Code.Internal);
    err.details.push({ type: "google.rpc.ErrorInfo", value: new Uint8Array([0x0a, 0xff]) });
    assert.equal(toMCPDError(err).reason, "");
    assert.ok(toMCPDError(new Error("boom")) instanceof UnknownError);
  });
});

interface ErrorCase {
  description: string;
  code: string;
  error_info: { reason: string; domain: string; metadata: Record<string, string> } | null;
  class: string;
  retryable: boolean;
}

const errorCases = (
  JSON.parse(fs.readFileSync(path.join(REPO, "clients", "testdata", "errors.json"), "utf8")) as { cases: ErrorCase[] }
).cases;

/** gRPC code names by number, as the shared cases spell them. */
const GRPC_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

describe("retryable: the shared cases", () => {
  it("has cases", () => assert.ok(errorCases.length >= 10, `only ${errorCases.length} cases`));
  for (const c of errorCases) {
    it(c.description, () => {
      const code = GRPC_NAMES.indexOf(c.code);
      assert.ok(code > 0, `unknown code ${c.code}`);
      const err = new ConnectError("boom", code as Code);
      if (c.error_info !== null) {
        err.details.push({ type: "google.rpc.ErrorInfo", value: errorInfo(c.error_info.reason, c.error_info.domain, c.error_info.metadata) });
      }
      const e = toMCPDError(err);
      assert.equal(e.name, c.class);
      assert.equal(e.reason, c.error_info?.reason ?? "");
      assert.equal(e.retryable, c.retryable);
    });
  }
});

const skip = MCPD_BIN === undefined ? "no mcpd binary (MCPD_BIN)" : false;

describe("retryable from a real mcpd", { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  // One tool call per server at a time, another queued for 0.2 s, and
  // messages of up to 64 KiB.
  let daemon: Daemon;
  before(async () => {
    if (skip) return;
    daemon = await new Daemon(["--max-inflight-calls", "1", "--queue-timeout", "200ms", "--max-message-bytes", "65536"]).start();
    await daemon.demoReady();
  });
  after(async () => {
    await daemon?.stop();
  });

  for (const wire of testWires()) {
    it(`${wire}: a tool call to a server that is not ready is, with SERVER_UNAVAILABLE`, async () => {
      const c = daemon.client(wire);
      const name = `broken-${wire.replace(/[^a-z0-9]/g, "")}`;
      try {
        const s = await c.connectServer(ServerConfig.stdio(name, "/bin/false"), { replace: true });
        assert.equal(s.state, "failed", `${s.state} ${s.lastError}`);
        for (const call of [() => c.callTool(`mcp__${name}__x`), async () => { for await (const _ of c.callToolStream(`mcp__${name}__x`)); }]) {
          await assert.rejects(call(), (e: unknown) => {
            assert.ok(e instanceof Unavailable, String(e));
            assert.deepEqual([e.reason, e.domain, e.retryable], [REASON_SERVER_UNAVAILABLE, "mcpd.v1", true], String(e));
            return true;
          });
        }
      } finally {
        await c.disconnectServer(name).catch(() => undefined);
        await c.close();
      }
    });

    it(`${wire}: a call refused after --queue-timeout is, with QUEUE_TIMEOUT; a message over --max-message-bytes is not`, async () => {
      const holder = daemon.client("grpc");
      const c = daemon.client(wire);
      try {
        const long = holder.callToolStream("mcp__demo__slow", { steps: 600, delay_ms: 100 });
        try {
          const first = await long.next();
          assert.ok(!first.done && first.value.type === "progress", "the long call holds the one slot");
          await assert.rejects(c.callTool("mcp__demo__echo", { message: "queued" }), (e: unknown) => {
            assert.ok(e instanceof ResourceExhausted, String(e));
            assert.equal(e.reason, "QUEUE_TIMEOUT");
            assert.equal(e.domain, "mcpd.v1");
            assert.equal(e.retryable, true);
            return true;
          });
        } finally {
          long.cancel();
        }
        await assert.rejects(c.callTool("mcp__demo__echo", { message: "x".repeat(100_000) }), (e: unknown) => {
          assert.ok(e instanceof ResourceExhausted, String(e));
          assert.equal(e.reason, "");
          assert.equal(e.retryable, false);
          return true;
        });
      } finally {
        await c.close();
        await holder.close();
      }
    });
  }
});

describe("a tool call cut off with its connection to mcpd", { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  // mcpd killed while it runs a tool call (the recording server's "wait",
  // which never answers): the call reached the tool and may have had its
  // effect, so it is no more retryable than mcpd's own CALL_MAY_HAVE_RUN.
  // A call that never reached mcpd (nothing listens) stays retryable.
  for (const wire of testWires()) {
    for (const streamed of [false, true]) {
      it(`${wire}: ${streamed ? "callToolStream" : "callTool"} is Unavailable with CALL_MAY_HAVE_RUN, not retryable`, async () => {
        const dir = tempDir();
        const record = path.join(dir, "record.txt");
        const own = await new Daemon().start();
        const c = own.client(wire);
        try {
          const s = await c.connectServer(ServerConfig.stdio("rec", process.execPath, [RECORDING_SERVER], { env: { RECORD_FILE: record } }));
          assert.ok(s.ready, `${s.state} ${s.lastError}`);
          const call = streamed
            ? (async () => {
                for await (const _ of c.callToolStream("mcp__rec__wait", {}));
              })()
            : c.callTool("mcp__rec__wait", {});
          call.catch(() => undefined);
          await linesOf(record, "called ", 1);
          own.signal("SIGKILL");
          await assert.rejects(call, (e: unknown) => {
            assert.ok(e instanceof Unavailable, String(e));
            assert.equal(e.reason, REASON_CALL_MAY_HAVE_RUN, String(e));
            assert.equal(e.domain, "mcpd.v1");
            assert.equal(e.retryable, false);
            assert.match(e.rawMessage, /may have run/);
            return true;
          });
          // Once mcpd has exited nothing listens: the call of a new client
          // (no connection kept from before, which may carry it before it
          // sees that mcpd is gone) never reaches mcpd.
          await own.stop();
          const fresh = own.client(wire);
          try {
            await assert.rejects(fresh.callTool("mcp__rec__wait", {}), (e: unknown) => {
              assert.ok(e instanceof Unavailable, String(e));
              assert.equal(e.reason, "", String(e));
              assert.equal(e.retryable, true);
              return true;
            });
          } finally {
            await fresh.close();
          }
        } finally {
          await c.close();
          await own.stop();
        }
      });
    }
  }
});

describe("an HTTP wire at mcpd's gRPC listener", { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  // A Connect wire pointed at the gRPC listener (MCPD_ADDRESS set to it):
  // the error must say what is wrong, not quote a parser.
  let daemon: Daemon;
  before(async () => {
    if (skip) return;
    daemon = await new Daemon().start();
  });
  after(async () => {
    await daemon?.stop();
  });

  for (const wire of ["connect", "connect-h2"] as const) {
    it(`${wire}: Unavailable, naming the gRPC listener and the way out`, async () => {
      const c = new Client(daemon.target("grpc"), { wire, timeoutMs: 10_000 });
      try {
        await assert.rejects(c.servers(), (e: unknown) => {
          assert.ok(e instanceof Unavailable, String(e));
          // Over HTTP/1.1 the listener may close before the request is
          // written: then a plain connection error is all there is.
          if (wire === "connect-h2" || !/EPIPE|ECONNRESET|socket hang up/.test(e.rawMessage)) {
            assert.match(e.rawMessage, /gRPC listener/);
            assert.match(e.rawMessage, /wire "grpc"/);
            assert.match(e.rawMessage, /--http-listen/);
          }
          return true;
        });
      } finally {
        await c.close();
      }
    });
  }
});
