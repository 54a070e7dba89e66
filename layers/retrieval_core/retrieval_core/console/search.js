// #/search: one question against one store, dense, keyword and hybrid side by side, with the scores,
// the words that matched, the pipeline's timings, the prompt-ready context and a grounded answer.

import { call, segment } from "/console/api.js";
import { announce, errorMessage, field, h, highlighted, replace, score } from "/console/dom.js";
import { metadataBlock } from "/console/documents.js";

/** The methods compared, as the retrieve API's searchMode names them. */
export const METHODS = [
  { mode: "vector", label: "Dense" },
  { mode: "keyword", label: "Keyword" },
  { mode: "hybrid", label: "Hybrid" },
];

/** Every store name the credential may see (the first 200), for a store picker. */
export async function storeNames() {
  const names = [];
  let cursor = null;
  do {
    const page = await call("GET", "/api/v1/stores", { query: { limit: 100, cursor } });
    names.push(...page.stores.map((store) => store.name));
    cursor = page.nextCursor;
  } while (cursor && names.length < 200);
  return names;
}

/** A <select> of `names`, `chosen` selected. */
export function storeSelect(names, chosen) {
  return h("select", { name: "store", required: true }, names.map((name) => h("option", { value: name, selected: name === chosen }, name)));
}

export async function searchView(view, params) {
  const names = await storeNames();
  if (names.length === 0) {
    replace(view, h("h1", {}, "Search"), h("p", {}, "There is no store to search yet. "), h("a", { href: "#/stores" }, "Create one"));
    return;
  }
  const store = storeSelect(names, params.get("store") ?? names[0]);
  const query = h("textarea", { name: "query", rows: 2, required: true, maxlength: 8000 });
  const grade = h("input", { name: "grade", type: "number", min: 0, max: 1, step: 0.05, value: "0" });
  const topK = h("input", { name: "similarityTopK", type: "number", min: 1, max: 50, placeholder: "default" });
  const engine = h("select", { name: "engineName" }, h("option", { value: "default" }, "default (reranks when asked)"), h("option", { value: "naive" }, "naive (no reranking)"));
  const rerank = h(
    "select",
    { name: "rerank" },
    ["server default", "off", "bge", "llm", "bedrock", "mmr"].map((value) => h("option", { value }, value)),
  );
  const filter = h("input", { name: "metadataFilter", placeholder: "e.g. year >= 2023 AND NOT draft = true", spellcheck: "false" });
  const methods = METHODS.map(({ mode, label }) => h("input", { type: "checkbox", name: "method", value: mode, checked: true, "aria-label": label }));
  const results = h("div", { class: "compare" });
  const answer = h("section", { class: "answer", "aria-labelledby": "answer-title" });

  const requestFor = (mode) => {
    const body = { query: query.value, store: store.value, searchMode: mode, engineName: engine.value, returnFormatted: true };
    if (mode !== "keyword") body.grade = Number(grade.value || 0);
    if (topK.value) body.similarityTopK = Number(topK.value);
    if (engine.value === "default" && rerank.value !== "server default") {
      body.rerank = rerank.value === "off" ? { enabled: false } : { strategy: rerank.value };
    }
    const text = filter.value.trim();
    if (text) body.metadataFilter = text.startsWith("{") ? JSON.parse(text) : text;
    return body;
  };

  const form = h(
    "form",
    {
      class: "search-form",
      role: "search",
      onsubmit: async (event) => {
        event.preventDefault();
        const chosen = METHODS.filter((_, i) => methods[i].checked);
        let bodies;
        try {
          bodies = chosen.map(({ mode }) => requestFor(mode));
        } catch (error) {
          replace(results, h("p", { class: "error", role: "alert" }, `The filter is not valid JSON: ${error.message}`));
          return;
        }
        replace(answer);
        replace(results, chosen.map(({ label }) => h("section", { class: "method" }, h("h2", {}, label), h("p", { class: "muted" }, "Searching…"))));
        const columns = await Promise.all(
          chosen.map(async ({ label }, i) => {
            try {
              return methodColumn(label, await call("POST", "/api/v1/rag/retrieve", { body: bodies[i] }), store.value);
            } catch (error) {
              return h("section", { class: "method" }, h("h2", {}, label), errorMessage(error));
            }
          }),
        );
        replace(results, columns);
        announce(`Searched ${store.value} with ${chosen.map(({ label }) => label).join(", ")}.`);
        if (bodies.length) {
          replace(answer, h("button", { type: "button", onclick: () => showAnswer(answer, bodies[bodies.length - 1], chosen[chosen.length - 1].label) }, `Answer with the ${chosen[chosen.length - 1].label.toLowerCase()} results`));
        }
      },
    },
    field("Store", store),
    field("Question", query),
    h("fieldset", { class: "methods" }, h("legend", {}, "Methods"), METHODS.map(({ label }, i) => h("label", { class: "check" }, methods[i], ` ${label}`))),
    h(
      "details",
      { class: "options" },
      h("summary", {}, "Options"),
      h("div", { class: "grid-form" },
        field("Minimum similarity (grade)", grade, "dense and hybrid"),
        field("Candidates (similarityTopK)", topK),
        field("Engine", engine),
        field("Rerank", rerank, "default engine only"),
        field("Metadata filter", filter, "an expression, or a JSON filter tree")),
    ),
    h("button", { type: "submit", class: "primary" }, "Search"),
  );
  replace(view, h("h1", {}, "Search playground"), form, results, answer);
  query.focus();
}

function methodColumn(label, response, store) {
  const pipeline = response.pipeline;
  const timings = pipeline.timingsMs;
  const facts = [
    `${response.totalResults} results of ${pipeline.candidatesConsidered} candidates`,
    `embed ${timings.embed.toFixed(1)} ms · search ${timings.search.toFixed(1)} ms · rerank ${timings.rerank.toFixed(1)} ms`,
    pipeline.reranked ? `reranked by ${pipeline.rerankStrategy}` : null,
    pipeline.fusion ? `fusion ${pipeline.fusion}` : null,
    pipeline.keywordScorer ? `keyword scorer ${pipeline.keywordScorer}` : null,
  ].filter(Boolean);
  return h(
    "section",
    { class: "method", "aria-label": `${label} results` },
    h("h2", {}, label),
    h("ul", { class: "facts" }, facts.map((fact) => h("li", {}, fact))),
    pipeline.warnings.map((warning) => h("p", { class: "warning" }, warning)),
    response.results.length === 0 ? h("p", {}, "Nothing came back.") : null,
    h("ol", { class: "results" }, response.results.map((result) => resultItem(result, store))),
    response.context ? h("details", { class: "context" }, h("summary", {}, `Context for a prompt (${response.contextTokens} tokens)`), h("pre", {}, response.context)) : null,
  );
}

function resultItem(result, store) {
  const metadata = result.metadata ?? {};
  const scores = [
    ["similarity", result.score],
    ["keyword", result.keywordScore],
    ["fused", result.fusedScore],
    ["rerank", result.rerankScore],
  ].filter(([, value]) => value !== null && value !== undefined);
  const where = [
    typeof metadata.pageNumber === "number" ? `page ${metadata.pageNumber}` : null,
    metadata.section ? `section ${metadata.section}` : null,
  ].filter(Boolean).join(" · ");
  const documentId = metadata.documentId ?? result.id.split("#")[0];
  return h(
    "li",
    { class: "result" },
    h("p", { class: "scores" }, scores.map(([name, value]) => h("span", { class: "score" }, `${name} ${score(value)}`)),
      result.citation ? h("span", { class: "score" }, `[${result.citation}]`) : null),
    h("p", { class: "source" }, h("a", { href: `#/stores/${segment(store)}/documents/${segment(documentId)}` }, documentId), where ? ` · ${where}` : ""),
    h("p", { class: "chunk-text" }, highlighted(result.content, result.matchedTerms)),
    result.matchedTerms?.length ? h("p", { class: "muted" }, `Matched: ${result.matchedTerms.join(", ")}`) : null,
    metadataBlock("Metadata", metadata),
  );
}

async function showAnswer(section, retrieveBody, label) {
  const { returnFormatted, maxContextTokens, ...body } = retrieveBody;
  replace(section, h("h2", { id: "answer-title" }, "Answer"), h("p", { class: "muted" }, `Answering from the ${label.toLowerCase()} results…`));
  try {
    const answer = await call("POST", "/api/v1/rag/answer", { body });
    const pipeline = answer.pipeline;
    replace(
      section,
      h("h2", { id: "answer-title" }, "Answer"),
      h("p", { class: "muted" }, `${pipeline.provider} · ${pipeline.model} · ${answer.grounded ? "grounded" : `not grounded (${pipeline.ungroundedReason})`}`),
      h("p", { class: "answer-text" }, answer.text || "(no answer)"),
      answer.citations.length
        ? h("ol", { class: "citations" }, answer.citations.map((citation) => h("li", {}, `“${citation.text}” — ${citation.chunkIds.join(", ")}`)))
        : null,
    );
  } catch (error) {
    replace(section, h("h2", { id: "answer-title" }, "Answer"), errorMessage(error));
  }
}
