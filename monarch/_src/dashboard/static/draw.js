// Small drawing helpers: escaping, times, and the SVG charts of the views (no library).

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

export function clock(us) {
  if (us === null || us === undefined) return "–";
  return new Date(Number(us) / 1000).toISOString().slice(11, 23);
}

export function num(n) {
  return Number(n ?? 0).toLocaleString("en-US");
}

// A CSS class for an actor status: failed, stopped, stopping, busy, idle, or unknown.
export function statusClass(status) {
  switch (status) {
    case "Failed": return "failed";
    case "Stopped": return "stopped";
    case "Stopping": return "stopping";
    case "Processing": case "Initializing": case "Created": return "busy";
    case "Idle": case "Client": return "idle";
    default: return "unknown";
  }
}

export const STATUS_COLORS = {
  failed: "#e5484d", stopped: "#8e8ea0", stopping: "#f59e0b", busy: "#3b82f6",
  idle: "#30a46c", unknown: "#5c6370",
};

// A failure reason: its last line (the exception) first, the whole text folded below.
export function reasonHtml(reason) {
  const text = String(reason ?? "").trim();
  if (!text) return "";
  const lines = text.split("\n").map((l) => l.trim()).filter(Boolean);
  const head = lines[lines.length - 1];
  if (lines.length === 1) return `<div class="reason-head">${esc(head)}</div>`;
  return `<div class="reason-head">${esc(head)}</div><details><summary>full report</summary><pre class="reason">${esc(text)}</pre></details>`;
}

export function pill(status) {
  return `<span class="pill ${statusClass(status)}">${esc(status)}</span>`;
}

// A half-circle gauge of `value` (0-100).
export function gauge(value) {
  const v = Math.max(0, Math.min(100, Number(value) || 0));
  const color = v >= 90 ? STATUS_COLORS.idle : v >= 60 ? STATUS_COLORS.stopping : STATUS_COLORS.failed;
  const r = 70, cx = 90, cy = 90;
  const end = Math.PI * (1 - v / 100);
  const x = cx + r * Math.cos(end), y = cy - r * Math.sin(end);
  const arc = v > 0
    ? `<path d="M ${cx - r} ${cy} A ${r} ${r} 0 0 1 ${x.toFixed(1)} ${y.toFixed(1)}" stroke="${color}" class="gauge-value"/>`
    : "";
  return `<svg class="gauge" viewBox="0 0 180 110" role="img" aria-label="health ${v}">
    <path d="M ${cx - r} ${cy} A ${r} ${r} 0 0 1 ${cx + r} ${cy}" class="gauge-track"/>
    ${arc}
    <text x="${cx}" y="${cy - 8}" text-anchor="middle" class="gauge-text" fill="${color}">${v}</text>
  </svg>`;
}

// An area chart of `series` ([{t_us, n}]), time along x.
export function activityChart(series, bucketSecs) {
  const w = 560, h = 160, pad = 28;
  if (!series.length) return `<p class="muted">No messages yet.</p>`;
  const max = Math.max(1, ...series.map((p) => p.n));
  const step = (w - pad * 2) / Math.max(1, series.length - 1);
  const pts = series.map((p, i) => [pad + i * step, h - pad - (p.n / max) * (h - pad * 2)]);
  const line = pts.map(([x, y], i) => `${i ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  const area = `${line} L${pts[pts.length - 1][0].toFixed(1)},${h - pad} L${pad},${h - pad} Z`;
  const perSec = (max / bucketSecs).toFixed(max / bucketSecs < 10 ? 1 : 0);
  return `<svg class="chart" viewBox="0 0 ${w} ${h}" role="img" aria-label="messages over time">
    <line x1="${pad}" y1="${h - pad}" x2="${w - pad}" y2="${h - pad}" class="axis"/>
    <line x1="${pad}" y1="${pad}" x2="${w - pad}" y2="${pad}" class="grid"/>
    <path d="${area}" class="area"/><path d="${line}" class="line"/>
    <text x="${pad}" y="${pad - 8}" class="tick">${esc(perSec)}/s</text>
    <text x="${pad}" y="${h - 8}" class="tick">${esc(clock(series[0].t_us).slice(0, 8))}</text>
    <text x="${w - pad}" y="${h - 8}" class="tick" text-anchor="end">${esc(clock(series[series.length - 1].t_us).slice(0, 8))}</text>
  </svg>`;
}

// A donut of `{status: count}`, with its legend.
export function donut(counts) {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  const total = entries.reduce((s, [, n]) => s + n, 0);
  const r = 52, c = 2 * Math.PI * r;
  let offset = 0;
  const arcs = entries.map(([status, n]) => {
    const len = (n / Math.max(1, total)) * c;
    const color = STATUS_COLORS[statusClass(status)];
    const arc = `<circle r="${r}" cx="70" cy="70" fill="none" stroke="${color}" stroke-width="18"
      stroke-dasharray="${len.toFixed(2)} ${(c - len).toFixed(2)}" stroke-dashoffset="${(-offset).toFixed(2)}"
      class="slice ${statusClass(status)}"><title>${esc(status)}: ${n}</title></circle>`;
    offset += len;
    return arc;
  }).join("");
  const legend = entries.map(([status, n]) =>
    `<li class="${statusClass(status)}"><i style="background:${STATUS_COLORS[statusClass(status)]}"></i>${esc(status)} <b>${num(n)}</b></li>`).join("");
  return `<div class="donut"><svg viewBox="0 0 140 140" role="img" aria-label="actor statuses">
      <circle r="${r}" cx="70" cy="70" fill="none" class="donut-track" stroke-width="18"/>
      <g transform="rotate(-90 70 70)">${arcs}</g>
      <text x="70" y="68" text-anchor="middle" class="donut-total">${num(total)}</text>
      <text x="70" y="86" text-anchor="middle" class="donut-label">actors</text>
    </svg><ul class="legend">${legend || "<li class='muted'>no actors yet</li>"}</ul></div>`;
}

// Horizontal bars of `[{label, n, failed}]`; the failed share drawn red.
export function bars(rows) {
  if (!rows.length) return `<p class="muted">No messages yet.</p>`;
  const max = Math.max(1, ...rows.map((r) => r.n));
  return `<table class="bars">${rows.map((r) => {
    const okW = ((r.n - r.failed) / max) * 100, badW = (r.failed / max) * 100;
    return `<tr class="${r.failed ? "has-failed" : ""}"><th title="${esc(r.label)}">${esc(r.label)}</th>
      <td class="bar"><span class="ok" style="width:${okW.toFixed(1)}%"></span><span class="bad" style="width:${badW.toFixed(1)}%"></span></td>
      <td class="n">${num(r.n)}${r.failed ? ` <span class="failed-text">(${num(r.failed)} failed)</span>` : ""}</td></tr>`;
  }).join("")}</table>`;
}
