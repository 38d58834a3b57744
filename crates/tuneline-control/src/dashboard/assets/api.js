// What every page shares: the API call (the session cookie, and the page's
// CSRF token on changes), element building (text is set as text only, so
// no job name or log line can become markup), tables and number formats.

const csrf = document.querySelector('meta[name="csrf-token"]').content;

/** One API call; a lost session goes back to the login page. */
export async function api(path, options = {}) {
  const headers = { "X-CSRF-Token": csrf, ...(options.headers || {}) };
  const response = await fetch("/v1" + path, { ...options, headers, credentials: "same-origin" });
  if (response.status === 401) {
    location.assign("/login");
    throw new Error("the session ended");
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

/** A POST of `body` as JSON. */
export function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

/** Logs out: the session ends on the server, then the login page. */
export async function logout() {
  await fetch("/logout", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
  location.assign("/login");
}

/** An element with attributes and children (strings become text). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== false && value != null) node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) if (child != null) node.append(child instanceof Node ? child : String(child));
  return node;
}

/** A table of `rows`, each a list of cells; `numeric` columns align right. */
export function table(head, rows, numeric = []) {
  return el("table", {},
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map((cell, i) => el("td", numeric.includes(i) ? { class: "num" } : {}, cell))))));
}

/** "nothing here" in place of an empty table. */
export const empty = (text) => el("p", { class: "empty" }, text);

export const money = (x) => "$" + x.toFixed(Math.abs(x) < 1 ? 4 : 2);
export const ago = (t) => Math.max(0, Math.round(Date.now() / 1000 - t)) + " s ago";
export const clock = (t) => new Date(t * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC";
export const percent = (x) => (x * 100).toFixed(1) + "%";
export const FINAL = ["succeeded", "failed", "cancelled"];

/** The steps an attempt finished that a checkpoint kept. */
export function keptSteps(attempt) {
  const computed = attempt.max_step == null ? 0 : attempt.max_step - (attempt.start_step ?? 0);
  return computed - attempt.lost_steps;
}

/** A job's state, coloured. */
export const stateOf = (state, id) => el("span", { class: "state-" + state, id }, state);
