// #/evaluate: a BEIR-style query set and its judgments scored against a store by the service, nDCG@k and
// recall@k per method as a chart, and the queries one method wins and loses against another.

import { call, segment } from "/console/api.js";
import { announce, errorMessage, field, h, replace, score, svg, table } from "/console/dom.js";
import { METHODS, storeNames, storeSelect } from "/console/search.js";

const METHOD_OPTIONS = {
  vector: { engineName: "naive", searchMode: "vector" },
  keyword: { engineName: "naive", searchMode: "keyword" },
  hybrid: { engineName: "naive", searchMode: "hybrid" },
};

/** BEIR queries.jsonl ({"_id", "text"} a line), or a TSV of id and text. */
export function parseQueries(text) {
  const queries = [];
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim()) continue;
    if (line.trimStart().startsWith("{")) {
      const record = JSON.parse(line);
      queries.push({ id: String(record._id ?? record.id), text: String(record.text) });
    } else {
      const [id, ...rest] = line.split("\t");
      queries.push({ id: id.trim(), text: rest.join("\t").trim() });
    }
  }
  return queries;
}

/** Judgments from a qrels file: BEIR's `query-id corpus-id score` (a header line allowed) or TREC's
 * `query-id 0 doc-id relevance`, tab- or space-separated. */
export function parseJudgments(text) {
  const judgments = [];
  for (const line of text.split(/\r?\n/)) {
    const parts = line.trim().split(/\s+/);
    if (parts.length < 3) continue;
    const [queryId, documentId, relevance] = parts.length >= 4 ? [parts[0], parts[2], parts[3]] : parts;
    if (!/^-?\d+$/.test(relevance)) continue; // the header line
    judgments.push({ queryId, documentId, relevance: Number(relevance) });
  }
  return judgments;
}

export async function evaluateView(view, params) {
  const names = await storeNames();
  if (names.length === 0) {
    replace(view, h("h1", {}, "Evaluate"), h("p", {}, "There is no store to evaluate yet. "), h("a", { href: "#/stores" }, "Create one"));
    return;
  }
  const store = storeSelect(names, params.get("store") ?? names[0]);
  const queriesFile = h("input", { type: "file", name: "queries", accept: ".jsonl,.tsv,.txt", required: true });
  const qrelsFile = h("input", { type: "file", name: "qrels", accept: ".tsv,.txt,.qrels", required: true });
  const limit = h("input", { type: "number", name: "limit", min: 1, max: 100, value: "50" });
  const k = h("input", { type: "number", name: "k", min: 1, max: 50, value: "10" });
  const methods = METHODS.map(({ mode, label }) => h("input", { type: "checkbox", name: "method", value: mode, checked: true, "aria-label": label }));
  const output = h("div", { class: "evaluation" });
  const form = h(
    "form",
    {
      class: "grid-form",
      onsubmit: async (event) => {
        event.preventDefault();
        let body;
        try {
          const judgments = parseJudgments(await qrelsFile.files[0].text());
          const judged = new Set(judgments.filter((j) => j.relevance > 0).map((j) => j.queryId));
          const queries = parseQueries(await queriesFile.files[0].text()).filter((q) => judged.has(q.id)).slice(0, Number(limit.value));
          const chosen = new Set(queries.map((q) => q.id));
          body = {
            queries,
            judgments: judgments.filter((j) => chosen.has(j.queryId)),
            methods: METHODS.filter((_, i) => methods[i].checked).map(({ mode, label }) => ({ name: label, options: METHOD_OPTIONS[mode] })),
            k: Number(k.value),
          };
          if (queries.length === 0) throw new Error("no query of the file has a judgment above 0 in the judgments file");
        } catch (error) {
          replace(output, h("p", { class: "error", role: "alert" }, `Could not read the files: ${error.message}`));
          return;
        }
        replace(output, h("p", { class: "muted" }, `Scoring ${body.queries.length} queries with ${body.methods.length} methods…`));
        try {
          const result = await call("POST", `/api/v1/stores/${segment(store.value)}/evaluate`, { body });
          replace(output, report(result));
          announce(`Scored ${result.scoredQueries} queries.`);
        } catch (error) {
          replace(output, errorMessage(error));
        }
      },
    },
    field("Store", store),
    field("Queries", queriesFile, "BEIR queries.jsonl, or id<TAB>text lines"),
    field("Judgments", qrelsFile, "qrels: query-id, corpus-id (the document id), relevance"),
    field("Queries to score", limit, "the first judged ones, at most 100"),
    field("k", k, "nDCG@k and recall@k"),
    h("fieldset", { class: "methods" }, h("legend", {}, "Methods"), METHODS.map(({ label }, i) => h("label", { class: "check" }, methods[i], ` ${label}`))),
    h("button", { type: "submit", class: "primary" }, "Evaluate"),
  );
  replace(view, h("h1", {}, "Evaluate"), h("p", {}, "Score a judged query set against a store: the service runs each query with each method and measures the ranking of the documents."), form, output);
}

function report(result) {
  const names = result.methods.map((method) => method.name);
  return h(
    "section",
    { "aria-labelledby": "evaluation-title" },
    h("h2", { id: "evaluation-title" }, `Quality on ${result.store}`),
    h("p", {}, `${result.scoredQueries} queries scored`, result.skippedQueries ? `, ${result.skippedQueries} without a relevant judgment skipped` : "",
      result.complete ? "." : ": stopped early to fit the time limit, so these are the queries done in time."),
    chart(result.methods, result.k),
    table(
      `nDCG@${result.k} and recall@${result.k} per method`,
      [{ name: "Method" }, { name: `nDCG@${result.k}`, numeric: true }, { name: `Recall@${result.k}`, numeric: true }, { name: "Median latency", numeric: true }],
      result.methods.map((method) => ({ cells: [method.name, score(method.ndcg), score(method.recall), `${method.medianLatencyMs.toFixed(1)} ms`] })),
      true,
    ),
    names.length >= 2 ? comparison(result, names) : null,
  );
}

const CHART = { width: 640, height: 250, left: 40, bottom: 40, top: 20 };

/** Bars of nDCG and recall per method, 0 to 1 (an SVG drawn from data: no markup is parsed). */
function chart(methods, k) {
  const plotHeight = CHART.height - CHART.bottom - CHART.top;
  const group = (CHART.width - CHART.left) / methods.length;
  const bar = Math.min(48, group / 3);
  const y = (value) => CHART.top + plotHeight * (1 - value);
  const bars = methods.flatMap((method, i) => {
    const x = CHART.left + i * group + (group - 2 * bar) / 2;
    return [
      ["ndcg", method.ndcg, x],
      ["recall", method.recall, x + bar],
    ].map(([kind, value, left]) =>
      svg("g", {},
        svg("rect", { x: left, y: y(value), width: bar - 4, height: plotHeight * value, class: `bar ${kind}` },
          svg("title", {}, `${method.name}: ${kind === "ndcg" ? `nDCG@${k}` : `recall@${k}`} ${score(value)}`)),
        svg("text", { x: left + (bar - 4) / 2, y: y(value) - 3, class: "value", "text-anchor": "middle" }, score(value))),
    ).concat(svg("text", { x: x + bar, y: CHART.height - CHART.bottom + 16, "text-anchor": "middle", class: "label" }, method.name));
  });
  const ticks = [0, 0.5, 1].map((value) => svg("g", {},
    svg("line", { x1: CHART.left - 4, x2: CHART.width, y1: y(value), y2: y(value), class: "grid" }),
    svg("text", { x: CHART.left - 8, y: y(value) + 4, "text-anchor": "end", class: "label" }, value.toFixed(1))));
  return h("figure", { class: "chart" },
    svg("svg", { viewBox: `0 0 ${CHART.width} ${CHART.height}`, role: "img", "aria-label": `nDCG@${k} and recall@${k} per method` }, ticks, bars),
    h("figcaption", {}, h("span", { class: "key ndcg" }), ` nDCG@${k}  `, h("span", { class: "key recall" }), ` recall@${k}`));
}

/** Queries where method A's nDCG beats B's, and where it loses, largest difference first. */
function comparison(result, names) {
  const a = h("select", { name: "a" }, names.map((name, i) => h("option", { value: name, selected: i === names.length - 1 }, name)));
  const b = h("select", { name: "b" }, names.map((name, i) => h("option", { value: name, selected: i === 0 }, name)));
  const differences = h("div", {});
  const draw = () => {
    const rows = result.queries
      .map((query) => ({ query, difference: query.scores[a.value].ndcg - query.scores[b.value].ndcg }))
      .filter((row) => row.difference !== 0)
      .sort((x, y) => y.difference - x.difference);
    const wins = rows.filter((row) => row.difference > 0).length;
    replace(
      differences,
      h("p", {}, `${a.value} beats ${b.value} on ${wins} queries, loses on ${rows.length - wins}, ties on ${result.queries.length - rows.length}.`),
      rows.length === 0 ? null : table(
        "Per-query differences",
        [{ name: "Query" }, { name: a.value, numeric: true }, { name: b.value, numeric: true }, { name: "Difference", numeric: true }, { name: `${a.value}'s first documents` }],
        rows.map(({ query, difference }) => ({
          attributes: { class: difference > 0 ? "win" : "loss" },
          cells: [
            [query.text, h("div", { class: "muted" }, `${query.id} · ${query.relevantDocuments} relevant`)],
            score(query.scores[a.value].ndcg),
            score(query.scores[b.value].ndcg),
            `${difference > 0 ? "+" : ""}${difference.toFixed(3)}`,
            query.scores[a.value].topDocuments.slice(0, 3).join(", "),
          ],
        })),
      ),
    );
  };
  a.addEventListener("change", draw);
  b.addEventListener("change", draw);
  draw();
  return h("section", { "aria-labelledby": "wins-title" }, h("h2", { id: "wins-title" }, "Wins and losses per query"),
    h("div", { class: "row" }, field("Method", a), field("against", b)), differences);
}
