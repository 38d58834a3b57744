// The overview: recent spend and whether the GPUs trained more than half
// the time they billed, the workers billing now, queued and running jobs,
// and every job, a page at a time, with runs to compare picked from it.
import { api, el, table, empty, money, ago, percent, stateOf } from "./api.js";

const PAGE = 50;

export async function overview(view) {
  const [spend, workers, queued, leased, running] = await Promise.all([
    api("/spend"), api("/workers"), api("/jobs?state=queued"), api("/jobs?state=leased"), api("/jobs?state=running")]);
  const active = [...queued, ...leased, ...running].sort((a, b) => a.id - b.id);
  // A busy worker's utilization: its job's open attempt's.
  const utilization = new Map(active.flatMap((j) => j.attempts.filter((a) => a.ended_at == null && a.utilization != null).map((a) => [a.worker, a.utilization])));
  const picked = new Set();
  const compare = el("button", { type: "button", id: "compare", disabled: true, onclick: () => {
    location.hash = "#compare/" + [...picked].map(encodeURIComponent).join("/");
  } }, "Compare selected runs");
  const all = el("div", {});
  view.replaceChildren(
    el("h1", {}, "Overview"),
    spendPanel(spend),
    el("h2", {}, "Workers billing now"),
    workers.length === 0 ? empty("no workers") : table(
      ["worker", "provider", "instance", "$/h", "state", "heartbeat", "utilization"],
      workers.map((w) => [String(w.id), w.info.provider, w.info.instance_type || w.info.instance || "-", money(w.info.price_per_hour), w.state, ago(w.last_seen),
        utilization.has(w.id) ? percent(utilization.get(w.id)) : "-"]),
      [3, 6]),
    el("h2", {}, "Queued and running jobs"),
    active.length === 0 ? empty("no queued or running jobs") : jobTable(active),
    el("h2", {}, "All jobs ", compare),
    all);
  let after = null;
  const more = async () => {
    const page = await api(`/jobs?newest_first=true&limit=${PAGE}` + (after == null ? "" : `&after=${after}`));
    if (page.length) after = page[page.length - 1].id;
    all.querySelector("#older")?.remove();
    all.append(jobTable(page, (run, on) => {
      if (on) picked.add(run); else picked.delete(run);
      compare.disabled = picked.size < 2;
    }));
    if (page.length === PAGE) all.append(el("button", { type: "button", id: "older", onclick: more }, "Older jobs"));
  };
  await more();
}

/** Today's and this week's spend, and the guide's question over the last 7 days. */
function spendPanel(s) {
  const share = s.effective_share_7d;
  const answer = share == null ? "no GPU billed in the last 7 days"
    : `${percent(share)} of ${s.gpu_hours_7d.toFixed(2)} billed GPU hours trained kept steps: ${share > 0.5 ? "more" : "not more"} than half`;
  const card = (id, label, value, text) => el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "figure", id, "data-value": String(value) }, text));
  return el("div", { class: "cards" },
    card("spend-today", "spent today", s.today_usd, money(s.today_usd)),
    card("spend-week", "spent this week", s.week_usd, money(s.week_usd)),
    card("share-7d", "effective share of GPU time, last 7 days", share ?? "", answer));
}

/** Jobs as a table; with `pick`, a box per row picks its run for comparing. */
function jobTable(jobs, pick) {
  const head = ["job", "kind", "state", "run", "step", "loss", "attempts"];
  const rows = jobs.map((j) => [
    el("a", { href: "#job/" + j.id }, String(j.id)), j.kind, stateOf(j.state), j.spec.run,
    j.step == null ? "-" : String(j.step), j.loss == null ? "-" : j.loss.toFixed(4), `${j.attempts_used}/${j.max_attempts}`]);
  if (pick) {
    head.unshift("");
    rows.forEach((row, i) => row.unshift(el("input", { type: "checkbox", class: "pick", "aria-label": "compare run " + jobs[i].spec.run,
      onchange: (e) => pick(jobs[i].spec.run, e.target.checked) })));
  }
  return table(head, rows, pick ? [5, 6] : [4, 5]);
}
