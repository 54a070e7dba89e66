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

/**
 * False for a document id a URL path cannot carry: one with a `.` or `..` segment (between `/` or `\\`,
 * also percent-encoded as `%2e`, tabs and newlines dropped), which the browser resolves as a step up the
 * path before the request leaves. The service stores no such id; ones stored before are reached by the
 * routes that take the id as a query parameter.
 */
export function pathSafe(documentId) {
  let text = documentId;
  for (let round = 0; round < 8; round += 1) {
    // Only ASCII escapes can spell a dot or a separator.
    const decoded = text
      .replace(/[\t\n\r]/g, "")
      .replace(/%([0-7][0-9a-f])/gi, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
    if (decoded === text) break;
    text = decoded;
  }
  return !text.split(/[/\\]/).some((part) => part === "." || part === "..");
}

/** A document's route: the id encoded whole as one segment, so that none of its characters is a step. */
export function documentPath(store, documentId) {
  if (!pathSafe(documentId)) throw new Error(`The document id ${documentId} cannot travel in a path.`);
  return `/api/v1/stores/${segment(store)}/documents/${segment(documentId)}`;
}

/** One document without its chunks; an id a path cannot carry is looked up in the store's list. */
export async function getDocument(store, documentId) {
  if (pathSafe(documentId)) return call("GET", documentPath(store, documentId));
  const page = await call("GET", `/api/v1/stores/${segment(store)}/documents`, { query: { prefix: documentId, limit: 1 } });
  const item = page.documents[0];
  if (item?.documentId !== documentId) {
    throw new ApiError(404, "document_not_found", `Store ${store} has no document ${documentId}.`, null, {});
  }
  return item;
}

/** Delete a document; an id a path cannot carry goes as the documentId query parameter. */
export function deleteDocument(store, documentId) {
  if (pathSafe(documentId)) return call("DELETE", documentPath(store, documentId));
  return call("DELETE", `/api/v1/stores/${segment(store)}/documents`, { query: { documentId } });
}

let config = null;

/** What this deployment allows (the largest document body), from /console/config.json. */
export async function consoleConfig() {
  config ??= await fetch("/console/config.json").then((response) => response.json());
  return config;
}
