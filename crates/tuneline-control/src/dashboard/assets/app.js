// The dashboard's router: `#job/ID`, `#compare/RUN/RUN...`, `#plan[/ID]`,
// or the overview. A job still running is drawn again every 5 s.
import { el, logout } from "./api.js";
import { overview } from "./overview.js";
import { job } from "./run.js";
import { compare } from "./compare.js";
import { plan } from "./plan.js";

let timer = null;

/** Draws the page the location's hash names. */
async function route() {
  clearTimeout(timer);
  const view = document.getElementById("view");
  const hash = location.hash;
  const [page, ...args] = hash.replace(/^#/, "").split("/").map(decodeURIComponent);
  try {
    if (page === "job" && /^\d+$/.test(args[0])) {
      const live = await job(view, args[0], route);
      if (live && location.hash === hash) timer = setTimeout(redraw, 5000);
    } else if (page === "compare" && args.length >= 2) {
      await compare(view, args);
    } else if (page === "plan") {
      await plan(view, args[0]);
    } else {
      await overview(view);
    }
  } catch (e) {
    view.replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
  }
}

/** Draws the page again, unless the user is typing in one of its forms (then 5 s later). */
function redraw() {
  if (document.activeElement?.closest("#view form")) timer = setTimeout(redraw, 5000);
  else route();
}

document.getElementById("logout").addEventListener("click", logout);
window.addEventListener("hashchange", route);
route();
