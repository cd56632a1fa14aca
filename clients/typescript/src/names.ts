/**
 * Tool names that model providers accept, and tool definitions in their
 * formats.
 *
 * OpenAI and Anthropic take tool names of 1 to 64 characters of
 * `[a-zA-Z0-9_-]`. mcpd's qualified names are `mcp__<server>__<tool>`;
 * server names already fit, but a server's own tool name may hold other
 * characters (`.`, `/`, spaces) or be long. {@link providerNames} maps each
 * qualified name to a provider-safe one, exactly as the Python client does
 * (both test against clients/testdata/tool-names.json):
 *
 * 1. a qualified name that is already safe is kept as is;
 * 2. otherwise every other character becomes `_`;
 * 3. if that is longer than 64 characters or collides with another tool's
 *    name, it is cut to 55 characters and `_` plus the first 8 hex digits
 *    of the SHA-256 of the qualified name are appended.
 */

import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Tool } from "./types.js";

/** The longest tool name OpenAI and Anthropic accept. */
export const MAX_NAME_LENGTH = 64;

const SAFE = /^[a-zA-Z0-9_-]{1,64}$/;
const UNSAFE_CHAR = /[^a-zA-Z0-9_-]/gu;
const HASH_DIGITS = 8;

/** Whether `name` is 1 to 64 characters of `[a-zA-Z0-9_-]`. */
export function isProviderSafe(name: string): boolean {
  return SAFE.test(name);
}

/** Orders strings by code point, as Python's sorted() does. */
function byCodePoint(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** Maps each qualified tool name to a provider-safe name, injectively. */
export function providerNames(qualified: Iterable<string>): Map<string, string> {
  const names = [...new Set(qualified)].sort(byCodePoint);
  const out = new Map<string, string>();
  for (const q of names) if (isProviderSafe(q)) out.set(q, q);
  const taken = new Set(out.values());
  for (const q of names) {
    if (out.has(q)) continue;
    let candidate = q.replace(UNSAFE_CHAR, "_") || "_";
    if (candidate.length > MAX_NAME_LENGTH || taken.has(candidate)) candidate = hashed(q, candidate, taken);
    out.set(q, candidate);
    taken.add(candidate);
  }
  return out;
}

function hashed(qualified: string, sanitized: string, taken: Set<string>): string {
  const digest = createHash("sha256").update(qualified, "utf8").digest("hex");
  // 8 hex digits make a collision unlikely; take more if one happens.
  for (let k = HASH_DIGITS; k <= digest.length; k++) {
    const candidate = sanitized.slice(0, MAX_NAME_LENGTH - 1 - k) + "_" + digest.slice(0, k);
    if (!taken.has(candidate)) return candidate;
  }
  throw new Error(`no provider-safe name for ${JSON.stringify(qualified)}`);
}

/** A tool's input schema as a provider expects it: always an object schema. */
export function toolParameters(tool: Tool): JsonObject {
  const schema: JsonObject = { ...(tool.inputSchema ?? {}) };
  if (schema["type"] === undefined) schema["type"] = "object";
  if (schema["type"] === "object" && schema["properties"] === undefined) schema["properties"] = {};
  return schema;
}

function description(tool: Tool): string {
  return tool.description || tool.title || tool.toolName;
}

/** Which OpenAI API a tool definition is for. */
export type OpenAIApi = "chat" | "responses";

/** A tool in OpenAI's Chat Completions format. */
export interface OpenAIChatTool {
  type: "function";
  function: { name: string; description: string; parameters: JsonObject };
}

/** A tool in OpenAI's Responses API format. */
export interface OpenAIResponsesTool {
  type: "function";
  name: string;
  description: string;
  parameters: JsonObject;
}

/** A tool in Anthropic's Messages API format. */
export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: JsonObject;
}

/** One tool in OpenAI's Chat Completions format. */
export function openaiTool(tool: Tool, name: string, api?: "chat"): OpenAIChatTool;
/** One tool in OpenAI's Responses API format. */
export function openaiTool(tool: Tool, name: string, api: "responses"): OpenAIResponsesTool;
export function openaiTool(tool: Tool, name: string, api: OpenAIApi = "chat"): OpenAIChatTool | OpenAIResponsesTool {
  const fn = { name, description: description(tool), parameters: toolParameters(tool) };
  if (api === "chat") return { type: "function", function: fn };
  if (api === "responses") return { type: "function", ...fn };
  throw new TypeError(`api must be "chat" or "responses", got ${JSON.stringify(api)}`);
}

/** One tool in Anthropic's Messages API format. */
export function anthropicTool(tool: Tool, name: string): AnthropicTool {
  return { name, description: description(tool), input_schema: toolParameters(tool) };
}

/** The marker the Vercel AI SDK (`ai`) recognizes a schema by, as its `jsonSchema()` sets it. */
const AI_SCHEMA = Symbol.for("vercel.ai.schema");

/**
 * A JSON Schema in the shape the Vercel AI SDK's `jsonSchema()` returns
 * (arguments are validated by mcpd and the server, not here).
 */
export interface AISDKSchema {
  readonly [AI_SCHEMA]: true;
  readonly jsonSchema: JsonObject;
  readonly _type: unknown;
  validate(value: unknown): { success: true; value: unknown };
}

/** Wraps a JSON Schema the way the Vercel AI SDK's `jsonSchema()` does. */
export function aiSchema(schema: JsonObject): AISDKSchema {
  return {
    [AI_SCHEMA]: true,
    jsonSchema: schema,
    _type: undefined,
    validate: (value: unknown) => ({ success: true, value }),
  };
}
