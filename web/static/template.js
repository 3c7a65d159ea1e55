// The template page (/templates/{id}): every task of a job template
// against its own history. One request (GET /api/v1/templates/{id}/history)
// gives the runs of the window and, per task, its values in each run and
// the regressions the server's rule flagged. Each task is a row with a
// small chart per compared metric: the run is the x axis (oldest left,
// the same columns in every chart), the value the y; a regression is a
// red ring with its factor, and every point links to that run's job page
// focused on the task. window.peakline exposes the page's state for tests.

import { el, svg, fmtDateTime, fmtDuration, fmtCount, apiError, pathSegment } from './format.js';
import {
  METRICS, DEFAULT_RUNS, metricValue, historyURL, jobTaskURL, regressionText, regressionDetail, median, fmtFactor,
  isRegression,
} from './history.js';
import { loadRightsize } from './rightsize.js';

// Runs a page may ask for with ?last=N (the API answers at most 100).
const MAX_RUNS = 100;
// One chart, in CSS px: the points sit inside the padding.
const CHART = { w: 176, h: 54, padX: 9, padTop: 9, padBottom: 6, r: 3.2, rRegression: 5.5 };

const $ = (id) => document.getElementById(id);
const templateId = decodeURIComponent(location.pathname.replace(/^\/templates\//, '').replace(/\/+$/, ''));

const debug = { templateId, ready: false, error: null, runs: 0, tasks: 0, regressions: 0, requests: 0 };
window.peakline = debug;

function lastParam() {
  const n = Number(new URLSearchParams(location.search).get('last'));
  return Number.isInteger(n) && n >= 1 && n <= MAX_RUNS ? n : DEFAULT_RUNS;
}

function setStatus(text, kind = '') {
  const s = $('status');
  s.className = `status ${kind}`;
  s.replaceChildren(...(Array.isArray(text) ? text : [text]));
  s.hidden = !text;
}

function showError(msg) {
  debug.error = Array.isArray(msg) ? msg.map((m) => (typeof m === 'string' ? m : m.textContent)).join('') : msg;
  setStatus(msg, 'error');
  debug.ready = true;
}

async function load() {
  debug.requests++;
  let h;
  try {
    const resp = await fetch(historyURL(templateId, lastParam()), { headers: { Accept: 'application/json' } });
    if (!resp.ok) {
      const msg = await apiError(resp);
      showError(resp.status === 404
        ? [`No runs of template “${templateId}” in this Peakline. `, el('a', { href: '/' }, 'See the jobs it holds.')]
        : `Could not load the template's history: ${msg}`);
      return;
    }
    h = await resp.json();
  } catch (err) {
    showError(`Could not load the template's history: ${err.message}. Is the server running?`);
    return;
  }
  show(h);
}

function show(h) {
  const runs = h.runs || [];
  const tasks = h.tasks || [];
  const name = h.template_name || `Template ${templateId}`;
  $('template-name').textContent = name;
  // A template without a name is titled by its id alone.
  $('template-id').textContent = h.template_name ? `template ${h.template_id || templateId}` : '';
  document.title = `${name} · Peakline`;
  const nRegressions = tasks.reduce((n, t) => n + (t.regressions || []).filter(isRegression).length, 0);
  const meta = [`${fmtCount(runs.length)} run${runs.length === 1 ? '' : 's'}${runs.length >= lastParam() ? ` (the last ${lastParam()})` : ''}`];
  if (runs.length) meta.push(`${fmtDateTime(runs[0].start)} – ${fmtDateTime(runs[runs.length - 1].start)}`);
  meta.push(`${fmtCount(tasks.length)} tasks${h.tasks_omitted ? ` (${fmtCount(h.tasks_omitted)} more not shown)` : ''}`);
  meta.push(nRegressions ? `${fmtCount(nRegressions)} regression${nRegressions === 1 ? '' : 's'}` : 'no regressions');
  $('template-meta').textContent = meta.join(' · ');
  if (runs.length === 0) {
    setStatus([`No runs of template “${templateId}” in this Peakline. `, el('a', { href: '/' }, 'See the jobs it holds.')], 'empty');
  } else if (runs.length < (h.min_others ?? 3) + 1) {
    setStatus(fewRunsText(runs.length, h.runs_in_all ?? runs.length, h.min_others ?? 3), 'empty');
  } else {
    setStatus('');
  }
  renderRegressions(tasks);
  renderRuns(runs, tasks);
  renderTasks(runs, tasks);
  Object.assign(debug, { ready: true, error: null, runs: runs.length, tasks: tasks.length, regressions: nRegressions });
}

// fewRunsText says why nothing can be flagged with shown runs in the
// window of the inAll the template has: the window is small (a link
// widens it), or the template has too few runs so far.
function fewRunsText(shown, inAll, minOthers) {
  const need = `Regressions are judged against at least ${minOthers} other runs`;
  if (inAll > shown) {
    const u = new URL(location.href);
    u.searchParams.set('last', String(Math.min(MAX_RUNS, inAll)));
    return [`${need}: this window shows only the last ${shown} of the template's ${fmtCount(inAll)} runs (?last=${lastParam()}). `,
      el('a', { href: u.pathname + u.search }, `Show the last ${Math.min(MAX_RUNS, inAll)}`), '.'];
  }
  return `${need}: this template has ${shown} run${shown === 1 ? '' : 's'} so far.`;
}

// renderRegressions lists every flagged value, newest run first: the
// page's answer at a glance.
function renderRegressions(tasks) {
  const items = [];
  for (const t of tasks) {
    for (const reg of t.regressions || []) {
      if (!isRegression(reg)) continue; // contended: other work on the node
      const at = (t.runs || []).find((r) => r.job_id === reg.job_id);
      items.push({ t, reg, at });
    }
  }
  const box = $('regressions');
  box.hidden = items.length === 0;
  if (!items.length) { box.replaceChildren(); return; }
  items.sort((a, b) => (b.at ? b.at.start : 0) - (a.at ? a.at.start : 0));
  box.replaceChildren(
    el('h2', {}, `Regressions (${fmtCount(items.length)})`),
    el('ul', {}, ...items.map(({ t, reg, at }) => el('li', { dataset: { job: reg.job_id, metric: reg.metric, task: t.key } },
      el('a', { href: jobTaskURL(reg.job_id, at ? at.counter : 0) }, `job ${reg.job_id}`), ' · ',
      el('span', { class: 'task-name' }, t.name || '(unnamed task)'), ' · ',
      el('strong', { class: 'regression-text' }, regressionText(reg)),
      el('span', { class: 'muted' }, ` — ${regressionDetail(reg).replace(/^[^:]*: /, '')}`)))));
}

function renderRuns(runs, tasks) {
  const perJob = new Map();
  for (const t of tasks) for (const reg of (t.regressions || []).filter(isRegression)) perJob.set(reg.job_id, (perJob.get(reg.job_id) || 0) + 1);
  const rows = runs.map((r, i) => {
    const n = perJob.get(r.job_id) || 0;
    return el('tr', { dataset: { job: r.job_id }, class: n ? 'regressed' : '' },
      el('td', { class: 'num' }, String(i + 1)),
      el('td', { class: 'name' }, el('a', { href: `/jobs/${pathSegment(r.job_id)}` }, r.job_id)),
      el('td', { class: 'time' }, r.start ? fmtDateTime(r.start) : '–'),
      el('td', { class: 'num' }, r.start && r.end ? fmtDuration(r.end - r.start) : '–'),
      el('td', {}, r.status ? el('span', { class: `run-status ${r.status}` }, r.status) : '–'),
      el('td', { class: 'num' }, n ? el('span', { class: 'badge regression' }, `${n} regression${n === 1 ? '' : 's'}`) : el('span', { class: 'muted' }, 'none')));
  });
  const table = el('table', { class: 'runs' },
    el('caption', {}, el('span', { class: 'caption-title' }, `Runs (${fmtCount(runs.length)})`), el('span', { class: 'muted' }, ' oldest first: run n is the n-th point from the left in every chart below · '),
      el('a', { href: `/?template=${encodeURIComponent(templateId)}` }, 'all jobs of this template'),
      el('span', { class: 'muted' }, ' · compare the last '),
      ...[10, 20, 50, 100].flatMap((n, i) => [i ? ' ' : null, n === lastParam()
        ? el('strong', {}, String(n))
        : el('a', { href: `?last=${n}`, class: 'last-n' }, String(n))]).filter(Boolean),
      el('span', { class: 'muted' }, ' runs')),
    el('thead', {}, el('tr', {}, ...['Run', 'Job', 'Started', 'Duration', 'Status', 'Regressions'].map((h, i) => el('th', { scope: 'col', class: [0, 3, 5].includes(i) ? 'num' : '' }, h)))),
    el('tbody', {}, ...rows));
  $('runs').replaceChildren(table);
  $('runs').hidden = runs.length === 0;
}

function renderTasks(runs, tasks) {
  const head = el('tr', {}, el('th', { scope: 'col' }, 'Task'),
    ...METRICS.map((m) => el('th', { scope: 'col', class: `metric ${m.resource || 'duration'}` }, m.resource ? el('span', { class: `swatch ${m.resource}` }) : null, m.label)));
  const rows = tasks.map((t, i) => {
    const byJob = new Map((t.runs || []).map((r) => [r.job_id, r]));
    const regs = (t.regressions || []).filter(isRegression);
    return el('tr', { dataset: { i: String(i), key: t.key }, class: regs.length ? 'regressed' : '' },
      el('td', { class: 'name' }, el('span', { class: 'task-name', title: t.name || '' }, t.name || '(unnamed task)'),
        el('div', { class: 'task-key muted', title: [t.play && `play: ${t.play}`, t.role && `role: ${t.role}`, t.task_path && `path: ${t.task_path}`].filter(Boolean).join('\n') },
          t.task_path ? t.key.replace(` ${t.name}`, '') : 'no task path'),
        el('div', { class: 'muted small' }, `in ${fmtCount(byJob.size)} of ${fmtCount(runs.length)} runs`)),
      ...METRICS.map((m) => el('td', { class: 'spark-cell', dataset: { metric: m.key } }, sparkline(t, m, runs, byJob, regs))));
  });
  const table = el('table', { class: 'history' },
    el('caption', {}, el('span', { class: 'caption-title' }, `Tasks (${fmtCount(tasks.length)})`),
      el('span', { class: 'muted' }, ' each point is one run (hover for its value, click for that job at this task); the dashed line is the median; red rings are regressions')),
    el('thead', {}, head),
    el('tbody', {}, ...rows));
  if (tasks.length === 0) table.querySelector('tbody').append(el('tr', {}, el('td', { colspan: String(METRICS.length + 1), class: 'empty' }, 'No task has run yet.')));
  $('history').replaceChildren(table);
  $('history').hidden = runs.length === 0;
}

// sparkline draws one task's metric across the runs as an SVG: a point
// per run the task has a value in, each a link to that job at the task.
function sparkline(t, m, runs, byJob, regs) {
  const pts = [];
  runs.forEach((run, i) => {
    const entry = byJob.get(run.job_id);
    const v = entry ? metricValue(m.key, entry) : undefined;
    if (v !== undefined) pts.push({ i, run, entry, v, reg: regs.find((r) => r.job_id === run.job_id && r.metric === m.key) });
  });
  if (pts.length === 0) return el('span', { class: 'muted' }, '–');
  const { w, h, padX, padTop, padBottom } = CHART;
  const usual = median(pts.map((p) => p.v));
  const top = Math.max(...pts.map((p) => p.v), usual) || 1;
  const x = (i) => (runs.length === 1 ? w / 2 : padX + (i * (w - 2 * padX)) / (runs.length - 1));
  const y = (v) => padTop + (1 - v / top) * (h - padTop - padBottom);
  const root = svg('svg', {
    class: `spark ${m.resource || 'duration'}`, width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: 'group',
    'aria-label': `${m.label} of ${t.name} across ${pts.length} runs`,
  });
  root.append(svg('line', { class: 'spark-base', x1: 0, x2: w, y1: h - padBottom, y2: h - padBottom }));
  root.append(svg('line', { class: 'spark-usual', x1: padX / 2, x2: w - padX / 2, y1: y(usual), y2: y(usual) }));
  root.append(svg('polyline', { class: 'spark-line', points: pts.map((p) => `${x(p.i).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ') }));
  for (const p of pts) {
    const label = `run ${p.i + 1}, job ${p.run.job_id}: ${m.label.toLowerCase()} ${m.fmt(p.v)}`
      + (p.reg ? ` — regression, ${regressionText(p.reg)} (usual ${m.fmt(p.reg.baseline)})` : usual > 0 ? ` (${fmtFactor(p.v / usual)} the median)` : '');
    const a = svg('a', { href: jobTaskURL(p.run.job_id, p.entry.counter), class: 'pt-link', 'aria-label': label });
    const title = svg('title');
    title.textContent = label;
    const dot = svg('circle', {
      class: `pt${p.reg ? ' regression' : ''}`, cx: x(p.i).toFixed(1), cy: y(p.v).toFixed(1), r: p.reg ? CHART.rRegression : CHART.r,
      'data-job': p.run.job_id, 'data-counter': p.entry.counter, 'data-metric': m.key, 'data-run': p.i,
    });
    a.append(title, dot);
    if (p.reg) {
      // Beside the ring, on the side with room.
      const left = x(p.i) > 36;
      const tx = svg('text', {
        class: 'pt-factor', x: (x(p.i) + (left ? -9 : 9)).toFixed(1), y: (y(p.v) + 4).toFixed(1), 'text-anchor': left ? 'end' : 'start',
      });
      tx.textContent = fmtFactor(p.reg.factor ?? p.v / p.reg.baseline);
      a.append(tx);
    }
    root.append(a);
  }
  const newest = pts[pts.length - 1];
  return el('div', { class: 'spark-box' }, root,
    el('div', { class: 'spark-foot' }, el('span', {}, m.fmt(newest.v)), el('span', { class: 'muted' }, ` newest · median ${m.fmt(usual)}`)));
}

function start() {
  if (!templateId) { showError('No template id in the address.'); return; }
  $('template-id').textContent = `template ${templateId}`;
  load();
  loadRightsize($('rightsize'), templateId, lastParam(), debug);
}

start();
