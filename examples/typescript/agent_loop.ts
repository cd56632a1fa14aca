// A minimal agent loop: mcpd's tools go to the model in OpenAI's format, and
// the model's tool calls go straight back to mcpd.
//
// The model here is a stand-in function (no network): swap fakeModel for
// your provider's chat call, e.g. with the openai package
//
//     const resp = await openai.chat.completions.create({ model, messages, tools });
//     return resp.choices[0].message;
//
// The same loop works for Anthropic with mcpd.toolsForAnthropic() and its
// tool_use / tool_result blocks, and for the Vercel AI SDK with
// mcpd.toolsForAISDK() passed to generateText. The client also answers
// servers that ask the model for a completion (sampling) with the stand-in.
//
//     make build-typescript
//     node clients/typescript/build/examples/agent_loop.js "What is 19 + 23?"

import { Client, MCPDError, type OpenAIChatTool } from "mcpd-client";

interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

type Message =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** Stands in for a chat model: adds two numbers with the first tool that says it adds, then answers with the result. */
function fakeModel(messages: Message[], tools: OpenAIChatTool[]): Extract<Message, { role: "assistant" }> {
  const last = messages[messages.length - 1]!;
  if (last.role === "tool") return { role: "assistant", content: `The answer is ${last.content}.` };
  const numbers = (String(last.content).match(/-?\d+(?:\.\d+)?/g) ?? []).map(Number);
  const adder = tools.find((t) => t.function.description.toLowerCase().includes("adds"))?.function.name;
  if (adder === undefined || numbers.length < 2) return { role: "assistant", content: "I have no tool for that." };
  const call: ToolCall = { id: "call_1", type: "function", function: { name: adder, arguments: JSON.stringify({ a: numbers[0], b: numbers[1] }) } };
  return { role: "assistant", content: null, tool_calls: [call] };
}

export async function run(mcpd: Client, question: string, maxTurns = 8): Promise<string> {
  const tools = await mcpd.toolsForOpenAI(); // provider-safe names; callTool maps them back
  const messages: Message[] = [{ role: "user", content: question }];
  for (let turn = 0; turn < maxTurns; turn++) {
    const reply = fakeModel(messages, tools);
    messages.push(reply);
    if (!reply.tool_calls?.length) return String(reply.content);
    for (const call of reply.tool_calls) {
      let content: string;
      try {
        const result = await mcpd.callTool(call.function.name, call.function.arguments, { timeoutMs: 60_000 });
        content = result.isError ? `error: ${result.text}` : result.text;
      } catch (e) {
        // The model should see failures too, its own malformed arguments included.
        if (!(e instanceof MCPDError || e instanceof SyntaxError || e instanceof TypeError)) throw e;
        content = `error: ${e.message}`;
      }
      console.log(`  tool ${call.function.name}(${call.function.arguments}) -> ${content}`);
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  return "gave up after too many turns";
}

const question = process.argv.slice(2).join(" ") || "What is 19 + 23?";
const mcpd = new Client({ timeoutMs: 30_000 }); // $MCPD_ADDRESS, $MCPD_API_TOKEN, $MCPD_WIRE
mcpd.onSampling(async (req) => ({ content: String(fakeModel([{ role: "user", content: req.text }], []).content), model: "fake-model" }));
try {
  console.log("user:", question);
  console.log("assistant:", await run(mcpd, question));
} finally {
  await mcpd.close();
}
