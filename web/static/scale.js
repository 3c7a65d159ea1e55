// Axes: the value scale of each resource and the shared time scale, and
// the binary searches that find points by time. Pure functions of numbers.

import { bytesUnit } from './format.js';

// Time axis steps, in ms.
const TIME_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3,
  60e3, 120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3, 7200e3, 10800e3, 21600e3, 43200e3, 86400e3];

// lowerBound returns the first index i with ts[i] >= t.
export function lowerBound(ts, t) {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < t) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// nearestIndex returns the index of the time closest to t, or -1.
export function nearestIndex(ts, t) {
  if (ts.length === 0) return -1;
  const i = lowerBound(ts, t);
  if (i === 0) return 0;
  if (i === ts.length) return ts.length - 1;
  return t - ts[i - 1] <= ts[i] - t ? i - 1 : i;
}

// niceStep rounds raw up to 1, 2, 2.5 or 5 × 10^k.
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
}

// yScale chooses the value axis of a resource: top, ticks and labels.
export function yScale(resource, dataMax) {
  let scale = 1;
  let suffix = resource === 'cpu' ? ' %' : '';
  if (resource === 'memory') {
    const u = bytesUnit(dataMax);
    scale = u.scale;
    suffix = ` ${u.name}`;
  }
  const m = Math.max(dataMax / scale, resource === 'pids' ? 1 : 0) || 1;
  let step = niceStep(m / 3.5);
  if (resource === 'pids') step = Math.max(1, Math.ceil(step));
  const top = Math.ceil((m * 1.06) / step) * step;
  const ticks = [];
  const mag = Math.floor(Math.log10(step));
  const lead = step / 10 ** mag; // 1, 2, 2.5 or 5, give or take rounding
  const digits = Math.max(0, -mag + (Math.abs(lead - Math.round(lead)) > 1e-9 ? 1 : 0));
  for (let k = 0; k * step <= top + step / 2; k++) {
    ticks.push({ v: k * step * scale, label: `${(k * step).toFixed(digits)}${suffix}` });
  }
  return { max: top * scale, ticks };
}

// timeTicks chooses time axis ticks for [fromMs, toMs] drawn over widthPx:
// a step from TIME_STEPS leaving about 110 px per label, ticks on local
// wall-clock multiples of it.
export function timeTicks(fromMs, toMs, widthPx) {
  const span = toMs - fromMs;
  const want = Math.max(2, Math.floor(widthPx / 110));
  const step = TIME_STEPS.find((s) => span / s <= want) || TIME_STEPS[TIME_STEPS.length - 1];
  const offset = new Date(fromMs).getTimezoneOffset() * 60e3;
  const ticks = [];
  for (let t = Math.ceil((fromMs - offset) / step) * step + offset; t <= toMs; t += step) ticks.push(t);
  return { step, ticks };
}
