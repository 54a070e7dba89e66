// #/stores: every store a page at a time, with its counts and settings; create and drop (admin keys).

import { call, segment } from "/console/api.js";
import { announce, confirmDialog, count, errorMessage, field, h, prefixFilter, replace, table } from "/console/dom.js";

const PAGE = 20;

export async function storesView(view, params) {
  const cursors = [];
  const list = h("div", { class: "list" });
  replace(
    view,
    h("h1", {}, "Stores"),
    createForm(() => loadPage(null)),
    h("h2", {}, "All stores"),
    prefixFilter("Name starts with", "name prefix", params.get("prefix") ?? "", (prefix) => {
      window.location.hash = prefix ? `#/stores?prefix=${encodeURIComponent(prefix)}` : "#/stores";
    }),
    list,
  );

  async function loadPage(cursor) {
    let page;
    try {
      page = await call("GET", "/api/v1/stores", { query: { limit: PAGE, cursor, prefix: params.get("prefix") } });
    } catch (error) {
      replace(list, errorMessage(error));
      return;
    }
    replace(
      list,
      page.stores.length === 0 ? h("p", {}, "No store yet: create one above.") : storesTable(page.stores, loadPage),
      pager(cursors, cursor, page.nextCursor, loadPage),
    );
  }
  await loadPage(null);
}


/** Previous and next page buttons over a cursor-paged list; `cursors` remembers the pages before. */
export function pager(cursors, cursor, nextCursor, load) {
  const previous = h("button", {
    type: "button",
    disabled: cursors.length === 0,
    onclick: () => load(cursors.pop() ?? null),
  }, "Previous page");
  const next = h("button", {
    type: "button",
    disabled: !nextCursor,
    onclick: () => {
      cursors.push(cursor);
      load(nextCursor);
    },
  }, "Next page");
  return h("div", { class: "row pager" }, previous, next);
}

function storesTable(stores, reload) {
  const columns = ["Store", "Documents", "Chunks", "Storage", "Text search", "Embedding model", "Source", "Actions"]
    .map((name) => ({ name, numeric: name === "Documents" || name === "Chunks" }));
  return table("Stores", columns, stores.map((store) => ({
    cells: [
      [
        h("a", { href: `#/stores/${segment(store.name)}` }, store.name),
        store.displayName && store.displayName !== store.name ? h("div", { class: "muted" }, store.displayName) : null,
      ],
      count(store.documentCount),
      count(store.chunkCount),
      `${store.storage} (${store.dimension})`,
      store.textSearch,
      store.embeddingModel,
      sourceLabel(store.source),
      h("button", { type: "button", class: "danger", "aria-label": `Drop ${store.name}`, onclick: () => dropStore(store, reload) }, "Drop"),
    ],
  })));
}

/** An attached store's table (and whether it is writable), or "—" for a store of our own. */
export function sourceLabel(source) {
  if (!source) return "—";
  const table = source.table ?? source.view ?? JSON.stringify(source);
  return source.writable ? `${table} (writable)` : `${table} (read-only)`;
}

async function dropStore(store, reload) {
  const confirmed = await confirmDialog(
    `Drop ${store.name}?`,
    `This deletes the store and its ${count(store.documentCount)} documents and ${count(store.chunkCount)} chunks. It cannot be undone.`,
    "Drop store",
  );
  if (!confirmed) return;
  try {
    await call("DELETE", `/api/v1/stores/${segment(store.name)}`);
    announce(`Dropped ${store.name}.`);
    await reload(null);
  } catch (error) {
    announce(`Could not drop ${store.name}: ${error.message}`);
  }
}

function createForm(reload) {
  const name = h("input", { name: "name", required: true, spellcheck: "false" });
  const displayName = h("input", { name: "displayName" });
  const storage = h("select", { name: "storage" }, h("option", { value: "vector" }, "vector (4-byte floats)"), h("option", { value: "halfvec" }, "halfvec (2-byte floats)"));
  const textSearch = h("input", { name: "textSearch", value: "english", spellcheck: "false" });
  const result = h("div", { class: "result" });
  const form = h(
    "form",
    {
      class: "grid-form",
      onsubmit: async (event) => {
        event.preventDefault();
        const body = { storage: storage.value, textSearch: textSearch.value.trim() || undefined };
        if (displayName.value.trim()) body.displayName = displayName.value.trim();
        try {
          await call("PUT", `/api/v1/stores/${segment(name.value.trim())}`, { body });
          replace(result, h("p", { class: "ok" }, `Created `, h("a", { href: `#/stores/${segment(name.value.trim())}` }, name.value.trim()), "."));
          announce(`Created store ${name.value.trim()}.`);
          form.reset();
          await reload();
        } catch (error) {
          replace(result, errorMessage(error));
        }
      },
    },
    field("Name", name, "ASCII letters, digits, '.', '_' or '-'"),
    field("Display name", displayName, "optional"),
    field("Storage", storage, "fixed once created"),
    field("Text search configuration", textSearch, "english, simple, german, ..."),
    h("button", { type: "submit" }, "Create store"),
  );
  return h("details", { class: "panel" }, h("summary", {}, "Create a store (admin keys)"), form, result);
}
