// The client's method table is typed against the generated operations: an operation the OpenAPI
// document gains and the client lacks must fail the build.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

import { createRetrievalClient, type OperationId } from "../src/index.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

it("tsc fails on the client when operations has one more than the client's methods", () => {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const fixture = join(root, "test", "fixtures", "extra-operation", "tsconfig.json");
  const run = spawnSync(process.execPath, [tsc, "-p", fixture], { encoding: "utf8" });
  assert.notEqual(run.status, 0, "tsc accepted a client lacking exportStore");
  assert.match(run.stdout, /Property 'exportStore' is missing/);
  assert.match(run.stdout, /src\/index\.ts/);
});

it("the client has a method for each operationId of the document", async () => {
  const { readFile } = await import("node:fs/promises");
  const document = JSON.parse(await readFile(join(root, "..", "openapi.json"), "utf8")) as {
    paths: Record<string, Record<string, { operationId?: string }>>;
  };
  const ids = Object.values(document.paths).flatMap((path) => Object.values(path).map((op) => op.operationId));
  const client = createRetrievalClient({ baseUrl: "http://unused" });
  for (const id of ids) assert.equal(typeof client[id as OperationId], "function", `no method ${id}`);
});
