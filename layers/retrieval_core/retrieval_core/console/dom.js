// Building the page from data. Every string becomes a text node or an attribute value, never HTML:
// a document's text or metadata can hold markup, and it must show as the characters it is.

/** An element: `h("a", {href: "#/x", class: "link"}, "text", child)`. `on*` props become listeners. */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  setProps(element, props);
  append(element, children);
  return element;
}

const SVG = "http://www.w3.org/2000/svg";

/** An SVG element, with the same props as h(). */
export function svg(tag, props = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  setProps(element, props);
  append(element, children);
  return element;
}

function setProps(element, props) {
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === "dataset") {
      Object.assign(element.dataset, value);
    } else if (name === "value" || name === "checked") {
      element[name] = value;
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A table of `rows` (arrays of cells; the first is the row's header) under `columns` ({name, numeric}).
 * Each cell carries its column's name, which narrow screens show beside it (console.css). */
export function table(caption, columns, rows, captionVisible = false) {
  const cell = (column, content, index) =>
    h(index === 0 ? "th" : "td", { scope: index === 0 ? "row" : undefined, class: column.numeric ? "number" : undefined, "data-label": column.name }, content);
  return h(
    "table",
    { class: "data" },
    h("caption", { class: captionVisible ? undefined : "visually-hidden" }, caption),
    h("thead", {}, h("tr", {}, columns.map((column) => h("th", { scope: "col", class: column.numeric ? "number" : undefined }, column.name)))),
    h("tbody", {}, rows.map((row) => h("tr", row.attributes ?? {}, row.cells.map((content, index) => cell(columns[index], content, index))))),
  );
}

/** `node` emptied, then given `children`. */
export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** `text` with every whole-word occurrence of `terms` in <mark>: the words a keyword search matched. */
export function highlighted(text, terms) {
  if (!terms || terms.length === 0) return [text];
  const escaped = [...new Set(terms)]
    .filter((term) => term.length > 0)
    .sort((a, b) => b.length - a.length)
    .map((term) => term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (escaped.length === 0) return [text];
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}_])(?:${escaped.join("|")})(?![\\p{L}\\p{N}_])`, "gu");
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) parts.push(text.slice(last, match.index));
    parts.push(h("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}

const numberFormat = new Intl.NumberFormat("en");

/** 12345 -> "12,345"; null -> "—". */
export function count(value) {
  return value === null || value === undefined ? "—" : numberFormat.format(value);
}

/** A score to three decimals, or "—". */
export function score(value) {
  return value === null || value === undefined ? "—" : value.toFixed(3);
}

/** 1536000 -> "1.5 MB". */
export function bytes(value) {
  if (value < 1000) return `${value} B`;
  if (value < 1_000_000) return `${(value / 1000).toFixed(1)} kB`;
  return `${(value / 1_000_000).toFixed(1)} MB`;
}

let fields = 0;

/** A form control with its label, and a hint the control names as its description. */
export function field(label, control, hint) {
  fields += 1;
  control.id ||= `field-${fields}`;
  const hintElement = hint ? h("small", { id: `${control.id}-hint` }, hint) : null;
  if (hintElement) control.setAttribute("aria-describedby", hintElement.id);
  return h("div", { class: "field" }, h("label", { class: "label", for: control.id }, label), control, hintElement);
}

/** A search form of one prefix field; `onFilter` gets what was typed, trimmed. */
export function prefixFilter(label, placeholder, value, onFilter) {
  const input = h("input", { type: "search", name: "prefix", value, placeholder });
  const submit = (event) => {
    event.preventDefault();
    onFilter(input.value.trim());
  };
  return h("form", { class: "row", role: "search", onsubmit: submit }, field(label, input), h("button", { type: "submit" }, "Filter"));
}

/** A modal question; resolves true when the user confirms. */
export function confirmDialog(title, message, confirmLabel) {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, message),
      h(
        "form",
        { method: "dialog", class: "actions" },
        h("button", { value: "cancel", type: "submit" }, "Cancel"),
        h("button", { value: "confirm", type: "submit", class: "danger" }, confirmLabel),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "confirm");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** An API error as the user should read it: what went wrong, its code, and what to do about a credential. */
export function errorMessage(error) {
  const hint =
    error.status === 401
      ? " Enter an API key or token above."
      : error.status === 403
        ? " This credential may not do that."
        : "";
  return h(
    "p",
    { class: "error", role: "alert" },
    error.message + hint,
    error.code ? h("code", {}, ` ${error.code}`) : null,
  );
}

/** A short message in the status line (read out by screen readers). */
let announced;

export function announce(message) {
  const status = document.getElementById("status");
  status.textContent = message;
  clearTimeout(announced);
  announced = setTimeout(() => (status.textContent = ""), 6000);
}
