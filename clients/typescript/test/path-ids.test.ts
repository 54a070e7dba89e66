// No document id can change the route a call takes: generated ids against a live server
// (python -m tests.client_server).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { createRetrievalClient, pathSafe, RetrievalApiError } from "../src/index.js";
import { server } from "./live-server.js";

const client = createRetrievalClient({ baseUrl: server.url, apiKey: server.adminKey });

// What ids that climb are made of: dots, both slashes, percent escapes of them, and what browsers drop.
const PIECES = [".", "..", "/", "\\", "%2e", "%2E", "%252e", "%2f", "%5c", "\t", "a", "ü", "#", "?", " ", "%"];

/** `count` ids of one to six pieces, the same every run (mulberry32). */
function generatedIds(count: number, seed = 20261208): string[] {
  let state = seed >>> 0;
  const next = (n: number) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
  return Array.from({ length: count }, () =>
    Array.from({ length: 1 + next(6) }, () => PIECES[next(PIECES.length)]).join(""),
  );
}

async function notFound(promise: Promise<unknown>): Promise<void> {
  await assert.rejects(promise, (error) => error instanceof RetrievalApiError && error.code === "document_not_found");
}

describe("document ids in paths", () => {
  const store = `ts-dots-${process.pid}-${Date.now()}`;
  const neighbour = `${store}-neighbour`;

  before(async () => {
    await client.putStore(store, {});
    await client.putStore(neighbour, {});
    await client.putDocument(neighbour, "plans", { text: "The neighbour's plans." });
  });

  after(async () => {
    await client.deleteStore(store).catch(() => undefined);
    await client.deleteStore(neighbour).catch(() => undefined);
  });

  it("refuses dot segments before sending and deletes them by query", async () => {
    for (const documentId of ["..", ".", `../../${neighbour}`, "../.."]) {
      assert.equal(pathSafe(documentId), false);
      await assert.rejects(client.putDocument(store, documentId, { text: "Climbing out." }), /'\.' or '\.\.' segment/);
      await assert.rejects(client.getDocument(store, documentId), /'\.' or '\.\.' segment/);
      await notFound(client.deleteDocument(store, documentId));
    }
    assert.equal((await client.getStore(store)).documentCount, 0);
    assert.equal((await client.getStore(neighbour)).documentCount, 1);
  });

  it("writes, reads and deletes every other generated id as itself", async () => {
    let kept = 0;
    for (const documentId of new Set(generatedIds(150))) {
      if (!pathSafe(documentId)) {
        await notFound(client.deleteDocument(store, documentId));
        continue;
      }
      const written = await client.putDocument(store, documentId, { text: `The document ${JSON.stringify(documentId)}.` });
      assert.equal(written.documentId, documentId);
      assert.equal((await client.getDocument(store, documentId)).documentId, documentId);
      await (kept % 2 ? client.deleteDocument(store, documentId) : client.deleteDocumentByQuery(store, documentId));
      await notFound(client.getDocument(store, documentId));
      kept += 1;
    }
    assert.ok(kept > 20, `only ${kept} ids could travel in a path`);
    assert.equal((await client.getStore(store)).documentCount, 0);
    assert.equal((await client.getStore(neighbour)).documentCount, 1);
  });
});
