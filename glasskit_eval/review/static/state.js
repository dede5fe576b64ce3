// The page's one state object, and pure reads of it. Everything the page shows is drawn
// from here; every module that changes it goes through the functions of app.js.
import { atList, rawTimes, sameTime, snapTime, nearestIndex } from "./util.js";
import { History } from "./history.js";

export const state = {
  session: null, // /api/session: eval dir, deep link, report path, report arms
  arm: null, // a report with arms: the arm whose results the overlay shows (null: the control, the first)
  cases: [], // case summaries for the list
  caseId: null,
  // The case as the server last confirmed it: file text (source), revision, parsed blocks, markers.
  detail: null,
  // targetId -> raw sample blocks as shown; ahead of `detail` while a write is in flight.
  raws: {},
  // targetId -> a stream target's raw events as shown (file order), ahead of `detail` likewise.
  events: {},
  // The selected event of a stream target: {target, index} (apart from `selection`, which is a sample block's).
  eventSel: null,
  targetId: null,
  // What edits act on: {target, block, tick}; tick is the index in an `at` list, null for a range.
  selection: null,
  time: 0, // the playhead, seconds
  frameTimes: [], // the video's frame table
  frame: null, // the exact frame shown: {requested, index, media, hash}
  conflict: false, // the file changed on disk: writes stop until the case is reloaded
  prompt: null, // a question the next key answers: {text, keys: {key: action}, buttons}
  // The frame lock's view of the case, for the revision it was computed on: {revision, lock_file,
  // error, counts, problems, byTime: Map "target@time" -> {status, label, problem, message}};
  // null for a case without a lock, {loading: true} while the server decodes.
  pins: null,
  // The selected sample's clip as /clip sent it ({target, time_s, clip: {window, frames, ...}}), or null.
  clip: null,
  histories: new Map(), // caseId -> History
  saves: 0, // writes completed (tests wait on it)
};

export function history(caseId = state.caseId) {
  if (!state.histories.has(caseId)) state.histories.set(caseId, new History());
  return state.histories.get(caseId);
}

export const duration = () => state.detail?.video?.duration_s || 0;
export const blockTimes = (raw) => rawTimes(raw, state.detail?.every_s);
export const editable = () => !!state.detail?.editable && !state.conflict;
export const target = (id = state.targetId) => state.detail?.targets.find((t) => t.id === id) || null;
export const playheadTime = () => snapTime(state.frameTimes, state.time);

export function frameIndexNow() {
  return state.frame && Math.abs(state.frame.requested - state.time) < 1e-9
    ? state.frame.index : nearestIndex(state.frameTimes, state.time);
}

// A list's onsets and its indices in onset order (file order among equal onsets), worked out
// once per list: the page replaces a list on every edit and never changes one in place.
const ORDERS = new WeakMap();
export function onsetOrder(events) {
  let found = ORDERS.get(events);
  if (!found) {
    const ats = Float64Array.from(events, (raw) => Number(raw.at));
    const order = Uint32Array.from(events.keys());
    // Files list events in time order nearly always: then file order is the order, with no sort.
    if (ats.some((at, k) => k > 0 && at < ats[k - 1])) order.sort((a, b) => ats[a] - ats[b] || a - b);
    found = { ats, order };
    ORDERS.set(events, found);
  }
  return found;
}

export function targetTimes(targetId) {
  const { ats, order } = onsetOrder(state.events[targetId] || []);
  const onsets = Array.from(order, (k) => ats[k]);
  const samples = (state.raws[targetId] || []).flatMap((raw) => blockTimes(raw));
  return samples.length ? samples.concat(onsets).sort((a, b) => a - b) : onsets;
}

// How many samples (and events) a target has, without listing their times.
export function sampleCount(targetId) {
  return (state.raws[targetId] || []).reduce((n, raw) => n + blockTimes(raw).length, 0) + (state.events[targetId] || []).length;
}

// The block (and tick of an `at` list) holding a sample at t, or in whose range t lies.
export function findBlockAt(targetId, t) {
  const raws = state.raws[targetId] || [];
  for (let i = 0; i < raws.length; i++) {
    const raw = raws[i];
    if ("range" in raw) {
      if (t >= raw.range[0] - 1e-9 && t < raw.range[1]) return { block: i, tick: null };
    } else {
      const tick = atList(raw).findIndex((v) => sameTime(v, t));
      if (tick >= 0) return { block: i, tick };
    }
  }
  return null;
}

export function selectedRaw() {
  const sel = state.selection;
  return sel ? state.raws[sel.target]?.[sel.block] || null : null;
}

// The sample the selection stands for: the tick's time, or the range sample under the playhead.
export function selectedSampleTime() {
  const raw = selectedRaw();
  if (!raw) return null;
  if (!("range" in raw)) return atList(raw)[state.selection.tick ?? 0] ?? null;
  const times = blockTimes(raw);
  const before = times.filter((t) => t <= state.time + 1e-9);
  return before.length ? before.at(-1) : times[0] ?? null;
}

export const pinKey = (targetId, t) => `${targetId}@${Number(t).toFixed(6)}`;

// The frame-lock status of the sample of targetId at t, or null (no lock, not loaded, no sample).
export function pinAt(targetId, t) {
  return state.pins?.byTime?.get(pinKey(targetId, t)) || null;
}

// Samples whose frame lock reports a problem (moved, pixels changed, time edited), in time order.
export function pinProblems() {
  const order = new Map((state.detail?.targets || []).map((t, i) => [t.id, i]));
  const out = [];
  for (const [key, pin] of state.pins?.byTime || []) {
    if (pin.problem && order.has(pin.target)) out.push({ target: pin.target, time: pin.time_s, rank: order.get(pin.target), key });
  }
  return out.sort((a, b) => a.time - b.time || a.rank - b.rank);
}

// The report's markers the page shows: with arms, the chosen arm's only.
export const shownArm = () => {
  const arms = state.session?.arms || [];
  return arms.length ? (arms.includes(state.arm) ? state.arm : arms[0]) : null;
};
export const reportMarkers = () => {
  const all = state.detail?.markers || [];
  const arm = shownArm();
  return arm === null ? all : all.filter((m) => m.arm === arm);
};
export const markersOf = (targetId) => reportMarkers().filter((m) => m.target === targetId);
export const markersAt = (targetId, t) => markersOf(targetId).filter((m) => sameTime(m.time_s, t));
export const isFailure = (m) => (m.status === "failed" || m.status === "error") && !m.changed;

// Failed or errored samples the file still says the same about, in time then target order.
export function failures() {
  const order = new Map((state.detail?.targets || []).map((t, i) => [t.id, i]));
  const seen = new Set();
  const out = [];
  for (const m of reportMarkers()) {
    const key = `${m.target}@${m.time_s.toFixed(6)}`;
    if (!isFailure(m) || !order.has(m.target) || seen.has(key)) continue;
    seen.add(key);
    out.push({ target: m.target, time: m.time_s, rank: order.get(m.target) });
  }
  return out.sort((a, b) => a.time - b.time || a.rank - b.rank);
}

// The marker the inspector details for a sample: a failing trial first, else the first trial.
export function markerFor(targetId, t) {
  const mine = markersAt(targetId, t);
  return mine.find(isFailure) || mine[0] || null;
}
