// The dashboard's shell: the route in the URL's hash picks a view, a poller refreshes it every
// two seconds while the page is visible, and the header carries liveness, health and the
// hang-triage button.

import { Poller, getJSON } from "./api.js";
import { clock, esc, reasonHtml } from "./draw.js";
import * as explorer from "./explorer.js";
import * as overview from "./overview.js";
import * as topology from "./topology.js";

const viewEl = document.getElementById("view");
const liveEl = document.getElementById("live");
const healthEl = document.getElementById("health-badge");
let poller = null;
let current = null;

function parseRoute() {
  const parts = (location.hash || "#/overview").slice(2).split("/").filter(Boolean);
  const name = ["overview", "topology", "explorer"].includes(parts[0]) ? parts[0] : "overview";
  return { name, rest: parts.slice(1) };
}

function showHealth(health) {
  if (health === undefined) return;
  healthEl.hidden = false;
  healthEl.textContent = `health ${health}`;
  healthEl.className = `badge ${health >= 90 ? "idle" : health >= 60 ? "stopping" : "failed"}`;
}

function setLive(state, detail) {
  if (state === "live") {
    liveEl.textContent = `live · ${clock(Date.now() * 1000).slice(0, 8)}`;
    liveEl.className = "live on";
  } else if (state === "paused") {
    liveEl.textContent = "paused (page hidden)";
    liveEl.className = "live paused";
  } else {
    liveEl.textContent = `error: ${detail}`;
    liveEl.className = "live error";
  }
}

function start() {
  const route = parseRoute();
  document.querySelectorAll("#nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.view === route.name));
  document.body.dataset.view = route.name;
  if (poller) poller.stop();
  if (current !== route.name) {
    viewEl.innerHTML = `<p class="muted">loading…</p>`;
    current = route.name;
  }
  let load;
  if (route.name === "overview") {
    load = async () => showHealth(overview.render(viewEl, await getJSON(overview.route)).health);
  } else if (route.name === "topology") {
    if (route.rest[0]) topology.setTab(route.rest[0]);
    load = async () => topology.render(viewEl, await getJSON(topology.route));
  } else {
    const [kind, id] = route.rest;
    explorer.select(["actor", "mesh"].includes(kind) ? kind : null, /^\d+$/.test(id ?? "") ? id : null);
    load = async () => explorer.render(viewEl, await explorer.load());
  }
  poller = new Poller(load, setLive);
  poller.tick();
}

// Hang triage: the admin API's /v1/why, asked by the server for us.
function triageHtml(t) {
  const lines = (t.lines || []).map((l) => `<li>${esc(l)}</li>`).join("");
  const group = (g) => {
    const ranks = (g.ranks || []).join(", ");
    const age = g.max_age_s !== null && g.max_age_s !== undefined ? ` for ${Math.round(g.max_age_s)} s` : "";
    return `<div class="why-group${g.outlier ? " failed" : ""}"><b>${g.count} rank${g.count === 1 ? "" : "s"} in ${esc(g.where)}${esc(age)}</b>
      <span class="muted">ranks ${esc(ranks)}${g.outlier ? " · outlier" : ""}</span>
      ${g.stack && g.stack.length ? `<pre>${esc(g.stack.join("\n"))}</pre>` : ""}</div>`;
  };
  const meshes = (t.meshes || []).map((m) => `<div class="why-mesh"><h3>${esc(m.mesh)} <small class="muted">${m.ranks} ranks</small></h3>
    ${(m.groups || []).map(group).join("")}</div>`).join("");
  const failed = (t.failed || []).map((f) => `<li class="failed"><b>${esc(f.mesh)}[${esc(f.rank)}]</b>${reasonHtml(f.report)}</li>`).join("");
  const unreachable = (t.unreachable || []).map((u) => `<li class="${u.state === "failed" ? "failed" : ""}">${esc(u.mesh)}[${esc(u.rank)}] ${esc(u.state)}: ${esc(u.reason ?? "")}</li>`).join("");
  return `<p id="why-summary"><b>${esc(t.summary ?? "")}</b></p><ul class="why-lines">${lines}</ul>${meshes}
    ${failed ? `<h3>Failed</h3><ul class="errors">${failed}</ul>` : ""}${unreachable ? `<h3>Not answering</h3><ul>${unreachable}</ul>` : ""}`;
}

document.getElementById("why-button").addEventListener("click", async () => {
  const panel = document.getElementById("why-panel");
  const body = document.getElementById("why-body");
  panel.hidden = false;
  body.innerHTML = `<p class="muted">asking every rank…</p>`;
  try {
    body.innerHTML = triageHtml(await getJSON("api/dashboard/why"));
  } catch (err) {
    body.innerHTML = `<p class="failed-text" id="why-error">${esc(err.message)}</p>`;
  }
});
document.getElementById("why-close").addEventListener("click", () => {
  document.getElementById("why-panel").hidden = true;
});

window.addEventListener("hashchange", start);
start();
