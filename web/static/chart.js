// The stacked charts of one job: one canvas per resource for the line,
// task bands and grid (cheap at 10,000 points), an SVG overlay on each for
// what people point at (peak markers, the cursor, the drag selection, the
// highlighted task), a task strip above and one time axis below, all on
// the same time scale. The charts only draw and report gestures; the page
// (job.js) decides what a pick, a zoom or a reset does.

import { RESOURCES, RESOURCE_ORDER, fmtValue, fmtClock, fmtDuration, el, svg, taskLabel } from './format.js';
import { lowerBound, nearestIndex, yScale, timeTicks } from './scale.js';
import { pressureBand, pressureLegend, drawPressureBand, pressureText } from './pressure.js';

// Plot margins in CSS pixels, the same in every chart so points align.
const MARGIN = { left: 68, right: 24, top: 10, bottom: 6 };
// A press that moves less than this is a click, not a drag.
const DRAG_PX = 5;
// A click on the line waits this long for a double click (reset) before
// it picks; picks keep the browser's transient activation for seconds.
const DBLCLICK_MS = 260;

// cssVar reads a custom property of el, for canvas colors that follow the
// page theme.
function cssVar(node, name) {
  return getComputedStyle(node).getPropertyValue(name).trim();
}

// ellipsize fits text into width px.
function ellipsize(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(`${text.slice(0, mid)}…`).width <= width) lo = mid; else hi = mid - 1;
  }
  return lo > 0 ? `${text.slice(0, lo)}…` : '';
}

// setupCanvas sizes a canvas to its box at the device pixel ratio and
// returns a context in CSS pixels.
function setupCanvas(canvas, w, h) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(w * dpr));
  canvas.height = Math.max(1, Math.round(h * dpr));
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return ctx;
}

export class ChartStack {
  // handlers: taskAt(counter, t) → task or null; events(task) → its events;
  // pick(info) when a point, peak or task is clicked or chosen by keyboard;
  // zoom(fromMs, toMs); zoomStep(factor, centerMs); reset(); hoverTask(task).
  constructor(root, handlers) {
    this.root = root;
    this.handlers = handlers;
    this.view = null;
    this.charts = [];
    this.cursor = null; // {ci, idx, keyboard}
    this.highlight = null;
    this.drag = null;
    this.pickTimer = 0;
    this.strip = el('div', { class: 'task-strip', 'aria-hidden': 'true' }, el('canvas'));
    this.stack = el('div', { class: 'chart-list' });
    this.axis = el('div', { class: 'time-axis', 'aria-hidden': 'true' }, el('canvas'));
    this.tooltip = el('div', { class: 'tooltip', role: 'tooltip', id: 'chart-tooltip', hidden: true });
    this.live = el('div', { class: 'sr-only', 'aria-live': 'polite' });
    root.replaceChildren(this.strip, this.stack, this.axis, this.tooltip, this.live);
    this.stripTasks = [];
    this.strip.addEventListener('mousemove', (e) => this.stripHover(e));
    this.strip.addEventListener('mouseleave', () => { this.hideTooltip(); this.setHighlight(null); this.renderOverlays(); });
    this.strip.addEventListener('click', (e) => this.stripClick(e));
    this.onWindowMove = (e) => this.dragMove(e);
    this.onWindowUp = (e) => this.dragEnd(e);
    new ResizeObserver(() => this.scheduleDraw()).observe(root);
    this.watchDensity();
  }

  // watchDensity redraws when the device pixel ratio changes (browser
  // zoom, a window moved to another screen), so canvases stay sharp.
  watchDensity() {
    matchMedia(`(resolution: ${window.devicePixelRatio}dppx)`).addEventListener('change', () => {
      this.scheduleDraw();
      this.watchDensity();
    }, { once: true });
  }

  // plotWidth is the width in CSS px the lines get, for choosing points.
  plotWidth() {
    return Math.max(100, this.root.clientWidth - MARGIN.left - MARGIN.right);
  }

  // setView shows a payload window: {from, to, series, tasks (by start)}.
  setView(view) {
    this.view = view;
    let from = view.from;
    let to = view.to;
    if (!(to > from)) { from -= 1000; to += 1000; }
    this.from = from;
    this.to = to;
    const present = RESOURCE_ORDER.map((r) => view.series.find((s) => s.resource === r)).filter(Boolean);
    const same = present.length === this.charts.length && present.every((s, i) => this.charts[i].resource === s.resource);
    if (!same) {
      this.charts = present.map((s) => this.buildChart(s.resource));
      this.stack.replaceChildren(...this.charts.map((c) => c.el));
    }
    present.forEach((s, i) => {
      const c = this.charts[i];
      c.series = s;
      c.el.dataset.points = String(s.t.length);
      c.el.dataset.rawSamples = String(s.raw_samples);
      let m = s.peak ? s.peak.v : 0;
      for (const v of s.v) if (v > m) m = v;
      c.y = yScale(s.resource, m);
      pressureLegend(c.legend, pressureBand(view, s.resource), s.resource, () => this.draw());
    });
    this.strip.hidden = view.tasks.length === 0 || this.charts.length === 0;
    this.axis.hidden = this.charts.length === 0;
    if (this.cursor && (this.cursor.ci >= this.charts.length || this.cursor.idx >= this.charts[this.cursor.ci].series.t.length)) {
      this.cursor = null;
    }
    this.draw();
  }

  buildChart(resource) {
    const meta = RESOURCES[resource];
    const canvas = el('canvas');
    const overlay = svg('svg', { class: 'overlay' });
    const dyn = svg('g', { class: 'dynamic' }); // highlight, selection, cursor
    const peakLayer = svg('g', { class: 'peaks' });
    overlay.append(dyn, peakLayer);
    const plot = el('div', { class: 'plot' }, canvas, overlay);
    const legend = el('span', { class: 'pressure-legend', hidden: true });
    const title = el('h3', { class: 'chart-title' }, el('span', { class: `swatch ${resource}` }), meta.label,
      el('span', { class: 'unit' }, resource === 'memory' ? 'binary units: MiB, GiB' : meta.unitLabel), legend);
    const node = el('section', {
      class: 'chart', tabindex: '0', dataset: { resource },
      'aria-label': `${meta.label} chart. Left and right arrows move between points, P jumps to the peak, Enter opens the events of the task at the cursor, plus and minus zoom, Escape resets the zoom.`,
      'aria-describedby': 'chart-tooltip',
    }, title, plot);
    const c = { resource, el: node, plot, canvas, overlay, dyn, peakLayer, legend, series: null, y: null };
    plot.addEventListener('mousemove', (e) => this.hover(c, e));
    plot.addEventListener('mouseleave', () => this.unhover());
    plot.addEventListener('mousedown', (e) => this.dragStart(c, e));
    plot.addEventListener('dblclick', (e) => { e.preventDefault(); clearTimeout(this.pickTimer); this.handlers.reset(); });
    node.addEventListener('keydown', (e) => this.key(c, e));
    node.addEventListener('focus', () => this.focusChart(c));
    node.addEventListener('blur', () => { if (this.cursor && this.cursor.keyboard) { this.cursor = null; this.renderOverlays(); this.hideTooltip(); } });
    return c;
  }

  scheduleDraw() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = 0; if (this.view) this.draw(); });
  }

  x(t, w) {
    return MARGIN.left + ((t - this.from) / (this.to - this.from)) * (w - MARGIN.left - MARGIN.right);
  }

  tAt(x, w) {
    return this.from + ((x - MARGIN.left) / (w - MARGIN.left - MARGIN.right)) * (this.to - this.from);
  }

  draw() {
    if (!this.view) return;
    const w = this.root.clientWidth;
    if (w === 0) return;
    const { ticks, step } = timeTicks(this.from, this.to, w - MARGIN.left - MARGIN.right);
    for (const c of this.charts) this.drawChart(c, w, ticks);
    this.drawStrip(w);
    this.drawAxis(w, ticks, step);
    this.renderOverlays();
  }

  drawChart(c, w, xticks) {
    const h = c.plot.clientHeight;
    const ctx = setupCanvas(c.canvas, w, h);
    const top = MARGIN.top;
    const bottom = h - MARGIN.bottom;
    const left = MARGIN.left;
    const right = w - MARGIN.right;
    const yOf = (v) => bottom - (v / c.y.max) * (bottom - top);
    // Task bands, alternating, behind everything.
    const bands = [cssVar(this.root, '--band-a'), cssVar(this.root, '--band-b')];
    this.view.tasks.forEach((task, i) => {
      const x0 = Math.max(left, this.x(task.start, w));
      const x1 = Math.min(right, this.x(task.end, w));
      if (x1 > x0) {
        ctx.fillStyle = bands[i % 2];
        ctx.fillRect(x0, top, x1 - x0, bottom - top);
      }
    });
    // The pressure band, behind the grid and the line.
    c.canvas.pressure = drawPressureBand(ctx, pressureBand(this.view, c.resource), c.resource, (t) => this.x(t, w),
      { left, right, top, bottom }, cssVar(this.root, '--pressure'));
    // Grid and value labels.
    ctx.strokeStyle = cssVar(this.root, '--grid');
    ctx.fillStyle = cssVar(this.root, '--muted');
    ctx.lineWidth = 1;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    ctx.beginPath();
    for (const tk of c.y.ticks) {
      const y = Math.round(yOf(tk.v)) + 0.5;
      ctx.moveTo(left, y);
      ctx.lineTo(right, y);
      ctx.fillText(tk.label, left - 8, Math.min(Math.max(y, top + 5), bottom - 4));
    }
    for (const t of xticks) {
      const x = Math.round(this.x(t, w)) + 0.5;
      ctx.moveTo(x, top);
      ctx.lineTo(x, bottom);
    }
    ctx.stroke();
    // The line and the area under it.
    const s = c.series;
    const n = s.t.length;
    const color = cssVar(this.root, RESOURCES[c.resource].colorVar);
    ctx.save();
    ctx.beginPath();
    ctx.rect(left - 4, top - 4, right - left + 8, bottom - top + 8);
    ctx.clip();
    // What was placed on the canvas, kept for reading back (the browser
    // tests compare it and the pixels with the payload): line vertices,
    // or dots for a single point.
    let vertices = 0;
    let dots = 0;
    if (n > 1) {
      ctx.beginPath();
      ctx.moveTo(this.x(s.t[0], w), bottom);
      for (let i = 0; i < n; i++) ctx.lineTo(this.x(s.t[i], w), yOf(s.v[i]));
      ctx.lineTo(this.x(s.t[n - 1], w), bottom);
      ctx.closePath();
      ctx.globalAlpha = 0.14;
      ctx.fillStyle = color;
      ctx.fill();
      ctx.globalAlpha = 1;
      ctx.beginPath();
      for (let i = 0; i < n; i++) {
        const x = this.x(s.t[i], w);
        const y = yOf(s.v[i]);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
        vertices++;
      }
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.lineJoin = 'round';
      ctx.stroke();
    }
    // Dots where points are far apart, so single samples show.
    if (n > 0 && (right - left) / n >= 7) {
      ctx.fillStyle = color;
      const r = n === 1 ? 3.5 : 2.2;
      for (let i = 0; i < n; i++) {
        ctx.beginPath();
        ctx.arc(this.x(s.t[i], w), yOf(s.v[i]), r, 0, 2 * Math.PI);
        ctx.fill();
        dots++;
      }
    }
    ctx.restore();
    c.canvas.drawn = {
      points: n > 1 ? vertices : dots, color, dpr: window.devicePixelRatio || 1,
      from: this.from, to: this.to, left, right, top, bottom, yMax: c.y.max,
    };
    c.w = w;
    c.h = h;
    c.yOf = yOf;
    c.overlay.setAttribute('viewBox', `0 0 ${w} ${h}`);
    c.overlay.setAttribute('width', String(w));
    c.overlay.setAttribute('height', String(h));
    this.renderPeak(c);
  }

  drawStrip(w) {
    if (this.strip.hidden) return;
    const canvas = this.strip.firstChild;
    const h = this.strip.clientHeight;
    const ctx = setupCanvas(canvas, w, h);
    const left = MARGIN.left;
    const right = w - MARGIN.right;
    const fills = [cssVar(this.root, '--strip-a'), cssVar(this.root, '--strip-b')];
    const hl = cssVar(this.root, '--highlight');
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'left';
    ctx.fillStyle = cssVar(this.root, '--muted');
    ctx.fillText('tasks', 8, h / 2);
    this.stripTasks = [];
    this.view.tasks.forEach((task, i) => {
      const x0 = Math.max(left, this.x(task.start, w));
      const x1 = Math.min(right, this.x(task.end, w));
      if (x1 <= x0) return;
      this.stripTasks.push({ x0, x1, task });
      ctx.fillStyle = task === this.highlight ? hl : fills[i % 2];
      ctx.fillRect(x0, 1, Math.max(1, x1 - x0 - 1), h - 2);
      if (x1 - x0 > 36) {
        ctx.fillStyle = cssVar(this.root, '--fg');
        ctx.fillText(ellipsize(ctx, task.name || '(unnamed)', x1 - x0 - 10), x0 + 5, h / 2 + 0.5);
      }
    });
  }

  drawAxis(w, ticks, step) {
    if (this.axis.hidden) return;
    const canvas = this.axis.firstChild;
    const h = this.axis.clientHeight;
    const ctx = setupCanvas(canvas, w, h);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = cssVar(this.root, '--muted');
    ctx.strokeStyle = cssVar(this.root, '--grid');
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.beginPath();
    ctx.moveTo(MARGIN.left, 0.5);
    ctx.lineTo(w - MARGIN.right, 0.5);
    for (const t of ticks) {
      const x = Math.round(this.x(t, w)) + 0.5;
      ctx.moveTo(x, 0);
      ctx.lineTo(x, 4);
      ctx.fillText(fmtClock(t, step < 1000), x, 7);
    }
    ctx.stroke();
  }

  // renderOverlays redraws the SVG layer of every chart: highlighted
  // task, selection, cursor and peak marker.
  renderOverlays() {
    for (const c of this.charts) this.renderOverlay(c);
  }

  renderOverlay(c) {
    if (!c.w || !c.series) return;
    const { w, h } = c;
    const nodes = [];
    const top = MARGIN.top;
    const bottom = h - MARGIN.bottom;
    const left = MARGIN.left;
    const right = w - MARGIN.right;
    if (this.highlight) {
      const x0 = Math.max(left, this.x(this.highlight.start, w));
      const x1 = Math.min(right, this.x(this.highlight.end, w));
      if (x1 > x0) nodes.push(svg('rect', { class: 'hl-band', x: x0, y: top, width: x1 - x0, height: bottom - top }));
    }
    if (this.drag && this.drag.moved) {
      const x0 = Math.max(left, Math.min(this.drag.x0, this.drag.x1));
      const x1 = Math.min(right, Math.max(this.drag.x0, this.drag.x1));
      nodes.push(svg('rect', { class: 'selection', x: x0, y: top, width: Math.max(0, x1 - x0), height: bottom - top }));
    }
    const s = c.series;
    if (this.cursor) {
      const cur = this.charts[this.cursor.ci];
      const t = this.cursor.x !== undefined ? this.tAt(this.cursor.x, w) : cur.series.t[this.cursor.idx];
      const lx = this.cursor.x !== undefined ? this.cursor.x : this.x(t, w);
      nodes.push(svg('line', { class: 'cursor-line', x1: lx, x2: lx, y1: top, y2: bottom }));
      const idx = c === cur ? this.cursor.idx : nearestIndex(s.t, t);
      if (idx >= 0 && (c === cur || this.near(s, idx, t))) {
        nodes.push(svg('circle', { class: `cursor-dot ${c.resource}`, cx: this.x(s.t[idx], w), cy: c.yOf(s.v[idx]), r: c === cur ? 5 : 3.5 }));
      }
    }
    c.dyn.replaceChildren(...nodes);
  }

  // renderPeak rebuilds a chart's peak marker; it stays put while the
  // cursor moves, so keyboard focus on it survives, and keeps focus across
  // redraws (a resize, a live refresh).
  renderPeak(c) {
    const focused = c.peakLayer.contains(document.activeElement);
    c.peakLayer.replaceChildren();
    if (!c.series.peak) return;
    const marker = this.peakMarker(c);
    c.peakLayer.append(marker);
    if (focused) marker.focus({ preventScroll: true });
  }

  // near reports whether point idx of s is close enough to time t to be
  // read as "the value then" in another chart.
  near(s, idx, t) {
    const lo = s.t[Math.max(0, idx - 1)];
    const hi = s.t[Math.min(s.t.length - 1, idx + 1)];
    const slack = Math.max(hi - lo, (this.to - this.from) / 200);
    return Math.abs(s.t[idx] - t) <= slack;
  }

  peakMarker(c) {
    const p = c.series.peak;
    const task = this.handlers.taskAt(p.counter, p.t);
    const ev = this.handlers.events(task);
    const x = this.x(p.t, c.w);
    const y = c.yOf(p.v);
    const value = fmtValue(c.resource, p.v);
    const attrs = {
      class: `peak ${c.resource}`, 'data-resource': c.resource, tabindex: '0',
      'aria-label': `${RESOURCES[c.resource].label} peak ${value} at ${fmtClock(p.t, true)} in task ${task ? task.name : 'unknown'}: open its job events`,
    };
    if (ev.url) { attrs.href = ev.url; attrs.target = '_blank'; attrs.rel = 'noopener'; } else { attrs.role = 'button'; }
    const a = svg('a', attrs);
    a.append(svg('circle', { class: 'peak-ring', cx: x, cy: y, r: 9 }), svg('circle', { class: 'peak-dot', cx: x, cy: y, r: 4.5 }));
    const label = svg('text', { class: 'peak-label', y: Math.max(MARGIN.top + 11, y - 8) });
    label.textContent = `peak ${value}`;
    const flip = x > c.w - MARGIN.right - 130;
    c.peakLabelSide = flip ? 'left' : 'right';
    label.setAttribute('x', String(flip ? x - 13 : x + 13));
    label.setAttribute('text-anchor', flip ? 'end' : 'start');
    a.append(label);
    const info = () => this.info(c, -1);
    const show = () => {
      const inf = info();
      this.setHighlight(inf.task);
      this.renderOverlays();
      this.showInfo(c, inf, x, y, { awayFrom: c.peakLabelSide });
    };
    a.addEventListener('mouseenter', show);
    a.addEventListener('focus', show);
    a.addEventListener('blur', () => { this.hideTooltip(); this.setHighlight(null); this.renderOverlays(); });
    a.addEventListener('click', (e) => {
      if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return; // let the browser open a tab
      e.preventDefault();
      e.stopPropagation();
      this.handlers.pick(info());
    });
    a.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        e.stopPropagation();
        this.handlers.pick(info());
      }
    });
    return a;
  }

  // info describes point idx of chart c (-1: its peak) for tooltips and picks.
  info(c, idx) {
    const s = c.series;
    const p = idx < 0 ? s.peak : { t: s.t[idx], v: s.v[idx], counter: s.counter[idx] };
    const task = this.handlers.taskAt(p.counter, p.t);
    return { resource: c.resource, t: p.t, v: p.v, counter: p.counter, task, peak: idx < 0 || (s.peak && s.peak.t === p.t && s.peak.v === p.v) };
  }

  hover(c, e) {
    if (this.drag) return;
    if (e.target.closest && e.target.closest('.peak')) return;
    const rect = c.plot.getBoundingClientRect();
    const x = e.clientX - rect.left;
    if (x < MARGIN.left - 4 || x > c.w - MARGIN.right + 4) { this.unhover(); return; }
    const ci = this.charts.indexOf(c);
    const idx = nearestIndex(c.series.t, this.tAt(x, c.w));
    if (idx < 0) return;
    this.cursor = { ci, idx, x, keyboard: false };
    const inf = this.info(c, idx);
    this.setHighlight(inf.task);
    this.renderOverlays();
    this.showInfo(c, inf, this.x(inf.t, c.w), c.yOf(inf.v));
  }

  unhover() {
    if (this.drag) return;
    if (this.cursor && !this.cursor.keyboard) {
      this.cursor = null;
      this.setHighlight(null);
      this.renderOverlays();
      this.hideTooltip();
    }
  }

  setHighlight(task) {
    if (this.highlight === task) return;
    this.highlight = task;
    if (this.view) this.drawStrip(this.root.clientWidth);
    this.handlers.hoverTask(task);
  }

  // highlightTask marks a task's span (from the table), or clears it.
  highlightTask(task) {
    if (this.highlight === task) return;
    this.highlight = task;
    if (!this.view) return;
    this.drawStrip(this.root.clientWidth);
    this.renderOverlays();
  }

  // showInfo fills the tooltip for a point and places it beside (x, y) of
  // chart c: on the right where it fits, or on the side away from a label.
  showInfo(c, inf, x, y, { awayFrom = null } = {}) {
    const meta = RESOURCES[inf.resource];
    const ev = this.handlers.events(inf.task);
    const rows = [
      el('div', { class: 'tt-time' }, fmtClock(inf.t, true),
        el('span', { class: 'muted' }, ` +${fmtDuration(inf.t - this.view.jobStart)}`)),
      el('div', { class: 'tt-value' }, el('span', { class: `swatch ${inf.resource}` }), `${meta.label} `,
        el('b', {}, fmtValue(inf.resource, inf.v)), inf.peak ? el('span', { class: 'badge' }, 'peak') : null),
      el('div', { class: 'tt-task' }, inf.task ? taskLabel(inf.task) : 'no task known'),
      el('div', { class: 'tt-counter' }, inf.counter > 0
        ? `counter ${inf.counter}${ev.known ? ` · events ${ev.gte}–${ev.lte}` : ''}`
        : 'counter unknown · events unknown'),
    ];
    const others = [];
    for (const o of this.charts) {
      if (o === c) continue;
      const j = nearestIndex(o.series.t, inf.t);
      if (j >= 0 && this.near(o.series, j, inf.t)) others.push(`${RESOURCES[o.resource].label} ${fmtValue(o.resource, o.series.v[j])}`);
    }
    if (others.length) rows.push(el('div', { class: 'tt-others' }, others.join(' · ')));
    const waited = pressureText(this.view, inf.resource, inf.t);
    if (waited) rows.push(el('div', { class: 'tt-pressure' }, waited));
    rows.push(el('div', { class: 'tt-hint' }, this.cursor && this.cursor.keyboard ? 'Enter: open events' : 'click: open events · drag: zoom'));
    this.tooltip.replaceChildren(...rows);
    this.tooltip.hidden = false;
    const rootRect = this.root.getBoundingClientRect();
    const plotRect = c.plot.getBoundingClientRect();
    const px = plotRect.left - rootRect.left + x;
    const py = plotRect.top - rootRect.top + y;
    const tw = this.tooltip.offsetWidth;
    const th = this.tooltip.offsetHeight;
    let left = awayFrom === 'right' ? px - 16 - tw : px + 16;
    if (left + tw > rootRect.width - 4) left = px - 16 - tw;
    if (left < 4) left = px + 16;
    const topPx = Math.min(Math.max(4, py - th / 2), Math.max(4, this.root.clientHeight - th - 4));
    this.tooltip.style.left = `${Math.max(4, left)}px`;
    this.tooltip.style.top = `${topPx}px`;
  }

  hideTooltip() {
    this.tooltip.hidden = true;
  }

  dragStart(c, e) {
    if (e.button !== 0 || (e.target.closest && e.target.closest('.peak'))) return;
    e.preventDefault(); // no text selection while dragging
    // Focus the chart for the keys that may follow, without the keyboard
    // cursor that focusing by Tab puts on the peak.
    this.focusByPointer = true;
    c.el.focus({ preventScroll: true });
    this.focusByPointer = false;
    const rect = c.plot.getBoundingClientRect();
    this.drag = { c, left: rect.left, x0: e.clientX - rect.left, x1: e.clientX - rect.left, moved: false };
    window.addEventListener('mousemove', this.onWindowMove);
    window.addEventListener('mouseup', this.onWindowUp);
  }

  dragMove(e) {
    const d = this.drag;
    if (!d) return;
    d.x1 = e.clientX - d.left;
    if (Math.abs(d.x1 - d.x0) >= DRAG_PX) d.moved = true;
    if (d.moved) {
      this.hideTooltip();
      this.renderOverlays();
    }
  }

  dragEnd(e) {
    const d = this.drag;
    window.removeEventListener('mousemove', this.onWindowMove);
    window.removeEventListener('mouseup', this.onWindowUp);
    if (!d) return;
    this.drag = null;
    const w = d.c.w;
    if (d.moved) {
      const x0 = Math.max(MARGIN.left, Math.min(d.x0, d.x1));
      const x1 = Math.min(w - MARGIN.right, Math.max(d.x0, d.x1));
      this.renderOverlays();
      if (x1 - x0 >= DRAG_PX) this.handlers.zoom(Math.floor(this.tAt(x0, w)), Math.ceil(this.tAt(x1, w)));
      return;
    }
    // A click on the line: pick the nearest point, unless a double click
    // (reset) follows.
    if (e.detail > 1) return;
    const idx = nearestIndex(d.c.series.t, this.tAt(d.x0, w));
    if (idx < 0) return;
    const inf = this.info(d.c, idx);
    clearTimeout(this.pickTimer);
    this.pickTimer = setTimeout(() => this.handlers.pick(inf), DBLCLICK_MS);
  }

  focusChart(c) {
    if (this.focusByPointer) return;
    const ci = this.charts.indexOf(c);
    if (this.cursor && this.cursor.ci === ci) return;
    const s = c.series;
    let idx = s.peak ? lowerBound(s.t, s.peak.t) : 0;
    if (idx >= s.t.length) idx = s.t.length - 1;
    if (idx >= 0) this.moveCursor(c, idx);
  }

  moveCursor(c, idx) {
    const ci = this.charts.indexOf(c);
    this.cursor = { ci, idx, keyboard: true };
    const inf = this.info(c, idx);
    this.setHighlight(inf.task);
    this.renderOverlays();
    const x = this.x(inf.t, c.w);
    const y = c.yOf(inf.v);
    this.showInfo(c, inf, x, y, { awayFrom: inf.peak ? c.peakLabelSide : null });
    this.live.textContent = `${fmtClock(inf.t, true)}, ${RESOURCES[c.resource].label} ${fmtValue(c.resource, inf.v)}, task ${inf.task ? inf.task.name : 'unknown'}, ${inf.counter > 0 ? `counter ${inf.counter}` : 'counter unknown'}`;
  }

  key(c, e) {
    if (e.target !== c.el) return; // keys on a peak marker are its own
    const n = c.series.t.length;
    const ci = this.charts.indexOf(c);
    const cur = this.cursor && this.cursor.ci === ci ? this.cursor.idx : -1;
    const move = (i) => { e.preventDefault(); this.moveCursor(c, Math.max(0, Math.min(n - 1, i))); };
    const big = Math.max(1, Math.round(n / 20));
    switch (e.key) {
      case 'ArrowRight': return move(cur < 0 ? 0 : cur + (e.shiftKey ? big : 1));
      case 'ArrowLeft': return move(cur < 0 ? n - 1 : cur - (e.shiftKey ? big : 1));
      case 'PageDown': return move(cur + big);
      case 'PageUp': return move(cur - big);
      case 'Home': return move(0);
      case 'End': return move(n - 1);
      case 'p': case 'P':
        if (c.series.peak) move(lowerBound(c.series.t, c.series.peak.t));
        return undefined;
      case 'Enter': case ' ':
        if (cur >= 0) { e.preventDefault(); this.handlers.pick(this.info(c, cur)); }
        return undefined;
      case '+': case '=':
        e.preventDefault();
        this.handlers.zoomStep(0.5, cur >= 0 ? c.series.t[cur] : (this.from + this.to) / 2);
        return undefined;
      case '-': case '_':
        e.preventDefault();
        this.handlers.zoomStep(2, cur >= 0 ? c.series.t[cur] : (this.from + this.to) / 2);
        return undefined;
      case 'Escape':
        e.preventDefault();
        this.handlers.reset();
        return undefined;
    }
    return undefined;
  }

  stripAt(e) {
    const x = e.clientX - this.strip.getBoundingClientRect().left;
    return this.stripTasks.find((b) => x >= b.x0 && x < b.x1) || null;
  }

  stripHover(e) {
    const b = this.stripAt(e);
    if (!b) { this.hideTooltip(); this.setHighlight(null); this.renderOverlays(); return; }
    const { task } = b;
    this.setHighlight(task);
    this.renderOverlays();
    const ev = this.handlers.events(task);
    this.tooltip.replaceChildren(
      el('div', { class: 'tt-task' }, taskLabel(task)),
      el('div', { class: 'tt-time' }, `${fmtClock(task.start, true)} – ${fmtClock(task.end, true)} (${fmtDuration(task.end - task.start)})`),
      el('div', { class: 'tt-counter' }, ev.known ? `counter ${task.counter} · events ${ev.gte}–${ev.lte}` : 'counter unknown · events unknown'),
      el('div', { class: 'tt-hint' }, 'click: open events'),
    );
    this.tooltip.hidden = false;
    const rootRect = this.root.getBoundingClientRect();
    const left = Math.min(e.clientX - rootRect.left + 12, rootRect.width - this.tooltip.offsetWidth - 4);
    this.tooltip.style.left = `${Math.max(4, left)}px`;
    this.tooltip.style.top = `${this.strip.offsetTop + this.strip.offsetHeight + 4}px`;
  }

  stripClick(e) {
    const b = this.stripAt(e);
    if (!b) return;
    this.handlers.pick({ resource: null, t: b.task.start, v: null, counter: b.task.counter, task: b.task, peak: false });
  }
}
