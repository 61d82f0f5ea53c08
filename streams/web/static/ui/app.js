// gpuflow web view: polls the worker's JSON endpoints; no build step, no libraries.
"use strict";

const LIVE_EVERY_MS = 2000;
const HISTORY_EVERY_MS = 10000;
const COLOURS = ["#4c7cf0", "#1c8a4a", "#c0392b", "#b86e00", "#8e44ad", "#16a085", "#7f8c8d"];
let failures = 0;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function setStatus(state, text) {
  const status = document.getElementById("status");
  status.dataset.state = state;
  status.textContent = text;
}

async function getJSON(path) {
  const answer = await fetch(path, { cache: "no-store" });
  if (!answer.ok) throw new Error(`${path}: HTTP ${answer.status}`);
  return answer.json();
}

function renderRegions(regions) {
  const body = document.querySelector("#regions tbody");
  body.replaceChildren();
  for (const r of regions) {
    r.models.forEach((m, i) => {
      const pct = Math.round(m.allocated * 100);
      body.append(el("tr", { "data-region": r.region, "data-model": m.gpu_model },
        el("td", {}, i === 0 ? r.region : ""), el("td", {}, i === 0 ? r.owner : ""),
        el("td", {}, m.gpu_model), el("td", { class: "num" }, m.free),
        el("td", { class: "num" }, m.used), el("td", { class: "num" }, m.total),
        el("td", {}, el("span", { class: "bar", style: `width:${pct}px` }), ` ${pct}%`),
        el("td", { class: "num" }, i === 0 ? r.queue_depth : "")));
    });
  }
}

function renderDecisions(decisions) {
  const list = document.getElementById("decisions");
  list.replaceChildren();
  for (const d of decisions) {
    const where = d.outcome === "PLACED"
      ? `${d.region} ${d.gpu_model}×${d.gpu_count} on ${d.nodes.join(", ")} (score ${Math.round(d.score)})`
      : (d.region || "");
    list.append(el("li", { "data-job": d.job_id, "data-outcome": d.outcome },
      el("b", { class: d.outcome }, d.outcome), ` ${d.job_id} `, where,
      el("div", { class: "reasons" }, d.reasons.join("; "))));
  }
}

function renderQueues(queues, total) {
  const body = document.querySelector("#queues tbody");
  body.replaceChildren();
  for (const q of queues) {
    body.append(el("tr", { "data-job": q.job_id }, el("td", {}, q.region), el("td", {}, q.job_id),
      el("td", { class: "num" }, q.gpus), el("td", {}, q.models.join(", ") || "any"),
      el("td", { class: "num" }, q.priority), el("td", { class: "num" }, `${q.waiting_s} s`)));
  }
  document.getElementById("queued-total").textContent = `(${total} waiting)`;
}

let shownJob = "";

function renderJobs(jobs) {
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  for (const j of jobs) {
    const why = j.reason_code ? `${j.reason_code}: ${j.reason}` : j.reason;
    const row = el("tr", { "data-job": j.job_id, "data-state": j.state, class: "job" },
      el("td", {}, j.job_id), el("td", {}, j.tenant), el("td", {}, el("b", { class: j.state }, j.state)),
      el("td", {}, j.region || "-"), el("td", { class: "num" }, j.gpus),
      el("td", { class: "num" }, j.epoch), el("td", { class: "num" }, `${j.retries_used}/${j.retries}`),
      el("td", { class: "reasons" }, why));
    row.addEventListener("click", () => { shownJob = j.job_id; refreshJob(); });
    body.append(row);
  }
}

function renderServices(services) {
  const body = document.querySelector("#services tbody");
  body.replaceChildren();
  const rate = (x) => (x === null || x === undefined ? "-" : Number(x).toFixed(1));
  for (const s of services) {
    const zones = Object.entries(s.zones).map(([zone, roles]) =>
      `${zone}: ${Object.entries(roles).map(([role, n]) => `${n} ${role}`).join(", ")}`);
    const slo = s.slo_attainment === null ? "-" : `${(s.slo_attainment * 100).toFixed(1)}%`;
    body.append(el("tr", { "data-service": s.service, "data-serving": s.serving_target },
      el("td", {}, s.service),
      el("td", { class: "num" }, `${s.serving_target} (${s.min_replicas}-${s.max_replicas})`),
      el("td", {}, zones.join("; ") || "-"), el("td", { class: "num" }, rate(s.observed_rps)),
      el("td", { class: "num" }, rate(s.forecast_rps)),
      el("td", { class: "num" }, `${slo} ≤ ${s.slo_p99_ms} ms`),
      el("td", { class: "reasons" }, el("b", {}, s.action || "-"), ` ${s.reason}`)));
  }
}

async function refreshJob() {
  if (!shownJob) return;
  try {
    const answer = await getJSON(`api/job?job=${encodeURIComponent(shownJob)}`);
    document.getElementById("job-id").textContent = shownJob +
      (answer.job ? ` · ${answer.job.state}` : "");
    document.getElementById("job-note").textContent = answer.why || "";
    const body = document.querySelector("#epochs tbody");
    body.replaceChildren();
    for (const e of answer.epochs) {
      body.append(el("tr", { "data-epoch": e.epoch, "data-state": e.state },
        el("td", { class: "num" }, e.epoch), el("td", {}, e.state), el("td", {}, e.nodes.join(", ")),
        el("td", { class: "num" }, e.gpus), el("td", {}, e.started || "-"), el("td", {}, e.ended || "-"),
        el("td", { class: "num" }, e.exit_code === null ? "-" : e.exit_code), el("td", {}, e.cause || "-"),
        el("td", { class: "num" }, Number(e.gpu_hours).toFixed(4)), el("td", { class: "num" }, e.moves)));
    }
  } catch (err) {
    /* the live poll reports the outage */
  }
}

function lineChart(figure, series) {
  const W = 360, H = 160, P = 28;
  const names = Object.keys(series);
  figure.querySelector("svg")?.remove();
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const points = names.flatMap((n) => series[n]);
  if (points.length) {
    const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 10), y1 = Math.max(...ys, 1e-9);
    const sx = (x) => P + ((x - x0) / (x1 - x0)) * (W - 2 * P);
    const sy = (y) => H - P - (y / y1) * (H - 2 * P);
    names.forEach((name, i) => {
      const d = series[name].map((p, j) => `${j ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`);
      const path = document.createElementNS(svg.namespaceURI, "path");
      path.setAttribute("d", d.join(" ") + (series[name].length === 1 ? " h2" : ""));
      path.setAttribute("fill", "none");
      path.setAttribute("stroke", COLOURS[i % COLOURS.length]);
      path.setAttribute("stroke-width", "2");
      path.setAttribute("data-series", name);
      svg.append(path);
      const label = document.createElementNS(svg.namespaceURI, "text");
      label.setAttribute("x", String(P + (i % 3) * 110));
      label.setAttribute("y", String(12 + Math.floor(i / 3) * 12));
      label.setAttribute("fill", COLOURS[i % COLOURS.length]);
      label.textContent = name;
      svg.append(label);
    });
    const top = document.createElementNS(svg.namespaceURI, "text");
    top.setAttribute("x", "2"); top.setAttribute("y", String(P));
    top.textContent = y1.toPrecision(3);
    svg.append(top);
  }
  figure.append(svg);
}

async function refreshLive() {
  try {
    const live = await getJSON("api/live");
    failures = 0;
    renderRegions(live.regions);
    renderDecisions(live.decisions);
    renderQueues(live.queues, live.queued_total);
    renderJobs(live.jobs || []);
    renderServices(live.services || []);
    const w = live.worker;
    document.getElementById("worker").textContent =
      `${w.app_id} · partitions ${w.partitions.join(",") || "-"}${w.ready ? "" : " · rebuilding"}`;
    setStatus("live", `live · ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    failures += 1;
    setStatus("down", `worker unreachable, retrying (${failures})`);
  }
}

async function refreshHistory() {
  try {
    const history = await getJSON("api/history");
    const note = document.getElementById("history-note");
    note.textContent = history.available ? "" : `no history here: ${history.why}`;
    if (!history.available) return;
    for (const [name, series] of Object.entries(history.charts)) {
      const figure = document.getElementById(`chart-${name}`);
      if (figure) lineChart(figure, series);
    }
  } catch (err) {
    /* the live poll reports the outage; the next round retries */
  }
}

refreshLive();
refreshHistory();
setInterval(refreshLive, LIVE_EVERY_MS);
setInterval(refreshHistory, HISTORY_EVERY_MS);
setInterval(refreshJob, HISTORY_EVERY_MS);
