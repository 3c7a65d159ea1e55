// A job template's run-over-run history, as the pages use it: the
// compared metrics, the request for GET /api/v1/templates/{id}/history,
// and the "vs usual" figures of one run's tasks (its value against the
// median of the other runs of the window). The regressions themselves
// come from the server (its rule decides); this module only shows them.

import { fmtValue, fmtDuration, fmtBytes, pathSegment } from './format.js';

// Runs asked for by default (the API's own default).
export const DEFAULT_RUNS = 20;
// Fewest other runs a task needs for a "vs usual" figure: the server's
// rule flags nothing with fewer.
export const MIN_OTHERS = 3;
// Statuses of a run still going (the server's history.Unfinished).
export const UNFINISHED = new Set(['new', 'pending', 'waiting', 'running']);
// A factor closer to 1 than this reads "as usual".
const USUAL_BAND = 0.1;

const fmtSeconds = (v) => (v < 10 ? `${v.toFixed(2)} s` : `${v.toFixed(1)} s`);

// METRICS are the compared metrics, in the API's order: key as the API
// names it, short as the "vs usual" text names it, value(run entry).
export const METRICS = [
  { key: 'duration_ms', label: 'Duration', short: 'duration', value: (r) => r.duration_ms, fmt: fmtDuration },
  { key: 'cpu_max', label: 'CPU max', short: 'CPU', resource: 'cpu', value: (r) => r.max && r.max.cpu, fmt: (v) => fmtValue('cpu', v) },
  { key: 'cpu_seconds', label: 'CPU time', short: 'CPU time', resource: 'cpu', value: (r) => r.cpu_seconds, fmt: fmtSeconds },
  { key: 'memory_max', label: 'Memory max', short: 'memory', resource: 'memory', value: (r) => r.max && r.max.memory, fmt: fmtBytes },
  { key: 'pids_max', label: 'PIDs max', short: 'PIDs', resource: 'pids', value: (r) => r.max && r.max.pids, fmt: (v) => fmtValue('pids', v) },
];
export const METRIC = Object.fromEntries(METRICS.map((m) => [m.key, m]));

// metricValue is a task run's value of metric, or undefined.
export function metricValue(metric, run) {
  const v = METRIC[metric].value(run);
  return Number.isFinite(v) ? v : undefined;
}

// historyURL is the API address of template id's history of the last
// runs, or of the runs up to job jobId.
export function historyURL(templateId, last = DEFAULT_RUNS, jobId = '') {
  const q = new URLSearchParams({ last: String(last) });
  if (jobId) q.set('job', jobId);
  return `/api/v1/templates/${pathSegment(templateId)}/history?${q}`;
}

// jobTaskURL opens a job's page focused on the task with counter.
export function jobTaskURL(jobId, counter) {
  const u = `/jobs/${pathSegment(jobId)}`;
  return counter > 0 ? `${u}?task=${counter}` : u;
}

// templateURL is the page of a template.
export function templateURL(templateId) {
  return `/templates/${pathSegment(templateId)}`;
}

export function median(values) {
  const s = values.slice().sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// fmtFactor renders a ratio for people: "2.8×", "0.45×".
export function fmtFactor(f) {
  if (!Number.isFinite(f)) return '–';
  if (f >= 10) return `${Math.round(f)}×`;
  if (f >= 0.95) return `${f.toFixed(1)}×`;
  return `${f.toFixed(2)}×`;
}

// regressionText says one regression in words: "memory 2.8× usual".
export function regressionText(reg) {
  const m = METRIC[reg.metric];
  const f = reg.factor ?? (reg.baseline > 0 ? reg.value / reg.baseline : NaN);
  return `${m ? m.short : reg.metric} ${fmtFactor(f)} usual`;
}

// regressionDetail is the longer form for titles: values and baseline.
export function regressionDetail(reg) {
  const m = METRIC[reg.metric];
  const fmt = m ? m.fmt : String;
  return `${regressionText(reg)}: ${m ? m.label.toLowerCase() : reg.metric} ${fmt(reg.value)}, usual ${fmt(reg.baseline)} (median of the other runs)`;
}

// isRegression tells a regression from a contended finding: a value the
// rule flags that the task's stall explains (other work on the node), no
// regression.
export const isRegression = (reg) => !reg.contended;

// contendedDetail says why a finding is contended.
export function contendedDetail(reg) {
  const s = reg.stall || {};
  return `${regressionText(reg)}, contended: waited ${Math.round((s.share || 0) * 100)} % of its time for a CPU, usually ${Math.round((s.baseline || 0) * 100)} % (other work on the node)`;
}

// jobRegressions lists the regressions of one job across the tasks of
// history h: [{task, reg}], contended findings left out.
export function jobRegressions(h, jobId) {
  const out = [];
  for (const task of h.tasks || []) {
    for (const reg of task.regressions || []) if (reg.job_id === jobId && isRegression(reg)) out.push({ task, reg });
  }
  return out;
}

// usualOf compares each task run of job jobId in history h with the
// same task's other runs. It returns a Map from the job's task counter to
// {task, counter, regressions, figures: [{metric, value, usual}]}, with
// figures only for metrics with at least MIN_OTHERS other runs. Asking
// the history with job= (historyURL) puts the job in h's window.
// Runs still going (UNFINISHED) are no "usual" for the others, as in
// the server's rule: their tasks are cut short.
export function usualOf(h, jobId) {
  const out = new Map();
  const going = new Set((h.runs || []).filter((r) => UNFINISHED.has(r.status)).map((r) => r.job_id));
  for (const task of h.tasks || []) {
    const runs = task.runs || [];
    const mine = runs.find((r) => r.job_id === jobId);
    if (!mine) continue;
    const others = runs.filter((r) => r !== mine && !going.has(r.job_id));
    const figures = [];
    for (const m of METRICS) {
      const value = metricValue(m.key, mine);
      const vals = others.map((r) => metricValue(m.key, r)).filter((v) => v !== undefined);
      if (value === undefined || vals.length < MIN_OTHERS) continue;
      figures.push({ metric: m.key, value, usual: median(vals) });
    }
    const flagged = (task.regressions || []).filter((r) => r.job_id === jobId);
    out.set(mine.counter, { task, counter: mine.counter, figures, regressions: flagged.filter(isRegression), contended: flagged.filter((r) => !isRegression(r)) });
  }
  return out;
}

// usualSummary picks what the "vs usual" cell says for one task: the
// server's regressions first, else the metric furthest from usual, or
// "as usual"; its title lists every metric. Null without figures.
export function usualSummary(entry) {
  if (!entry) return null;
  const figs = entry.figures.filter((f) => f.usual > 0).map((f) => ({ ...f, factor: f.value / f.usual }));
  if (figs.length === 0) return null;
  let title = figs.map((f) => `${METRIC[f.metric].label}: ${METRIC[f.metric].fmt(f.value)}, usual ${METRIC[f.metric].fmt(f.usual)} (${fmtFactor(f.factor)})`).join('\n');
  if (entry.contended && entry.contended.length) title = `${entry.contended.map(contendedDetail).join('\n')}\n\n${title}`;
  if (entry.regressions.length) {
    const top = entry.regressions.reduce((a, b) => ((b.factor ?? 0) > (a.factor ?? 0) ? b : a));
    return { text: regressionText(top), regressed: true, factor: top.factor, metric: top.metric, title: `${entry.regressions.map(regressionDetail).join('\n')}\n\n${title}` };
  }
  const far = figs.reduce((a, b) => (Math.abs(Math.log(b.factor)) > Math.abs(Math.log(a.factor)) ? b : a));
  if (Math.abs(far.factor - 1) < USUAL_BAND) return { text: 'as usual', regressed: false, factor: far.factor, metric: null, title };
  return { text: `${METRIC[far.metric].short} ${fmtFactor(far.factor)} usual`, regressed: false, factor: far.factor, metric: far.metric, title };
}
