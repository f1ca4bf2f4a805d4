// The Overview view: counts, health, message activity, statuses, failures, traffic.

import { activityChart, bars, clock, donut, esc, gauge, num, reasonHtml } from "./draw.js";

export const route = "api/dashboard/overview";

function card(metric, title, value, detail, bad = false) {
  return `<div class="card${bad ? " failed" : ""}" data-metric="${metric}">
    <div class="card-title">${esc(title)}</div>
    <div class="card-value">${esc(value)}</div>
    <div class="card-detail">${esc(detail)}</div></div>`;
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
    ${card("failures", "Failures", num(c.failed_actors), `failed actors · ${num(c.failed_messages)} failed handlers`, c.failed_actors > 0 || c.failed_messages > 0)}
  </section>
  <section class="grid2">
    <div class="panel" id="health"><h2>Health</h2>${gauge(d.health)}
      <p class="center health-word ${d.health >= 90 ? "ok-text" : "failed-text"}">${healthWord}</p>
      <p class="center muted">workload actors not failed × handlers not failed</p></div>
    <div class="panel" id="activity"><h2>Message activity <small class="muted">last ${Math.round(d.activity.series.length * d.activity.bucket_secs / 60)} min</small></h2>
      ${activityChart(d.activity.series, d.activity.bucket_secs)}
      <p class="muted small">Each poll of this page runs a few scans of the telemetry tables, which are messages too.</p></div>
  </section>
  <section class="grid2">
    <div class="panel" id="actor-status"><h2>Actor status <small class="muted">workload actors, current state</small></h2>${donut(d.status)}</div>
    <div class="panel" id="errors-panel"><h2>Errors &amp; failures</h2>${errors(d.errors)}</div>
  </section>
  <section class="panel" id="traffic"><h2>Traffic by endpoint <small class="muted">messages received, failed handlers in red</small></h2>
    ${bars(d.endpoints.map((e) => ({ label: e.endpoint, n: e.n, failed: e.failed })))}</section>`;
  return { health: d.health };
}
