// pairjudge review: keyboard shortcuts and the next item without a full page load.
// Plain script, served by the app itself (the Content-Security-Policy allows nothing else).
"use strict";

function csrf() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

function container() { return document.getElementById("item"); }

async function loadNext() {
  const box = container();
  const query = box.dataset.filters;
  const response = await fetch("/item" + (query ? "?" + query : ""), { headers: { "Accept": "text/html" }, credentials: "same-origin" });
  if (!response.ok) { window.location.reload(); return; }
  box.innerHTML = await response.text();  // server-rendered and escaped by the app's templates
  bindForms();
}

async function post(form) {
  const response = await fetch(form.action, {
    method: "POST",
    body: new FormData(form),
    headers: { "Accept": "application/json", "X-CSRF-Token": csrf() },
    credentials: "same-origin",
  });
  if (!response.ok) {
    let message = "The label was not saved (" + response.status + ").";
    try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
    alert(message);
    if (response.status === 409 || response.status === 401) { window.location.reload(); }
    return;
  }
  await loadNext();
}

function bindForms() {
  const box = container();
  if (!box) { return; }
  for (const form of box.querySelectorAll("form.label, form.skip")) {
    form.addEventListener("submit", (event) => { event.preventDefault(); post(form); });
  }
}

function choose(value) {
  const input = document.querySelector('form.label input[name="choice"][value="' + value + '"]');
  if (input) { input.checked = true; input.focus(); }
}

// Only a rubric that offers a tie (the item's data-allow-tie) takes 3; elsewhere the key does nothing, as the
// page's key hints say.
function tieAllowed() {
  const item = document.querySelector("article.item");
  return item !== null && item.dataset.allowTie === "yes";
}

document.addEventListener("keydown", (event) => {
  const form = document.querySelector("form.label");
  if (!form || event.altKey || event.metaKey) { return; }
  const typing = event.target instanceof HTMLTextAreaElement || event.target instanceof HTMLInputElement && event.target.type !== "radio";
  if (event.key === "Enter" && (!typing || event.ctrlKey)) {
    event.preventDefault();
    form.requestSubmit();
    return;
  }
  if (typing || event.ctrlKey) { return; }
  if (event.key === "1") { choose("left"); }
  else if (event.key === "2") { choose("right"); }
  else if (event.key === "3" && tieAllowed()) { choose("tie"); }
  else if (event.key === "s") { const skip = document.querySelector("form.skip"); if (skip) { skip.requestSubmit(); } }
});

// The audit view: swap in its figures every few seconds (server-rendered and escaped, like the items).
async function refreshLive(box) {
  try {
    const response = await fetch(box.dataset.refresh, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
    if (response.ok) { box.innerHTML = await response.text(); }
  } catch (e) { /* the service is restarting: try again next time */ }
}

document.addEventListener("DOMContentLoaded", () => {
  bindForms();
  const live = document.getElementById("audit-live");
  if (live && live.dataset.refresh) { setInterval(() => refreshLive(live), 2000); }
});
