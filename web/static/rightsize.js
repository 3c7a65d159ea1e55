// Right-sizing on the pages. The template page's "Right-size" section
// shows what GET /api/v1/templates/{id}/rightsize recommends: memory and
// CPU with their basis, the task that drives memory, the fork fit against
// AWX's 100 MiB per fork, the runs OOM-killed or at their cap (each
// linked to its job page at that task), the notes, and the pod spec to
// copy. The job page's sizing line marks a job OOM-killed (with the task
// running at the kill) or run at its memory limit, from the graph
// payload's sizing.

import { el, fmtBytes, fmtCount, copyText, apiError, pathSegment } from './format.js';
import { jobTaskURL } from './history.js';

// rightsizeURL is the API address of a template's recommendation.
export function rightsizeURL(templateId, last) {
  return `/api/v1/templates/${pathSegment(templateId)}/rightsize?${new URLSearchParams({ last: String(last) })}`;
}

// fmtMillicores renders CPU as Kubernetes writes it: "960m (0.96 CPU)".
export function fmtMillicores(m) {
  if (!Number.isFinite(m)) return '–';
  return `${Math.round(m)}m (${(m / 1000).toFixed(2)} CPU)`;
}

// loadRightsize fetches the recommendation of a template and renders it
// into box; state (the page's debug object) gets rightsize: the answer,
// or {error}.
export async function loadRightsize(box, templateId, last, state) {
  let rs;
  try {
    const resp = await fetch(rightsizeURL(templateId, last), { headers: { Accept: 'application/json' } });
    if (!resp.ok) throw new Error(await apiError(resp));
    rs = await resp.json();
  } catch (err) {
    box.replaceChildren(el('h2', {}, 'Right-size'), el('p', { class: 'status error' }, `Could not load the recommendation: ${err.message}`));
    box.hidden = false;
    state.rightsize = { error: err.message };
    return;
  }
  renderRightsize(box, rs);
  state.rightsize = rs;
}

// renderRightsize draws the section from a rightsize answer.
export function renderRightsize(box, rs) {
  const children = [el('h2', {}, 'Right-size')];
  if (!rs.runs_used) {
    children.push(el('p', { class: 'muted rs-empty' }, (rs.notes || []).join(' · ') || 'No finished run to size from.'));
    box.replaceChildren(...children);
    box.hidden = rs.runs === 0;
    return;
  }
  const m = rs.memory;
  const c = rs.cpu;
  const f = rs.forks;
  children.push(el('p', { class: 'meta rs-summary' },
    `From ${fmtCount(rs.runs_used)} of ${fmtCount(rs.runs)} runs · confidence `,
    el('strong', { class: `rs-confidence rs-${rs.confidence}` }, rs.confidence)));
  const rows = [
    ['Memory request and limit', el('strong', { class: 'rs-memory' }, fmtBytes(m.request_bytes)), m.basis],
    ['Memory peaks per run', `p50 ${fmtBytes(m.p50_bytes)} · p95 ${fmtBytes(m.p95_bytes)} · max ${fmtBytes(m.max_bytes)}`,
      m.current_limit_bytes ? `current limit ${fmtBytes(m.current_limit_bytes)}` : 'no memory limit seen'],
    ['CPU request', el('strong', { class: 'rs-cpu' }, fmtMillicores(c.request_millicores)),
      `${c.basis}; peak ${fmtMillicores(c.peak_millicores)}`],
  ];
  if (m.driven_by) {
    const d = m.driven_by;
    rows.push(['Memory driven by', el('a', { class: 'rs-driven', href: jobTaskURL(d.job_id, d.counter) }, d.task || d.key),
      `peaked at ${fmtBytes(d.peak_bytes)} in job ${d.job_id}`]);
  }
  if (f.per_fork_bytes !== null && f.per_fork_bytes !== undefined) {
    rows.push(['Memory per fork', el('span', { class: 'rs-per-fork' }, fmtBytes(f.per_fork_bytes)),
      `over a base of ${fmtBytes(f.base_bytes)} (${fmtCount(f.fit.runs)} runs, r² ${f.fit.r2 ?? '–'}); AWX assumes ${fmtBytes(f.awx_per_fork_bytes)}`]);
  }
  if (f.max_forks_for_limit !== null && f.max_forks_for_limit !== undefined) {
    rows.push(['Most forks that fit', el('span', { class: 'rs-max-forks' }, String(f.max_forks_for_limit)),
      `in ${fmtBytes(f.limit_bytes)}${f.forks ? `; the newest run had ${f.forks}` : ''}`]);
  }
  children.push(el('table', { class: 'rs-table' }, el('tbody', {},
    ...rows.map(([k, v, note]) => el('tr', {}, el('th', { scope: 'row' }, k), el('td', {}, v), el('td', { class: 'muted' }, note))))));
  if ((rs.oom || []).length) {
    children.push(el('h3', {}, 'OOM-killed runs'), el('ul', { class: 'rs-oom' }, ...rs.oom.map((o) => el('li', {},
      el('a', { href: jobTaskURL(o.job_id, o.counter) }, `job ${o.job_id}`),
      ` killed in “${o.task || 'an unknown task'}”`,
      o.limit_bytes ? ` at a limit of ${fmtBytes(o.limit_bytes)}` : '',
      o.kills > 1 ? ` (${o.kills} kills)` : ''))));
  }
  if ((rs.at_cap || []).length) {
    children.push(el('h3', {}, 'Runs at their memory limit'), el('ul', { class: 'rs-at-cap' }, ...rs.at_cap.map((a) => el('li', {},
      el('a', { href: jobTaskURL(a.job_id, a.counter) }, `job ${a.job_id}`),
      ` peaked at ${fmtBytes(a.peak_bytes)} of ${fmtBytes(a.limit_bytes)}`, a.task ? ` in “${a.task}”` : ''))));
  }
  if ((rs.notes || []).length) {
    children.push(el('ul', { class: 'rs-notes muted' }, ...rs.notes.map((n) => el('li', {}, n))));
  }
  if (rs.pod_spec_override) {
    const pre = el('pre', { class: 'rs-pod-spec' }, rs.pod_spec_override);
    const copied = el('span', { class: 'muted rs-copied', role: 'status' });
    const button = el('button', {
      type: 'button', class: 'rs-copy',
      onclick: async () => { copied.textContent = (await copyText(rs.pod_spec_override)) ? 'copied' : 'select the text to copy it'; },
    }, 'Copy pod spec');
    children.push(el('h3', {}, 'Container group pod spec (pod_spec_override)'), el('div', { class: 'rs-copy-row' }, button, copied), pre);
  }
  box.replaceChildren(...children);
  box.hidden = false;
}

// renderJobSizing fills the job page's sizing line of job jobId from
// the graph payload's sizing and the task names by counter (a Map); it
// hides the line when the job was neither killed nor at its cap.
export function renderJobSizing(box, jobId, sizing, taskName) {
  const s = sizing || {};
  const parts = [];
  if (s.oom_kills > 0) {
    const name = s.oom_counter > 0 ? taskName.get(s.oom_counter) : '';
    parts.push(el('strong', { class: 'oom-mark' }, 'OOM-killed'),
      s.oom_counter > 0
        ? el('span', {}, ' in ', el('a', { class: 'oom-task', href: jobTaskURL(jobId, s.oom_counter) }, `“${name || `task ${s.oom_counter}`}”`))
        : ' (task unknown)',
      s.memory_limit_bytes ? ` at a memory limit of ${fmtBytes(s.memory_limit_bytes)}` : '',
      s.oom_kills > 1 ? ` · ${s.oom_kills} kills` : '');
  } else if (s.at_cap) {
    parts.push(el('strong', { class: 'cap-mark' }, 'At its memory limit'),
      `: peaked at ${fmtBytes(s.peak_bytes)} of ${fmtBytes(s.memory_limit_bytes)}; it may have needed more`);
  }
  box.replaceChildren(...parts);
  box.hidden = parts.length === 0;
}
