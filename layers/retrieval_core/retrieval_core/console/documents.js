// #/stores/<store>: the store's documents, a page at a time with a prefix filter, upload by drag and drop,
// delete; #/stores/<store>/documents/<id>: one document's chunks as the parser and chunker made them.

import { call, consoleConfig, deleteDocument, documentPath, getDocument, segment } from "/console/api.js";
import { announce, bytes, confirmDialog, count, errorMessage, h, prefixFilter, replace, table } from "/console/dom.js";
import { pager, sourceLabel } from "/console/stores.js";

const PAGE = 25;
const CHUNK_PAGE = 50;

export async function storeView(view, params, store) {
  const info = await call("GET", `/api/v1/stores/${segment(store)}`);
  const prefix = params.get("prefix") ?? "";
  const cursors = [];
  const list = h("div", { class: "list" });
  replace(
    view,
    h("p", { class: "crumbs" }, h("a", { href: "#/stores" }, "Stores"), " / ", store),
    h("h1", {}, info.displayName || store),
    storeSummary(info),
    h("p", {}, h("a", { href: `#/search?store=${segment(store)}` }, "Search this store")),
    uploader(store, () => loadPage(null)),
    h("h2", {}, "Documents"),
    prefixFilter("Document id starts with", "e.g. handbook/", prefix, (value) => {
      window.location.hash = `#/stores/${segment(store)}` + (value ? `?prefix=${encodeURIComponent(value)}` : "");
    }),
    list,
  );

  async function loadPage(cursor) {
    let page;
    try {
      page = await call("GET", `/api/v1/stores/${segment(store)}/documents`, { query: { limit: PAGE, cursor, prefix } });
    } catch (error) {
      replace(list, errorMessage(error));
      return;
    }
    replace(
      list,
      page.documents.length === 0
        ? h("p", {}, prefix ? `No document id starts with “${prefix}”.` : "No documents yet: drop files above.")
        : documentsTable(store, page.documents, () => loadPage(cursor)),
      pager(cursors, cursor, page.nextCursor, loadPage),
    );
  }
  await loadPage(null);
}

/** A store's chunking in words: strategy, size and overlap, and whose it is. */
function chunkingLabel(chunking) {
  if (!chunking) return "— (rows of an attached table)";
  const whose = chunking.own ? "the store's own" : "the deployment's";
  return `${chunking.strategy}, ${count(chunking.size)} characters overlapping by ${count(chunking.overlap)} (${whose})`;
}

function storeSummary(info) {
  const rows = [
    ["Name", info.name],
    ["Documents", count(info.documentCount)],
    ["Chunks", count(info.chunkCount)],
    ["Storage", `${info.storage}, ${info.dimension} dimensions`],
    ["Embedding model", info.embeddingModel],
    ["Text search configuration", info.textSearch],
    ["Chunking", chunkingLabel(info.pipeline?.chunking)],
    ["Source", sourceLabel(info.source)],
    ["Metadata keys a filter may name", info.allowedMetadataKeys ? info.allowedMetadataKeys.join(", ") : "any"],
  ];
  return h("dl", { class: "summary" }, rows.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
}


function documentsTable(store, documents, reload) {
  const columns = ["Document", "Type", "Chunks", "Updated", "Written by", "Actions"].map((name) => ({ name, numeric: name === "Chunks" }));
  return table("Documents", columns, documents.map((item) => ({
    cells: [
      [
        h("a", { href: `#/stores/${segment(store)}/documents/${segment(item.documentId)}` }, item.documentId),
        titleOf(item) && titleOf(item) !== item.documentId ? h("div", { class: "muted" }, titleOf(item)) : null,
      ],
      item.contentType,
      count(item.chunkCount),
      new Date(item.updatedAt).toLocaleString(),
      item.writtenBy ?? "—",
      h("button", { type: "button", class: "danger", "aria-label": `Delete ${item.documentId}`, onclick: () => confirmAndDelete(store, item.documentId, reload) }, "Delete"),
    ],
  })));
}

/** The document's title: the parser's, else a `title` in its metadata. */
function titleOf(item) {
  const title = item.title || item.metadata?.title;
  return typeof title === "string" ? title : "";
}

async function confirmAndDelete(store, documentId, reload) {
  const confirmed = await confirmDialog(`Delete ${documentId}?`, "Its chunks leave the store at once.", "Delete document");
  if (!confirmed) return;
  try {
    await deleteDocument(store, documentId);
    announce(`Deleted ${documentId}.`);
    await reload();
  } catch (error) {
    announce(`Could not delete ${documentId}: ${error.message}`);
  }
}

function uploader(store, reload) {
  const log = h("ul", { class: "upload-log", "aria-live": "polite" });
  // The file input stays hidden; a plain button opens its chooser, so the control is one tab stop.
  const input = h("input", { type: "file", multiple: true, hidden: true, id: "upload-input" });
  const zone = h(
    "div",
    { class: "dropzone" },
    h("p", {}, "Drop files here to add them to the store, or"),
    h("button", { type: "button", onclick: () => input.click() }, "Choose files"),
    input,
    h("p", { class: "muted" }, "Each file's name becomes its document id; a file already there is replaced."),
  );
  const upload = async (files) => {
    for (const file of files) await uploadFile(store, file, log);
    await reload();
  };
  input.addEventListener("change", () => upload([...input.files]).finally(() => (input.value = "")));
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("over");
    upload([...event.dataTransfer.files]);
  });
  return h("section", { "aria-labelledby": "upload-title" }, h("h2", { id: "upload-title" }, "Add documents"), zone, log);
}

/** The body a PUT of `file` sends: base64 is 4 bytes for each 3, plus the JSON around it. */
function bodySize(file) {
  return Math.ceil(file.size / 3) * 4 + file.name.length * 2 + 200;
}

async function uploadFile(store, file, log) {
  const line = h("li", {}, `${file.name}: reading…`);
  log.prepend(line);
  const { documentsMaxBodyBytes } = await consoleConfig();
  if (bodySize(file) > documentsMaxBodyBytes) {
    replace(
      line,
      h("span", { class: "error" }, `${file.name} (${bytes(file.size)}) is over what the HTTP API takes in one request `
        + `(${bytes(documentsMaxBodyBytes)} once base64-encoded). Upload it to the documents S3 bucket, or with the CLI: `),
      h("code", {}, `retrieval ingest ${file.name} --store ${store}`),
    );
    return;
  }
  const content = base64(await file.arrayBuffer());
  line.textContent = `${file.name}: uploading…`;
  try {
    const written = await call("PUT", documentPath(store, file.name), {
      body: { content, fileName: file.name, contentType: file.type || undefined },
    });
    replace(line, h("span", { class: "ok" }, `${file.name}: ${written.status}, ${count(written.chunkCount)} chunks (${written.contentType}). `),
      h("a", { href: `#/stores/${segment(store)}/documents/${segment(written.documentId)}` }, "See its chunks"));
    announce(`${file.name} ${written.status}.`);
  } catch (error) {
    replace(line, h("span", { class: "error" }, `${file.name}: ${error.message} `), h("code", {}, error.code));
    announce(`${file.name} failed: ${error.message}`);
  }
}

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export async function documentView(view, params, store, documentId) {
  const item = await getDocument(store, documentId);
  const list = h("ol", { class: "chunks" });
  const more = h("div", { class: "row" });
  replace(
    view,
    h("p", { class: "crumbs" }, h("a", { href: "#/stores" }, "Stores"), " / ", h("a", { href: `#/stores/${segment(store)}` }, store), " / ", documentId),
    h("h1", {}, titleOf(item) || documentId),
    h("dl", { class: "summary" },
      [["Document id", documentId], ["Type", item.contentType], ["Chunks", count(item.chunkCount)],
        ["Source", item.source ?? "—"], ["Updated", new Date(item.updatedAt).toLocaleString()],
        ["Written by", item.writtenBy ?? "—"], ["SHA-256", item.contentSha256]]
        .map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)])),
    metadataBlock("Document metadata", item.metadata),
    h("h2", {}, "Chunks"),
    list,
    more,
  );
  async function load(cursor) {
    let page;
    try {
      page = await call("GET", `/api/v1/stores/${segment(store)}/chunks`, { query: { documentId, limit: CHUNK_PAGE, cursor } });
    } catch (error) {
      replace(more, errorMessage(error));
      return;
    }
    list.append(...page.chunks.map(chunkItem));
    replace(more, page.nextCursor ? h("button", { type: "button", onclick: () => load(page.nextCursor) }, "More chunks") : null);
  }
  await load(null);
}

function chunkItem(chunk) {
  const where = [
    `Chunk ${chunk.chunkIndex}`,
    chunk.pageNumber !== null && chunk.pageNumber !== undefined ? `page ${chunk.pageNumber}` : null,
    chunk.section ? `section ${chunk.section}` : null,
  ].filter(Boolean).join(" · ");
  return h(
    "li",
    { class: "chunk", value: chunk.chunkIndex + 1 },
    h("p", { class: "chunk-where" }, where),
    h("pre", { class: "chunk-text" }, chunk.content),
    metadataBlock("Metadata", chunk.metadata),
  );
}

/** Metadata as indented JSON text, folded. */
export function metadataBlock(title, metadata) {
  if (!metadata || Object.keys(metadata).length === 0) return null;
  return h("details", { class: "metadata" }, h("summary", {}, title), h("pre", {}, JSON.stringify(metadata, null, 2)));
}
