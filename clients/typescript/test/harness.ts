// Test helpers: a real bin/mcpd on a Unix socket (and, where the daemon has
// one, an HTTP listener), server-everything, a proxy that cuts connections.
//
// Environment (set by `make test-typescript`):
//   MCPD_BIN             the mcpd binary (default: <repo>/bin/mcpd)
//   MCPD_EVERYTHING_BIN  @modelcontextprotocol/server-everything
//   MCPD_E2E_REQUIRED=1  a missing binary fails the run instead of skipping
//   MCPD_TEST_WIRES      the wires to test, comma-separated (default: all the daemon serves)

import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Client, ServerConfig, type ClientOptions, type Wire } from "../src/index.js";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");
/** Bound of one RPC in tests, and of the polling loops. */
export const RPC_TIMEOUT_MS = 30_000;
export const POLL_TIMEOUT_MS = 20_000;
/**
 * Bound of a suite that starts daemons (the slowest takes about 15 s). A
 * suite still running then fails, and names the test it was in as
 * cancelled; node's --test-timeout (the Makefile's) is the outer bound of
 * a whole file.
 */
export const SUITE_TIMEOUT_MS = 120_000;

/** The daemons running, killed if the test process exits without stopping them. */
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const p of running) p.kill("SIGKILL");
});
// The runner ends a file that outlives its timeout with SIGTERM.
process.once("SIGTERM", () => process.exit(143));

const required = process.env["MCPD_E2E_REQUIRED"] === "1";

/** A binary from the environment, or why it is missing (a failure when required). */
function binary(env: string, fallback: string, what: string): string | undefined {
  const bin = process.env[env] || fallback;
  try {
    fs.accessSync(bin, fs.constants.X_OK);
    return bin;
  } catch {
    if (required) throw new Error(`${what}: no executable at ${JSON.stringify(bin)} (MCPD_E2E_REQUIRED=1)`);
    return undefined;
  }
}

export const MCPD_BIN = binary("MCPD_BIN", path.join(REPO, "bin", "mcpd"), "mcpd (run `make build`)");
export const EVERYTHING_BIN = binary("MCPD_EVERYTHING_BIN", "", "server-everything (run `make tools`)");

/**
 * The folders tempDir made: removed when this test file's process exits
 * with every test passed, kept (with the daemons' logs) when one failed.
 */
const tempDirs: string[] = [];
process.on("exit", (code) => {
  if (code !== 0) return;
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A short temporary folder (Unix socket paths are limited to ~107 bytes). */
export function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mcpd-ts-"));
  tempDirs.push(dir);
  return dir;
}

export async function poll<T>(what: string, fn: () => Promise<T> | T, timeoutMs = POLL_TIMEOUT_MS): Promise<NonNullable<T>> {
  const deadline = performance.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await fn();
    if (last) return last as NonNullable<T>;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${String(last)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Whether every thread of the process pid is stopped (Linux's /proc). */
function allThreadsStopped(pid: number): boolean {
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
    } catch {
      continue; // the thread has ended
    }
    // "tid (comm) state ...": comm may hold spaces and parentheses.
    const state = stat.slice(stat.lastIndexOf(")") + 1).trim().split(" ")[0];
    if (state !== "T" && state !== "t") return false;
  }
  return true;
}

function connectable(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(socket);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

function connectableTCP(hostPort: string): Promise<boolean> {
  const i = hostPort.lastIndexOf(":");
  return new Promise((resolve) => {
    const s = net.connect(Number(hostPort.slice(i + 1)), hostPort.slice(0, i));
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** Whether bin/mcpd has the HTTP listener (--http-listen). */
export function hasHttpListener(): boolean {
  if (MCPD_BIN === undefined) return false;
  const out = spawnSync(MCPD_BIN, ["--help"], { encoding: "utf8" });
  return /-http-listen\b/.test(`${out.stdout}${out.stderr}`);
}

/** The wires under test: $MCPD_TEST_WIRES, else every wire the daemon serves. */
export function testWires(): Wire[] {
  const env = process.env["MCPD_TEST_WIRES"];
  if (env) return env.split(",").map((w) => w.trim() as Wire);
  return hasHttpListener() ? ["grpc", "connect", "connect-h2"] : ["grpc"];
}

/** One mcpd process on Unix sockets in its own folder. */
export class Daemon {
  readonly dir = tempDir();
  readonly socket = path.join(this.dir, "grpc.sock");
  readonly httpSocket = path.join(this.dir, "http.sock");
  readonly log = path.join(this.dir, "mcpd.log");
  private proc: ChildProcess | undefined;
  private readonly http: boolean;

  constructor(private readonly args: string[] = []) {
    this.http = hasHttpListener();
  }

  /** The target of a wire: the gRPC socket, or the HTTP listener's. */
  target(wire: Wire = "grpc"): string {
    return `unix://${wire === "grpc" ? this.socket : this.httpSocket}`;
  }

  start(): Promise<this> {
    return this.launch(`unix://${this.socket}`, this.http ? `unix://${this.httpSocket}` : undefined);
  }

  /** Starts mcpd on loopback TCP addresses (TLS needs them); readiness is a GetServer over gRPC. */
  async startTCP(grpc: string, http: string | undefined): Promise<this> {
    return this.launch(grpc, http);
  }

  private async launch(grpc: string, http: string | undefined): Promise<this> {
    if (MCPD_BIN === undefined) throw new Error("no mcpd binary");
    const env = { ...process.env };
    delete env["MCPD_API_TOKEN"]; // only this daemon's flags count
    // The machine's config scopes (~/.mcp.json, ~/.claude.json, the managed files) must not reach the tests.
    env["HOME"] = this.dir;
    env["MCPD_MANAGED_CONFIG"] = path.join(this.dir, "managed-mcp.json");
    env["MCPD_CLAUDE_MANAGED_DIR"] = path.join(this.dir, "claude-code");
    const args = ["--listen", grpc, "--log-level", "debug", ...this.args];
    if (http !== undefined) args.push("--http-listen", http);
    const out = fs.openSync(this.log, "a");
    const proc = spawn(MCPD_BIN, args, { stdio: ["ignore", out, out], env, cwd: this.dir });
    this.proc = proc;
    running.add(proc);
    proc.once("exit", () => running.delete(proc));
    fs.closeSync(out);
    const deadline = performance.now() + RPC_TIMEOUT_MS;
    const ready = async (): Promise<boolean> => {
      for (const a of [grpc, http]) {
        if (a === undefined) continue;
        const ok = a.startsWith("unix://") ? await connectable(a.slice("unix://".length)) : await connectableTCP(a);
        if (!ok) return false;
      }
      return true;
    };
    while (!(await ready())) {
      if (this.proc.exitCode !== null) throw new Error(`mcpd exited with ${this.proc.exitCode}:\n${this.logTail()}`);
      if (performance.now() > deadline) {
        await this.stop();
        throw new Error(`mcpd did not listen in time:\n${this.logTail()}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return this;
  }

  /** SIGTERM, then SIGKILL if mcpd has not exited in 15 s. */
  async stop(): Promise<void> {
    const p = this.proc;
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((r) => p.once("exit", () => r()));
    p.kill("SIGTERM");
    const timer = setTimeout(() => p.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }

  /**
   * Sends mcpd a signal. SIGSTOP freezes it as a deadlock would: its
   * kernel still takes connections and acknowledges what is sent, and
   * nothing reaches mcpd until SIGCONT.
   */
  signal(sig: NodeJS.Signals): void {
    this.proc?.kill(sig);
  }

  /**
   * Freezes mcpd (SIGSTOP) and waits until every thread of it has
   * stopped: the signal stops one thread, which then stops the others,
   * and until they all are, mcpd may still answer a call made right away.
   */
  async freeze(): Promise<void> {
    const pid = this.proc?.pid;
    assert.ok(pid !== undefined, "mcpd is not running");
    this.signal("SIGSTOP");
    await poll("every thread of mcpd to stop", () => allThreadsStopped(pid));
  }

  logTail(n = 40): string {
    try {
      return fs.readFileSync(this.log, "utf8").split("\n").slice(-n).join("\n");
    } catch {
      return "";
    }
  }

  client(wire: Wire, options: ClientOptions = {}): Client {
    return new Client(this.target(wire), { timeoutMs: RPC_TIMEOUT_MS, wire, ...options });
  }

  /** Waits for the built-in demo server. */
  async demoReady(): Promise<void> {
    const c = this.client("grpc");
    try {
      await poll("the demo server to be ready", async () => (await c.getServer("demo")).ready);
    } finally {
      await c.close();
    }
  }
}

export const EVERYTHING_CONDITIONAL = ["trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"];

/** Connects server-everything as `name` and waits for the tools it lists only after mcpd initialized it. */
export async function connectEverything(c: Client, name = "ev"): Promise<string> {
  if (EVERYTHING_BIN === undefined) throw new Error("no server-everything");
  const s = await c.connectServer(ServerConfig.stdio(name, EVERYTHING_BIN, ["stdio"]), { replace: true });
  if (!s.ready) throw new Error(`server-everything: ${s.state} ${s.lastError}`);
  await poll("server-everything's conditional tools", async () => {
    const names = new Set((await c.listTools(name)).map((t) => t.toolName));
    return EVERYTHING_CONDITIONAL.every((n) => names.has(n));
  });
  return name;
}

/** A byte-level proxy from one Unix socket to another, so a test can cut every connection while mcpd runs on. */
export class UnixProxy {
  private readonly server: net.Server;
  private readonly conns = new Set<net.Socket>();
  private refusing = false;
  /** The connections passed on to upstream so far. */
  accepted = 0;

  constructor(
    readonly listen: string,
    upstream: string,
  ) {
    this.server = net.createServer((down) => {
      if (this.refusing) return down.destroy();
      this.accepted++;
      const up = net.connect(upstream);
      this.conns.add(down).add(up);
      const drop = (): void => {
        down.destroy();
        up.destroy();
        this.conns.delete(down);
        this.conns.delete(up);
      };
      down.on("error", drop).on("close", drop);
      up.on("error", drop).on("close", drop);
      down.pipe(up);
      up.pipe(down);
    });
  }

  get target(): string {
    return `unix://${this.listen}`;
  }

  start(): Promise<this> {
    return new Promise((resolve) => this.server.listen(this.listen, () => resolve(this)));
  }

  /** Drops every open connection and refuses new ones until allow(). */
  cut(): void {
    this.refusing = true;
    for (const s of this.conns) s.destroy();
    this.conns.clear();
  }

  allow(): void {
    this.refusing = false;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Lines of a file that start with prefix, once there are n of them. */
export async function linesOf(file: string, prefix: string, n = 1): Promise<string[]> {
  return poll(`${n} "${prefix}" line(s) in ${file}`, () => {
    let text = "";
    try {
      text = fs.readFileSync(file, "utf8");
    } catch {
      return undefined;
    }
    const lines = text.split("\n").filter((l) => l.startsWith(prefix));
    return lines.length >= n ? lines : undefined;
  });
}

/** How many ports below the kernel's ephemeral range freePort picks from. */
const FREE_PORT_SPAN = 10000;
const givenPorts = new Set<number>();

/**
 * A loopback TCP port that no one listens on, for a daemon to bind. It is
 * taken from below the kernel's ephemeral range: a port from that range,
 * once released, can go to any outgoing connection before the daemon binds
 * it. Below the range the kernel hands out nothing, and freePort never
 * hands out the same port twice (as the Go tests' freePort).
 */
export async function freePort(): Promise<number> {
  const low = ephemeralPortsFrom() - FREE_PORT_SPAN;
  for (let i = 0; i < 1000; i++) {
    const port = low + Math.floor(Math.random() * FREE_PORT_SPAN);
    if (givenPorts.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once("error", () => resolve(false)); // someone else's
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (free) {
      givenPorts.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${low}..${low + FREE_PORT_SPAN - 1}`);
}

/** The first port of the kernel's ephemeral range, or Linux's default where it cannot be read. */
function ephemeralPortsFrom(): number {
  try {
    const first = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(first) && first > FREE_PORT_SPAN + 1024) return first;
  } catch {
    // not Linux
  }
  return 32768;
}
