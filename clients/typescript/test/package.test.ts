// What `npm pack` puts in the package a user installs: no daemon needed.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

// build/test/ -> the package folder.
const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The paths `npm pack` would put in the tarball (it reads only local files). */
function packedFiles(): Set<string> {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: PKG, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  const [pack] = JSON.parse(out) as { files: { path: string }[] }[];
  return new Set(pack!.files.map((f) => f.path));
}

describe("the npm package", () => {
  const files = packedFiles();

  it("holds what package.json's exports, main and types name, and no tests or benchmarks", () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(PKG, "package.json"), "utf8")) as {
      main: string;
      types: string;
      exports: Record<string, Record<string, string>>;
    };
    const named = [manifest.main, manifest.types, ...Object.values(manifest.exports).flatMap((e) => Object.values(e))];
    for (const n of named) assert.ok(files.has(path.posix.normalize(n)), `package.json names ${n}, which the package lacks`);
    for (const f of files) assert.ok(!/^(build\/)?(test|bench|examples)\//.test(f), `the package holds ${f}`);
  });

  it("has a declaration for every module and source maps whose sources it holds", () => {
    const maps = [...files].filter((f) => f.endsWith(".js.map"));
    assert.ok(maps.length > 0, "no source maps packed");
    for (const js of [...files].filter((f) => f.endsWith(".js"))) {
      assert.ok(files.has(js.replace(/\.js$/, ".d.ts")), `${js} has no declaration in the package`);
      const url = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(fs.readFileSync(path.join(PKG, js), "utf8"))?.[1];
      if (url !== undefined) assert.ok(files.has(path.posix.join(path.posix.dirname(js), url)), `${js} points at ${url}, which the package lacks`);
    }
    for (const map of maps) {
      const { sources, sourceRoot } = JSON.parse(fs.readFileSync(path.join(PKG, map), "utf8")) as { sources: string[]; sourceRoot?: string };
      for (const s of sources) {
        const source = path.posix.normalize(path.posix.join(path.posix.dirname(map), sourceRoot ?? "", s));
        assert.ok(files.has(source), `${map} maps to ${source}, which the package lacks`);
      }
    }
  });
});
