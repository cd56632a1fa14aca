// TLS and mutual TLS against bin/mcpd on loopback TCP, on every wire, with
// certificates made here by openssl (no key is checked in).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client, MCPDError, ServerConfig, Unauthenticated, Unavailable, type Wire } from "../src/index.js";
import { Daemon, MCPD_BIN, RPC_TIMEOUT_MS, SUITE_TIMEOUT_MS, freePort, hasHttpListener, poll, tempDir, testWires } from "./harness.js";

const skip = MCPD_BIN === undefined ? "no mcpd binary (MCPD_BIN)" : false;

function openssl(dir: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** A CA, a server certificate for localhost and 127.0.0.1, and a client certificate. */
function makeCerts(dir: string): void {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(dir, "req", "-x509", ...ec, "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1", "-subj", "/CN=test-ca");
  fs.writeFileSync(path.join(dir, "server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
  fs.writeFileSync(path.join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n");
  for (const name of ["server", "client"]) {
    openssl(dir, "req", "-new", ...ec, "-keyout", `${name}-key.pem`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
    openssl(dir, "x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial", "-out", `${name}.pem`, "-days", "1", "-extfile", `${name}.ext`);
  }
}

const dir = tempDir();
const credentials = (): { caFile: string; certFile: string; keyFile: string } => ({
  caFile: path.join(dir, "ca.pem"),
  certFile: path.join(dir, "client.pem"),
  keyFile: path.join(dir, "client-key.pem"),
});
let tlsDaemon: Daemon;
let mtlsDaemon: Daemon;
let plainDaemon: Daemon;
const addr: Record<string, Record<Wire, string>> = {};
/** The mutual-TLS daemon's MCP endpoint (--mcp-listen: HTTPS, client certificates). */
let mtlsEndpoint = "";

async function start(name: string, extra: string[]): Promise<Daemon> {
  const [g, h] = [await freePort(), await freePort()];
  const args = ["--tls-cert", path.join(dir, "server.pem"), "--tls-key", path.join(dir, "server-key.pem"), ...extra];
  const d = await new Daemon(args).startTCP(`127.0.0.1:${g}`, hasHttpListener() ? `127.0.0.1:${h}` : undefined);
  addr[name] = { grpc: `127.0.0.1:${g}`, connect: `127.0.0.1:${h}`, "connect-h2": `127.0.0.1:${h}` };
  const c = new Client(addr[name]!.grpc, { wire: "grpc", token: name === "tls" ? "tls-token" : "", ...credentials(), timeoutMs: RPC_TIMEOUT_MS });
  try {
    await poll("the demo server to be ready", async () => (await c.getServer("demo")).ready);
  } finally {
    await c.close();
  }
  return d;
}

before(async () => {
  if (skip) return;
  makeCerts(dir);
  fs.writeFileSync(path.join(dir, "token"), "tls-token\n", { mode: 0o600 });
  tlsDaemon = await start("tls", ["--api-token-file", path.join(dir, "token")]);
  const mcpPort = await freePort();
  mtlsEndpoint = `https://127.0.0.1:${mcpPort}/mcp`;
  mtlsDaemon = await start("mtls", ["--tls-client-ca", path.join(dir, "ca.pem"), "--mcp-listen", `127.0.0.1:${mcpPort}`]);
  const [g, h] = [await freePort(), await freePort()];
  plainDaemon = await new Daemon().startTCP(`127.0.0.1:${g}`, hasHttpListener() ? `127.0.0.1:${h}` : undefined);
  addr["plain"] = { grpc: `127.0.0.1:${g}`, connect: `127.0.0.1:${h}`, "connect-h2": `127.0.0.1:${h}` };
});

after(async () => {
  await tlsDaemon?.stop();
  await mtlsDaemon?.stop();
  await plainDaemon?.stop();
});

for (const wire of testWires()) {
  describe(`TLS, wire ${wire}`, { skip, timeout: SUITE_TIMEOUT_MS }, () => {
    it("calls over TLS with the CA and a token", async () => {
      const c = new Client(addr["tls"]![wire], { wire, caFile: path.join(dir, "ca.pem"), token: "tls-token", timeoutMs: RPC_TIMEOUT_MS });
      try {
        assert.ok((await c.servers()).some((s) => s.name === "demo"));
        assert.equal((await c.callTool("mcp__demo__echo", { message: "tls" })).text, "tls");
      } finally {
        await c.close();
      }
      const noToken = new Client(addr["tls"]![wire], { wire, ca: fs.readFileSync(path.join(dir, "ca.pem")), token: "", timeoutMs: RPC_TIMEOUT_MS });
      await assert.rejects(noToken.servers(), Unauthenticated);
      await noToken.close();
    });

    it("refuses a server certificate it cannot verify", async () => {
      const c = new Client(addr["tls"]![wire], { wire, token: "tls-token", caFile: path.join(dir, "client.pem"), timeoutMs: RPC_TIMEOUT_MS });
      await assert.rejects(c.servers(), (e) => {
        assert.ok(e instanceof Unavailable && /could not complete a TLS handshake with mcpd: \S/.test(e.message), String(e));
        return true;
      });
      await c.close();
    });

    it("says Unavailable, briefly, when the listener speaks no TLS", async () => {
      for (const target of [addr["plain"]![wire], `https://${addr["plain"]![wire]}`]) {
        const c = new Client(target, { wire, caFile: path.join(dir, "ca.pem"), timeoutMs: RPC_TIMEOUT_MS });
        try {
          await assert.rejects(c.servers(), (e) => {
            assert.ok(e instanceof Unavailable, `${target}: got ${String(e)}`);
            assert.match(e.message, /could not complete a TLS handshake with mcpd/);
            assert.doesNotMatch(e.message, /ssl3_|openssl|\n/i);
            return true;
          });
        } finally {
          await c.close();
        }
      }
    });

    it("presents a client certificate for mutual TLS", async () => {
      const c = new Client(addr["mtls"]![wire], {
        wire,
        caFile: path.join(dir, "ca.pem"),
        certFile: path.join(dir, "client.pem"),
        keyFile: path.join(dir, "client-key.pem"),
        timeoutMs: RPC_TIMEOUT_MS,
      });
      try {
        assert.equal((await c.callTool("mcp__demo__echo", { message: "mtls" })).text, "mtls");
      } finally {
        await c.close();
      }
      const without = new Client(addr["mtls"]![wire], { wire, caFile: path.join(dir, "ca.pem"), timeoutMs: RPC_TIMEOUT_MS });
      await assert.rejects(without.servers(), MCPDError);
      await without.close();
      assert.throws(() => new Client(addr["mtls"]![wire], { wire, certFile: path.join(dir, "client.pem") }), TypeError);
    });
  });
}

describe("connectServer with tls files", { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  it("reaches an MCP server behind mutual TLS with a private CA", async () => {
    // The plain daemon connects the mutual-TLS daemon's MCP endpoint,
    // presenting the client certificate the tls option names.
    const c = new Client(addr["plain"]!.grpc, { wire: "grpc", timeoutMs: RPC_TIMEOUT_MS });
    try {
      const up = await c.connectServer(ServerConfig.http("up", mtlsEndpoint, { tls: credentials() }));
      assert.ok(up.ready, up.lastError);
      assert.equal((await c.callTool("mcp__up__mcp__demo__echo", { message: "through mTLS" })).text, "through mTLS");
      // Without the files the endpoint's certificate is not trusted.
      const plain = await c.connectServer(ServerConfig.http("plain", mtlsEndpoint));
      assert.ok(!plain.ready && /certificate/.test(plain.lastError), plain.lastError);
    } finally {
      await c.close();
    }
  });
});
