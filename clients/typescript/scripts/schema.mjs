// `node scripts/schema.mjs write`: src/schema.ts from ../openapi.json (openapi-typescript).
// `node scripts/schema.mjs check`: the same into a temporary file; exit 1 when it differs from src/schema.ts.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const document = join(root, "..", "openapi.json");
const committed = join(root, "src", "schema.ts");
// Fields with a default stay optional in requests: the server fills them in.
const options = ["--default-non-nullable", "false"];

function generate(output) {
  const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
  const run = spawnSync(process.execPath, [cli, document, ...options, "--output", output], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (run.status !== 0) {
    console.error(`openapi-typescript failed on ${document} (exit ${run.status})`);
    process.exit(run.status ?? 1);
  }
}

const mode = process.argv[2];
if (mode === "write") {
  generate(committed);
  console.log(`wrote ${committed} from ${document}`);
} else if (mode === "check") {
  const directory = mkdtempSync(join(tmpdir(), "retrieval-schema-"));
  try {
    const fresh = join(directory, "schema.ts");
    generate(fresh);
    const expected = readFileSync(fresh, "utf8").split("\n");
    const actual = readFileSync(committed, "utf8").split("\n");
    const length = Math.max(expected.length, actual.length);
    let line = 0;
    while (line < length && expected[line] === actual[line]) line += 1;
    if (line < length) {
      console.error(
        `src/schema.ts is not what openapi-typescript makes of clients/openapi.json ` +
          `(first difference at line ${line + 1}:\n  committed: ${JSON.stringify(actual[line] ?? null)}\n` +
          `  generated: ${JSON.stringify(expected[line] ?? null)}).\n` +
          `Run \`npm run generate\` in clients/typescript and commit src/schema.ts.`,
      );
      process.exit(1);
    }
    console.log("src/schema.ts matches clients/openapi.json");
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
} else {
  console.error("usage: node scripts/schema.mjs write|check");
  process.exit(2);
}
