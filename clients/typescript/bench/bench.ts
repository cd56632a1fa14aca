// The TypeScript benchmark (`make bench-typescript`; a report, not a test).
//
// One mcpd with the demo server and server-everything over stdio; for
// `echo`, at 1, 16 and 64 concurrent calls from one Node process:
//   sdk          the MCP TypeScript SDK calling the server directly (stdio)
//   client/WIRE  mcpd-client's callTool through mcpd, on each wire
// and, to see what the client itself adds, GetServer on each wire:
//   bare/WIRE    a bare Connect client of the same transport
//   client/WIRE  mcpd-client's getServer
// Then the cold start: a fresh node process to its first tool result,
// through the warm mcpd vs spawning the server with the SDK.

import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import * as http from "node:http";
import { Client as SDKClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Client, ServerConfig, pb, type Wire } from "../src/index.js";

const { values: opt } = parseArgs({
  options: {
    mcpd: { type: "string" },
    everything: { type: "string" },
    duration: { type: "string", default: "2" },
    warmup: { type: "string", default: "0.5" },
    "cold-runs": { type: "string", default: "5" },
    concurrency: { type: "string", default: "1,16,64" },
    json: { type: "string" },
  },
});
if (!opt.mcpd || !opt.everything) throw new Error("usage: bench.js --mcpd BIN --everything BIN [--duration S] [--cold-runs N] [--json FILE]");
const MCPD = opt.mcpd;
const EVERYTHING = opt.everything;
const DURATION_MS = Number(opt.duration) * 1000;
const WARMUP_MS = Number(opt.warmup) * 1000;
const COLD_RUNS = Number(opt["cold-runs"]);
const CONCURRENCY = opt.concurrency!.split(",").map(Number);
const WIRES: Wire[] = ["grpc", "connect", "connect-h2"];
const COLD = path.join(path.dirname(fileURLToPath(import.meta.url)), "cold.js");

interface Cell {
  upstream: string;
  client: string;
  callers: number;
  p50: number;
  p99: number;
  rate: number;
  calls: number;
}

function quantile(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN;
}

/** Runs `callers` loops of call() for warmup + duration; times the calls after the warmup. */
async function measure(upstream: string, client: string, callers: number, call: () => Promise<unknown>): Promise<Cell> {
  const lat: number[] = [];
  const start = performance.now();
  const measureFrom = start + WARMUP_MS;
  const end = measureFrom + DURATION_MS;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      for (;;) {
        const t0 = performance.now();
        if (t0 >= end) return;
        await call();
        const t1 = performance.now();
        if (t0 >= measureFrom) lat.push(t1 - t0);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  const cell = { upstream, client, callers, p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), rate: lat.length / (DURATION_MS / 1000), calls: lat.length };
  console.error(`  ${upstream} ${client} x${callers}: p50 ${cell.p50.toFixed(3)} ms, p99 ${cell.p99.toFixed(3)} ms, ${cell.rate.toFixed(0)}/s`);
  return cell;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

async function startMcpd(): Promise<{ proc: ChildProcess; grpc: string; http: string }> {
  const [gp, hp] = [await freePort(), await freePort()];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcpd-tsbench-"));
  const log = fs.openSync(path.join(dir, "mcpd.log"), "a");
  const env = { ...process.env };
  delete env["MCPD_API_TOKEN"];
  const proc = spawn(MCPD, ["--listen", `127.0.0.1:${gp}`, "--http-listen", `127.0.0.1:${hp}`, "--log-level", "warn"], { stdio: ["ignore", log, log], env, cwd: dir });
  const grpc = `127.0.0.1:${gp}`;
  const c = new Client(grpc, { timeoutMs: 5_000 });
  for (let i = 0; ; i++) {
    try {
      if ((await c.getServer("demo")).ready) break;
    } catch (e) {
      if (i > 300) throw e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const ev = await c.connectServer(ServerConfig.stdio("everything", EVERYTHING, ["stdio"]), { replace: true });
  if (!ev.ready) throw new Error(`server-everything: ${ev.state} ${ev.lastError}`);
  await c.close();
  return { proc, grpc, http: `127.0.0.1:${hp}` };
}

function bareTransport(wire: Wire, target: string): { hub: ReturnType<typeof createClient<typeof pb.MCPHub>>; close: () => void } {
  const baseUrl = `http://${target}`;
  if (wire === "connect") {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    return { hub: createClient(pb.MCPHub, createConnectTransport({ baseUrl, httpVersion: "1.1", nodeOptions: { agent } })), close: () => agent.destroy() };
  }
  const sm = new Http2SessionManager(baseUrl);
  const transport = wire === "grpc" ? createGrpcTransport({ baseUrl, sessionManager: sm }) : createConnectTransport({ baseUrl, httpVersion: "2", sessionManager: sm });
  return { hub: createClient(pb.MCPHub, transport), close: () => sm.abort() };
}

/** Spawns `node args`, resolves with ms from spawn to its first stdout line. */
function timeToFirstLine(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("\n")) resolve(performance.now() - t0);
    });
    p.on("exit", (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`cold start exited ${code}: ${out}`))));
  });
}

async function cold(args: string[]): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < COLD_RUNS; i++) times.push(await timeToFirstLine([COLD, ...args]));
  times.sort((a, b) => a - b);
  return quantile(times, 0.5);
}

const fmt = (n: number, d = 3): string => (Number.isFinite(n) ? (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(d)) : "-");

async function main(): Promise<void> {
  const load = os.loadavg()[0]!.toFixed(1);
  console.error(`bench: node ${process.version}, ${os.cpus().length} CPUs, load average ${load}`);
  const daemon = await startMcpd();
  const cells: Cell[] = [];
  const target = (w: Wire): string => (w === "grpc" ? daemon.grpc : daemon.http);
  try {
    const upstreams: [string, string, string[]][] = [
      ["demo", MCPD, ["demo-server"]],
      ["everything", EVERYTHING, ["stdio"]],
    ];
    for (const [name, command, args] of upstreams) {
      const sdk = new SDKClient({ name: "bench", version: "1.0.0" });
      await sdk.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
      for (const n of CONCURRENCY) cells.push(await measure(name, "sdk", n, () => sdk.callTool({ name: "echo", arguments: { message: "hi" } })));
      await sdk.close();
      for (const wire of WIRES) {
        const c = new Client(target(wire), { wire });
        const tool = `mcp__${name}__echo`;
        for (const n of CONCURRENCY) cells.push(await measure(name, `client/${wire}`, n, () => c.callTool(tool, { message: "hi" })));
        await c.close();
      }
    }
    for (const wire of WIRES) {
      const bare = bareTransport(wire, target(wire));
      for (const n of CONCURRENCY) cells.push(await measure("GetServer", `bare/${wire}`, n, () => bare.hub.getServer({ name: "demo" })));
      bare.close();
      const c = new Client(target(wire), { wire });
      for (const n of CONCURRENCY) cells.push(await measure("GetServer", `client/${wire}`, n, () => c.getServer("demo")));
      await c.close();
    }

    const colds: { upstream: string; how: string; ms: number }[] = [];
    for (const [name, command, args] of upstreams) {
      colds.push({ upstream: name, how: "sdk", ms: await cold(["sdk", command, "echo", ...args]) });
      for (const wire of WIRES) colds.push({ upstream: name, how: `mcpd/${wire}`, ms: await cold(["mcpd", target(wire), wire, `mcp__${name}__echo`]) });
    }

    const get = (u: string, c: string, n: number): Cell | undefined => cells.find((x) => x.upstream === u && x.client === c && x.callers === n);
    const lines: string[] = [];
    lines.push(`node ${process.version}, ${os.cpus().length} CPUs, load average ${load} at the start; ${DURATION_MS / 1000} s per cell after ${WARMUP_MS / 1000} s of warmup`, "");
    lines.push("| upstream | client | callers | p50 ms | p99 ms | calls/s |", "|---|---|---:|---:|---:|---:|");
    for (const c of cells) lines.push(`| ${c.upstream} | ${c.client} | ${c.callers} | ${fmt(c.p50)} | ${fmt(c.p99)} | ${c.rate.toFixed(0)} |`);
    lines.push("", "| cold start (median) | ms | ratio to sdk |", "|---|---:|---:|");
    for (const c of colds) {
      const base = colds.find((x) => x.upstream === c.upstream && x.how === "sdk")!.ms;
      lines.push(`| ${c.upstream} ${c.how} | ${c.ms.toFixed(0)} | ${(c.ms / base).toFixed(2)} |`);
    }
    const lo = Math.min(...CONCURRENCY);
    const hi = Math.max(...CONCURRENCY);
    const verdict = (ok: boolean): string => (ok ? "PASS" : "MISS");
    lines.push("", `| target (wire) | ${WIRES.join(" | ")} |`, `|---|${WIRES.map(() => "---:").join("|")}|`);
    const row = (label: string, f: (w: Wire) => [number, boolean]): void => {
      lines.push(`| ${label} | ${WIRES.map((w) => {
        const [v, ok] = f(w);
        return Number.isFinite(v) ? `${v.toFixed(2)} ${verdict(ok)}` : "-";
      }).join(" | ")} |`);
    };
    row(`client GetServer p50 / bare p50, ${lo} caller, ≤ 1.10`, (w) => {
      const v = get("GetServer", `client/${w}`, lo)!.p50 / get("GetServer", `bare/${w}`, lo)!.p50;
      return [v, v <= 1.1];
    });
    for (const [u] of upstreams) {
      row(`${u}: p50 through mcpd / sdk, ${lo} caller, ≤ 1.5`, (w) => {
        const v = get(u, `client/${w}`, lo)!.p50 / get(u, "sdk", lo)!.p50;
        return [v, v <= 1.5];
      });
      row(`${u}: calls/s through mcpd / sdk, ${hi} callers, ≥ 0.5`, (w) => {
        const v = get(u, `client/${w}`, hi)!.rate / get(u, "sdk", hi)!.rate;
        return [v, v >= 0.5];
      });
      row(`${u}: cold start through mcpd / sdk, ≤ 0.2`, (w) => {
        const v = colds.find((x) => x.upstream === u && x.how === `mcpd/${w}`)!.ms / colds.find((x) => x.upstream === u && x.how === "sdk")!.ms;
        return [v, v <= 0.2];
      });
    }
    console.log(lines.join("\n"));
    if (opt.json) fs.writeFileSync(opt.json, JSON.stringify({ node: process.version, load, cells, colds }, null, 2));
  } finally {
    daemon.proc.kill("SIGTERM");
  }
}

await main();
