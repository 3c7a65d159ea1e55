// The pressure band of the job page's charts: behind the CPU line, the
// share of each sample interval the job waited for a CPU; behind the
// memory line, the share it waited on memory (the graph payload's
// `pressure`, from the kernel's pressure stall counters). The band's
// height is the share: the plot's full height is 100 % of the interval.
// A job measured without stall figures has no band and no legend entry.
// The legend entry in each chart's title shows or hides the band.

import { el } from './format.js';

// The stall signal drawn behind each resource's line.
const SIGNAL = { cpu: 'cpu', memory: 'memory' };
const LABEL = { cpu: 'waited for a CPU', memory: 'waited on memory' };

// hidden holds the signals whose band the legend turned off, for the
// page's lifetime (zoom and live refreshes keep the choice).
const hidden = new Set();

// pressureBand returns the payload's band drawn behind resource's line,
// or null when the job has none.
export function pressureBand(view, resource) {
  const sig = SIGNAL[resource];
  if (!sig || !view || !Array.isArray(view.pressure)) return null;
  const b = view.pressure.find((p) => p.signal === sig);
  return b && b.t.length > 0 ? b : null;
}

// pressureLegend fills a chart's legend slot for its band: a toggle
// with the band's swatch, or nothing without a band. redraw is called
// after a toggle.
export function pressureLegend(slot, band, resource, redraw) {
  if (!band) {
    slot.replaceChildren();
    slot.hidden = true;
    return;
  }
  const sig = SIGNAL[resource];
  if (slot.dataset.signal === sig && slot.firstChild) {
    slot.hidden = false;
    return; // already built: keep the toggle (and its focus)
  }
  const box = el('input', { type: 'checkbox', class: 'pressure-toggle', dataset: { signal: sig } });
  box.checked = !hidden.has(sig);
  box.addEventListener('change', () => {
    if (box.checked) hidden.delete(sig); else hidden.add(sig);
    redraw();
  });
  slot.dataset.signal = sig;
  slot.hidden = false;
  slot.replaceChildren(el('label', {
    class: 'pressure-legend-entry',
    title: `shaded: the share of each sample interval the job ${LABEL[resource]} (other work on the node, or its limits), full height = 100 % of the interval`,
  }, box, el('span', { class: 'swatch pressure' }), `${LABEL[resource]} (share of interval)`));
}

// drawPressureBand draws a chart's band on ctx, behind the line: one
// rectangle per interval from x(from) to x(t), share × the plot height
// high. It returns what it placed, kept on the canvas for reading back:
// {signal, from, t, share, color} of the drawn intervals, or null.
export function drawPressureBand(ctx, band, resource, x, box, color) {
  if (!band || hidden.has(SIGNAL[resource])) return null;
  const { left, right, top, bottom } = box;
  const drawn = { signal: band.signal, from: [], t: [], share: [], color };
  ctx.save();
  ctx.fillStyle = color;
  ctx.globalAlpha = 0.22;
  for (let k = 0; k < band.t.length; k++) {
    const x0 = Math.max(left, x(band.from[k]));
    const x1 = Math.min(right, x(band.t[k]));
    if (!(x1 > x0)) continue;
    const h = Math.min(1, Math.max(0, band.share[k])) * (bottom - top);
    if (h > 0) ctx.fillRect(x0, bottom - h, x1 - x0, h);
    drawn.from.push(band.from[k]);
    drawn.t.push(band.t[k]);
    drawn.share.push(band.share[k]);
  }
  ctx.restore();
  return drawn;
}

// pressureText is the tooltip line of the band at time t, or null.
export function pressureText(view, resource, t) {
  const b = pressureBand(view, resource);
  if (!b || hidden.has(SIGNAL[resource])) return null;
  for (let k = 0; k < b.t.length; k++) {
    if (t > b.from[k] && t <= b.t[k]) return `${LABEL[resource]} ${(b.share[k] * 100).toFixed(b.share[k] < 0.1 ? 1 : 0)} % of the interval`;
  }
  return null;
}
