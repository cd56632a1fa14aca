// The examples in examples/typescript, run as a user would against a real
// mcpd, on every wire the daemon serves.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Daemon, MCPD_BIN, SUITE_TIMEOUT_MS, testWires } from "./harness.js";

const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "examples");
const skip = MCPD_BIN === undefined ? "no mcpd binary (MCPD_BIN)" : false;

let daemon: Daemon;
before(async () => {
  if (skip) return;
  daemon = await new Daemon().start();
  await daemon.demoReady();
});
after(async () => {
  await daemon?.stop();
});

describe("examples/typescript", { skip, timeout: SUITE_TIMEOUT_MS }, () => {
  for (const wire of testWires()) {
    it(`agent_loop answers with the tool's result (wire ${wire})`, async () => {
      const env: NodeJS.ProcessEnv = { ...process.env, MCPD_ADDRESS: daemon.target(wire), MCPD_WIRE: wire };
      delete env["MCPD_API_TOKEN"];
      const { stdout } = await promisify(execFile)(process.execPath, [path.join(EXAMPLES, "agent_loop.js"), "What is 19 + 23?"], {
        env,
        timeout: 60_000,
      });
      assert.match(stdout, /tool mcp__demo__add\(\{"a":19,"b":23\}\) -> 42/);
      assert.match(stdout, /assistant: The answer is 42\./);
    });
  }
});
