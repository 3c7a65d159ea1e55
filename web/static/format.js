// Formatting and small helpers shared by the pages: units, times, the
// job-events link of a task, and safe DOM building (text is always set as
// text, never as HTML, because task names come from playbooks).

// RESOURCES describes the three resources in the order the page stacks them.
export const RESOURCES = {
  cpu: { label: 'CPU', unitLabel: '% of one CPU', colorVar: '--cpu' },
  memory: { label: 'Memory', unitLabel: 'bytes', colorVar: '--memory' },
  pids: { label: 'PIDs', unitLabel: 'processes', colorVar: '--pids' },
};
export const RESOURCE_ORDER = ['cpu', 'memory', 'pids'];

const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

// bytesUnit picks the binary unit that shows v with 1 to 3 integer digits.
export function bytesUnit(v) {
  let i = 0;
  while (i < BINARY_UNITS.length - 1 && Math.abs(v) >= 1024 ** (i + 1)) i++;
  return { name: BINARY_UNITS[i], scale: 1024 ** i };
}

// fmtBytes renders bytes in binary units with one decimal:
// 324698112 → "309.7 MiB".
export function fmtBytes(v) {
  if (!Number.isFinite(v)) return '–';
  const u = bytesUnit(v);
  const x = v / u.scale;
  if (u.scale === 1) return `${Math.round(x)} B`;
  return `${x.toFixed(1)} ${u.name}`;
}

// fmtValue renders one value of a resource with its unit.
export function fmtValue(resource, v) {
  if (v === undefined || v === null || !Number.isFinite(v)) return '–';
  switch (resource) {
    case 'cpu': return `${v.toFixed(v >= 100 ? 0 : 1)} %`;
    case 'memory': return fmtBytes(v);
    case 'pids': return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }
  return String(v);
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// fmtClock renders a unix-ms time as local HH:MM:SS, with milliseconds
// when withMs.
export function fmtClock(ms, withMs = false) {
  const d = new Date(ms);
  const s = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withMs ? `${s}.${pad(d.getMilliseconds(), 3)}` : s;
}

// fmtDate renders a unix-ms time as local YYYY-MM-DD.
export function fmtDate(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

// fmtZone names the browser's time zone at a unix-ms time by its offset
// from UTC: "UTC", "UTC+1", "UTC−3", "UTC+5:30".
export function fmtZone(ms) {
  const off = -new Date(ms).getTimezoneOffset(); // minutes east of UTC
  if (off === 0) return 'UTC';
  const a = Math.abs(off);
  return `UTC${off > 0 ? '+' : '−'}${Math.floor(a / 60)}${a % 60 ? `:${pad(a % 60)}` : ''}`;
}

// fmtDateTime renders a unix-ms time as local "YYYY-MM-DD HH:MM:SS" and
// its zone: "2026-12-02 01:05:33 UTC+1".
export function fmtDateTime(ms) {
  return `${fmtDate(ms)} ${fmtClock(ms)} ${fmtZone(ms)}`;
}

// fmtDuration renders milliseconds for people: "850 ms", "5.9 s",
// "2 min 05 s", "1 h 02 min".
export function fmtDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const total = Math.round(s);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  if (h > 0) return `${h} h ${pad(m)} min`;
  return `${m} min ${pad(total % 60)} s`;
}

// fmtCount renders an integer with thousands separators.
export function fmtCount(n) {
  return Number.isFinite(n) ? n.toLocaleString('en-US') : '–';
}

// BEFORE_FIRST_TASK names the samples taken before a job's first task
// started (counter 0 with no name: ansible's own start-up, or a whole
// job collected without job events).
export const BEFORE_FIRST_TASK = 'before first task';

// taskLabel is how the pages name a task of a job's tasks payload: its
// name, BEFORE_FIRST_TASK for the samples before the first task, else
// "(unnamed task)" for a task its events name not.
export function taskLabel(task) {
  if (task.name) return task.name;
  return task.counter > 0 ? '(unnamed task)' : BEFORE_FIRST_TASK;
}

// pathSegment escapes a job id for one URL path segment, leaving the
// characters a path segment may hold as they are (":" of timestamped ids
// above all): the server routes on the raw path when it is escaped
// differently from Go's own escaping, and would then not find the job.
export function pathSegment(s) {
  return encodeURIComponent(s).replace(/%(3A|40|24|26|2B|2C|3B|3D)/gi, (m) => decodeURIComponent(m));
}

// awxEventsPath is the AWX API search of a counter range, for copying
// when no events_url template is configured.
export function awxEventsPath(jobId, gte, lte) {
  return `/api/v2/jobs/${pathSegment(jobId)}/job_events/?counter__gte=${gte}&counter__lte=${lte}`;
}

// taskEvents says where a task's job events are: {known: false} when its
// counter is unknown (0), else the counter range, the link to open (url:
// the AWX UI's job output page, jobURL, when the server has one, else
// the filled-in events template; null without either; output tells
// which) and the AWX API path.
export function taskEvents(task, template, jobId, jobURL) {
  if (!task || !task.events || !(task.counter > 0)) return { known: false };
  const gte = task.events.counter_gte;
  const lte = task.events.counter_lte;
  const search = template
    ? template.replaceAll('{counter_gte}', String(gte)).replaceAll('{counter_lte}', String(lte))
    : null;
  const url = jobURL || search;
  return { known: true, gte, lte, url, output: !!jobURL, path: awxEventsPath(jobId, gte, lte) };
}

// el builds an element: el('a', {href: u, class: 'x'}, 'text', child…).
// Attribute values and text children are never parsed as HTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

// svg builds an SVG element with attributes.
export function svg(tag, attrs = {}) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  return node;
}

// copyText puts text on the clipboard, falling back to a selected field
// where the Clipboard API is unavailable (plain http off localhost).
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = el('textarea', { class: 'offscreen', readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch { ok = false; }
    ta.remove();
    return ok;
  }
}

// apiError turns a failed API answer into a message for people.
export async function apiError(resp) {
  let msg = `${resp.status} ${resp.statusText}`;
  try {
    const body = await resp.json();
    if (body && body.error) msg = body.error;
  } catch { /* not JSON: keep the status line */ }
  return msg;
}
