// Every method once against a live server (python -m tests.client_server), in the order a user
// would call them: the tests of a `describe` run one after the other and share its store.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, describe, it } from "node:test";

import {
  createRetrievalClient,
  RetrievalApiError,
  type AnswerStreamEvent,
} from "../src/index.js";
import { recordingFetch, server } from "./live-server.js";

const client = createRetrievalClient({ baseUrl: server.url, apiKey: server.adminKey });

async function rejection(promise: Promise<unknown>): Promise<RetrievalApiError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof RetrievalApiError, `expected a RetrievalApiError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

describe("a store from creation to deletion", () => {
  const store = `ts-client-${process.pid}-${Date.now()}`;
  const displayName = `TypeScript client test ${store}`;
  const oddId = "a/b#c?d %e ü";
  const fileBytes = new TextEncoder().encode("# Travel\n\nTrains to Zürich are booked through the travel desk, 東京 too.\n");

  after(async () => {
    await client.deleteStore(store).catch(() => undefined);
  });

  it("putStore creates the store with the service's embedder", async () => {
    const created = await client.putStore(store, { displayName, allowedMetadataKeys: ["team", "year"] });
    assert.equal(created.name, store);
    assert.equal(created.dimension, 384);
    assert.equal(created.documentCount, 0);
    const again = await client.getStore(store);
    assert.equal(again.displayName, displayName);
  });

  it("putDocument writes text, and the same text again is unchanged", async () => {
    const body = { text: "Visitors sign in at the front desk.", metadata: { team: "facilities", year: 2026 } };
    const written = await client.putDocument(store, "policies/visitors", body);
    assert.equal(written.status, "created");
    assert.equal(written.documentId, "policies/visitors");
    assert.equal(written.chunkCount, 1);
    const rewritten = await client.putDocument(store, "policies/visitors", body);
    assert.equal(rewritten.status, "unchanged");
  });

  it("putFile sends the bytes base64 and the service stores those bytes", async () => {
    const written = await client.putFile(store, "policies/travel.md", fileBytes, {
      contentType: "text/markdown",
      fileName: "travel.md",
      metadata: { team: "travel" },
    });
    assert.equal(written.status, "created");
    assert.equal(written.contentSha256, createHash("sha256").update(fileBytes).digest("hex"));
    const document = await client.getDocument(store, "policies/travel.md");
    assert.equal(document.contentType, "text/markdown");
    assert.equal(document.metadata["fileName"], "travel.md");
  });

  it("an id with / # ? % space and ü is one document, read back whole", async () => {
    const written = await client.putDocument(store, oddId, {
      text: "Badges are returned to reception when visitors sign out.",
      metadata: { team: "facilities" },
    });
    assert.equal(written.documentId, oddId);
    const document = await client.getDocument(store, oddId);
    assert.equal(document.documentId, oddId);
    assert.equal(document.metadata["team"], "facilities");
    // Not "a" nor "a/b": the id was not cut at / # or ?.
    await assert.rejects(client.getDocument(store, "a/b"), { code: "document_not_found", status: 404 });
  });

  it("listDocuments pages with limit=1, and iterDocuments follows every nextCursor", async () => {
    const first = await client.listDocuments(store, { limit: 1 });
    assert.ok("documents" in first && !("statistics" in first));
    assert.equal(first.documents.length, 1);
    assert.equal(typeof first.nextCursor, "string");
    const second = await client.listDocuments(store, { limit: 1, cursor: first.nextCursor });
    assert.equal(second.documents.length, 1);
    assert.notEqual(second.documents[0]?.documentId, first.documents[0]?.documentId);

    const ids: string[] = [];
    for await (const document of client.iterDocuments(store, { limit: 1 })) ids.push(document.documentId);
    // Byte order of the UTF-8 ids, as the service pages them.
    const expected = [oddId, "policies/travel.md", "policies/visitors"].sort((a, b) =>
      Buffer.compare(Buffer.from(a), Buffer.from(b)),
    );
    assert.deepEqual(ids, expected);

    const policies: string[] = [];
    for await (const document of client.iterDocuments(store, { prefix: "policies/", limit: 1 })) {
      policies.push(document.documentId);
    }
    assert.deepEqual(policies, ["policies/travel.md", "policies/visitors"]);
  });

  it("listDocuments with status=ok lists each source's last outcome", async () => {
    const page = await client.listDocuments(store, { status: "ok" });
    assert.ok("statistics" in page);
    assert.deepEqual(
      page.documents.map((item) => [item.documentId, item.status]),
      [
        [oddId, "ok"],
        ["policies/travel.md", "ok"],
        ["policies/visitors", "ok"],
      ].sort(([a], [b]) => Buffer.compare(Buffer.from(a ?? ""), Buffer.from(b ?? ""))),
    );
  });

  it("listStores and iterStores page through the stores the key may read", async () => {
    const page = await client.listStores({ prefix: store });
    assert.deepEqual(page.stores.map((each) => each.name), [store]);
    assert.equal(page.nextCursor, null);
    const names: string[] = [];
    for await (const each of client.iterStores({ limit: 1 })) names.push(each.name);
    assert.ok(names.includes("sample") && names.includes(store), `stores: ${names.join(", ")}`);
    assert.equal(new Set(names).size, names.length, "a store came twice");
  });

  it("resolveStore finds the store by its display name", async () => {
    const resolved = await client.resolveStore({ name: displayName });
    assert.equal(resolved.name, store);
    assert.equal(resolved.resolvedBy, "displayName");
  });

  it("retrieve with a metadata filter answers only matching chunks", async () => {
    const query = { query: "Where do visitors sign in and out?", grade: 0, store };
    const unfiltered = await client.retrieve(query);
    const everyTeam = new Set(unfiltered.results.map((result) => result.metadata["team"]));
    assert.ok(everyTeam.has("travel"), "without the filter the travel document is found too");
    const filtered = await client.retrieve({ ...query, metadataFilter: { team: "facilities" } });
    assert.ok(filtered.results.length >= 2);
    for (const result of filtered.results) assert.equal(result.metadata["team"], "facilities");
    assert.equal(filtered.store, store);
  });

  it("retrieveBatch answers each request in its slot", async () => {
    const batch = await client.retrieveBatch({
      requests: [
        { query: "visitors", grade: 0, store },
        { query: "How does Kubernetes schedule pods?", grade: 0.1, store: "sample" },
        { query: "anything", grade: 0, store: "no-such-store" },
      ],
    });
    assert.deepEqual(
      batch.results.map((item) => item.status),
      [200, 200, 404],
    );
    assert.equal(batch.results[1]?.response?.results[0]?.id, "k8s-scheduling#0");
    assert.equal(batch.results[2]?.error?.code, "store_not_found");
  });

  it("similaritySearch takes a vector of the store's dimension and refuses another", async () => {
    const vector = Array.from({ length: 384 }, (_, index) => Math.sin(index + 1));
    const found = await client.similaritySearch({ queryEmbedding: vector, store, topK: 2 });
    assert.equal(found.results.length, 2);
    const error = await rejection(client.similaritySearch({ queryEmbedding: [0.1, 0.2, 0.3], store }));
    assert.equal(error.status, 422);
    assert.equal(error.code, "dimension_mismatch");
  });

  it("refreshStore, which is for stores attached to a table, refuses a store of documents (409)", async () => {
    const error = await rejection(client.refreshStore(store));
    assert.equal(error.status, 409);
    assert.equal(error.code, "conflict");
    assert.equal(error.details["field"], "store");
  });

  it("deleteDocument removes the odd id; reading it is then document_not_found", async () => {
    assert.equal((await client.getDocument(store, oddId)).documentId, oddId);
    assert.equal(await client.deleteDocument(store, oddId), undefined);
    const error = await rejection(client.getDocument(store, oddId));
    assert.equal(error.status, 404);
    assert.equal(error.code, "document_not_found");
    const left: string[] = [];
    for await (const document of client.iterDocuments(store)) left.push(document.documentId);
    assert.deepEqual(left, ["policies/travel.md", "policies/visitors"]);
  });

  it("deleteStore drops the store; reading it is then store_not_found", async () => {
    assert.equal(await client.deleteStore(store), undefined);
    const error = await rejection(client.getStore(store));
    assert.equal(error.code, "store_not_found");
  });
});

describe("a document's chunks", () => {
  const store = `ts-chunks-${process.pid}-${Date.now()}`;
  const guide = new TextEncoder().encode(
    "# Guide\n\nRead this first.\n\n## Install\n\nRun the installer.\n\n## Upgrade\n\nStop the service first.\n",
  );

  after(async () => {
    await client.deleteStore(store).catch(() => undefined);
  });

  it("listChunks pages a Markdown file's chunks in order, each with its section", async () => {
    await client.putStore(store);
    await client.putFile(store, "docs/guide#1.md", guide, { fileName: "guide.md" });
    const first = await client.listChunks(store, { documentId: "docs/guide#1.md", limit: 2 });
    assert.equal(first.documentId, "docs/guide#1.md");
    assert.deepEqual(
      first.chunks.map((chunk) => [chunk.id, chunk.chunkIndex, chunk.section, chunk.pageNumber]),
      [
        ["docs/guide#1.md#0", 0, "Guide", null],
        ["docs/guide#1.md#1", 1, "Guide > Install", null],
      ],
    );
    assert.equal(typeof first.nextCursor, "string");
    const rest = await client.listChunks(store, { documentId: "docs/guide#1.md", limit: 2, cursor: first.nextCursor });
    assert.deepEqual(
      rest.chunks.map((chunk) => chunk.section),
      ["Guide > Upgrade"],
    );
    assert.equal(rest.nextCursor, null);
    assert.match(rest.chunks[0]?.content ?? "", /Stop the service first\.$/);
    assert.equal(rest.chunks[0]?.metadata["fileName"], "guide.md");
  });

  it("iterChunks follows every nextCursor; an unknown document is document_not_found", async () => {
    const indexes: number[] = [];
    for await (const chunk of client.iterChunks(store, "docs/guide#1.md", { limit: 1 })) indexes.push(chunk.chunkIndex);
    assert.deepEqual(indexes, [0, 1, 2]);
    const error = await rejection(client.listChunks(store, { documentId: "docs/missing.md" }));
    assert.equal(error.status, 404);
    assert.equal(error.code, "document_not_found");
  });
});

describe("evaluate", () => {
  const queries = [
    { id: "q1", text: "How does the Kubernetes scheduler pick a node for a pod?" },
    { id: "q2", text: "How often are API keys rotated?" },
  ];

  it("evaluate scores each default method and every judged query on the sample store", async () => {
    const judgments = [
      { queryId: "q1", documentId: "k8s-scheduling", relevance: 2 },
      { queryId: "q2", documentId: "security-keys", relevance: 0 },
    ];
    const scored = await client.evaluate("sample", { queries, judgments, k: 3 });
    assert.equal(scored.complete, true);
    assert.deepEqual([scored.scoredQueries, scored.skippedQueries], [1, 1]);
    assert.deepEqual(
      scored.methods.map((method) => method.name),
      ["dense", "hybrid", "keyword"],
    );
    const dense = scored.queries[0]?.scores["dense"];
    assert.equal(dense?.topDocuments[0], "k8s-scheduling");
    assert.equal(dense?.topDocuments.length, 3);
    assert.equal(dense?.ndcg, 1);
  });

  it("a judgment of a query not in queries is a validation_error naming it", async () => {
    const judgments = [{ queryId: "q9", documentId: "k8s-scheduling", relevance: 1 }];
    const error = await rejection(client.evaluate("sample", { queries, judgments }));
    assert.equal(error.status, 422);
    assert.equal(error.code, "validation_error");
    assert.match(error.message, /q9/);
  });
});

describe("answers", () => {
  const question = { query: "How does Kubernetes decide which node runs a pod?", grade: 0.1, store: "sample" };

  it("answer (JSON) is grounded in cited sources", async () => {
    const answer = await client.answer(question);
    assert.ok(answer.text.length > 0);
    assert.equal(answer.grounded, true);
    assert.ok(answer.citations.length > 0);
    assert.ok(answer.citations.some((citation) => citation.documentIds.includes("k8s-scheduling")));
  });

  it("answerStream yields deltas, then citations, then done with the whole answer", async () => {
    const events: AnswerStreamEvent[] = [];
    for await (const event of client.answerStream(question)) events.push(event);
    const kinds = events.map((event) => event.event);
    const firstCitation = kinds.indexOf("citation");
    assert.ok(kinds.indexOf("delta") === 0 && firstCitation > 0, kinds.join(" "));
    assert.deepEqual(kinds.slice(firstCitation, -1).filter((kind) => kind !== "citation"), []);
    const done = events.at(-1);
    assert.ok(done?.event === "done");
    const text = events.map((event) => (event.event === "delta" ? event.data.text : "")).join("");
    assert.equal(text, done.data.text);
    const citations = events.flatMap((event) => (event.event === "citation" ? [event.data] : []));
    assert.deepEqual(citations, done.data.citations);
  });
});

describe("knowledgeSearch", () => {
  it("is backend_not_configured (501) on a service without a Gemini key", async () => {
    const error = await rejection(client.knowledgeSearch({ query: "anything", store: "fileSearchStores/none" }));
    assert.equal(error.status, 501);
    assert.equal(error.code, "backend_not_configured");
  });
});

describe("health", () => {
  it("health reports every check ok and healthy() is true", async () => {
    const report = await client.health();
    assert.equal(report.status, "ok");
    assert.equal(await client.healthy(), true);
  });
});

describe("errors", () => {
  it("an unknown store is store_not_found (404) with the response's request id", async () => {
    const recorder = recordingFetch();
    const recorded = createRetrievalClient({ baseUrl: server.url, apiKey: server.adminKey, fetch: recorder.fetch });
    const error = await rejection(recorded.getStore("no-such-store"));
    assert.equal(error.status, 404);
    assert.equal(error.code, "store_not_found");
    assert.match(error.message, /no-such-store/);
    assert.equal(error.operation, "getStore");
    assert.ok(error.requestId);
    assert.equal(error.requestId, recorder.answers.at(-1)?.requestId);
    assert.equal(recorder.answers.length, 1, "a 404 is not retried");
  });

  it("no key is unauthorized (401)", async () => {
    const anonymous = createRetrievalClient({ baseUrl: server.url });
    const error = await rejection(anonymous.listStores());
    assert.equal(error.status, 401);
    assert.equal(error.code, "unauthorized");
  });

  it("the read key writing is forbidden (403), naming the scope it lacks", async () => {
    const reader = createRetrievalClient({ baseUrl: server.url, apiKey: server.readKey });
    const store = await rejection(reader.putStore("ts-client-forbidden"));
    assert.equal(store.status, 403);
    assert.equal(store.code, "forbidden");
    assert.equal(store.details["requiredScope"], "admin");
    const document = await rejection(reader.putDocument("sample", "forbidden", { text: "no" }));
    assert.equal(document.code, "forbidden");
    assert.equal(document.details["requiredScope"], "write");
    // The read key does read.
    assert.equal((await reader.getStore("sample")).name, "sample");
  });

  it("a bad request is validation_error (422) naming the field", async () => {
    const error = await rejection(client.listStores({ limit: 0 }));
    assert.equal(error.status, 422);
    assert.equal(error.code, "validation_error");
    assert.match(error.message, /limit/);
  });
});
