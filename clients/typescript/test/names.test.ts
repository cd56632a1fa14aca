// Provider-safe names against the cases the Python client tests too, and
// the tool definitions in each provider's format.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { anthropicTool, isProviderSafe, openaiTool, pb, providerNames } from "../src/index.js";
import { REPO } from "./harness.js";

interface NameCase {
  description: string;
  qualified: string[];
  want: Record<string, string>;
}

const cases = (
  JSON.parse(fs.readFileSync(path.join(REPO, "clients", "testdata", "tool-names.json"), "utf8")) as { cases: NameCase[] }
).cases;

describe("providerNames: the shared cases", () => {
  it("has cases", () => assert.ok(cases.length >= 10, `only ${cases.length} cases`));
  for (const c of cases) {
    it(c.description, () => {
      for (const order of [c.qualified, [...c.qualified].reverse()]) {
        const got = Object.fromEntries(providerNames(order));
        assert.deepEqual(got, c.want);
        for (const name of Object.values(got)) assert.ok(isProviderSafe(name), name);
      }
    });
  }
});

describe("providerNames", () => {
  it("cuts a long name to 64 characters with the SHA-256 prefix", () => {
    const q = "mcp__" + "s".repeat(60) + "__tool";
    const got = providerNames([q]).get(q)!;
    const digest = createHash("sha256").update(q).digest("hex").slice(0, 8);
    assert.equal(got.length, 64);
    assert.ok(got.endsWith("_" + digest), got);
  });
});

describe("tool definitions", () => {
  const read = create(pb.ToolSchema, {
    name: "mcp__fs__read.file",
    server: "fs",
    toolName: "read.file",
    description: "Reads.",
    inputSchema: { type: "object", properties: { path: { type: "string" } } },
  });
  const bare = create(pb.ToolSchema, { name: "mcp__fs__noschema", server: "fs", toolName: "noschema", title: "No schema" });

  it("OpenAI Chat Completions", () => {
    assert.deepEqual(openaiTool(read, "mcp__fs__read_file"), {
      type: "function",
      function: { name: "mcp__fs__read_file", description: "Reads.", parameters: read.inputSchema },
    });
    const b = openaiTool(bare, "mcp__fs__noschema");
    assert.deepEqual(b.function.parameters, { type: "object", properties: {} });
    assert.equal(b.function.description, "No schema");
  });

  it("OpenAI Responses", () => {
    const r = openaiTool(read, "mcp__fs__read_file", "responses");
    assert.equal(r.name, "mcp__fs__read_file");
    assert.equal(r.type, "function");
    assert.ok(!("function" in r));
    assert.throws(() => openaiTool(read, "x", "nope" as "responses"), TypeError);
  });

  it("Anthropic", () => {
    assert.deepEqual(anthropicTool(read, "mcp__fs__read_file"), {
      name: "mcp__fs__read_file",
      description: "Reads.",
      input_schema: read.inputSchema,
    });
  });
});
