// Error classes from a ConnectError, with the ErrorInfo mcpd attaches.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Cancelled, MCPDError, NotFound, Unavailable, UnknownError, toMCPDError } from "../src/index.js";

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

  it("survives garbage details and plain errors", () => {
    const err = new ConnectError("x", Code.Internal);
    err.details.push({ type: "google.rpc.ErrorInfo", value: new Uint8Array([0x0a, 0xff]) });
    assert.equal(toMCPDError(err).reason, "");
    assert.ok(toMCPDError(new Error("boom")) instanceof UnknownError);
  });
});
