// A job's state as the pages show it: the server maps every status a
// sender reports onto running, successful, failed, canceled or unknown
// (the "status" of the jobs list and of the graph payload). A job is
// live while it runs: its status says so. Only a job whose status is
// unknown (no sender said, e.g. remote write) is taken as live while its
// newest data is recent, for want of anything better.

import { el } from './format.js';

export const STATES = ['running', 'successful', 'failed', 'canceled', 'unknown'];

// A job of unknown status whose newest data is this recent may be running.
export const UNKNOWN_LIVE_MS = 30_000;

// isLive tells whether a job is still running: by its status, or for an
// unknown status by how recent its newest data (lastMs) is.
export function isLive(status, lastMs, nowMs = Date.now()) {
  if (status === 'running') return true;
  if (status && status !== 'unknown') return false;
  return Number.isFinite(lastMs) && nowMs - lastMs <= UNKNOWN_LIVE_MS;
}

// stateBadge shows a state; reported is the sender's own word when it
// differs (AWX's "error" shows as failed, with "error" in its title).
export function stateBadge(status, reported) {
  const state = STATES.includes(status) ? status : 'unknown';
  const title = reported && reported !== state ? `reported as “${reported}”` : (state === 'unknown' ? 'no status was reported for this job' : `the job is ${state}`);
  return el('span', { class: `state ${state}`, dataset: { state }, title }, state);
}
