import type { components } from "./schema.js";

export type ErrorCode = components["schemas"]["ErrorCode"];

/**
 * A non-2xx answer of the service (or an `error` event of an answer stream).
 *
 * `code` is the service's `error.code`; a code this client's ErrorCode does not list (a newer
 * service) is kept as it came, so treat an unknown one by `status`. An answer without an error
 * body (HEAD, a proxy's HTML page) gets the code `http_error`.
 */
export class RetrievalApiError extends Error {
  override name = "RetrievalApiError";
  /** The HTTP status; for an `error` event of an answer stream, the stream's own status (200). */
  readonly status: number;
  readonly code: ErrorCode | (string & {});
  readonly details: Record<string, unknown>;
  /** The response's `x-request-id`: quote it when asking about a request. */
  readonly requestId: string | null;
  /** The response's `Retry-After`, in seconds; null without one. */
  readonly retryAfterS: number | null;
  /** The operation that failed, e.g. `getStore`. */
  readonly operation: string;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    details?: Record<string, unknown> | undefined;
    requestId: string | null;
    retryAfterS: number | null;
    operation: string;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? {};
    this.requestId = init.requestId;
    this.retryAfterS = init.retryAfterS;
    this.operation = init.operation;
  }

  /** The error a response stands for; `body` is its parsed JSON (or text, or undefined). */
  static fromResponse(operation: string, response: Response, body: unknown): RetrievalApiError {
    const error = errorObject(body);
    return new RetrievalApiError({
      status: response.status,
      code: error?.code ?? "http_error",
      message: error?.message ?? `${operation}: HTTP ${response.status} without an error body`,
      details: error?.details,
      requestId: response.headers.get("x-request-id"),
      retryAfterS: retryAfterSeconds(response.headers.get("retry-after")),
      operation,
    });
  }
}

/** No answer within the attempt's time-out (`timeoutMs`, or what was left of `deadlineMs`). */
export class RetrievalTimeoutError extends Error {
  override name = "RetrievalTimeoutError";
  readonly operation: string;
  readonly timeoutMs: number;
  readonly attempts: number;

  constructor(operation: string, timeoutMs: number, attempts: number, options?: { cause?: unknown }) {
    super(`${operation}: no answer within ${timeoutMs} ms (attempt ${attempts})`, options);
    this.operation = operation;
    this.timeoutMs = timeoutMs;
    this.attempts = attempts;
  }
}

/** The request did not reach the service or its answer was cut (refused connection, reset, DNS). */
export class RetrievalNetworkError extends Error {
  override name = "RetrievalNetworkError";
  readonly operation: string;
  readonly attempts: number;

  constructor(operation: string, attempts: number, options: { cause: unknown }) {
    const reason = options.cause instanceof Error ? options.cause.message : String(options.cause);
    super(`${operation}: request failed (attempt ${attempts}): ${reason}`, options);
    this.operation = operation;
    this.attempts = attempts;
  }
}

function errorObject(body: unknown): { code: string; message: string; details?: Record<string, unknown> } | null {
  if (typeof body !== "object" || body === null || !("error" in body)) return null;
  const error = (body as { error: unknown }).error;
  if (typeof error !== "object" || error === null) return null;
  const { code, message, details } = error as Record<string, unknown>;
  if (typeof code !== "string" || typeof message !== "string") return null;
  const detailsObject =
    typeof details === "object" && details !== null ? (details as Record<string, unknown>) : undefined;
  return { code, message, details: detailsObject };
}

/** `Retry-After` in seconds: delay-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return null;
  return Math.max(0, Math.ceil((date - now) / 1000));
}
