// A config's plan, as `tuneline plan` prints it: its job ranked on every
// catalog offer, the save_steps its training takes, and the offers left out.
import { api, post, el, table, empty } from "./api.js";

export async function plan(view, id) {
  const configs = (await api("/jobs?newest_first=true&limit=200")).filter((j) => j.spec.config);
  const pick = el("select", { id: "plan-job", "aria-label": "a stored config", onchange: () => { location.hash = "#plan/" + pick.value; } },
    configs.map((j) => el("option", { value: String(j.id), selected: String(j.id) === id }, `job ${j.id}: ${j.kind} ${j.spec.run}`)));
  view.replaceChildren(el("h1", {}, "Plan"), configs.length === 0 ? empty("no stored config yet: submit a training job") : el("p", {}, "the config of ", pick));
  const chosen = configs.find((j) => String(j.id) === id) ?? configs[0];
  if (!chosen) return;
  const p = await post("/plan", { config: chosen.spec.config });
  const m = p.job.memory;
  view.append(
    el("p", {}, `${m.model.name}, ${m.quant === "Bits16" ? "LoRA" : "QLoRA"} r=${m.lora_r}, ${m.micro_batch} x ${m.seq_len} tokens per micro-batch; `,
      `${p.job.steps} steps of ${p.job.accumulation} micro-batches per GPU; phase ${p.job.phase}`),
    el("p", {}, "save_steps ", el("strong", { id: "save-steps" }, p.save_steps == null ? "none" : String(p.save_steps)), ` (${p.save_steps_why})`),
    el("h2", {}, "Ranked offers"),
    p.plan.ranked.length === 0 ? empty("no offer can run this job") : table(
      ["rank", "offer", "hardware", "market", "$/h", "fit", "tok/s", "save_steps", "wall h", "total $", "ETH $", "$/M tok"],
      p.plan.ranked.map((e, i) => [String(i + 1), e.offer + (e.stale_days == null ? "" : " *"), e.hardware, e.market, e.price_per_hour.toFixed(3), e.fit,
        e.tokens_per_second.toFixed(0), e.save_steps == null ? "-" : String(e.save_steps), e.wall_h.toFixed(2), e.total_cost.toFixed(2), e.eth.toFixed(2), e.usd_per_m_tokens.toFixed(3)]),
      [0, 4, 6, 7, 8, 9, 10, 11]),
    el("h2", {}, "Left out"),
    p.plan.excluded.length === 0 ? empty("none") : table(["offer", "market", "why"], p.plan.excluded.map((x) => [x.offer, x.market, x.reason])));
}
