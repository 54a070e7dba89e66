// The console's entry: the credential form, and the views by the location's hash
// (#/stores, #/stores/<store>, #/stores/<store>/documents/<id>, #/search, #/evaluate).

import { credential, forgetCredential, saveCredential } from "/console/api.js";
import { announce, errorMessage, h, replace } from "/console/dom.js";
import { documentView, storeView } from "/console/documents.js";
import { evaluateView } from "/console/evaluate.js";
import { searchView } from "/console/search.js";
import { storesView } from "/console/stores.js";

const ROUTES = [
  [/^#\/stores\/([^/]+)\/documents\/([^/]+)$/, documentView],
  [/^#\/stores\/([^/]+)$/, storeView],
  [/^#\/stores$/, storesView],
  [/^#\/search$/, searchView],
  [/^#\/evaluate$/, evaluateView],
];

function route() {
  const [path, query] = (window.location.hash || "#/stores").split("?");
  const params = new URLSearchParams(query ?? "");
  const view = document.getElementById("view");
  for (const link of document.querySelectorAll("nav a")) {
    const current = path.startsWith(link.getAttribute("href"));
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  for (const [pattern, render] of ROUTES) {
    const match = pattern.exec(path);
    if (match) {
      const args = match.slice(1).map(decodeURIComponent);
      render(view, params, ...args).catch((error) => showError(view, error));
      return;
    }
  }
  replace(view, h("h1", {}, "Not found"), h("p", {}, "This page does not exist. "), h("a", { href: "#/stores" }, "Stores"));
}

function showError(view, error) {
  replace(view, h("h1", {}, "Something went wrong"), errorMessage(error));
}

function showCredentialState() {
  const saved = credential();
  document.getElementById("credential-state").textContent = saved?.value
    ? `${saved.kind === "bearer" ? "Token" : "Key"} set for this tab`
    : "No credential";
  if (saved?.kind) document.getElementById("credential-kind").value = saved.kind;
}

function setUpCredential() {
  const form = document.getElementById("credential");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("credential-value");
    if (!input.value) return;
    saveCredential(document.getElementById("credential-kind").value, input.value.trim());
    input.value = "";
    showCredentialState();
    announce("Credential set for this tab.");
    route();
  });
  document.getElementById("credential-forget").addEventListener("click", () => {
    forgetCredential();
    showCredentialState();
    announce("Credential forgotten.");
    route();
  });
  showCredentialState();
}

setUpCredential();
window.addEventListener("hashchange", () => {
  route();
  document.getElementById("view").focus();
});
route();
