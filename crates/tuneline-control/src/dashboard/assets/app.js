// The dashboard's pages, drawn from the server's JSON API (/v1) with the
// session cookie; changes carry the page's CSRF token. Text is set with
// textContent only, so no job name or log line can become markup.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;

/** One API call; a lost session goes back to the login page. */
async function api(path, options = {}) {
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

/** An element with attributes and children (strings become text). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child));
  return node;
}

/** A table of `rows`, each a list of cells; `numeric` columns align right. */
function table(head, rows, numeric = []) {
  return el("table", {},
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map((cell, i) => el("td", numeric.includes(i) ? { class: "num" } : {}, cell))))));
}

const money = (x) => "$" + x.toFixed(x < 1 ? 4 : 2);
const ago = (t) => Math.max(0, Math.round(Date.now() / 1000 - t)) + " s ago";

async function overview(view) {
  const [workers, jobs] = await Promise.all([api("/workers"), api("/jobs")]);
  const billing = workers.filter((w) => w.state !== "gone" && w.state !== "lost");
  const active = jobs.filter((j) => ["queued", "leased", "running"].includes(j.state));
  view.replaceChildren(
    el("h1", {}, "Overview"),
    el("h2", {}, "Workers billing now"),
    billing.length === 0 ? el("p", { class: "empty" }, "no workers") : table(
      ["worker", "provider", "instance", "$/h", "state", "heartbeat"],
      billing.map((w) => [String(w.id), w.info.provider, w.info.instance_type || w.info.instance || "-", money(w.info.price_per_hour), w.state, ago(w.last_seen)]),
      [3]),
    el("h2", {}, "Queued and running jobs"),
    active.length === 0 ? el("p", { class: "empty" }, "no queued or running jobs") : jobTable(active),
    el("h2", {}, "All jobs"),
    jobTable(jobs.slice().reverse()));
}

function jobTable(jobs) {
  return table(["job", "kind", "state", "run", "step", "loss", "attempts"], jobs.map((j) => [
    el("a", { href: "#job/" + j.id }, String(j.id)), j.kind, el("span", { class: "state-" + j.state }, j.state), j.spec.run,
    j.step == null ? "-" : String(j.step), j.loss == null ? "-" : j.loss.toFixed(4), `${j.attempts_used}/${j.max_attempts}`]), [4, 5]);
}

/** The loss (a line) and eval loss (dots) against step, as SVG. */
function curve(series) {
  const ns = "http://www.w3.org/2000/svg";
  const [w, h, pad] = [800, 260, 40];
  const points = series.loss.concat(series.eval_loss);
  const steps = points.map((p) => p.step), values = points.map((p) => p.value);
  const [x0, x1] = [Math.min(...steps), Math.max(...steps, Math.min(...steps) + 1)];
  const [y0, y1] = [Math.min(...values), Math.max(...values, Math.min(...values) + 1e-9)];
  const x = (s) => pad + (s - x0) / (x1 - x0) * (w - 2 * pad);
  const y = (v) => h - pad - (v - y0) / (y1 - y0) * (h - 2 * pad);
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("class", "curve");
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  add("line", { class: "axis", x1: pad, y1: h - pad, x2: w - pad, y2: h - pad });
  add("line", { class: "axis", x1: pad, y1: pad, x2: pad, y2: h - pad });
  add("text", { x: pad, y: h - pad + 16 }, `step ${x0}`);
  add("text", { x: w - pad, y: h - pad + 16, "text-anchor": "end" }, `step ${x1}`);
  add("text", { x: 4, y: pad }, y1.toFixed(3));
  add("text", { x: 4, y: h - pad }, y0.toFixed(3));
  const path = series.loss.map((p, i) => (i ? "L" : "M") + x(p.step).toFixed(1) + " " + y(p.value).toFixed(1)).join(" ");
  add("path", { class: "loss", d: path, "data-points": String(series.loss.length) });
  for (const p of series.eval_loss) add("circle", { class: "eval", cx: x(p.step), cy: y(p.value), r: 3 });
  return svg;
}

/** A run's bill, as `tuneline cost report` prints it: ETH and what it is made of. */
function billPanel(bill) {
  const c = bill.cost;
  const figure = (id, label, value, text) => [label, el("span", { id, "data-value": String(value) }, text)];
  return table(["", ""], [
    figure("eth", "ETH", c.eth_usd ?? "", c.eth_usd == null ? "n/a (no step kept yet)" : money(c.eth_usd) + " per effective training hour"),
    figure("total", "total", c.total_usd, money(c.total_usd)),
    figure("compute", "compute (training)", c.compute_usd, `${money(c.compute_usd)} for ${c.wall_hours.toFixed(4)} h billed`),
    figure("effective", "effective hours", c.effective_hours, `${c.effective_hours.toFixed(4)} h computing kept steps`),
    figure("utilization", "utilization", c.utilization, (c.utilization * 100).toFixed(1) + "%"),
    figure("lost", "lost to preemption", c.steps_lost, `${c.steps_lost} steps in ${c.preemptions} preemptions or losses`),
    figure("delivery", "delivery (CPU, not in ETH)", c.delivery_usd, `${money(c.delivery_usd)} for ${c.delivery_hours.toFixed(4)} h`),
    figure("storage", "storage", c.storage_usd, money(c.storage_usd)),
    figure("egress", "egress", c.egress_usd, money(c.egress_usd)),
  ]);
}

async function job(view, id) {
  const [job, series] = await Promise.all([api("/jobs/" + id), api("/jobs/" + id + "/series")]);
  const bill = await api("/report?run=" + encodeURIComponent(job.spec.run));
  const final = ["succeeded", "failed", "cancelled"].includes(job.state);
  const cancel = el("button", { class: "danger", type: "button", id: "cancel", onclick: async () => {
    cancel.disabled = true;
    await api(`/jobs/${id}/cancel`, { method: "POST" });
    route();
  } }, "Cancel job");
  if (final) cancel.disabled = true;
  view.replaceChildren(
    el("h1", {}, `Job ${job.id}: ${job.kind} ${job.spec.run}`),
    el("p", {}, "state ", el("span", { class: "state-" + job.state, id: "state" }, job.state), job.error ? ` (${job.error})` : "", " ", cancel),
    el("h2", {}, "Loss"),
    series.logged === 0 ? el("p", { class: "empty" }, "no steps yet")
      : el("div", {}, curve(series), el("p", { class: "empty" }, `${series.logged} steps logged, ${series.loss.length} drawn`)),
    el("h2", {}, "Bill of run " + job.spec.run),
    billPanel(bill),
    el("h2", {}, "Attempts"),
    job.attempts.length === 0 ? el("p", { class: "empty" }, "no attempts yet") : table(
      ["worker", "provider", "from", "hours", "outcome", "steps kept", "steps lost"],
      job.attempts.map((a) => [String(a.worker), a.provider, new Date(a.started_at * 1000).toISOString().slice(0, 19) + "Z",
        (((a.ended_at || Date.now() / 1000) - a.started_at) / 3600).toFixed(4), a.outcome || "running",
        a.max_step == null ? "-" : String(a.max_step - a.lost_steps - (a.start_step || 0)), String(a.lost_steps)]), [3, 5, 6]));
}

/** Draws the page the location's hash names: `#job/ID`, or the overview. */
async function route() {
  const view = document.getElementById("view");
  const match = location.hash.match(/^#job\/(\d+)$/);
  try {
    await (match ? job(view, match[1]) : overview(view));
  } catch (e) {
    view.replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
  }
}

document.getElementById("logout").addEventListener("click", async () => {
  await fetch("/logout", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
  location.assign("/login");
});
window.addEventListener("hashchange", route);
route();
