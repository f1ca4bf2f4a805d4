// The Overview view: counts, health, message activity, statuses, failures, traffic.

import { activityChart, bars, clock, donut, esc, gauge, num, reasonHtml } from "./draw.js";

export const route = "api/dashboard/overview";

function card(metric, title, value, detail, bad = false) {
  return `<div class="card${bad ? " failed" : ""}" data-metric="${metric}">
    <div class="card-title">${esc(title)}</div>
    <div class="card-value">${esc(value)}</div>
    <div class="card-detail">${esc(detail)}</div></div>`;
}

function stoppedList(list) {
  if (!list.length) return "";
  return `<h3>Stopped</h3><ul class="stopped-list" id="stopped">${list.map((s) => `
    <li data-actor="${esc(s.actor_id)}"><a href="#/explorer/actor/${esc(s.actor_id)}">${esc(s.mesh ?? "?")}[${esc(s.rank)}]</a>
      <span class="muted">stopped at ${esc(clock(s.at_us))}${s.reason ? `: ${esc(s.reason)}` : ""}</span></li>`).join("")}</ul>`;
}

function lifecycle(l) {
  const total = l.queued + l.active + l.complete + l.failed;
  const part = (name, n) => `<span class="seg ${name}" style="width:${((n / Math.max(1, total)) * 100).toFixed(2)}%" title="${name}: ${n}"></span>`;
  return `<div class="lifecycle" id="lifecycle"><div class="seg-bar">${part("complete", l.complete)}${part("failed", l.failed)}${part("active", l.active)}${part("queued", l.queued)}</div>
    <p class="chips"><span class="chip complete">complete <b>${num(l.complete)}</b></span><span class="chip failed">failed <b>${num(l.failed)}</b></span>
    <span class="chip active">active <b>${num(l.active)}</b></span><span class="chip queued">queued <b>${num(l.queued)}</b></span></p>
    <p class="muted small">Each message's handler: queued, then active, then complete or failed (an exception). Active and queued ones are still running, not failures.</p></div>`;
}

function errors(list) {
  if (!list.length) return `<p class="ok-text" id="no-errors">No failed actors.</p>`;
  return `<ul class="errors" id="errors">${list.map((e) => `
    <li class="failed" data-actor="${esc(e.actor_id)}">
      <a href="#/explorer/actor/${esc(e.actor_id)}"><b>${esc(e.mesh ?? "?")}[${esc(e.rank)}]</b></a>
      <span class="muted">failed at ${esc(clock(e.at_us))}</span>
      ${reasonHtml(e.reason)}</li>`).join("")}</ul>`;
}

export function render(el, d) {
  const c = d.counts;
  const healthWord = d.health >= 90 ? "Healthy" : d.health >= 60 ? "Degraded" : "Unhealthy";
  el.innerHTML = `
  <section class="cards">
    ${card("host_meshes", "Host meshes", num(c.host_meshes), `${num(c.proc_meshes)} proc meshes`)}
    ${card("actor_meshes", "Actor meshes", num(c.actor_meshes), "of every class")}
    ${card("actors", "Actors", num(c.actors), `${num(c.workload_actors)} workload · ${num(c.system_actors)} system`)}
    ${card("rate", "Messages/s", num(d.rate_per_s), `${num(c.messages)} messages in all`)}
    ${card("success", "Handler success", `${d.success_pct}%`, `${num(d.lifecycle.active + d.lifecycle.queued)} in progress`, d.lifecycle.failed > 0)}
    ${card("failures", "Failures", num(c.failed_actors), `failed actors · ${num(c.failed_messages)} failed handlers`, c.failed_actors > 0 || c.failed_messages > 0)}
  </section>
  <section class="grid2">
    <div class="panel" id="health"><h2>Health</h2>${gauge(d.health)}
      <p class="center health-word ${d.health >= 90 ? "ok-text" : d.health >= 60 ? "warn-text" : "failed-text"}">${healthWord}</p>
      <p class="center muted">workload actors not failed × handlers not failed</p></div>
    <div class="panel" id="activity"><h2>Message activity <small class="muted">last ${Math.round(d.activity.series.length * d.activity.bucket_secs / 60)} min</small></h2>
      ${activityChart(d.activity.series, d.activity.bucket_secs)}
      <p class="muted small">Each poll of this page runs a few scans of the telemetry tables, which are messages too.</p></div>
  </section>
  <section class="grid2">
    <div class="panel" id="actor-status"><h2>Actor status <small class="muted">workload actors, current state</small></h2>${donut(d.status)}</div>
    <div class="panel" id="errors-panel"><h2>Errors &amp; failures</h2>${errors(d.errors)}${stoppedList(d.stopped)}</div>
  </section>
  <section class="panel" id="traffic"><h2>Message traffic <small class="muted">handler lifecycle, then messages received by endpoint (failed handlers in red)</small></h2>
    ${lifecycle(d.lifecycle)}
    ${bars(d.endpoints.map((e) => ({ label: e.endpoint, n: e.n, failed: e.failed })))}</section>`;
  return { health: d.health };
}
