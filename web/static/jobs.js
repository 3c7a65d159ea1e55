// The jobs page (/): the jobs Peakline holds, newest first, with their
// peaks, a page at a time from GET /api/v1/jobs. The next page loads as
// the end of the table scrolls into view; the id filter is applied by the
// server as you type. Each row opens the job's graph. A job of an AWX
// job template names it (a link to the template's page), and is flagged
// when the template's history (fetched once per template shown, for at
// most MAX_TEMPLATES templates) finds regressions in it.

import { RESOURCE_ORDER, fmtValue, fmtDateTime, fmtDuration, fmtCount, el, apiError, pathSegment } from './format.js';
import { historyURL, templateURL, jobRegressions, regressionText } from './history.js';
import { STATES, isLive, stateBadge } from './jobstate.js';

// Templates whose history the page asks for: a bound on the requests a
// long list makes (one per template, not per job).
const MAX_TEMPLATES = 20;

// Rows per request; `?limit=N` in the page's address overrides it.
const PAGE_ROWS = 100;
// Typing pauses this long before the filter asks the server.
const FILTER_DEBOUNCE_MS = 250;
const $ = (id) => document.getElementById(id);

// The list being shown: its filter, the cursor of its next page ('' when
// every page is in), and the request under way, if any.
const list = { q: '', next: '', shown: 0, total: 0, pages: 0, loading: null, done: false };
let pageRows = PAGE_ROWS;
// `?template=ID` lists only the runs of that job template.
let onlyTemplate = '';
// `?status=STATE` (the status filter) lists only the jobs in that state.
let onlyStatus = '';
let observer = null;
// Template id → promise of its history (null when it could not load).
const histories = new Map();
let flagged = 0;

function row(j) {
  const live = isLive(j.status, j.last);
  return el('tr', { dataset: { job: j.job_id, state: j.status || 'unknown' } },
    el('td', { class: 'name' }, el('a', { href: `/jobs/${pathSegment(j.job_id)}` }, j.job_id),
      live ? el('span', { class: 'live' }, 'live') : null),
    el('td', { class: 'job-state' }, stateBadge(j.status, j.reported_status)),
    el('td', { class: 'template' }, j.template_id
      ? el('a', { href: templateURL(j.template_id), title: `template ${j.template_id}` }, j.template_name || `template ${j.template_id}`)
      : el('span', { class: 'muted' }, '–')),
    el('td', { class: 'playbook' }, j.playbook || el('span', { class: 'muted' }, '–')),
    el('td', { class: 'time' }, j.first ? fmtDateTime(j.first) : '–'),
    el('td', { class: 'num' }, j.first ? fmtDuration(j.last - j.first) : '–'),
    el('td', { class: 'num' }, fmtCount(j.tasks)),
    ...RESOURCE_ORDER.map((r) => peakCell(r, j.peaks && j.peaks[r])));
}

// peakCell shows a job's peak of one resource and the task it was in.
function peakCell(resource, peak) {
  if (!peak) return el('td', { class: 'num' }, '–');
  const task = peak.task || (peak.counter > 0 ? `task ${peak.counter}` : '(unnamed task)');
  return el('td', { class: 'num peak', dataset: { resource } },
    el('div', { class: 'peak-v' }, fmtValue(resource, peak.v)),
    el('div', { class: 'peak-of muted', title: peak.counter > 0 ? `${task} (counter ${peak.counter})` : task }, task));
}

function note() {
  const which = `${onlyStatus ? `${onlyStatus} ` : ''}jobs${onlyTemplate ? ` of template ${onlyTemplate}` : ''}`;
  let text = `${fmtCount(list.shown)} of ${fmtCount(list.total)} ${which}`;
  if (list.total === 0 && (onlyTemplate || onlyStatus)) text = `No ${which}${list.q ? ` with an id containing “${list.q}”` : ''}.`;
  else if (list.total === 0 && !list.q) text = 'No jobs yet. Import one with `peakline import`, or point a collector at this server.';
  else if (list.total === 0) text = `No job id contains “${list.q}”.`;
  else if (!list.done) text += ' · scroll for more';
  $('jobs-note').textContent = text;
  $('jobs-note').classList.remove('error');
}

// loadPage fetches the next page of the current list and appends its rows.
// A new filter aborts a page still loading for the old one.
async function loadPage() {
  if (list.loading || list.done) return;
  const ctl = new AbortController();
  list.loading = ctl;
  const params = new URLSearchParams({ limit: String(pageRows) });
  if (list.q) params.set('q', list.q);
  if (onlyTemplate) params.set('template', onlyTemplate);
  if (onlyStatus) params.set('status', onlyStatus);
  if (list.next) params.set('cursor', list.next);
  try {
    const resp = await fetch(`/api/v1/jobs?${params}`, { headers: { Accept: 'application/json' }, signal: ctl.signal });
    if (!resp.ok) throw new Error(await apiError(resp));
    const body = await resp.json();
    if (list.loading !== ctl) return;
    const jobs = body.jobs || [];
    $('jobs-body').append(...jobs.map(row));
    flagRegressions(jobs);
    list.shown += jobs.length;
    list.total = body.total || 0;
    list.next = body.next || '';
    list.done = list.next === '';
    list.pages++;
    note();
  } catch (err) {
    if (ctl.signal.aborted) return;
    $('jobs-note').textContent = `Could not load the jobs: ${err.message}`;
    $('jobs-note').classList.add('error');
    list.done = true;
  } finally {
    if (list.loading === ctl) list.loading = null;
  }
  window.peakline = { ready: true, jobs: list.shown, total: list.total, pages: list.pages, done: list.done, q: list.q, status: onlyStatus, histories: histories.size, flagged };
  // Observing again reports whether the end of the table is still in
  // view (a short page), which loads the page after at once.
  if (observer && !list.done) {
    observer.unobserve($('jobs-more'));
    observer.observe($('jobs-more'));
  }
}

// templateHistory fetches a template's history once; null when it fails or when
// MAX_TEMPLATES histories were asked for already.
function templateHistory(id) {
  if (!histories.has(id)) {
    if (histories.size >= MAX_TEMPLATES) return Promise.resolve(null);
    histories.set(id, fetch(historyURL(id), { headers: { Accept: 'application/json' } })
      .then((r) => (r.ok ? r.json() : null))
      .catch(() => null));
  }
  return histories.get(id);
}

// flagRegressions marks the rows of jobs whose template's history flags
// regressions in them.
async function flagRegressions(jobs) {
  await Promise.all(jobs.filter((j) => j.template_id).map(async (j) => {
    const h = await templateHistory(j.template_id);
    if (!h) return;
    const regs = jobRegressions(h, j.job_id);
    const tr = document.querySelector(`#jobs-body tr[data-job="${CSS.escape(j.job_id)}"]`);
    if (!tr || !regs.length) return;
    tr.classList.add('regressed');
    const title = regs.map(({ task, reg }) => `${task.name}: ${regressionText(reg)}`).join('\n');
    tr.querySelector('td.name').append(el('span', { class: 'badge regression', title }, `${regs.length} regression${regs.length === 1 ? '' : 's'}`));
    flagged++;
  }));
  if (window.peakline) window.peakline.flagged = flagged;
}

// restart shows the first page of the list filtered by q.
function restart(q) {
  if (list.loading) list.loading.abort();
  Object.assign(list, { q, next: '', shown: 0, total: 0, pages: 0, loading: null, done: false });
  $('jobs-body').replaceChildren();
  const u = new URL(location.href);
  if (q) u.searchParams.set('q', q); else u.searchParams.delete('q');
  if (onlyStatus) u.searchParams.set('status', onlyStatus); else u.searchParams.delete('status');
  history.replaceState(null, '', u);
  return loadPage();
}

async function start() {
  const params = new URLSearchParams(location.search);
  const n = Number(params.get('limit'));
  if (Number.isInteger(n) && n >= 1 && n <= 5000) pageRows = n;
  const q = (params.get('q') || '').trim();
  onlyTemplate = (params.get('template') || '').trim();
  startStatusFilter(params.get('status'));
  $('filter').value = q;
  let timer = 0;
  $('filter').addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const next = $('filter').value.trim();
      if (next !== list.q) restart(next);
    }, FILTER_DEBOUNCE_MS);
  });
  observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadPage();
  }, { rootMargin: '0px 0px 400px 0px' });
  await restart(q);
}

// startStatusFilter fills the status filter, selects the state of the
// page's `?status=` (one the server takes; any other shows every job)
// and lists again when another is picked.
function startStatusFilter(fromURL) {
  const sel = $('status-filter');
  sel.replaceChildren(el('option', { value: '' }, 'any'), ...STATES.map((s) => el('option', { value: s }, s)));
  onlyStatus = STATES.includes(fromURL) ? fromURL : '';
  sel.value = onlyStatus;
  sel.addEventListener('change', () => {
    onlyStatus = sel.value;
    restart(list.q);
  });
}

start();
