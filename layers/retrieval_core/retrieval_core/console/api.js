// The HTTP API as the pages call it, with the credential the user entered for this tab only.

const CREDENTIAL = "retrieval-console-credential";

/** {kind: "apiKey" | "bearer", value} or null: kept in sessionStorage, gone with the tab. */
export function credential() {
  try {
    return JSON.parse(sessionStorage.getItem(CREDENTIAL) ?? "null");
  } catch {
    return null;
  }
}

export function saveCredential(kind, value) {
  sessionStorage.setItem(CREDENTIAL, JSON.stringify({ kind, value }));
}

export function forgetCredential() {
  sessionStorage.removeItem(CREDENTIAL);
}

/** An error answer of the API: its status, its code (e.g. store_not_found) and its message. */
export class ApiError extends Error {
  constructor(status, code, message, requestId, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.details = details;
  }
}

function headers(hasBody) {
  const result = { accept: "application/json" };
  if (hasBody) result["content-type"] = "application/json";
  const saved = credential();
  if (saved?.kind === "bearer") result.authorization = `Bearer ${saved.value}`;
  else if (saved?.value) result["x-api-key"] = saved.value;
  return result;
}

/** One call: the parsed JSON answer, or an ApiError. */
export async function call(method, path, { query, body, signal } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
  }
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", `The service did not answer: ${error.message}`);
  }
  const requestId = response.headers.get("x-request-id");
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const error = parsed?.error;
    throw new ApiError(
      response.status,
      error?.code ?? `http_${response.status}`,
      error?.message ?? (text.slice(0, 300) || response.statusText),
      requestId,
      error?.details,
    );
  }
  return parsed;
}

/** A path segment: store names and document ids may hold any character. */
export function segment(value) {
  return encodeURIComponent(value);
}

/** A document id as its route takes it: the id's own slashes stay path separators. */
export function documentPath(store, documentId) {
  return `/api/v1/stores/${segment(store)}/documents/${documentId.split("/").map(segment).join("/")}`;
}

let config = null;

/** What this deployment allows (the largest document body), from /console/config.json. */
export async function consoleConfig() {
  config ??= await fetch("/console/config.json").then((response) => response.json());
  return config;
}
