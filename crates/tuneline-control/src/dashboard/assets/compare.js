// Runs compared: their loss curves overlaid, their evaluations, ETH and
// total, and the settings that differ between them.
import { api, el, table, empty, money } from "./api.js";
import { curve } from "./charts.js";

export async function compare(view, runs) {
  const query = runs.map((r) => "run=" + encodeURIComponent(r)).join("&");
  const [differing, ...each] = await Promise.all([api("/compare?" + query), ...runs.map(async (run) => {
    const q = encodeURIComponent(run);
    const [jobs, bill, stored] = await Promise.all([api(`/jobs?run=${q}`), api(`/report?run=${q}`), api(`/artifacts?run=${q}`).catch(() => null)]);
    const training = jobs.filter((j) => j.kind !== "deliver").pop();
    const series = training ? await api(`/jobs/${training.id}/series`) : null;
    return { run, bill: bill.cost, series, evaluation: stored?.evaluations.at(-1) };
  })]);
  const drawn = each.filter((r) => r.series && r.series.logged > 0);
  const score = (r, side, m) => r.evaluation?.metrics?.[side]?.[m]?.toFixed(3) ?? "-";
  view.replaceChildren(
    el("h1", {}, "Compare " + runs.join(", ")),
    el("h2", {}, "Loss"),
    drawn.length === 0 ? empty("no steps yet") : curve(drawn.map((r) => ({ label: r.run, series: r.series }))),
    el("h2", {}, "Cost and evaluation"),
    table(["run", "ETH", "total", "steps lost", "tuned loss", "tuned ROUGE-L", "tuned BLEU", "base ROUGE-L"], each.map((r) => [
      r.run, el("span", { class: "eth", "data-value": String(r.bill.eth_usd ?? "") }, r.bill.eth_usd == null ? "n/a" : money(r.bill.eth_usd)),
      el("span", { class: "total", "data-value": String(r.bill.total_usd) }, money(r.bill.total_usd)), String(r.bill.steps_lost),
      score(r, "tuned", "loss"), score(r, "tuned", "rouge_l"), score(r, "tuned", "bleu"), score(r, "base", "rouge_l")]), [1, 2, 3, 4, 5, 6, 7]),
    el("h2", {}, "Settings that differ"),
    differing.differing.length === 0 ? empty("none: the same settings")
      : table(["setting", ...runs], differing.differing.map((d) => [el("code", { class: "key" }, d.key), ...d.values.map((v) => v ?? "(unset)")])));
}
