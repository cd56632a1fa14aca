// An MCP host built on the official TypeScript SDK, for the MCP endpoint's
// end-to-end tests. It connects to mcpd over Streamable HTTP (mode "http",
// target the endpoint URL) or by starting a stdio server (mode "stdio",
// target the command, MCP_HOST_ARGS its JSON array of arguments), asks for
// the protocol version given (the SDK itself always asks for its newest),
// answers sampling requests, lists and calls the tools the test names, and
// prints what it saw as one JSON object.
//
// Usage: node mcp_host.mjs http|stdio TARGET VERSION
// Environment: MCPD_TS_SDK, the @modelcontextprotocol/sdk package folder;
// MCP_HOST_CALLS, a JSON array of {name, arguments}; MCPD_API_TOKEN.
import { pathToFileURL } from 'node:url';

const sdk = process.env.MCPD_TS_SDK;
const load = (path) => import(pathToFileURL(`${sdk}/dist/esm/${path}`).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { StdioClientTransport } = await load('client/stdio.js');
const { CreateMessageRequestSchema } = await load('types.js');

const [mode, target, version] = process.argv.slice(2);
let transport;
if (mode === 'http') {
  const headers = process.env.MCPD_API_TOKEN ? { Authorization: `Bearer ${process.env.MCPD_API_TOKEN}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({
    command: target,
    args: JSON.parse(process.env.MCP_HOST_ARGS || '[]'),
    env: { ...process.env },
    stderr: 'inherit',
  });
}

// Force the protocol version of the initialize request, and note the one
// the server answers with.
let negotiated = '';
const send = transport.send.bind(transport);
transport.send = (msg, opts) => {
  if (msg.method === 'initialize' && version) {
    msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
  }
  return send(msg, opts);
};
const start = transport.start.bind(transport);
transport.start = async () => {
  const onmessage = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    if (msg.result && msg.result.protocolVersion && msg.result.serverInfo) {
      negotiated = msg.result.protocolVersion;
    }
    onmessage(msg, extra);
  };
  return start();
};

const out = { negotiated: '', tools: [], calls: [], sampled: [] };
const client = new Client({ name: 'ts-mcp-host', version: '0' }, { capabilities: { sampling: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const first = req.params.messages[0];
  out.sampled.push(first && first.content && first.content.text ? first.content.text : '');
  return { model: 'ts-host-model', role: 'assistant', content: { type: 'text', text: 'a reply from the TypeScript host' } };
});
await client.connect(transport);
out.negotiated = negotiated;
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  out.tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);
for (const call of JSON.parse(process.env.MCP_HOST_CALLS || '[]')) {
  const res = await client.callTool({ name: call.name, arguments: call.arguments || {} });
  const text = (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  out.calls.push({ name: call.name, text, isError: Boolean(res.isError) });
}
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
