// A stream target's row on the timeline: quiet spans, each event's window with its onset tick
// (drag the tick to move the event, click to select it), and a run report's emissions coloured by
// what scoring made of them (hit, repeat, false alarm) with a mark at each missed onset.
// The same things the HTML report's stream strip draws, from the same JSON report keys.
import { onsetOrder } from "./state.js";
import { activatable, compact, el, fmtS } from "./util.js";

const DRAG_THRESHOLD_PX = 3;
const WORDS = { hit: "hit", repeat: "repeat", false_alarm: "false alarm", missed: "missed event" };

// The window of a raw event in media time: its own `window`, else the target's default.
export function eventSpan(raw, stream) {
  const w = Array.isArray(raw.window) ? raw.window : stream.window;
  const at = Number(raw.at);
  return [at + Number(w[0]), at + Number(w[1])];
}

// Draw onto `track`; tl is the Timeline (x, pxPerSecond, duration, ctx).
export function streamItems(tl, track, target) {
  const state = tl.ctx.state;
  const stream = target.stream;
  for (const [start, end] of stream.quiet) {
    const quiet = el("div", { class: "tl-quiet", dataset: { start, end },
      title: `quiet ${fmtS(start)} – ${fmtS(end)}: an emission here is a false alarm` });
    place(tl, quiet, start, end);
    track.append(quiet);
  }
  const events = state.events[target.id] || [];
  const selected = state.eventSel?.target === target.id ? state.eventSel.index : -1;
  for (const index of shownEvents(tl, events, selected)) {
    const raw = events[index];
    const at = Number(raw.at);
    const [start, end] = eventSpan(raw, stream);
    const sel = index === selected ? " selected" : "";
    const expect = "expect" in raw ? JSON.stringify(raw.expect) : "(draft: no expect)";
    const win = el("div", { class: `tl-window${sel}`, dataset: { event: index, start, end },
      title: `event @ ${fmtS(at)}: window [${fmtS(start)}, ${fmtS(end)}], expect ${expect}` });
    place(tl, win, start, end);
    win.append(el("span", { class: "tl-value", text: "expect" in raw ? compact(raw.expect, 24) : "draft" }));
    const tick = el("div", { class: `tl-event${sel}${"expect" in raw ? "" : " draft"}`, dataset: { event: index, time: at },
      title: `event @ ${fmtS(at)} (drag to move; Delete removes the selected event)` });
    tick.style.left = `${tl.x(at)}px`;
    activatable(tick, `${target.id}: event at ${at} s, expect ${expect}`, () => tl.ctx.selectEvent(target.id, index));
    tick.addEventListener("pointerdown", (event) => drag(tl, event, tick, win, target.id, index, raw));
    win.addEventListener("pointerdown", (event) => { event.stopPropagation(); tl.ctx.selectEvent(target.id, index); });
    track.append(win, tick);
  }
  for (const m of (state.detail.emissions || []).filter((x) => x.target === target.id)) {
    const what = m.changed ? `${WORDS[m.kind]}, changed since the run (the event moved or is gone)` : WORDS[m.kind];
    const value = m.kind === "missed" ? `expected ${JSON.stringify(m.expected)}` : JSON.stringify(m.value);
    const mark = el("div", { class: `tl-emission ${m.kind}${m.changed ? " changed" : ""}`,
      dataset: { time: m.time_s, kind: m.kind, trial: m.trial },
      title: `${what} @ ${fmtS(m.time_s)} (trial ${m.trial}): ${value}${m.latency_s != null ? `, latency ${fmtS(m.latency_s)}` : ""}` });
    mark.style.left = `${tl.x(m.time_s)}px`;
    mark.addEventListener("pointerdown", (event) => { event.stopPropagation(); tl.ctx.seek(m.time_s); });
    track.append(mark);
  }
}

// Past this many events, only those in view (and a few pixels apart) are drawn.
const MANY_EVENTS = 2000;
const MIN_EVENT_GAP_PX = 3;

// The indices of the events to draw, in onset order. A long list draws what the eye can tell
// apart: the events in view, one per few pixels (zoom in for the rest), found by bisecting the
// list's onset order; the selected event always. A short list draws every event.
function shownEvents(tl, events, selected) {
  if (events.length <= MANY_EVENTS) return events.keys();
  const { ats, order } = onsetOrder(events);
  const [from, to] = visibleSpan(tl);
  const out = [];
  let lastX = -Infinity;
  for (let k = firstAtOrAfter(ats, order, from); k < order.length && ats[order[k]] <= to; k++) {
    const x = tl.x(ats[order[k]]);
    if (x - lastX < MIN_EVENT_GAP_PX && order[k] !== selected) continue;
    lastX = x;
    out.push(order[k]);
  }
  if (events[selected] && !out.includes(selected)) out.push(selected);
  return out;
}

function firstAtOrAfter(ats, order, t) {
  let lo = 0;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ats[order[mid]] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The media times the timeline shows now, with a screen's margin either side (as measured when
// the drawing began).
function visibleSpan(tl) {
  const { width } = tl.frozen;
  const left = tl.frozen.left - width;
  tl.eventPixels = [left, left + 3 * width];
  watchScroll(tl, tl.root.parentElement);
  return [left / tl.pxPerSecond, (left + 3 * width) / tl.pxPerSecond];
}

// Scrolling a long list draws the events that come into view, once the view leaves the drawn margin.
function watchScroll(tl, view) {
  if (!view || view.dataset.eventsWatched) return;
  view.dataset.eventsWatched = "1";
  view.addEventListener("scroll", () => {
    const drawn = tl.eventPixels;
    if (!drawn || (view.scrollLeft >= drawn[0] && view.scrollLeft + view.clientWidth <= drawn[1])) return;
    tl.render();
  }, { passive: true });
}

function place(tl, node, start, end) {
  node.style.left = `${tl.x(start)}px`;
  node.style.width = `${Math.max(2, tl.x(end) - tl.x(start))}px`;
}

// Drag an onset: the window follows as a preview; one write on release. A press without a move selects.
function drag(tl, event, tick, win, targetId, index, raw) {
  if (event.button !== 0) return;
  event.preventDefault();
  event.stopPropagation();
  tick.setPointerCapture(event.pointerId);
  const x0 = event.clientX;
  const at = Number(raw.at);
  const [start, end] = eventSpan(raw, tl.ctx.state.detail.targets.find((t) => t.id === targetId).stream);
  let moved = false;
  let t = at;
  const onMove = (move) => {
    const dx = move.clientX - x0;
    if (!moved && Math.abs(dx) < DRAG_THRESHOLD_PX) return;
    moved = true;
    t = tl.ctx.snap(Math.min(tl.duration, Math.max(0, at + dx / tl.pxPerSecond)));
    tick.style.left = `${tl.x(t)}px`;
    place(tl, win, start + t - at, end + t - at);
  };
  const onUp = () => {
    tick.removeEventListener("pointermove", onMove);
    tick.removeEventListener("pointerup", onUp);
    tick.removeEventListener("pointercancel", onUp);
    if (moved && Math.abs(t - at) > 1e-9) tl.ctx.moveEvent(targetId, index, t);
    else if (moved) tl.render();
    else tl.ctx.selectEvent(targetId, index);
  };
  tick.addEventListener("pointermove", onMove);
  tick.addEventListener("pointerup", onUp);
  tick.addEventListener("pointercancel", onUp);
}
