// The task table under the charts: one row per task of the graph payload,
// sortable by any column (header buttons, so keyboard works), the heaviest
// task of each resource marked, every row linking to its job events.

import { RESOURCES, RESOURCE_ORDER, fmtValue, fmtClock, fmtDuration, fmtCount, el, copyText, taskLabel } from './format.js';

// Rows drawn before "show all": enough for any playbook people read, and
// the page stays quick for jobs with tens of thousands of tasks.
const ROW_LIMIT = 1000;

const totalSamples = (t) => Math.max(0, ...Object.values(t.samples || {}));

// A share of wall time (0–1) as a percentage.
const pct = (v) => `${(v * 100).toFixed(v >= 0.1 ? 0 : 1)} %`;

// waitedText renders a task's stall shares (the payload's waited): the
// job's own waits for a CPU and on memory; the node's where the job's
// are not measured.
export function waitedText(w) {
  if (!w) return '—';
  const parts = [];
  if (w.cpu !== undefined) parts.push(`CPU ${pct(w.cpu)}`);
  if (w.memory !== undefined) parts.push(`mem ${pct(w.memory)}`);
  if (!parts.length && w.node_cpu !== undefined) parts.push(`node ${pct(w.node_cpu)}`);
  return parts.length ? parts.join(' · ') : '—';
}

function waitedTitle(w) {
  if (!w) return 'no stall figures were measured for this task';
  const lines = ['share of the task\'s wall time it was stalled'];
  if (w.cpu !== undefined) lines.push(`waiting for a CPU: ${pct(w.cpu)}`);
  if (w.memory !== undefined) lines.push(`waiting on memory: ${pct(w.memory)}`);
  if (w.throttled !== undefined) lines.push(`held back by its CPU limit: ${pct(w.throttled)}`);
  if (w.node_cpu !== undefined) lines.push(`some task on the node waiting for a CPU: ${pct(w.node_cpu)}`);
  if (w.node_load !== undefined) lines.push(`node load per CPU: ${w.node_load.toFixed(2)}`);
  return lines.join('\n');
}

// COLUMNS in display order; value() is what sorts.
const COLUMNS = [
  { key: 'counter', label: '#', title: 'counter of the task-start job event', value: (t) => t.counter || Infinity, dir: 1 },
  { key: 'name', label: 'Task', value: (t) => (t.name || '').toLowerCase(), dir: 1 },
  { key: 'start', label: 'Start', value: (t) => t.start, dir: 1 },
  { key: 'duration', label: 'Duration', value: (t) => t.end - t.start, dir: -1, num: true },
  // Shown only for a job whose collector measured stall (hasWaited).
  { key: 'waited', label: 'Waited', title: 'share of the task\'s wall time stalled waiting for a CPU, and on memory: other work on the node, not the task', value: (t) => (t.waited && (t.waited.cpu ?? t.waited.node_cpu)) ?? -Infinity, dir: -1, num: true, stall: true },
  { key: 'samples', label: 'Samples', value: totalSamples, dir: -1, num: true },
  // Shown only for a job of a template with history (setUsual).
  { key: 'usual', label: 'vs usual', title: 'this run against the median of the template\'s other runs', value: (t, table) => table.usualFactor(t), dir: -1, optional: true },
  ...RESOURCE_ORDER.flatMap((r) => [
    { key: `max.${r}`, group: r, label: 'max', value: (t) => t.max[r] ?? -Infinity, dir: -1, num: true, resource: r, stat: 'max' },
    { key: `mean.${r}`, group: r, label: 'mean', value: (t) => t.mean[r] ?? -Infinity, dir: -1, num: true, resource: r, stat: 'mean' },
  ]),
];

export class TaskTable {
  // handlers: events(task) → taskEvents result; hoverTask(task or null).
  constructor(root, handlers) {
    this.root = root;
    this.handlers = handlers;
    this.tasks = [];
    this.sortKey = 'start';
    this.sortDir = 1;
    this.showAll = false;
    this.table = el('table', { class: 'tasks' });
    this.caption = el('caption');
    this.more = el('div', { class: 'more' });
    this.shown = [];
    this.usual = null; // task → "vs usual" summary or null (setUsual)
    // One listener for all rows: a row's task is this.shown[row index].
    const rowTask = (e) => {
      const tr = e.target.closest && e.target.closest('tbody tr[data-i]');
      return tr ? this.shown[Number(tr.dataset.i)] : null;
    };
    this.table.addEventListener('mouseover', (e) => { const t = rowTask(e); if (t) this.handlers.hoverTask(t); });
    this.table.addEventListener('focusin', (e) => { const t = rowTask(e); if (t) this.handlers.hoverTask(t); });
    this.table.addEventListener('mouseleave', () => this.handlers.hoverTask(null));
    root.replaceChildren(this.table, this.more);
  }

  // setTasks shows the payload's tasks; resources lists those the job has.
  setTasks(tasks, resources) {
    this.tasks = tasks;
    this.resources = resources;
    this.hasWaited = tasks.some((t) => t.waited && Object.keys(t.waited).length > 0);
    this.heaviest = {};
    for (const r of resources) {
      let best = null;
      for (const t of tasks) if (t.max[r] !== undefined && (!best || t.max[r] > best.max[r])) best = t;
      if (best) this.heaviest[r] = best;
    }
    this.render();
  }

  // setUsual adds the "vs usual" column: usual(task) returns {text,
  // title, regressed, factor} or null for a task without history; null
  // removes the column.
  setUsual(usual) {
    this.usual = usual;
    this.render();
  }

  usualFactor(t) {
    const u = this.usual && this.usual(t);
    if (!u || !Number.isFinite(u.factor)) return -Infinity;
    return (u.regressed ? 1e6 : 0) + u.factor;
  }

  sortBy(key) {
    const col = COLUMNS.find((c) => c.key === key);
    if (this.sortKey === key) this.sortDir = -this.sortDir; else { this.sortKey = key; this.sortDir = col.dir; }
    this.render();
    const btn = this.table.querySelector(`button[data-key="${key}"]`);
    if (btn) btn.focus();
  }

  render() {
    const cols = COLUMNS.filter((c) => (!c.resource || this.resources.includes(c.resource)) && (!c.optional || this.usual) && (!c.stall || this.hasWaited));
    const col = cols.find((c) => c.key === this.sortKey) || cols[0];
    const sorted = this.tasks.slice().sort((a, b) => {
      const va = col.value(a, this);
      const vb = col.value(b, this);
      if (va < vb) return -this.sortDir;
      if (va > vb) return this.sortDir;
      return a.start - b.start;
    });
    const shown = this.showAll ? sorted : sorted.slice(0, ROW_LIMIT);
    this.shown = shown;

    this.caption.replaceChildren(
      el('span', { class: 'caption-title' }, `Tasks (${fmtCount(this.tasks.length)})`),
      el('span', { class: 'muted' }, ' those the plotted points belong to and the heaviest ones, with exact max and mean over their samples in this window'),
    );
    const top = el('tr');
    const sub = el('tr');
    const header = (c) => {
      const th = el('th', { scope: 'col', class: c.num ? 'num' : '', 'aria-sort': c.key === this.sortKey ? (this.sortDir > 0 ? 'ascending' : 'descending') : 'none' },
        el('button', { type: 'button', 'data-key': c.key, title: c.title || `sort by ${c.group ? `${RESOURCES[c.group].label} ` : ''}${c.label}`, onclick: () => this.sortBy(c.key) },
          c.label, el('span', { class: 'sort-mark', 'aria-hidden': 'true' }, c.key === this.sortKey ? (this.sortDir > 0 ? '▲' : '▼') : '')));
      return th;
    };
    for (const c of cols) {
      if (c.group) continue;
      const th = header(c);
      th.rowSpan = 2;
      top.append(th);
    }
    for (const r of RESOURCE_ORDER.filter((x) => this.resources.includes(x))) {
      top.append(el('th', { scope: 'colgroup', colspan: '2', class: `group ${r}` }, el('span', { class: `swatch ${r}` }), RESOURCES[r].label));
    }
    top.append(el('th', { scope: 'col', rowspan: '2' }, 'Job events'));
    for (const c of cols) if (c.group) sub.append(header(c));
    const thead = el('thead', {}, top, sub);
    // Fixed column widths: the table lays out in one pass however many
    // rows it has (auto layout measured every cell of 10,000 rows).
    const colgroup = el('colgroup', {}, ...cols.map((c) => el('col', { class: `col-${c.stat || c.key}${c.resource ? ` ${c.resource}` : ''}` })),
      el('col', { class: 'col-events' }));

    const tbody = el('tbody');
    this.rows = new Map();
    shown.forEach((t, i) => {
      const tr = this.row(t, i, cols);
      this.rows.set(t, tr);
      tbody.append(tr);
    });
    this.marked = null;
    if (this.tasks.length === 0) {
      tbody.append(el('tr', {}, el('td', { colspan: String(cols.length + 1), class: 'empty' }, 'No task has samples in this window.')));
    }
    this.root.hidden = this.tasks.length === 0 && this.resources.length === 0;
    this.table.replaceChildren(this.caption, colgroup, thead, tbody);
    this.more.replaceChildren();
    if (sorted.length > shown.length) {
      this.more.append(el('button', { type: 'button', onclick: () => { this.showAll = true; this.render(); } },
        `Show all ${fmtCount(sorted.length)} tasks (${fmtCount(shown.length)} shown)`));
    }
  }

  // markTask highlights the row of the task under the chart cursor.
  markTask(task) {
    if (this.marked) this.marked.classList.remove('marked');
    this.marked = (task && this.rows && this.rows.get(task)) || null;
    if (this.marked) this.marked.classList.add('marked');
  }

  row(t, i, cols) {
    const tr = el('tr', { dataset: { i: String(i), counter: String(t.counter), uuid: t.uuid } });
    const badges = this.resources.filter((r) => this.heaviest[r] === t);
    if (badges.length) tr.classList.add('heaviest');
    for (const c of cols) {
      let td;
      switch (c.key) {
        case 'counter':
          td = el('td', { class: 'num', title: t.counter > 0 ? null : 'before the first task started (or no job events were recorded)' }, t.counter > 0 ? String(t.counter) : '–');
          break;
        case 'name':
          td = el('td', { class: 'name' }, el('span', { class: 'task-name' }, taskLabel(t)),
            ...badges.map((r) => el('span', { class: `badge top ${r}`, title: `heaviest ${RESOURCES[r].label} task` }, `top ${RESOURCES[r].label}`)));
          break;
        case 'start': td = el('td', { class: 'time' }, fmtClock(t.start, true)); break;
        case 'duration': td = el('td', { class: 'num' }, fmtDuration(t.end - t.start)); break;
        case 'waited': td = el('td', { class: 'num waited', title: waitedTitle(t.waited) }, waitedText(t.waited)); break;
        case 'usual': {
          const u = this.usual(t);
          td = el('td', { class: `vs-usual${u && u.regressed ? ' regressed' : ''}${u && !u.metric ? ' as-usual' : ''}`, title: u ? u.title : 'no history: this task is not in enough other runs of the template' },
            u ? u.text : '—');
          break;
        }
        case 'samples':
          td = el('td', { class: 'num', title: this.resources.map((r) => `${RESOURCES[r].label}: ${t.samples[r] || 0}`).join(', ') }, fmtCount(totalSamples(t)));
          break;
        default: {
          const v = c.stat === 'max' ? t.max[c.resource] : t.mean[c.resource];
          const top = c.stat === 'max' && this.heaviest[c.resource] === t;
          td = el('td', { class: `num${top ? ` top ${c.resource}` : ''}` }, fmtValue(c.resource, v));
        }
      }
      tr.append(td);
    }
    tr.append(el('td', { class: 'events' }, this.eventsCell(t)));
    return tr;
  }

  eventsCell(t) {
    const ev = this.handlers.events(t);
    if (!ev.known) {
      return el('span', { class: 'muted', title: 'no job events were recorded for this task; its samples were matched by time' }, 'unknown');
    }
    const range = `${ev.gte}–${ev.lte}`;
    if (ev.url) {
      return el('a', { href: ev.url, target: '_blank', rel: 'noopener', class: 'events-link', title: ev.output ? 'in the AWX job output' : null, 'aria-label': `job events ${range} of task ${t.name}${ev.output ? ' in the AWX job output' : ''}` }, `events ${range} ↗`);
    }
    const btn = el('button', { type: 'button', class: 'copy', title: `copy ${ev.path}` }, 'copy');
    btn.addEventListener('click', async () => { btn.textContent = (await copyText(ev.path)) ? 'copied' : 'copy failed'; });
    return el('span', { class: 'events-path' }, el('code', {}, ev.path), ' ', btn);
  }
}
