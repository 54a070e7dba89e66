// What the client does with answers a live server does not give on demand (time-outs, network
// errors, 5xx, a broken stream), through a fake fetch.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  createRetrievalClient,
  RetrievalApiError,
  RetrievalNetworkError,
  RetrievalTimeoutError,
  type AnswerStreamEvent,
} from "../src/index.js";
import { retryAfterSeconds } from "../src/errors.js";
import { readServerSentEvents } from "../src/sse.js";

type Handler = (request: Request, attempt: number) => Response | Promise<Response>;

function fakeService(handler: Handler) {
  const requests: Request[] = [];
  const fetch = async (request: Request) => {
    requests.push(request);
    return handler(request, requests.length);
  };
  return { requests, fetch };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "x-request-id": `request-${status}`, ...headers },
  });

const errorBody = (code: string, message = code) => ({ error: { code, message, details: {} } });

const store = { name: "s", displayName: "s" };
const question = { query: "q", grade: 0, store: "s" };
const answer = {
  text: "One. Two.",
  citations: [{ start: 0, end: 4, text: "One.", sources: [1], chunkIds: ["d#0"], documentIds: ["d"] }],
  sources: [],
  grounded: true,
  query: "q",
  store: "s",
  pipeline: {},
};

function streamOf(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

const eventStream = (...chunks: string[]) =>
  new Response(streamOf(...chunks), { status: 200, headers: { "content-type": "text/event-stream; charset=utf-8" } });

/** A service that never answers: like an open socket, it keeps the process alive until aborted. */
const silent: Handler = (request) =>
  new Promise<Response>((_, reject) => {
    const socket = setInterval(() => undefined, 1000);
    request.signal.addEventListener("abort", () => {
      clearInterval(socket);
      reject(request.signal.reason);
    });
  });

describe("time-outs and network errors", () => {
  it("an attempt without an answer ends in RetrievalTimeoutError after maxAttempts, not a hang", async () => {
    const service = fakeService(silent);
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch, timeoutMs: 50, maxAttempts: 2 });
    const started = Date.now();
    await assert.rejects(client.getStore("s"), (error: unknown) => {
      assert.ok(error instanceof RetrievalTimeoutError);
      assert.equal(error.name, "RetrievalTimeoutError");
      assert.equal(error.attempts, 2);
      assert.equal(error.timeoutMs, 50);
      return true;
    });
    assert.equal(service.requests.length, 2);
    assert.ok(Date.now() - started < 3000);
  });

  it("the deadline bounds an attempt's time-out", async () => {
    const service = fakeService(silent);
    const client = createRetrievalClient({
      baseUrl: "http://service",
      fetch: service.fetch,
      timeoutMs: 10_000,
      deadlineMs: 100,
    });
    const started = Date.now();
    await assert.rejects(client.getStore("s"), RetrievalTimeoutError);
    assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
  });

  it("a network error is retried for a GET and a searching POST, never for refreshStore", async () => {
    const refused = () => {
      throw new TypeError("fetch failed", { cause: new Error("ECONNREFUSED") });
    };
    const reads = fakeService((_, attempt) => (attempt < 2 ? refused() : json(200, store)));
    const reader = createRetrievalClient({ baseUrl: "http://service", fetch: reads.fetch, maxAttempts: 2 });
    assert.deepEqual(await reader.getStore("s"), store);
    assert.equal(reads.requests.length, 2);

    const searches = fakeService((_, attempt) =>
      attempt < 2 ? refused() : json(200, { results: [], query: "q", totalResults: 0 }),
    );
    const searcher = createRetrievalClient({ baseUrl: "http://service", fetch: searches.fetch, maxAttempts: 2 });
    assert.equal((await searcher.retrieve(question)).totalResults, 0);
    assert.equal(searches.requests.length, 2);

    const refreshes = fakeService(refused);
    const refresher = createRetrievalClient({ baseUrl: "http://service", fetch: refreshes.fetch, maxAttempts: 3 });
    await assert.rejects(refresher.refreshStore("s"), (error: unknown) => {
      assert.ok(error instanceof RetrievalNetworkError);
      assert.match(error.message, /refreshStore.*fetch failed/);
      return true;
    });
    assert.equal(refreshes.requests.length, 1);
  });
});

describe("retried statuses", () => {
  it("503 without Retry-After is retried after a backoff; the answer then is the call's", async () => {
    const service = fakeService((_, attempt) => (attempt === 1 ? json(503, errorBody("overloaded")) : json(200, store)));
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch });
    assert.deepEqual(await client.getStore("s"), store);
    assert.equal(service.requests.length, 2);
  });

  it("500 is retried only with Retry-After", async () => {
    const outage = fakeService((_, attempt) =>
      attempt === 1 ? json(500, errorBody("database_unavailable"), { "retry-after": "0" }) : json(200, store),
    );
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: outage.fetch });
    assert.deepEqual(await client.getStore("s"), store);
    assert.equal(outage.requests.length, 2);

    const refused = fakeService(() => json(500, errorBody("database_error", "SQLSTATE 42P01")));
    const other = createRetrievalClient({ baseUrl: "http://service", fetch: refused.fetch });
    await assert.rejects(other.getStore("s"), { code: "database_error", status: 500, retryAfterS: null });
    assert.equal(refused.requests.length, 1);
  });

  it("a 429 past maxAttempts is thrown with its Retry-After, code and request id", async () => {
    const service = fakeService(() => json(429, errorBody("rate_limited"), { "retry-after": "0" }));
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch, maxAttempts: 3 });
    await assert.rejects(client.listStores(), (error: unknown) => {
      assert.ok(error instanceof RetrievalApiError);
      assert.deepEqual(
        [error.status, error.code, error.retryAfterS, error.requestId],
        [429, "rate_limited", 0, "request-429"],
      );
      return true;
    });
    assert.equal(service.requests.length, 3);
  });

  it("an error without an error body keeps its status, with the code http_error", async () => {
    const service = fakeService(() => new Response("<html>Bad gateway</html>", { status: 502 }));
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch });
    await assert.rejects(client.getStore("s"), { status: 502, code: "http_error" });
  });

  it("Retry-After may be an HTTP date", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(retryAfterSeconds("Thu, 01 Jan 2026 00:00:03 GMT", now), 3);
    assert.equal(retryAfterSeconds("7", now), 7);
    assert.equal(retryAfterSeconds("soon", now), null);
  });
});

describe("requests", () => {
  it("a document id is percent-encoded whole in the path, and the key is sent", async () => {
    const service = fakeService(() => new Response(null, { status: 204 }));
    const client = createRetrievalClient({ baseUrl: "http://service/", fetch: service.fetch, apiKey: "k" });
    await client.deleteDocument("s", "a/b#c?d %e ü");
    const request = service.requests[0];
    assert.equal(request?.url, "http://service/api/v1/stores/s/documents/a%2Fb%23c%3Fd%20%25e%20%C3%BC");
    assert.equal(request?.method, "DELETE");
    assert.equal(request?.headers.get("x-api-key"), "k");
  });

  it("putFile sends the bytes as base64 content with the file's name and type", async () => {
    const service = fakeService(() => json(201, { documentId: "f", status: "created" }));
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch });
    const bytes = Uint8Array.from({ length: 70_000 }, (_, index) => index % 256);
    await client.putFile("s", "f", bytes, { contentType: "application/pdf", fileName: "f.pdf" });
    const body = (await service.requests[0]?.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ["content", "contentType", "fileName"]);
    assert.deepEqual(Buffer.from(body["content"] as string, "base64"), Buffer.from(bytes));
  });
});

describe("answerStream", () => {
  it("reads events split anywhere, with CRLF and several data lines", async () => {
    const text = 'event: delta\r\ndata: {"text":\r\ndata: "a\\u00fc"}\r\n\r\n: a comment\n\nevent: done\ndata: {}\n\n';
    const bytes = new TextEncoder().encode(text);
    const chunks = Array.from(bytes, (byte) => new Uint8Array([byte]));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });
    const events = [];
    for await (const event of readServerSentEvents(stream)) events.push(event);
    assert.deepEqual(events, [
      { event: "delta", data: '{"text":\n"a\\u00fc"}' },
      { event: "done", data: "{}" },
    ]);
  });

  it("an error event is thrown as RetrievalApiError with its code", async () => {
    const service = fakeService(() =>
      eventStream(
        'event: delta\ndata: {"text": "One."}\n\n',
        `event: error\ndata: ${JSON.stringify(errorBody("generation_provider_error", "the model failed"))}\n\n`,
      ),
    );
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch });
    const events: AnswerStreamEvent[] = [];
    await assert.rejects(
      (async () => {
        for await (const event of client.answerStream(question)) events.push(event);
      })(),
      { name: "RetrievalApiError", code: "generation_provider_error", message: "the model failed" },
    );
    assert.deepEqual(events, [{ event: "delta", data: { text: "One." } }]);
    assert.equal(service.requests[0]?.headers.get("accept"), "text/event-stream");
  });

  it("a stream cut before done is a RetrievalNetworkError", async () => {
    const service = fakeService(() => eventStream('event: delta\ndata: {"text": "One."}\n\n'));
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch });
    await assert.rejects(
      (async () => {
        for await (const _ of client.answerStream(question));
      })(),
      RetrievalNetworkError,
    );
  });

  it("a JSON answer (a server that does not stream) gives the same events", async () => {
    const service = fakeService(() => json(200, answer));
    const client = createRetrievalClient({ baseUrl: "http://service", fetch: service.fetch });
    const events: AnswerStreamEvent[] = [];
    for await (const event of client.answerStream(question)) events.push(event);
    assert.deepEqual(events, [
      { event: "delta", data: { text: answer.text } },
      { event: "citation", data: answer.citations[0] },
      { event: "done", data: answer },
    ]);
  });
});
