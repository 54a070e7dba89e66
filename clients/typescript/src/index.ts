import createClient from "openapi-fetch";

import { RetrievalApiError, RetrievalNetworkError, RetrievalTimeoutError } from "./errors.js";
import type { components, operations, paths } from "./schema.js";
import { readServerSentEvents } from "./sse.js";

export { RetrievalApiError, RetrievalNetworkError, RetrievalTimeoutError } from "./errors.js";
export type { ErrorCode } from "./errors.js";
export type { components, operations, paths } from "./schema.js";

type Schemas = components["schemas"];
export type AnswerCitation = Schemas["AnswerCitation"];
export type AnswerRequest = Schemas["AnswerRequest"];
export type AnswerResponse = Schemas["AnswerResponse"];
export type ChunkItem = Schemas["ChunkItem"];
export type DocumentPutRequest = Schemas["DocumentPutRequest"];
export type DocumentResponse = Schemas["DocumentResponse"];
export type DocumentWriteResponse = Schemas["DocumentWriteResponse"];
export type ErrorResponse = Schemas["ErrorResponse"];
export type EvaluateRequest = Schemas["EvaluateRequest"];
export type EvaluateResponse = Schemas["EvaluateResponse"];
export type HealthResponse = Schemas["HealthResponse"];
export type RetrieveRequest = Schemas["RetrieveRequest"];
export type RetrieveResponse = Schemas["RetrieveResponse"];
export type StorePutRequest = Schemas["StorePutRequest"];
export type StoreResponse = Schemas["StoreResponse"];

/** The operations' ids, as the OpenAPI document names them. */
export type OperationId = keyof operations;

type JsonContent<T> = T extends { content: { "application/json": infer Body } } ? Body : undefined;
type Responses<K extends OperationId> = operations[K]["responses"];
type SuccessStatus = 200 | 201 | 204;
/** The JSON body of an operation's 2xx answers (undefined for 204). */
export type OperationResult<K extends OperationId> = {
  [S in keyof Responses<K> & SuccessStatus]: JsonContent<Responses<K>[S]>;
}[keyof Responses<K> & SuccessStatus];
/** An operation's JSON request body. */
export type OperationBody<K extends OperationId> = JsonContent<NonNullable<operations[K]["requestBody"]>>;
/** An operation's query parameters. */
export type OperationQuery<K extends OperationId> = NonNullable<operations[K]["parameters"]["query"]>;

/**
 * One method per operation of the OpenAPI document, named by its operationId and answering its
 * 2xx body: the method table below must satisfy this, so a new operation in the document that the
 * client lacks is a compile error. `healthy` (HEAD) answers whether the service is healthy.
 */
type OperationMethods = {
  [K in OperationId]: (...args: never[]) => Promise<K extends "healthy" ? boolean : OperationResult<K>>;
};

/** The events of `answerStream`, in order: deltas, then one citation per citation, then done. */
export type AnswerStreamEvent =
  | { event: "delta"; data: { text: string } }
  | { event: "citation"; data: AnswerCitation }
  | { event: "done"; data: AnswerResponse };

export interface RetrievalClientOptions {
  /** The service's root, e.g. `http://127.0.0.1:8000` (the paths start with `/api/v1`). */
  baseUrl: string;
  /** Sent as `x-api-key` on every request. */
  apiKey?: string;
  /** Longest wait for one attempt's answer (for answerStream: for the whole stream). Default 60 000. */
  timeoutMs?: number;
  /** Longest time for a call, its retries and their waits included. Default 120 000. */
  deadlineMs?: number;
  /** Attempts per call, the first included (1: no retry). Default 4. */
  maxAttempts?: number;
  /** The fetch to use (default: globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
}

export interface PutFileOptions {
  /** The file's media type; the service decides from `fileName` and the bytes when absent. */
  contentType?: string;
  fileName?: string;
  metadata?: Record<string, unknown>;
  /** For a CSV or JSON Lines file: the columns of each record's parts. */
  columns?: OperationQuery<"putDocument">;
}

export interface ListOptions {
  /** Only names (stores) or ids (documents) starting with this. */
  prefix?: string;
  /** Items per page (1-1000; the service's default 100). */
  limit?: number;
}

const DEFAULTS = { timeoutMs: 60_000, deadlineMs: 120_000, maxAttempts: 4 } as const;

interface FetchResult {
  data?: unknown;
  error?: unknown;
  response: Response;
}

/** What a retried call runs once per attempt: the request, aborted by `signal` at the time-out. */
type Attempt<R extends FetchResult> = (signal: AbortSignal) => Promise<R>;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The wait before attempt `attempt + 1` when the service gave no Retry-After: 0.5 s doubling, at most 8 s, jittered. */
function backoffMs(attempt: number): number {
  return Math.min(8_000, 500 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
}

/** 429 and 503 are retried; a 500 only when it carries Retry-After (database_unavailable). */
function retryableStatus(error: RetrievalApiError): boolean {
  return error.status === 429 || error.status === 503 || (error.status === 500 && error.retryAfterS !== null);
}

/**
 * False for a document id a URL path cannot carry: one with a `.` or `..` segment (between `/` or `\\`,
 * also percent-encoded as `%2e`, tabs and newlines dropped), which `fetch` and proxies resolve as a step
 * up the path. The service stores no such id; one stored before is deleted with `deleteDocumentByQuery`.
 */
export function pathSafe(documentId: string): boolean {
  let text = documentId;
  for (let round = 0; round < 8; round += 1) {
    // Only ASCII escapes can spell a dot or a separator.
    const decoded = text
      .replace(/[\t\n\r]/g, "")
      .replace(/%([0-7][0-9a-f])/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (decoded === text) break;
    text = decoded;
  }
  return !text.split(/[/\\]/).some((part) => part === "." || part === "..");
}

/** The refusal of an id that would name another route if it were sent in a path. */
function unsafePath(documentId: string): Promise<never> {
  return Promise.reject(
    new TypeError(
      `document id ${JSON.stringify(documentId)} holds a '.' or '..' segment, which a URL reads as a step up ` +
        "the path: list one stored before with listDocuments, delete it with deleteDocument",
    ),
  );
}

export function createRetrievalClient(options: RetrievalClientOptions) {
  const timeoutMs = options.timeoutMs ?? DEFAULTS.timeoutMs;
  const deadlineMs = options.deadlineMs ?? DEFAULTS.deadlineMs;
  const maxAttempts = Math.max(1, options.maxAttempts ?? DEFAULTS.maxAttempts);
  const api = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    fetch: options.fetch,
    headers: options.apiKey === undefined ? {} : { "x-api-key": options.apiKey },
  });

  /**
   * Run `attempt` until the service answers one of `answered` (2xx unless told), retrying 429,
   * 503 and a 500 with Retry-After after the wait it names (backoff without one), and network
   * errors and time-outs only when `networkRetrySafe`; never waiting past the deadline, where the
   * last error is thrown instead.
   */
  async function send<R extends FetchResult>(
    operation: OperationId,
    networkRetrySafe: boolean,
    attempt: Attempt<R>,
    answered: (status: number) => boolean = (status) => status >= 200 && status < 300,
  ): Promise<{ result: R; signal: AbortSignal; attemptTimeoutMs: number }> {
    const started = Date.now();
    for (let attempts = 1; ; attempts += 1) {
      const remaining = deadlineMs - (Date.now() - started);
      const attemptTimeoutMs = Math.max(1, Math.min(timeoutMs, remaining));
      const signal = AbortSignal.timeout(attemptTimeoutMs);
      let failure: Error;
      let waitMs: number;
      try {
        const result = await attempt(signal);
        if (answered(result.response.status)) return { result, signal, attemptTimeoutMs };
        const error = RetrievalApiError.fromResponse(operation, result.response, result.error);
        if (!retryableStatus(error)) throw error;
        failure = error;
        waitMs = error.retryAfterS !== null ? error.retryAfterS * 1000 : backoffMs(attempts);
      } catch (error) {
        if (error instanceof RetrievalApiError) throw error;
        failure = signal.aborted
          ? new RetrievalTimeoutError(operation, attemptTimeoutMs, attempts, { cause: error })
          : new RetrievalNetworkError(operation, attempts, { cause: error });
        if (!networkRetrySafe) throw failure;
        waitMs = backoffMs(attempts);
      }
      if (attempts >= maxAttempts || Date.now() - started + waitMs >= deadlineMs) throw failure;
      await sleep(waitMs);
    }
  }

  /** `send`, answering the 2xx body: the one place where openapi-fetch's data is given its operation's type. */
  async function call<K extends OperationId>(
    operation: K,
    networkRetrySafe: boolean,
    attempt: Attempt<FetchResult>,
  ): Promise<OperationResult<K>> {
    const { result } = await send(operation, networkRetrySafe, attempt);
    return result.data as OperationResult<K>;
  }

  /** Delete the document named by the `documentId` query parameter: any id, also `..`. */
  const deleteDocumentByQuery = (store: string, documentId: string) =>
    call("deleteDocumentByQuery", true, (signal) =>
      api.DELETE("/api/v1/stores/{store}/documents", {
        params: { path: { store }, query: { documentId } },
        signal,
      }),
    );

  // Network errors and time-outs are retried for GET, HEAD, PUT and DELETE (idempotent) and for
  // the POSTs that only search (retrieve, retrieveBatch, answer, similaritySearch,
  // knowledgeSearch), never for refreshStore, a POST that changes state. A retried PUT writes the
  // same thing again ("unchanged"); a DELETE retried after a lost answer may answer 404.
  const methods = {
    retrieve: (body: OperationBody<"retrieve">) =>
      call("retrieve", true, (signal) => api.POST("/api/v1/rag/retrieve", { body, signal })),
    retrieveBatch: (body: OperationBody<"retrieveBatch">) =>
      call("retrieveBatch", true, (signal) => api.POST("/api/v1/rag/retrieve/batch", { body, signal })),
    answer: (body: OperationBody<"answer">) =>
      call("answer", true, (signal) =>
        api.POST("/api/v1/rag/answer", { body, signal, headers: { accept: "application/json" } }),
      ),
    similaritySearch: (body: OperationBody<"similaritySearch">) =>
      call("similaritySearch", true, (signal) => api.POST("/api/v1/chunks/similarity-search", { body, signal })),
    knowledgeSearch: (body: OperationBody<"knowledgeSearch">) =>
      call("knowledgeSearch", true, (signal) => api.POST("/api/v1/knowledge/search", { body, signal })),
    /** The health report: 200 when every check is ok, and also the 503 report when one is not. */
    health: async (): Promise<HealthResponse> => {
      const { result } = await send(
        "health",
        true,
        (signal) => api.GET("/api/v1/health", { signal }),
        (status) => status === 200 || status === 503,
      );
      return (result.data ?? result.error) as HealthResponse;
    },
    /** True on 200, false on 503 (a check failed, or the database is busy). */
    healthy: async (): Promise<boolean> => {
      const { result } = await send(
        "healthy",
        true,
        (signal) => api.HEAD("/api/v1/health", { signal }),
        (status) => status === 200 || status === 503,
      );
      return result.response.status === 200;
    },
    resolveStore: (query: OperationQuery<"resolveStore">) =>
      call("resolveStore", true, (signal) => api.GET("/api/v1/stores/resolve", { params: { query }, signal })),
    listStores: (query: OperationQuery<"listStores"> = {}) =>
      call("listStores", true, (signal) => api.GET("/api/v1/stores", { params: { query }, signal })),
    putStore: (store: string, body: OperationBody<"putStore"> = {}) =>
      call("putStore", true, (signal) =>
        api.PUT("/api/v1/stores/{store}", { params: { path: { store } }, body, signal }),
      ),
    getStore: (store: string) =>
      call("getStore", true, (signal) => api.GET("/api/v1/stores/{store}", { params: { path: { store } }, signal })),
    deleteStore: (store: string) =>
      call("deleteStore", true, (signal) =>
        api.DELETE("/api/v1/stores/{store}", { params: { path: { store } }, signal }),
      ),
    refreshStore: (store: string) =>
      call("refreshStore", false, (signal) =>
        api.POST("/api/v1/stores/{store}/refresh", { params: { path: { store } }, signal }),
      ),
    listDocuments: (store: string, query: OperationQuery<"listDocuments"> = {}) =>
      call("listDocuments", true, (signal) =>
        api.GET("/api/v1/stores/{store}/documents", { params: { path: { store }, query }, signal }),
      ),
    /** One page of a document's chunks in chunk order, each with its `pageNumber` and `section`. */
    listChunks: (store: string, query: OperationQuery<"listChunks">) =>
      call("listChunks", true, (signal) =>
        api.GET("/api/v1/stores/{store}/chunks", { params: { path: { store }, query }, signal }),
      ),
    /**
     * Score judged queries against a store: each method's mean nDCG@k and recall@k, and every query's
     * scores and first k documents. `complete` is false when the service stopped early (its deadline).
     */
    evaluate: (store: string, body: OperationBody<"evaluate">) =>
      call("evaluate", true, (signal) =>
        api.POST("/api/v1/stores/{store}/evaluate", { params: { path: { store } }, body, signal }),
      ),
    /** Write a document (`text`, or base64 `content`); `columns` names a table file's columns. */
    putDocument: (
      store: string,
      documentId: string,
      body: OperationBody<"putDocument">,
      columns: OperationQuery<"putDocument"> = {},
    ) =>
      pathSafe(documentId)
        ? call("putDocument", true, (signal) =>
            api.PUT("/api/v1/stores/{store}/documents/{document_id}", {
              params: { path: { store, document_id: documentId }, query: columns },
              body,
              signal,
            }),
          )
        : unsafePath(documentId),
    getDocument: (store: string, documentId: string) =>
      pathSafe(documentId)
        ? call("getDocument", true, (signal) =>
            api.GET("/api/v1/stores/{store}/documents/{document_id}", {
              params: { path: { store, document_id: documentId } },
              signal,
            }),
          )
        : unsafePath(documentId),
    /** Delete a document; an id a URL path cannot carry (`pathSafe`) goes as a query parameter instead. */
    deleteDocument: (store: string, documentId: string) =>
      pathSafe(documentId)
        ? call("deleteDocument", true, (signal) =>
            api.DELETE("/api/v1/stores/{store}/documents/{document_id}", {
              params: { path: { store, document_id: documentId } },
              signal,
            }),
          )
        : deleteDocumentByQuery(store, documentId),
    deleteDocumentByQuery,
  } satisfies OperationMethods;

  /** Every store the key may read, following `nextCursor` page after page. */
  async function* iterStores(list: ListOptions = {}): AsyncGenerator<StoreResponse> {
    let cursor: string | null = null;
    do {
      const page = await methods.listStores({ ...list, cursor });
      yield* page.stores;
      cursor = page.nextCursor ?? null;
    } while (cursor !== null);
  }

  /** Every document of `store`, in id order, following `nextCursor` page after page. */
  async function* iterDocuments(store: string, list: ListOptions = {}): AsyncGenerator<DocumentResponse> {
    let cursor: string | null = null;
    do {
      const page = await methods.listDocuments(store, { ...list, cursor });
      if ("statistics" in page) throw new TypeError("listDocuments answered an ingestion-status page");
      yield* page.documents;
      cursor = page.nextCursor ?? null;
    } while (cursor !== null);
  }

  /** Every chunk of a document, in chunk order, following `nextCursor` page after page. */
  async function* iterChunks(
    store: string,
    documentId: string,
    list: Pick<ListOptions, "limit"> = {},
  ): AsyncGenerator<ChunkItem> {
    let cursor: string | null = null;
    do {
      const page = await methods.listChunks(store, { documentId, limit: list.limit, cursor });
      yield* page.chunks;
      cursor = page.nextCursor ?? null;
    } while (cursor !== null);
  }

  /** Write a file's bytes as a document (sent base64 in `content`). */
  function putFile(store: string, documentId: string, bytes: Uint8Array, file: PutFileOptions = {}) {
    const body: DocumentPutRequest = { content: toBase64(bytes) };
    if (file.contentType !== undefined) body.contentType = file.contentType;
    if (file.fileName !== undefined) body.fileName = file.fileName;
    if (file.metadata !== undefined) body.metadata = file.metadata;
    return methods.putDocument(store, documentId, body, file.columns);
  }

  /**
   * The answer as it is written, from `POST /rag/answer` with `Accept: text/event-stream`.
   * Errors before the first event are thrown as by `answer` (and retried alike); an `error` event
   * is thrown as a RetrievalApiError; a stream that ends without `done` as a RetrievalNetworkError.
   * A server that does not stream (API Gateway) answers JSON: the same events are made from it.
   */
  async function* answerStream(body: OperationBody<"answer">): AsyncGenerator<AnswerStreamEvent> {
    const { result, signal, attemptTimeoutMs } = await send("answer", true, (attemptSignal) =>
      api.POST("/api/v1/rag/answer", {
        body,
        signal: attemptSignal,
        parseAs: "stream",
        headers: { accept: "text/event-stream" },
      }),
    );
    const { response } = result;
    const stream = result.data;
    if (!stream) throw new RetrievalNetworkError("answer", 1, { cause: new Error("the answer has no body") });
    try {
      if (!(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        const answer = (await new Response(stream).json()) as AnswerResponse;
        yield { event: "delta", data: { text: answer.text } };
        for (const citation of answer.citations) yield { event: "citation", data: citation };
        yield { event: "done", data: answer };
        return;
      }
      for await (const { event, data } of readServerSentEvents(stream)) {
        if (event === "delta") yield { event, data: JSON.parse(data) as { text: string } };
        else if (event === "citation") yield { event, data: JSON.parse(data) as AnswerCitation };
        else if (event === "done") {
          yield { event, data: JSON.parse(data) as AnswerResponse };
          return;
        } else if (event === "error") {
          throw RetrievalApiError.fromResponse("answer", response, JSON.parse(data));
        }
      }
      throw new RetrievalNetworkError("answer", 1, { cause: new Error("the stream ended before its done event") });
    } catch (error) {
      if (signal.aborted && !(error instanceof RetrievalApiError)) {
        throw new RetrievalTimeoutError("answer", attemptTimeoutMs, 1, { cause: error });
      }
      throw error;
    }
  }

  return { ...methods, iterStores, iterDocuments, iterChunks, putFile, answerStream };
}

export type RetrievalClient = ReturnType<typeof createRetrievalClient>;

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let start = 0; start < bytes.length; start += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(start, start + 0x8000));
  }
  return btoa(binary);
}
