// The Topology view: the job as a graph (host -> proc -> actor meshes -> actors), and tables
// of its actors and meshes. Failed actors, and the meshes above them, are drawn red.

import { STATUS_COLORS, esc, num, pill, statusClass } from "./draw.js";

export const route = "api/dashboard/topology?flows=1";

const NODE_W = 176, NODE_H = 46, GAP_X = 14, GAP_Y = 64, MAX_RANKS = 12;
const state = { tab: "graph", mode: "actors", showSystem: false, last: null, el: null };

// The forest of meshes and actors the graph draws (system ones only with showSystem).
export function buildTree(data, showSystem) {
  const meshes = new Map(data.meshes.map((m) => [m.id, { ...m, kind: "mesh", children: [], actors: [] }]));
  for (const a of data.actors) {
    const mesh = meshes.get(a.mesh_id);
    if (mesh && (showSystem || !a.system || mesh.client)) mesh.actors.push({ ...a, kind: "actor", children: [] });
  }
  const roots = [];
  for (const m of meshes.values()) {
    const parent = m.parent_mesh_id !== null ? meshes.get(m.parent_mesh_id) : undefined;
    (parent ? parent.children : roots).push(m);
  }
  // A mesh that exists only for the runtime: a system mesh, or a host or proc mesh whose
  // children all are (the client's own host, the telemetry collectors' procs).
  // The client (the controller) stays: it is where the job's calls come from.
  const systemOnly = (m) => (m.system && !m.client) || ((m.class === "Host" || m.class === "Proc") &&
    m.children.length > 0 && m.children.every(systemOnly));
  const visit = (m) => {
    if (!showSystem && systemOnly(m)) return null;
    m.children = m.children.map(visit).filter((c) => c !== null);
    m.failedBelow = m.actors.filter((a) => a.status === "Failed").length +
      m.children.reduce((s, c) => s + c.failedBelow, 0);
    return m;
  };
  return roots.map(visit).filter((m) => m !== null);
}

function graphChildren(node) {
  if (node.kind !== "mesh") return [];
  if (state.mode === "meshes") return node.children;
  let ranks = [...node.actors].sort((a, b) =>
    (b.status === "Failed") - (a.status === "Failed") || a.rank - b.rank);
  const more = ranks.length - MAX_RANKS;
  ranks = ranks.slice(0, MAX_RANKS);
  const out = [...node.children, ...ranks];
  if (more > 0) out.push({ kind: "more", label: `+${more} more`, mesh_id: node.id, children: [] });
  return out;
}

function layout(roots) {
  const placed = [], edges = [];
  let nextLeaf = 0;
  const place = (node, depth) => {
    const kids = graphChildren(node);
    let x;
    if (!kids.length) {
      x = nextLeaf++ * (NODE_W + GAP_X);
    } else {
      const xs = kids.map((k) => place(k, depth + 1));
      x = (xs[0] + xs[xs.length - 1]) / 2;
      for (const k of kids) edges.push([node, k]);
    }
    node.x = x;
    node.y = depth * (NODE_H + GAP_Y);
    placed.push(node);
    return x;
  };
  for (const r of roots) place(r, 0);
  return { placed, edges, width: Math.max(1, nextLeaf) * (NODE_W + GAP_X), depth: Math.max(0, ...placed.map((n) => n.y)) };
}

function nodeSvg(n) {
  let cls, kind, label, href, color;
  if (n.kind === "actor") {
    cls = statusClass(n.status);
    kind = `actor · ${n.status}`;
    label = `${n.mesh_name ?? "?"}[${n.rank}]`;
    href = `#/explorer/actor/${n.id}`;
    color = STATUS_COLORS[cls];
  } else if (n.kind === "mesh") {
    cls = n.failedBelow ? "failed" : "mesh";
    const what = n.class === "Host" ? "host mesh" : n.class === "Proc" ? "proc mesh" : n.class.replace(/^Python<(.*)>$/, "$1");
    const shape = Object.entries(n.shape || {}).map(([k, v]) => `${k}=${v}`).join(" ");
    kind = shape ? `${what} · ${shape}` : what;
    label = n.client ? `${n.given_name} (controller)` : n.given_name;
    if (state.mode === "meshes" && n.actors.length) {
      const failed = n.actors.filter((a) => a.status === "Failed").length;
      kind = `${what} · ${n.actors.length} actor${n.actors.length === 1 ? "" : "s"}${failed ? ` · ${failed} failed` : ""}`;
    }
    href = `#/explorer/mesh/${n.id}`;
    color = n.failedBelow ? STATUS_COLORS.failed : n.class === "Host" ? "#7c8cff" : n.class === "Proc" ? "#22b8cf" : "#b197fc";
  } else {
    cls = "more"; kind = "actors"; label = n.label; href = `#/explorer/mesh/${n.mesh_id}`; color = "#5c6370";
  }
  const id = n.kind === "more" ? "" : ` data-id="${esc(n.id)}"`;
  return `<a href="${esc(href)}"><g class="node ${n.kind} ${cls}"${id} transform="translate(${n.x},${n.y})">
    <title>${esc(n.full_name ?? label)}${n.reason ? `\n${esc(n.reason)}` : ""}</title>
    <rect width="${NODE_W}" height="${NODE_H}" rx="7" stroke="${color}"/>
    <rect width="5" height="${NODE_H}" rx="2" fill="${color}" stroke="none"/>
    <text x="12" y="17" class="node-kind">${esc(kind.length > 28 ? kind.slice(0, 27) + "…" : kind)}</text>
    <text x="12" y="35" class="node-label">${esc(label.length > 22 ? label.slice(0, 21) + "…" : label)}</text>
  </g></a>`;
}

// Message counts between actors, rolled up to the nodes drawn (an actor not drawn counts for
// its mesh, or the nearest mesh above it that is drawn); pairs inside one node are dropped.
function messageEdges(data, placed) {
  const byKey = new Map(placed.filter((n) => n.kind !== "more").map((n) => [`${n.kind}:${n.id}`, n]));
  const meshes = new Map(data.meshes.map((m) => [m.id, m]));
  const actors = new Map(data.actors.map((a) => [a.id, a]));
  const nodeOf = (actorId) => {
    const a = actors.get(actorId);
    if (!a) return null;
    let n = byKey.get(`actor:${a.id}`);
    let mesh = meshes.get(a.mesh_id);
    for (let hops = 0; !n && mesh && hops < 16; hops++) {
      n = byKey.get(`mesh:${mesh.id}`);
      mesh = meshes.get(mesh.parent_mesh_id);
    }
    return n || null;
  };
  const sums = new Map();
  for (const f of data.flows || []) {
    const a = nodeOf(f.from_actor_id), b = nodeOf(f.to_actor_id);
    if (!a || !b || a === b) continue;
    const key = `${a.kind}:${a.id}>${b.kind}:${b.id}`;
    const e = sums.get(key) || { a, b, n: 0 };
    e.n += f.n;
    sums.set(key, e);
  }
  return [...sums.values()];
}

function graph(data) {
  const roots = buildTree(data, state.showSystem);
  if (!roots.length) return `<p class="muted">No meshes yet.</p>`;
  const { placed, edges, width, depth } = layout(roots);
  const pad = 12, h = depth + NODE_H + pad * 2;
  const flows = messageEdges(data, placed).map(({ a, b, n }) => {
    // From the top of one node to the top of the other, arching above both.
    const x1 = a.x + NODE_W / 2 + 12, y1 = a.y, x2 = b.x + NODE_W / 2 - 12, y2 = b.y;
    const bend = Math.max(24, Math.abs(x2 - x1) / 6);
    const w = Math.min(4, 1 + Math.log10(n));
    return `<path d="M${x1},${y1} Q${(x1 + x2) / 2},${Math.min(y1, y2) - bend} ${x2},${y2}" class="flow" stroke-width="${w.toFixed(1)}"><title>${n} message${n === 1 ? "" : "s"}</title></path>`;
  }).join("");
  const paths = edges.map(([a, b]) => {
    const x1 = a.x + NODE_W / 2, y1 = a.y + NODE_H, x2 = b.x + NODE_W / 2, y2 = b.y, my = (y1 + y2) / 2;
    const bad = b.kind === "actor" ? b.status === "Failed" : b.failedBelow > 0;
    return `<path d="M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}" class="edge${bad ? " failed" : ""}"/>`;
  }).join("");
  return `<div class="graph-scroll"><svg id="topology-graph" width="${width + pad * 2}" height="${h}"
      viewBox="${-pad} ${-pad} ${width + pad * 2} ${h}" role="img" aria-label="job topology">
    ${paths}${flows}${placed.map(nodeSvg).join("")}</svg></div>
    <p class="legend-line">${Object.entries(STATUS_COLORS).map(([k, c]) => `<span><i style="background:${c}"></i>${k}</span>`).join("")}
      <span><i class="solid"></i>hierarchy</span><span><i class="dashed"></i>messages</span></p>`;
}

function actorsTable(data) {
  const rows = data.actors.filter((a) => state.showSystem || !a.system);
  return `<table class="table" id="actors-table"><thead><tr><th>mesh</th><th>rank</th><th>status</th><th>since</th><th>full name</th><th>reason</th></tr></thead><tbody>
  ${rows.map((a) => `<tr class="${statusClass(a.status)}" data-id="${esc(a.id)}">
    <td><a href="#/explorer/mesh/${esc(a.mesh_id)}">${esc(a.mesh_name ?? "?")}</a></td><td>${esc(a.rank)}</td>
    <td>${pill(a.status)}</td><td>${esc(new Date(Number(a.status_us) / 1000).toISOString().slice(11, 19))}</td>
    <td><a href="#/explorer/actor/${esc(a.id)}">${esc(a.full_name)}</a></td>
    <td class="reason-cell" title="${esc(a.reason ?? "")}">${esc((a.reason ?? "").split("\n")[0])}</td></tr>`).join("")}
  </tbody></table>`;
}

function meshesTable(data) {
  const byMesh = new Map();
  for (const a of data.actors) {
    const s = byMesh.get(a.mesh_id) || { n: 0, failed: 0 };
    s.n += 1; s.failed += a.status === "Failed" ? 1 : 0;
    byMesh.set(a.mesh_id, s);
  }
  const names = new Map(data.meshes.map((m) => [m.id, m.given_name]));
  const rows = data.meshes.filter((m) => state.showSystem || !m.system);
  return `<table class="table" id="meshes-table"><thead><tr><th>name</th><th>class</th><th>shape</th><th>parent</th><th>actors</th><th>failed</th></tr></thead><tbody>
  ${rows.map((m) => {
    const s = byMesh.get(m.id) || { n: 0, failed: 0 };
    return `<tr class="${s.failed ? "failed" : ""}" data-id="${esc(m.id)}">
      <td><a href="#/explorer/mesh/${esc(m.id)}">${esc(m.given_name)}</a></td><td>${esc(m.class)}</td>
      <td>${esc(Object.entries(m.shape || {}).map(([k, v]) => `${k}=${v}`).join(" ") || "–")}</td>
      <td>${esc(names.get(m.parent_mesh_id) ?? "–")}</td><td>${num(s.n)}</td><td>${num(s.failed)}</td></tr>`;
  }).join("")}</tbody></table>`;
}

function draw() {
  const { el, last } = state;
  if (!el || !last) return;
  const tabs = [["graph", "Graph"], ["actors", "Actor table"], ["meshes", "Mesh table"]];
  const body = state.tab === "actors" ? actorsTable(last) : state.tab === "meshes" ? meshesTable(last) : graph(last);
  el.innerHTML = `<div class="toolbar">
      ${tabs.map(([t, label]) => `<button type="button" class="tab${state.tab === t ? " active" : ""}" data-tab="${t}">${label}</button>`).join("")}
      ${state.tab === "graph" ? `<span class="sep"></span>${[["actors", "Actors view"], ["meshes", "Meshes view"]].map(([m, label]) => `<button type="button" class="mode${state.mode === m ? " active" : ""}" data-mode="${m}">${label}</button>`).join("")}` : ""}
      <label class="toggle"><input type="checkbox" id="show-system"${state.showSystem ? " checked" : ""}> show system actors</label>
      <span class="muted">${num(last.meshes.length)} meshes · ${num(last.actors.length)} actors</span>
    </div><div class="panel" id="topology-body">${body}</div>`;
  el.querySelectorAll("button.tab").forEach((b) => b.addEventListener("click", () => { state.tab = b.dataset.tab; draw(); }));
  el.querySelectorAll("button.mode").forEach((b) => b.addEventListener("click", () => { state.mode = b.dataset.mode; draw(); }));
  el.querySelector("#show-system").addEventListener("change", (e) => { state.showSystem = e.target.checked; draw(); });
}

export function setTab(tab) {
  if (["graph", "actors", "meshes"].includes(tab)) state.tab = tab;
}

export function render(el, d) {
  // Keep the scroll position of the graph across polls.
  const scroller = el.querySelector(".graph-scroll");
  const scroll = scroller ? [scroller.scrollLeft, scroller.scrollTop] : null;
  state.el = el;
  state.last = d;
  draw();
  const again = el.querySelector(".graph-scroll");
  if (again && scroll) [again.scrollLeft, again.scrollTop] = scroll;
  return {};
}
