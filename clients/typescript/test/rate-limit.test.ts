// Retry-After against the live server's limited key: LIMITED_REQUESTS requests per window of
// LIMITED_WINDOW_S seconds, windows aligned on the epoch; over it, 429 rate_limited with Retry-After.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createRetrievalClient, RetrievalApiError } from "../src/index.js";
import { nextWindow, recordingFetch, server } from "./live-server.js";

const { limitedRequests, limitedWindowS } = server;

describe("rate limits", () => {
  it(`${limitedRequests + 1} calls in one window all succeed, the last after waiting out the window`, async () => {
    const recorder = recordingFetch();
    const client = createRetrievalClient({ baseUrl: server.url, apiKey: server.limitedKey, fetch: recorder.fetch });
    await nextWindow(limitedWindowS);
    const elapsed: number[] = [];
    for (let call = 0; call <= limitedRequests; call += 1) {
      const started = Date.now();
      const store = await client.getStore("sample");
      elapsed.push(Date.now() - started);
      assert.equal(store.name, "sample");
    }
    assert.deepEqual(
      recorder.answers.map((answer) => answer.status),
      [...Array<number>(limitedRequests).fill(200), 429, 200],
    );
    const last = elapsed.at(-1) ?? 0;
    // Retry-After is the whole seconds left in the window, the window having just started.
    assert.ok(last >= (limitedWindowS - 0.5) * 1000, `the last call took ${last} ms`);
    assert.ok(last < (limitedWindowS + 2) * 1000, `the last call took ${last} ms`);
  });

  it("a deadline shorter than Retry-After ends in the 429 error at once", async () => {
    const recorder = recordingFetch();
    const deadlineMs = (limitedWindowS * 1000) / 2;
    const client = createRetrievalClient({ baseUrl: server.url, apiKey: server.limitedKey, fetch: recorder.fetch, deadlineMs });
    await nextWindow(limitedWindowS);
    for (let call = 0; call < limitedRequests; call += 1) await client.getStore("sample");
    const started = Date.now();
    const error = await client.getStore("sample").then(
      () => assert.fail("the call over the limit succeeded"),
      (failure: unknown) => failure,
    );
    const took = Date.now() - started;
    assert.ok(error instanceof RetrievalApiError);
    assert.equal(error.status, 429);
    assert.equal(error.code, "rate_limited");
    assert.ok(error.retryAfterS !== null && error.retryAfterS * 1000 > deadlineMs, `Retry-After ${error.retryAfterS}`);
    assert.ok(took < deadlineMs, `the call took ${took} ms`);
    assert.equal(recorder.answers.length, limitedRequests + 1, "the 429 was not retried");
  });
});
