// One cold start, timed by bench.ts from this process's spawn to the line it
// prints: `cold.js mcpd TARGET WIRE TOOL` calls TOOL through a running mcpd;
// `cold.js sdk COMMAND TOOL ARGS...` spawns the server with the MCP
// TypeScript SDK, initializes and calls TOOL once.

const [mode, ...rest] = process.argv.slice(2);
if (mode === "mcpd") {
  const [target, wire, tool] = rest as [string, "grpc" | "connect" | "connect-h2", string];
  const { Client } = await import("../src/index.js");
  const c = new Client(target, { wire });
  const r = await c.callTool(tool, { message: "cold" });
  console.log(r.text);
  await c.close();
} else {
  const [command, tool, ...args] = rest as [string, string, ...string[]];
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
  const c = new Client({ name: "cold", version: "1.0.0" });
  await c.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  const r = (await c.callTool({ name: tool, arguments: { message: "cold" } })) as { content: { type: string; text?: string }[] };
  console.log(r.content.map((b) => b.text ?? "").join(""));
  await c.close();
}
