// The job page (/jobs/{job}): fetches the job's graph payload once per
// view (a view is the first load, a zoom, a reset or a live refresh; the
// number of points stays the same for all of them), and wires the charts,
// the peak summary, the picked task's events and the task table to it.
// window.peakline exposes the page's state for tests and curious people.

import { ChartStack } from './chart.js';
import { TaskTable } from './tasks.js';
import { DEFAULT_RUNS, historyURL, templateURL, usualOf, usualSummary, jobRegressions, regressionText } from './history.js';
import {
  RESOURCES, RESOURCE_ORDER, fmtValue, fmtClock, fmtDate, fmtDateTime, fmtZone, fmtDuration, fmtCount, taskEvents, el, copyText, apiError, pathSegment, taskLabel,
} from './format.js';
import { renderJobSizing } from './rightsize.js';
import { isLive, stateBadge } from './jobstate.js';

// A live job (isLive: running, by its status) is refreshed this often.
const REFRESH_MS = 5_000;
const MAX_POINTS = 10_000;
const MIN_POINTS = 2;

const $ = (id) => document.getElementById(id);
const jobId = decodeURIComponent(location.pathname.replace(/^\/jobs\//, '').replace(/\/+$/, ''));

const debug = {
  jobId, points: 0, requests: 0, loads: 0, ready: false, live: false, error: null,
  window: null, series: {}, tasks: 0, lastPick: null,
  template: null, history: null, focus: null,
};
window.peakline = debug;

const state = {
  points: 0,
  from: null, // zoom window in unix ms; null when showing the whole job
  to: null,
  full: null, // the whole job's window, once seen
  jobStart: null,
  payload: null,
  byStart: [], // payload tasks by start
  byCounter: new Map(),
  unknown: [], // payload tasks with counter 0, by start
  controller: null,
  timer: 0,
  // The job's template ({id, name}) and its history, fetched once.
  template: null,
  history: null, // {usual: Map counter → usualOf entry, regressions} once loaded
  historyAsked: false,
  // ?task=COUNTER (a link from the template page): the task to zoom to
  // on the first load and to mark while it is in the payload.
  focus: 0,
  focused: false, // zoomed to it (or it needed no zoom)
  focusShown: false, // marked and picked once: later views leave the user's choices alone
};

const zoomed = () => state.from !== null;

// taskAt finds the task a point belongs to: by counter when it is known,
// else by time among the tasks whose counter is unknown.
function taskAt(counter, t) {
  if (counter > 0 && state.byCounter.has(counter)) return state.byCounter.get(counter);
  const list = counter > 0 ? state.byStart : state.unknown;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (list[mid].start <= t) lo = mid + 1; else hi = mid;
  }
  const task = list[lo - 1];
  return task && t <= task.end ? task : null;
}

const events = (task) => taskEvents(task, state.payload && state.payload.events_url, jobId, state.payload && state.payload.job_url);

const charts = new ChartStack($('charts'), {
  taskAt,
  events,
  pick,
  zoom: (fromMs, toMs) => setWindow(fromMs, toMs),
  zoomStep,
  reset: () => setWindow(null, null),
  hoverTask: (task) => table.markTask(task),
});
const table = new TaskTable($('tasks'), {
  events,
  hoverTask: (task) => charts.highlightTask(task),
});

// pick shows the task of a point (or of a peak, or of a strip band) and
// opens its job events when a link template is configured.
function pick(info) {
  const ev = events(info.task);
  showDetail(info, ev);
  debug.lastPick = { task: info.task ? info.task.name : null, counter: info.counter, url: ev.url || null, path: ev.path || null };
  if (ev.url) window.open(ev.url, '_blank', 'noopener');
}

function eventsBlock(ev, task) {
  if (!task) return el('p', {}, 'No task is known for this time.');
  if (!ev.known) {
    return el('p', { class: 'unknown' }, 'Events unknown: no job events were recorded for this task, so its samples were matched by time (',
      `${fmtClock(task.start, true)} – ${fmtClock(task.end, true)}).`);
  }
  if (ev.url) {
    return el('p', {}, el('a', { href: ev.url, target: '_blank', rel: 'noopener', class: 'events-link button' },
      ev.output ? `Open the AWX job output (events ${ev.gte}–${ev.lte}) ↗` : `Open job events ${ev.gte}–${ev.lte} ↗`));
  }
  const btn = el('button', { type: 'button', class: 'copy' }, 'Copy');
  btn.addEventListener('click', async () => { btn.textContent = (await copyText(ev.path)) ? 'Copied' : 'Copy failed'; });
  return el('p', {}, `Job events ${ev.gte}–${ev.lte} (AWX API): `, el('code', { class: 'events-path' }, ev.path), ' ', btn,
    el('span', { class: 'muted' }, ' (start the server with --events-url to make this a link)'));
}

function showDetail(info, ev) {
  const task = info.task;
  const box = $('detail');
  const what = info.resource
    ? el('p', {}, el('span', { class: `swatch ${info.resource}` }), `${RESOURCES[info.resource].label} ${fmtValue(info.resource, info.v)}${info.peak ? ' (peak)' : ''} at ${fmtClock(info.t, true)}`,
      el('span', { class: 'muted' }, ` +${fmtDuration(info.t - state.jobStart)}`))
    : info.note ? el('p', { class: 'muted' }, info.note) : null;
  const close = el('button', { type: 'button', class: 'close', 'aria-label': 'close' }, '×');
  close.addEventListener('click', () => { box.hidden = true; });
  box.replaceChildren(...[close,
    el('h2', {}, task ? taskLabel(task) : 'No task', task && task.counter > 0 ? el('span', { class: 'badge' }, `counter ${task.counter}`) : null),
    what,
    task ? el('p', { class: 'muted' }, `Task ran ${fmtClock(task.start, true)} – ${fmtClock(task.end, true)} (${fmtDuration(task.end - task.start)})`) : null,
    eventsBlock(ev, task)].filter(Boolean)); // replaceChildren would print a null
  box.hidden = false;
}

// choosePoints sizes the payload to the chart: two points per CSS pixel.
function choosePoints() {
  const w = charts.plotWidth();
  return Math.max(MIN_POINTS, Math.min(MAX_POINTS, Math.round(2 * w)));
}

function setWindow(fromMs, toMs, { push = true } = {}) {
  if (fromMs === null && !zoomed()) return;
  if (fromMs !== null && state.full && fromMs <= state.full.from && toMs >= state.full.to) { fromMs = null; toMs = null; }
  state.from = fromMs;
  state.to = fromMs === null ? null : Math.max(toMs, fromMs + 1);
  if (push) {
    const u = new URL(location.href);
    u.search = '';
    if (zoomed()) { u.searchParams.set('from', String(state.from)); u.searchParams.set('to', String(state.to)); }
    history.pushState({ from: state.from, to: state.to }, '', u);
  }
  load();
}

// zoomStep scales the shown window by factor around centerMs (keyboard + and -).
function zoomStep(factor, centerMs) {
  const p = state.payload;
  if (!p) return;
  const span = Math.max(2, (p.to - p.from) * factor);
  let from = Math.round(centerMs - span / 2);
  let to = Math.round(centerMs + span / 2);
  if (state.full) {
    if (from < state.full.from) { to += state.full.from - from; from = state.full.from; }
    if (to > state.full.to) { from -= to - state.full.to; to = state.full.to; }
    from = Math.max(from, state.full.from);
  }
  setWindow(from, to);
}

function readWindowFromURL() {
  const q = new URLSearchParams(location.search);
  const from = Number.parseInt(q.get('from'), 10);
  const to = Number.parseInt(q.get('to'), 10);
  if (Number.isFinite(from) && Number.isFinite(to) && from <= to) { state.from = from; state.to = to; } else { state.from = null; state.to = null; }
}

function setStatus(text, kind = '') {
  const s = $('status');
  s.className = `status ${kind}`;
  s.replaceChildren(...(Array.isArray(text) ? text : [text]));
  s.hidden = !text;
}

async function load() {
  clearTimeout(state.timer);
  if (state.controller) state.controller.abort();
  const ctl = new AbortController();
  state.controller = ctl;
  const q = new URLSearchParams({ points: String(state.points) });
  if (zoomed()) { q.set('from', String(state.from)); q.set('to', String(state.to)); }
  debug.requests++;
  document.body.classList.add('loading');
  const began = performance.now();
  let payload;
  try {
    const resp = await fetch(`/api/v1/jobs/${pathSegment(jobId)}/graph?${q}`, { signal: ctl.signal, headers: { Accept: 'application/json' } });
    if (!resp.ok) {
      const msg = await apiError(resp);
      showError(resp.status === 404
        ? [`No job “${jobId}” in this Peakline: it was not imported yet, or it was deleted. `, el('a', { href: '/' }, 'See the jobs it holds.')]
        : `Could not load the graph: ${msg}`);
      return;
    }
    payload = await resp.json();
  } catch (err) {
    if (err.name === 'AbortError') return;
    showError(`Could not load the graph: ${err.message}. Is the server running?`);
    if (debug.live) state.timer = setTimeout(load, REFRESH_MS);
    return;
  } finally {
    if (state.controller === ctl) document.body.classList.remove('loading');
  }
  if (state.controller !== ctl) return;
  const fetched = performance.now();
  show(payload);
  debug.timing = { fetchMs: Math.round(fetched - began), renderMs: Math.round(performance.now() - fetched) };
}

function showError(msg) {
  debug.error = Array.isArray(msg) ? msg.map((m) => (typeof m === 'string' ? m : m.textContent)).join('') : msg;
  setStatus(msg, 'error');
  if (!state.payload) document.body.classList.add('no-job'); // keep what a refresh showed before
  debug.ready = true;
}

function show(p) {
  state.payload = p;
  const tasks = p.tasks.slice().sort((a, b) => a.start - b.start || a.counter - b.counter);
  state.byStart = tasks;
  state.byCounter = new Map(tasks.filter((t) => t.counter > 0).map((t) => [t.counter, t]));
  state.unknown = tasks.filter((t) => !(t.counter > 0));
  if (!zoomed()) state.full = { from: p.from, to: p.to };
  if (state.jobStart === null || !zoomed()) state.jobStart = state.full ? state.full.from : tasks.reduce((m, t) => Math.min(m, t.start), p.from);

  let lastSample = null;
  for (const s of p.series) if (s.t.length) lastSample = Math.max(lastSample ?? -Infinity, s.t[s.t.length - 1]);
  const live = !zoomed() && isLive(p.status, Math.max(lastSample ?? -Infinity, p.to));

  renderHeader(p, live);
  renderPeaks(p);
  charts.setView({ from: p.from, to: p.to, series: p.series, tasks, jobStart: state.jobStart, pressure: p.pressure });
  if (state.history) table.usual = usualFor; // drawn by setTasks
  table.setTasks(p.tasks, RESOURCE_ORDER.filter((r) => p.series.some((s) => s.resource === r)));
  if (p.template_id && !state.template) state.template = { id: p.template_id, name: p.template_name || '' };
  renderTemplate();
  if (state.template && !state.historyAsked) loadHistory();
  if (state.focus && !state.focusShown) showFocus();
  $('reset').disabled = !zoomed();
  document.body.classList.toggle('no-samples', p.series.length === 0);
  document.body.classList.remove('no-job');
  if (p.series.length === 0) {
    setStatus(zoomed()
      ? ['No samples in this window. ', el('button', { type: 'button', onclick: () => setWindow(null, null) }, 'Show the whole job')]
      : live
        ? 'This job has no samples yet: nothing to plot. Its tasks show up here as their samples arrive.'
        : 'This job has no samples: nothing to plot. Was resource profiling on for it?', 'empty');
  } else {
    setStatus('');
  }

  Object.assign(debug, {
    ready: true, error: null, loads: debug.loads + 1, live, status: p.status, end: p.end ?? null, points: state.points,
    window: { from: p.from, to: p.to, zoomed: zoomed() }, tasks: p.tasks.length,
    series: Object.fromEntries(p.series.map((s) => [s.resource, { points: s.t.length, peak: s.peak }])),
  });
  debug.live = live;
  if (live) state.timer = setTimeout(refresh, REFRESH_MS);
}

// refresh reloads a live job unless the page is hidden or a drag is on.
function refresh() {
  if (document.hidden || charts.drag) { state.timer = setTimeout(refresh, REFRESH_MS); return; }
  load();
}

function renderHeader(p, live) {
  $('job-id').textContent = jobId;
  $('live').hidden = !live;
  renderState(p);
  const raw = p.series.map((s) => `${RESOURCES[s.resource].label} ${fmtCount(s.raw_samples)}`).join(', ');
  const span = state.full || { from: p.from, to: p.to };
  const parts = [
    `${fmtDate(span.from)} ${fmtClock(span.from)} – ${fmtClock(span.to)} ${fmtZone(span.from)}`,
    `${fmtDuration(span.to - span.from)}`,
    raw ? `raw samples ${raw}` : 'no samples',
    `up to ${fmtCount(state.points)} points per chart (${p.algorithm})`,
  ];
  $('job-meta').textContent = parts.join(' · ');
  renderMeasured(p.measured);
  renderJobSizing($('job-sizing'), jobId, p.sizing, new Map(p.tasks.map((t) => [t.counter, t.name])));
  $('window-label').textContent = zoomed()
    ? `Window ${fmtClock(p.from, true)} – ${fmtClock(p.to, true)} (${fmtDuration(p.to - p.from)}) of the job`
    : 'Whole job';
  document.title = `Job ${jobId} · Peakline`;
}

// renderState shows the job's state beside its id, and when it ended
// (the end its status gives), or that it runs, or, for a status nobody
// reported, when its data last came.
function renderState(p) {
  const box = $('job-state');
  let when;
  if (p.end) when = `ended ${fmtDateTime(p.end)}`;
  else if (p.status === 'running') when = state.full ? `since ${fmtDateTime(state.full.from)}` : '';
  else if (p.status === 'unknown' || !p.status) when = state.full ? `status not reported · data until ${fmtDateTime(state.full.to)}` : 'status not reported';
  box.replaceChildren(stateBadge(p.status, p.reported_status), when ? el('span', { class: 'state-when muted' }, ` ${when}`) : '');
  box.hidden = false;
}

// renderMeasured notes a job measured from its process tree (it had no
// cgroup of its own): its numbers are sums over its processes, which
// read differently from a cgroup's. A cgroup job (or one whose sender
// did not say) gets no note.
function renderMeasured(measured) {
  const box = $('job-measured');
  box.hidden = measured !== 'process-tree';
  box.textContent = box.hidden ? ''
    : 'Measured from the job\'s process tree (no cgroup of its own): memory is summed RSS, which counts shared pages once per process; CPU misses processes that exited unreaped.';
}

// renderPeaks answers the page's question in one look: for each resource,
// its peak, the task it happened in and that task's events.
function renderPeaks(p) {
  const cards = [];
  for (const r of RESOURCE_ORDER) {
    const s = p.series.find((x) => x.resource === r);
    if (!s || !s.peak) continue;
    const task = taskAt(s.peak.counter, s.peak.t);
    const ev = events(task);
    let link;
    if (!ev.known) link = el('span', { class: 'muted' }, 'events unknown');
    else if (ev.url) link = el('a', { href: ev.url, target: '_blank', rel: 'noopener', class: 'events-link', title: ev.output ? 'in the AWX job output' : null }, `events ${ev.gte}–${ev.lte} ↗`);
    else link = el('button', { type: 'button', class: 'linkish', onclick: () => pick({ resource: r, ...s.peak, task, peak: true }) }, `events ${ev.gte}–${ev.lte}`);
    cards.push(el('div', { class: `peak-card ${r}`, dataset: { resource: r } },
      el('div', { class: 'peak-head' }, el('span', { class: `swatch ${r}` }), `Peak ${RESOURCES[r].label}`),
      el('div', { class: 'peak-value' }, fmtValue(r, s.peak.v)),
      el('div', { class: 'peak-task', title: task ? task.name : '' }, task ? taskLabel(task) : 'no task known'),
      el('div', { class: 'peak-foot' }, `at ${fmtClock(s.peak.t)} (+${fmtDuration(s.peak.t - state.jobStart)}) · `, link)));
  }
  $('peaks').replaceChildren(...cards);
  $('peaks').hidden = cards.length === 0;
}

// renderTemplate names the job's template in the header, with a link
// to its page and this run's regressions once the history is in.
function renderTemplate() {
  const box = $('job-template');
  if (!state.template) { box.hidden = true; return; }
  const t = state.template;
  const parts = [el('span', { class: 'muted' }, 'Template '),
    el('a', { href: templateURL(t.id), class: 'template-link' }, t.name || t.id), el('span', { class: 'muted' }, ` (${t.id})`)];
  const regs = state.history ? state.history.regressions : [];
  if (regs.length) {
    parts.push(' · ', el('span', { class: 'regression-text' }, `${regs.length} regression${regs.length === 1 ? '' : 's'}: `),
      regs.map(({ task, reg }) => `${task.name} ${regressionText(reg)}`).join(', '));
  } else if (state.history) {
    parts.push(el('span', { class: 'muted' }, state.history.enough ? ' · no regressions in this run' : ` · too few runs up to this one to compare (${state.history.runs} of ${state.history.minRuns} needed)`));
  }
  box.replaceChildren(...parts);
  box.hidden = false;
}

// loadHistory fetches the template's history once and fills the task
// table's "vs usual" column. A failure leaves the column out: the graph
// is what the page is for.
async function loadHistory() {
  state.historyAsked = true;
  let h;
  try {
    const resp = await fetch(historyURL(state.template.id, DEFAULT_RUNS, jobId), { headers: { Accept: 'application/json' } });
    if (!resp.ok) throw new Error(await apiError(resp));
    h = await resp.json();
  } catch (err) {
    debug.history = { error: err.message };
    return;
  }
  state.history = {
    usual: usualOf(h, jobId),
    regressions: jobRegressions(h, jobId),
    enough: (h.runs || []).length > (h.min_others ?? 3),
    runs: (h.runs || []).length,
    minRuns: (h.min_others ?? 3) + 1,
  };
  if (!state.template.name && h.template_name) state.template.name = h.template_name;
  debug.history = { runs: (h.runs || []).length, tasks: state.history.usual.size, regressions: state.history.regressions.length };
  renderTemplate();
  table.setUsual(usualFor);
  // The focused task's detail names the change, unless another was picked since.
  if (state.focusShown && debug.lastPick === null && !$('detail').hidden) showFocus();
}

// usualFor is the "vs usual" summary of one task of the payload.
function usualFor(task) {
  if (!state.history || !(task.counter > 0)) return null;
  return usualSummary(state.history.usual.get(task.counter));
}

// showFocus zooms to the ?task= task on the first load (the next load
// then marks it) and marks it in the table, the charts and the detail.
// It returns whether the task is in this payload.
function showFocus() {
  const task = state.byCounter.get(state.focus);
  debug.focus = { counter: state.focus, found: !!task, name: task ? task.name : null };
  if (!task) return false;
  if (!state.focused) {
    state.focused = true;
    if (!zoomed()) {
      const pad = Math.max(500, Math.round((task.end - task.start) * 0.15));
      const from = Math.max(state.full.from, task.start - pad);
      const to = Math.min(state.full.to, task.end + pad);
      if (from > state.full.from || to < state.full.to) {
        state.from = from;
        state.to = to;
        const u = new URL(location.href);
        u.searchParams.set('from', String(from));
        u.searchParams.set('to', String(to));
        history.replaceState({ from, to }, '', u);
        load();
        return true;
      }
    }
  }
  table.markTask(task);
  charts.highlightTask(task);
  const usual = usualFor(task);
  showDetail({ task, note: usual ? `Against the template's other runs: ${usual.text}.` : null }, events(task));
  state.focusShown = true;
  return true;
}

function start() {
  if (!jobId) { showError('No job id in the address: open a job from the list.'); return; }
  $('job-id').textContent = jobId;
  document.title = `Job ${jobId} · Peakline`;
  readWindowFromURL();
  const focus = Number.parseInt(new URLSearchParams(location.search).get('task'), 10);
  if (Number.isInteger(focus) && focus > 0) state.focus = focus;
  state.points = choosePoints();
  debug.points = state.points;
  $('reset').addEventListener('click', () => setWindow(null, null));
  window.addEventListener('popstate', () => { readWindowFromURL(); load(); });
  document.addEventListener('visibilitychange', () => { if (!document.hidden && debug.live) { clearTimeout(state.timer); load(); } });
  load();
}

start();
