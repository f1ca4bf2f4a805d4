// The Explorer view: pick an actor or mesh on the left, see it in detail on the right (its
// row, status history, messages in and out, the meshes around it), with a py-spy dump.

import { getJSON, postJSON } from "./api.js";
import { clock, esc, num, pill, reasonHtml, statusClass } from "./draw.js";

const state = { kind: null, id: null, filter: "", dumpHtml: "", admin: false, topology: null, showSystem: false };

export function select(kind, id) {
  if (state.kind !== kind || state.id !== id) {
    state.dumpHtml = "";
  }
  state.kind = kind;
  state.id = id;
}

export async function load() {
  const [topology, info] = await Promise.all([
    getJSON("api/dashboard/topology"), getJSON("api/dashboard/info")]);
  state.admin = info.admin;
  let detail = null, missing = null;
  if (state.kind && state.id) {
    try {
      detail = await getJSON(`api/dashboard/${state.kind}?id=${encodeURIComponent(state.id)}`);
    } catch (err) {
      missing = err.message;
    }
  }
  return { topology, detail, missing };
}

function entityList(topology) {
  const f = state.filter.toLowerCase();
  const actorsByMesh = new Map();
  for (const a of topology.actors) {
    if (!actorsByMesh.has(a.mesh_id)) actorsByMesh.set(a.mesh_id, []);
    actorsByMesh.get(a.mesh_id).push(a);
  }
  return topology.meshes.map((m) => {
    const selectedHere = state.kind === "mesh" && state.id === m.id;
    if (m.system && !m.client && !state.showSystem && !selectedHere) return "";
    const actors = (actorsByMesh.get(m.id) || []).filter((a) => state.showSystem || !a.system ||
      m.client || (state.kind === "actor" && state.id === a.id));
    if (!actors.length && (m.class === "Host" || m.class === "Proc") && !state.showSystem && !selectedHere &&
        !topology.meshes.some((c) => c.parent_mesh_id === m.id && (!c.system || c.client))) return "";
    const shown = actors.filter((a) => !f || `${m.given_name}[${a.rank}] ${a.full_name}`.toLowerCase().includes(f));
    if (f && !shown.length && !m.given_name.toLowerCase().includes(f)) return "";
    const failed = actors.some((a) => a.status === "Failed");
    const sel = (kind, id) => (state.kind === kind && state.id === id ? " selected" : "");
    return `<li class="mesh-item${failed ? " failed" : ""}${m.system ? " system" : ""}">
      <a href="#/explorer/mesh/${esc(m.id)}" class="entity${sel("mesh", m.id)}">${esc(m.given_name)} <small>${esc(m.class)}</small></a>
      <ul>${shown.map((a) => `<li><a href="#/explorer/actor/${esc(a.id)}" class="entity ${statusClass(a.status)}${sel("actor", a.id)}">[${esc(a.rank)}] ${esc(a.status)}</a></li>`).join("")}</ul></li>`;
  }).join("");
}

// host mesh > proc mesh > ... > the entity, each a link.
function breadcrumb(meshId, last) {
  const meshes = new Map((state.topology?.meshes || []).map((m) => [m.id, m]));
  const chain = [];
  for (let m = meshes.get(meshId); m && chain.length < 16; m = meshes.get(m.parent_mesh_id)) chain.unshift(m);
  const links = chain.map((m) => `<a href="#/explorer/mesh/${esc(m.id)}">${esc(m.given_name)}</a>`);
  if (last) links.push(`<span>${esc(last)}</span>`);
  return `<nav class="crumbs" id="breadcrumb">${links.join(" › ")}</nav>`;
}

function props(rows) {
  return `<table class="props">${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`).join("")}</table>`;
}

function messagesTable(rows, peerTitle) {
  if (!rows.length) return `<p class="muted">None.</p>`;
  return `<table class="table"><thead><tr><th>time</th><th>endpoint</th><th>${peerTitle}</th><th>status</th></tr></thead><tbody>
    ${rows.map((m) => `<tr class="${m.status === "failed" ? "failed" : ""}"><td>${esc(clock(m.timestamp_us))}</td><td>${esc(m.endpoint ?? "–")}</td>
      <td>${m.peer_id ? `<a href="#/explorer/actor/${esc(m.peer_id)}">${esc(m.peer ?? m.peer_id)}</a>` : "–"}</td><td>${esc(m.status ?? "–")}</td></tr>`).join("")}</tbody></table>`;
}

function actorDetail(d) {
  const a = d.actor;
  const history = d.history.map((h) => `<li class="${statusClass(h.status)}"><span class="time">${esc(clock(h.timestamp_us))}</span> ${pill(h.status)}
      ${h.reason ? reasonHtml(h.reason) : ""}</li>`).join("");
  const pyspy = state.admin
    ? `<button type="button" id="pyspy-button">py-spy dump</button>`
    : `<span class="muted">py-spy needs the mesh admin API (job.enable_admin()).</span>`;
  return `${breadcrumb(a.mesh_id, `[${a.rank}]`)}<h2 id="entity-title" class="${statusClass(a.status)}">Actor ${esc(a.mesh_name ?? "?")}[${esc(a.rank)}] ${pill(a.status)}</h2>
    ${a.status === "Failed" ? `<div class="failure-box failed"><b>Failed</b>${reasonHtml(a.reason)}</div>` : ""}
    ${props([["id", esc(a.id)], ["full name", esc(a.full_name)], ["display name", esc(a.display_name ?? "–")],
      ["mesh", `<a href="#/explorer/mesh/${esc(a.mesh_id)}">${esc(a.mesh_name ?? a.mesh_id)}</a> (${esc(a.mesh_class ?? "?")})`],
      ["rank", esc(a.rank)], ["created", esc(clock(a.created_us))],
      ["messages", `${num(d.counts.received)} received · ${num(d.counts.sent)} sent`]])}
    <div class="actions">${pyspy}</div><div id="pyspy-out">${state.dumpHtml}</div>
    <h3>Status history</h3><ol class="history" id="status-history">${history || "<li class='muted'>none</li>"}</ol>
    <h3>Messages received <small class="muted">latest ${d.received.length}</small></h3>${messagesTable(d.received, "from")}
    <h3>Messages sent <small class="muted">latest ${d.sent.length}</small></h3>${messagesTable(d.sent, "to")}`;
}

function meshDetail(d) {
  const m = d.mesh;
  const failed = d.actors.filter((a) => a.status === "Failed").length;
  const chain = d.parents.map((p) => `<a href="#/explorer/mesh/${esc(p.id)}">${esc(p.given_name)}</a> <small>${esc(p.class)}</small>`).join(" ← ");
  return `${breadcrumb(m.id, null)}<h2 id="entity-title" class="${failed ? "failed" : ""}">Mesh ${esc(m.given_name)} <small>${esc(m.class)}</small></h2>
    ${props([["id", esc(m.id)], ["full name", esc(m.full_name)],
      ["shape", esc(Object.entries(m.shape || {}).map(([k, v]) => `${k}=${v}`).join(" ") || "–")],
      ["parents", chain || "–"], ["created", esc(clock(m.timestamp_us))], ["casts to it", num(d.casts)],
      ["actors", `${num(d.actors.length)}${failed ? ` · <span class="failed-text">${failed} failed</span>` : ""}`]])}
    <h3>Actors</h3>${d.actors.length ? `<table class="table"><thead><tr><th>rank</th><th>status</th><th>full name</th><th>reason</th></tr></thead><tbody>
      ${d.actors.map((a) => `<tr class="${statusClass(a.status)}"><td>${esc(a.rank)}</td><td>${pill(a.status)}</td>
        <td><a href="#/explorer/actor/${esc(a.id)}">${esc(a.full_name)}</a></td><td class="reason-cell" title="${esc(a.reason ?? "")}">${esc((a.reason ?? "").split("\n")[0])}</td></tr>`).join("")}</tbody></table>` : "<p class='muted'>None.</p>"}
    <h3>Meshes under it</h3>${d.children.length ? `<ul>${d.children.map((c) => `<li><a href="#/explorer/mesh/${esc(c.id)}">${esc(c.given_name)}</a> <small>${esc(c.class)}</small></li>`).join("")}</ul>` : "<p class='muted'>None.</p>"}`;
}

function pyspyHtml(reply) {
  const r = reply.result || {};
  if (!r.Ok) return `<pre class="reason failed">${esc(JSON.stringify(r, null, 2))}</pre>`;
  const threads = r.Ok.stack_traces.map((t) => `<div class="thread"><b>${esc(t.thread_name ?? t.thread_id)}</b>${t.active ? " (active)" : ""}
    <pre>${t.frames.map((f) => `${esc(f.name)}  ${esc(f.short_filename || f.filename)}:${esc(f.line)}`).join("\n")}</pre></div>`).join("");
  return `<div class="pyspy" id="pyspy-result"><p class="muted">pid ${esc(r.Ok.pid)}${reply.dump_id ? ` · stored as dump ${esc(reply.dump_id)} (table pyspy_dumps)` : ""}</p>${threads}</div>`;
}

export function render(el, data) {
  let list = el.querySelector("#entity-list");
  if (!list) {
    el.innerHTML = `<div class="explorer"><aside class="panel"><input id="entity-filter" type="search" placeholder="filter actors and meshes">
      <label class="toggle"><input type="checkbox" id="explorer-system"> show system actors</label>
      <ul id="entity-list" class="entity-list"></ul></aside><article class="panel" id="entity-detail"></article></div>`;
    list = el.querySelector("#entity-list");
    const input = el.querySelector("#entity-filter");
    input.value = state.filter;
    input.addEventListener("input", () => { state.filter = input.value; list.innerHTML = entityList(state.topology); });
    const system = el.querySelector("#explorer-system");
    system.checked = state.showSystem;
    system.addEventListener("change", () => { state.showSystem = system.checked; list.innerHTML = entityList(state.topology); });
  }
  state.topology = data.topology;
  list.innerHTML = entityList(data.topology);
  const detail = el.querySelector("#entity-detail");
  if (!state.kind) {
    detail.innerHTML = `<p class="muted">Pick an actor or a mesh on the left.</p>`;
  } else if (!data.detail) {
    detail.innerHTML = `<p class="muted">${esc(data.missing || "Not in the telemetry yet.")}</p>`;
  } else {
    detail.innerHTML = data.detail.kind === "actor" ? actorDetail(data.detail) : meshDetail(data.detail);
  }
  const button = detail.querySelector("#pyspy-button");
  if (button) {
    button.addEventListener("click", async () => {
      const forId = state.id;
      button.disabled = true;
      button.textContent = "dumping…";
      let html;
      try {
        html = pyspyHtml(await postJSON(`api/dashboard/pyspy?actor=${encodeURIComponent(forId)}`));
      } catch (err) {
        html = `<p class="failed-text">py-spy: ${esc(err.message)}</p>`;
      }
      if (state.id === forId) {
        state.dumpHtml = html;
        const out = el.querySelector("#pyspy-out");
        if (out) out.innerHTML = html;
      }
      button.disabled = false;
      button.textContent = "py-spy dump";
    });
  }
  return {};
}
