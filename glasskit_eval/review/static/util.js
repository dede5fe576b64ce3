// Small pure helpers shared by the review page modules.

export const MODES = ["exact", "numeric", "json_subset", "set_equals", "set_contains_any", "set_contains_all"];
export const BLOCK_KEY_ORDER = ["at", "range", "every_s", "clip", "expect", "field", "compare", "comment", "ignore"];

export function clone(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

// An inspector's edit of `raw`: `mutate` changes a copy or returns a problem (a string), which the
// inspector shows while its fields are put back; a changed copy goes to `commit`.
export function applyEdit(inspector, raw, mutate, commit) {
  const next = clone(raw);
  const problem = mutate(next);
  if (typeof problem === "string") {
    inspector.showError(problem);
    inspector.render({ force: true });
    return;
  }
  inspector.showError("");
  if (JSON.stringify(next) !== JSON.stringify(raw)) commit(next);
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function fmtClock(seconds) {
  const s = Math.max(0, seconds || 0);
  const minutes = Math.floor(s / 60);
  const rest = s - minutes * 60;
  return `${String(minutes).padStart(2, "0")}:${rest.toFixed(3).padStart(6, "0")}`;
}

export function fmtS(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  return `${Number(seconds.toFixed(6))}s`;
}

export function compact(value, limit = 60) {
  const text = JSON.stringify(value);
  return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
}

export function typeOf(block) {
  if (!("expect" in block)) return "draft";
  const v = block.expect;
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v === "object" ? "object" : typeof v;
}

// Index of the frame nearest to t; a tie goes to the earlier frame, as in the engine.
export function nearestIndex(times, t) {
  if (!times.length) return 0;
  let lo = 0;
  let hi = times.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid] < t) lo = mid + 1; else hi = mid;
  }
  if (lo > 0 && t - times[lo - 1] <= times[lo] - t) return lo - 1;
  return lo;
}

// The shortest decimal (1 to 6 places) that still selects frame k, clear of any tie.
export function frameTime(times, k) {
  const t = times[k];
  if (t === undefined) return 0;
  const before = k > 0 ? (t - times[k - 1]) / 2 : Infinity;
  const after = k + 1 < times.length ? (times[k + 1] - t) / 2 : Infinity;
  const margin = Math.min(before, after) - 1e-7;
  for (let places = 1; places <= 6; places++) {
    const d = Number(t.toFixed(places));
    if (Math.abs(d - t) < margin) return d;
  }
  return Number(t.toFixed(6));
}

export function snapTime(times, t) {
  return times.length ? frameTime(times, nearestIndex(times, t)) : Number(Math.max(0, t).toFixed(3));
}

export function atList(raw) {
  if (!("at" in raw)) return [];
  return Array.isArray(raw.at) ? raw.at : [raw.at];
}

// Expanded times of a raw block, for drawing before the server has answered.
export function rawTimes(raw, caseEvery) {
  if ("range" in raw && Array.isArray(raw.range)) {
    const [start, end] = raw.range;
    const every = Number(raw.every_s ?? caseEvery ?? 0.5);
    if (!(every > 0) || !(end > start)) return [];
    const out = [];
    const count = Math.min(10000, Math.ceil((end - start) / every - 1e-9));
    for (let k = 0; k < count; k++) out.push(Number((start + k * every).toFixed(9)));
    return out;
  }
  return atList(raw).slice().sort((a, b) => a - b);
}

export function blockStart(raw) {
  if ("range" in raw && Array.isArray(raw.range)) return raw.range[0];
  const list = atList(raw);
  return list.length ? Math.min(...list) : 0;
}

// Keys in the order the case-file format documents, so new blocks read naturally.
export function ordered(raw) {
  const out = {};
  for (const key of BLOCK_KEY_ORDER) if (key in raw) out[key] = raw[key];
  for (const key of Object.keys(raw)) if (!(key in out)) out[key] = raw[key];
  return out;
}

// Sample times closer than this are the same time (the page rounds to 6 decimals).
export const SAME_TIME = 1e-6;
export const sameTime = (a, b) => Math.abs(a - b) < SAME_TIME;

export function pretty(value) {
  return value === undefined ? "(none)" : JSON.stringify(value, null, 2);
}

// JSON equality as the comparator sees it: 1 equals 1.0, true never equals 1.
export function jsonEqual(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

export const round6 = (t) => Number(t.toFixed(6));

// A clickable element that is also reachable by keyboard: Tab focuses it, Enter/Space activate it.
// Table rows keep their row role (and their cells are read out); they only become focusable.
export function activatable(node, label, activate) {
  node.tabIndex = 0;
  if (node.tagName !== "TR") {
    node.setAttribute("role", "button");
    node.setAttribute("aria-label", label);
  }
  node.activate = activate;
  return node;
}

// Redraw `container` without losing the keyboard focus inside it: the focus goes back to the
// element that stands for the same thing (the new selection, if the focused one was selected).
export function keepFocus(container, draw) {
  const active = document.activeElement;
  const inside = active && active !== container && container.contains(active);
  const wasSelected = inside && (active.classList.contains("selected") || active.getAttribute("aria-current") === "true");
  const key = inside ? focusKey(active) : null;
  draw();
  if (!inside || container.contains(active)) return;
  const selected = container.querySelector(".selected[tabindex], [aria-current='true'][tabindex]");
  const same = key ? container.querySelector(key) : null;
  (wasSelected ? selected || same : same || selected)?.focus({ preventScroll: true });
}

function focusKey(node) {
  const row = node.closest("[data-target]");
  const own = Object.entries(node.dataset).filter(([name]) => ["block", "tick", "case", "target", "index"].includes(name));
  if (!own.length) return null;
  const css = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  const self = `${node.tagName.toLowerCase()}.${node.classList[0]}${own.map(([k, v]) => `[data-${css(k)}="${CSS.escape(v)}"]`).join("")}`;
  return row && row !== node ? `[data-target="${CSS.escape(row.dataset.target)}"] ${self}` : self;
}
