// Conversions without a daemon: approval requests and their replies.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import * as pb from "../src/gen/mcpd/v1/mcpd_pb.js";
import * as t from "../src/types.js";

describe("approval requests", () => {
  const request = (approval: MessageInitShape<typeof pb.ApprovalRequestSchema>): t.ServerRequest | undefined =>
    t.toServerRequest(create(pb.ServerRequestSchema, { id: "r1", server: "gh", kind: { case: "approval", value: approval } }));

  it("become ApprovalRequest objects", () => {
    const call = request({ tool: "mcp__gh__merge", arguments: { pr: 7 }, annotations: { destructiveHint: true }, rule: "ask mcp__gh__*", caller: "ci" });
    assert.deepEqual(call, {
      kind: "approval",
      id: "r1",
      server: "gh",
      deadline: undefined,
      tool: "mcp__gh__merge",
      arguments: { pr: 7 },
      annotations: { destructiveHint: true },
      rule: "ask mcp__gh__*",
      caller: "ci",
      pollIntervalMs: undefined,
    });
    // Unset arguments and annotations are empty objects; a poll's interval is in ms.
    const poll = request({ tool: "mcp__gh__status", pollInterval: { seconds: 7n, nanos: 500_000_000 } });
    assert.ok(poll?.kind === "approval");
    assert.deepEqual([poll.arguments, poll.annotations, poll.pollIntervalMs], [{}, {}, 7_500]);
  });

  it("are answered with a boolean or an ApprovalResult", () => {
    const req = request({ tool: "mcp__gh__merge" })!;
    const answer = (result: unknown): pb.ApprovalResult | undefined => {
      const r = t.replyFor(req, result).result;
      return r.case === "approval" ? r.value : undefined;
    };
    assert.deepEqual([answer(true)?.approved, answer(true)?.reason], [true, ""]);
    assert.equal(answer(false)?.approved, false);
    assert.deepEqual([answer({ approved: true })?.approved, answer({ reason: "not now" })?.approved, answer({ reason: "not now" })?.reason], [true, false, "not now"]);
    for (const bad of [undefined, null, "yes", 1, [], { approved: "yes" }, { reason: 3 }]) {
      assert.throws(() => t.replyFor(req, bad), TypeError, JSON.stringify(bad));
    }
  });

  it("are registered by name", () => {
    assert.equal(t.REQUEST_KINDS.approval, pb.ServerRequestKind.APPROVAL);
  });
});
