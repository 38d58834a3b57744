// The pictures, as SVG: loss curves (one or more runs overlaid, against
// step or wall time) and a job's attempts on a timeline.

import { keptSteps } from "./api.js";

const NS = "http://www.w3.org/2000/svg";
const [W, H, PAD] = [800, 260, 44];

/** An SVG of class `cls` and an `add(tag, attrs, text)` that draws in it. */
function canvas(cls, height = H) {
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${height}`);
  svg.setAttribute("class", cls);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  return [svg, add];
}

/**
 * Loss (lines) and eval loss (dots) of each of `curves` ({label, series}),
 * against `axis`: "step", or "time" (minutes since each run's first point).
 */
export function curve(curves, axis = "step") {
  const [svg, add] = canvas("curve");
  const xOf = (c) => {
    const t0 = Math.min(...c.series.loss.concat(c.series.eval_loss).map((p) => p.at));
    return axis === "time" ? (p) => (p.at - t0) / 60 : (p) => p.step;
  };
  const all = curves.flatMap((c) => c.series.loss.concat(c.series.eval_loss).map((p) => [xOf(c)(p), p.value]));
  const [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  const [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  const x = (v) => PAD + (v - x0) / ((x1 - x0) || 1) * (W - 2 * PAD);
  const y = (v) => H - PAD - (v - y0) / ((y1 - y0) || 1) * (H - 2 * PAD);
  add("line", { class: "axis", x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD });
  add("line", { class: "axis", x1: PAD, y1: PAD, x2: PAD, y2: H - PAD });
  const unit = axis === "time" ? (v) => v.toFixed(1) + " min" : (v) => "step " + v;
  add("text", { x: PAD, y: H - PAD + 16 }, unit(x0));
  add("text", { x: W - PAD, y: H - PAD + 16, "text-anchor": "end" }, unit(x1));
  add("text", { x: 4, y: PAD }, y1.toFixed(3));
  add("text", { x: 4, y: H - PAD }, y0.toFixed(3));
  curves.forEach((c, i) => {
    const at = xOf(c);
    const d = c.series.loss.map((p, j) => (j ? "L" : "M") + x(at(p)).toFixed(1) + " " + y(p.value).toFixed(1)).join(" ");
    add("path", { class: `loss run-${i}`, d, "data-points": String(c.series.loss.length), "data-run": c.label });
    for (const p of c.series.eval_loss) add("circle", { class: `eval run-${i}`, cx: x(at(p)), cy: y(p.value), r: 3 });
    if (curves.length > 1) add("text", { class: `legend run-${i}`, x: W - PAD, y: PAD + 14 * i, "text-anchor": "end" }, c.label);
  });
  return svg;
}

/**
 * A job's attempts, one lane each, from its lease to its end (now while it
 * runs): the startup (lease to trainer) shaded, the outcome coloured, and
 * the steps it kept and lost written beside it.
 */
export function timeline(attempts, now) {
  const lane = 30;
  const height = PAD / 2 + lane * attempts.length + 10;
  const [svg, add] = canvas("timeline", height);
  const end = (a) => a.ended_at ?? now;
  const [t0, t1] = [Math.min(...attempts.map((a) => a.started_at)), Math.max(...attempts.map(end))];
  const x = (t) => 230 + (t - t0) / ((t1 - t0) || 1) * (W - 240);
  add("text", { x: 230, y: 14 }, new Date(t0 * 1000).toISOString().slice(11, 19) + " UTC");
  add("text", { x: W - 10, y: 14, "text-anchor": "end" }, `+${((t1 - t0) / 60).toFixed(1)} min`);
  attempts.forEach((a, i) => {
    const top = PAD / 2 + i * lane;
    const outcome = a.outcome ?? "running";
    const kept = keptSteps(a);
    const engine = a.engine ? ` on ${a.engine}` : "";
    add("text", { class: "steps", x: 4, y: top + 16 }, `worker ${a.worker}${engine}: ${outcome}, ${kept} kept, ${a.lost_steps} lost`);
    const rect = add("rect", { class: `attempt outcome-${outcome}`, x: x(a.started_at), y: top + 4, width: Math.max(2, x(end(a)) - x(a.started_at)), height: lane - 10, "data-outcome": outcome });
    rect.append(Object.assign(document.createElementNS(NS, "title"), { textContent: `${outcome}: ${kept} steps kept, ${a.lost_steps} lost` }));
    if (a.trainer_at != null || a.ended_at != null) {
      const started = Math.min(a.trainer_at ?? end(a), end(a));
      add("rect", { class: "startup", x: x(a.started_at), y: top + 4, width: Math.max(0, x(started) - x(a.started_at)), height: lane - 10 });
    }
  });
  return svg;
}
