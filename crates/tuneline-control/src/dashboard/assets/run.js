// A job's page: its live loss curve (against step or wall time), its
// checkpoints marked committed, its attempts on a timeline, the run's ETH
// bill broken down, the evaluation of base against tuned with its
// spot-check sheet, cancel, and a new job from the same stored config.
import { api, post, el, table, empty, money, clock, percent, stateOf, keptSteps, FINAL } from "./api.js";
import { curve, timeline } from "./charts.js";

/** How the curve's x axis is drawn, kept across the page's refreshes. */
let axis = "step";

export async function job(view, id, refresh) {
  const [job, series] = await Promise.all([api("/jobs/" + id), api("/jobs/" + id + "/series")]);
  const run = encodeURIComponent(job.spec.run);
  const [bill, stored] = await Promise.all([api("/report?run=" + run), api("/artifacts?run=" + run).catch((e) => e)]);
  const final = FINAL.includes(job.state);
  const cancel = el("button", { class: "danger", type: "button", id: "cancel", disabled: final, onclick: async () => {
    cancel.disabled = true;
    await api(`/jobs/${id}/cancel`, { method: "POST" });
    refresh();
  } }, "Cancel job");
  const axes = ["step", "time"].map((a) => el("button", { type: "button", class: a === axis ? "on" : null, id: "axis-" + a,
    onclick: () => { axis = a; refresh(); } }, a === "step" ? "by step" : "by wall time"));
  view.replaceChildren(
    el("h1", {}, `Job ${job.id}: ${job.kind} ${job.spec.run}`),
    el("p", {}, "state ", stateOf(job.state, "state"), job.error ? ` (${job.error})` : "", " ", cancel),
    el("h2", {}, "Loss ", ...axes),
    series.logged === 0 ? empty("no steps yet")
      : el("div", {}, curve([{ label: job.spec.run, series }], axis),
        el("p", { class: "empty" }, `${series.logged} steps logged, ${series.loss.length} drawn` + (final ? "" : "; updating every 5 s"))),
    el("h2", {}, "Attempts"),
    job.attempts.length === 0 ? empty("no attempts yet") : attempts(job.attempts),
    el("h2", {}, "Bill of run " + job.spec.run),
    billPanel(bill.cost),
    el("h2", {}, "Checkpoints"),
    stored instanceof Error ? el("p", { class: "error" }, "the run's store: " + stored.message) : checkpoints(stored.checkpoints),
    el("h2", {}, "Evaluation"),
    stored instanceof Error ? empty("-") : evaluations(job.spec.run, stored.evaluations),
    ...(job.kind === "deliver" ? [] : [el("h2", {}, "Again"), again(job)]));
  return !final;
}

/** The attempts: the timeline, then a row each. */
function attempts(list) {
  return el("div", {}, timeline(list, Date.now() / 1000), table(
    ["worker", "provider", "from", "hours", "outcome", "steps kept", "steps lost"],
    list.map((a) => [String(a.worker), a.provider + (a.spot ? " (spot)" : ""), clock(a.started_at),
      (((a.ended_at || Date.now() / 1000) - a.started_at) / 3600).toFixed(4), a.outcome || "running",
      String(keptSteps(a)), String(a.lost_steps)]), [3, 5, 6]));
}

/** A run's bill, as `tuneline cost report` prints it: ETH and what it is made of. */
function billPanel(c) {
  const b = c.breakdown;
  const figure = (id, label, value, text) => [label, el("span", { id, "data-value": String(value) }, text)];
  const part = (id, label, usd) => figure(id, "  " + label, usd, `${money(usd)} (${c.compute_usd > 0 ? percent(usd / c.compute_usd) : "-"} of compute)`);
  return table(["", ""], [
    figure("eth", "ETH", c.eth_usd ?? "", c.eth_usd == null ? "n/a (no step kept yet)" : money(c.eth_usd) + " per effective training hour"),
    figure("total", "total", c.total_usd, money(c.total_usd)),
    figure("compute", "compute (training)", c.compute_usd, `${money(c.compute_usd)} for ${c.wall_hours.toFixed(4)} h billed`),
    part("effective-usd", "effective (steps kept)", b.effective_usd),
    part("lost-usd", `lost to preemption (${c.steps_lost} steps in ${c.preemptions} preemptions or losses)`, b.lost_usd),
    part("startup-usd", "boot and prefetch (lease to trainer)", b.startup_usd),
    part("idle-usd", "idle (uploads, evaluation, waiting)", b.idle_usd),
    figure("storage", "storage", c.storage_usd, money(c.storage_usd)),
    figure("egress", "egress", c.egress_usd, money(c.egress_usd)),
    figure("effective", "effective hours", c.effective_hours, `${c.effective_hours.toFixed(4)} h computing kept steps`),
    figure("utilization", "utilization", c.utilization, percent(c.utilization)),
    figure("delivery", "delivery (CPU, not in ETH)", c.delivery_usd, `${money(c.delivery_usd)} for ${c.delivery_hours.toFixed(4)} h`),
  ]);
}

function checkpoints(list) {
  if (list.length === 0) return empty("no checkpoint in the store yet");
  return table(["step", "committed", "size", "when"], list.map((c) => [
    String(c.step), el("span", { class: c.committed ? "state-succeeded" : "state-failed", "data-committed": String(c.committed) }, c.committed ? "committed" : "not committed: " + c.problem),
    (c.size / 1048576).toFixed(2) + " MiB", c.committed_at || "-"]), [0, 2]);
}

/** Base against tuned, for each evaluated checkpoint, with its spot-check sheet. */
function evaluations(run, list) {
  if (list.length === 0) return empty("not evaluated yet (the delivery job evaluates)");
  const metrics = [["loss", 4], ["perplexity", 2], ["exact_match", 3], ["rouge_l", 3], ["bleu", 1]];
  return el("div", {}, list.map((e) => el("div", { class: "evaluation" },
    el("p", {}, `checkpoint ${e.step}, ${e.metrics.samples ?? "?"} samples `,
      e.spot_check ? el("a", { href: `/v1/spot-check?run=${encodeURIComponent(run)}&step=${e.step}`, target: "_blank", rel: "noopener", class: "sheet" }, "spot-check sheet") : ""),
    table(["metric", "base", "tuned"], metrics.map(([m, digits]) => [m, e.metrics.base?.[m]?.toFixed(digits) ?? "-", e.metrics.tuned?.[m]?.toFixed(digits) ?? "-"]), [1, 2]))));
}

/** A form that queues the same stored config (and dataset, or command) again, as a new run. */
function again(job) {
  const name = el("input", { id: "again-run", value: job.spec.run + "-again", required: true, "aria-label": "new run name" });
  const said = el("span", { class: "empty" });
  const form = el("form", { id: "again", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const queued = await post("/jobs", { kind: job.kind, spec: { ...job.spec, run: name.value.trim() }, max_attempts: job.max_attempts });
      location.hash = "#job/" + queued.id;
    } catch (error) {
      said.textContent = error.message;
      said.className = "error";
    }
  } }, `Queue this job's ${job.kind === "train" ? "config and dataset" : "command"} again as run `, name, " ", el("button", { type: "submit" }, "Submit"), " ", said);
  return form;
}
