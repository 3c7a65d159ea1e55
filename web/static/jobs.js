// The jobs page (/): every job Peakline holds, newest first, with its
// peaks, filtered by id as you type; each row opens the job's graph.

import { RESOURCE_ORDER, fmtValue, fmtDateTime, fmtDuration, fmtCount, el, apiError, pathSegment } from './format.js';

const LIVE_WINDOW_MS = 30_000;
const $ = (id) => document.getElementById(id);

let jobs = [];

function render() {
  const q = $('filter').value.trim().toLowerCase();
  const shown = jobs.filter((j) => j.job_id.toLowerCase().includes(q));
  const tbody = $('jobs-body');
  tbody.replaceChildren(...shown.map((j) => {
    const live = Date.now() - j.last <= LIVE_WINDOW_MS;
    return el('tr', { dataset: { job: j.job_id } },
      el('td', { class: 'name' }, el('a', { href: `/jobs/${pathSegment(j.job_id)}` }, j.job_id),
        live ? el('span', { class: 'live' }, 'live') : null),
      el('td', { class: 'time' }, j.first ? fmtDateTime(j.first) : '–'),
      el('td', { class: 'num' }, j.first ? fmtDuration(j.last - j.first) : '–'),
      el('td', { class: 'num' }, fmtCount(j.tasks)),
      ...RESOURCE_ORDER.map((r) => el('td', { class: 'num' }, j.peaks && j.peaks[r] ? fmtValue(r, j.peaks[r].v) : '–')));
  }));
  let note = `${fmtCount(shown.length)} of ${fmtCount(jobs.length)} jobs`;
  if (jobs.length === 0) note = 'No jobs yet. Import one with `peakline import`, or point a collector at this server.';
  else if (shown.length === 0) note = `No job id contains “${q}”.`;
  $('jobs-note').textContent = note;
  const u = new URL(location.href);
  if (q) u.searchParams.set('q', q); else u.searchParams.delete('q');
  history.replaceState(null, '', u);
}

async function start() {
  const q = new URLSearchParams(location.search).get('q');
  if (q) $('filter').value = q;
  $('filter').addEventListener('input', render);
  try {
    const resp = await fetch('/api/v1/jobs', { headers: { Accept: 'application/json' } });
    if (!resp.ok) throw new Error(await apiError(resp));
    const body = await resp.json();
    jobs = (body.jobs || []).slice().sort((a, b) => b.first - a.first);
  } catch (err) {
    $('jobs-note').textContent = `Could not load the jobs: ${err.message}`;
    $('jobs-note').classList.add('error');
    return;
  }
  render();
  window.peakline = { ready: true, jobs: jobs.length };
}

start();
