// The zoomable timeline: one row per target, ranges as bars, timestamps as ticks,
// run-report markers as dots. Ranges drag to move, their ends drag to resize; a boundary two
// ranges share moves both (Alt: one). Bars and ticks are focusable: Tab to them, Enter selects.
import { activatable, compact, el, rawTimes, atList, fmtS, keepFocus } from "./util.js";
import { clearOfRanges, dragEdge, moveRange, moveTick } from "./edits.js";
import { pinAt, markersOf } from "./state.js";
import { clipWindow } from "./clips.js";
import { eventSpan, streamItems } from "./events.js";

const NAME_WIDTH = 140;
const DRAG_THRESHOLD_PX = 3;

export class Timeline {
  constructor(root, ctx) {
    this.root = root;
    // {state, seek, select(target, block, tick, time), commit(target, result), focusTarget, snap, frameAfter, frameBefore,
    //  selectEvent(target, index), moveEvent(target, index, t)}
    this.ctx = ctx;
    this.zoom = 1;
    this.playheads = [];
    this.bars = {}; // targetId -> block index -> range bar, for drag previews
    this.queued = false;
    this.frozen = null; // {duration, px, left, width} while drawing: the scale and view, measured once
    this.draws = 0;
    this.width = null;
    this.eventPixels = null; // the pixels a long event list was drawn for (events.js)
    root.addEventListener("wheel", (event) => {
      if (!event.ctrlKey) return;
      event.preventDefault();
      this.setZoom(this.zoom * (event.deltaY < 0 ? 1.25 : 0.8));
    }, { passive: false });
    // Only a new width changes the scale: the rows a drawing adds make the timeline taller, and
    // redrawing for that would draw every case twice.
    new ResizeObserver(() => {
      if (root.clientWidth === this.width) return;
      this.width = root.clientWidth;
      this.render();
    }).observe(root);
  }

  setZoom(zoom) {
    this.zoom = Math.min(256, Math.max(1, zoom));
    this.draw();
    this.reveal(this.ctx.state.time);
  }

  get duration() {
    if (this.frozen) return this.frozen.duration;
    const video = this.ctx.state.detail?.video;
    return Math.max(0.001, video?.duration_s || this.lastSampleTime() + 1);
  }

  lastSampleTime() {
    const state = this.ctx.state;
    let last = 0;
    for (const target of state.detail?.targets || []) {
      for (const raw of state.raws[target.id] || []) last = Math.max(last, ...rawTimes(raw, state.detail.every_s), 0);
      for (const raw of target.stream ? state.events[target.id] || [] : []) last = Math.max(last, eventSpan(raw, target.stream)[1]);
    }
    return last;
  }

  get pxPerSecond() {
    return this.frozen ? this.frozen.px : this.scale(this.duration);
  }

  scale(duration) {
    const width = Math.max(200, this.root.clientWidth - NAME_WIDTH - 16);
    return (width * this.zoom) / duration;
  }

  x(t) { return t * this.pxPerSecond; }

  // Everything that changes what the timeline shows asks for a drawing; the asks of one task
  // (a case opening: its state, the selection, the clip) come to one drawing, before the next paint.
  render() {
    if (this.queued) return;
    this.queued = true;
    queueMicrotask(() => { if (this.queued) this.draw(); });
  }

  draw() {
    this.queued = false;
    // Measured before the old drawing goes: a layout of the emptied timeline would also scroll
    // the view back to its start.
    const view = this.root.parentElement;
    const duration = this.duration;
    this.frozen = { duration, px: this.scale(duration), left: view?.scrollLeft || 0, width: view?.clientWidth || 1000 };
    try {
      keepFocus(this.root, () => {
        const state = this.ctx.state;
        this.root.replaceChildren();
        this.playheads = [];
        this.eventPixels = null;
        if (!state.detail || !state.detail.targets.length) return;
        const width = this.x(duration);
        this.root.append(this.ruler(width));
        for (const target of state.detail.targets) this.root.append(this.row(target, width));
        this.movePlayhead(state.time);
        // Tests count the drawings: opening a case draws its timeline once.
        this.root.dataset.draws = String(++this.draws);
      });
    } finally {
      this.frozen = null;
    }
  }

  ruler(width) {
    const track = el("div", { class: "tl-track" });
    track.style.width = `${width}px`;
    const step = niceStep(80 / this.pxPerSecond);
    for (let t = 0; t <= this.duration + 1e-9; t += step) {
      const tick = el("div", { class: "tl-tick", text: `${Number(t.toFixed(3))}s` });
      tick.style.left = `${this.x(t)}px`;
      track.append(tick);
    }
    this.addPlayhead(track);
    track.addEventListener("pointerdown", (event) => this.seekFromEvent(event, track));
    return el("div", { class: "tl-ruler" }, el("div", { class: "tl-name muted", text: "target / time" }), track);
  }

  row(target, width) {
    const state = this.ctx.state;
    const track = el("div", { class: "tl-track", dataset: { target: target.id } });
    track.style.width = `${width}px`;
    const raws = state.raws[target.id] || [];
    this.bars[target.id] = {};
    // Under the bars and ticks, so they stay clickable.
    const clip = state.clip?.target === target.id ? clipWindow((t) => this.x(t)) : null;
    if (clip) track.append(clip);
    if (target.stream) streamItems(this, track, target);
    raws.forEach((raw, index) => {
      const sel = state.selection && state.selection.target === target.id && state.selection.block === index ? state.selection : null;
      const flags = [raw.ignore ? "ignored" : "", "expect" in raw || raw.ignore ? "" : "draft"].join(" ");
      if ("range" in raw) track.append(this.rangeBar(target.id, index, raw, `${flags} ${sel ? "selected" : ""}`));
      else atList(raw).forEach((t, tick) => track.append(this.atTick(target.id, index, tick, t, `${flags} ${sel && (sel.tick ?? 0) === tick ? "selected" : ""}`)));
    });
    for (const marker of markersOf(target.id)) {
      const status = marker.changed ? "changed" : marker.status;
      const what = marker.changed ? `changed since run (the run said ${marker.status})` : marker.status;
      const dot = el("div", { class: `tl-marker ${status}`, dataset: { time: marker.time_s },
        title: `${what} @ ${fmtS(marker.time_s)} — ${marker.reason || ""}\nexpected ${JSON.stringify(marker.expected)}, observed ${JSON.stringify(marker.observed_value)}` });
      dot.style.left = `${this.x(marker.time_s)}px`;
      dot.addEventListener("pointerdown", (event) => { event.stopPropagation(); this.ctx.seek(marker.time_s); });
      track.append(dot);
    }
    this.addPlayhead(track);
    track.addEventListener("pointerdown", (event) => {
      if (event.target === track) { this.ctx.focusTarget(target.id); this.seekFromEvent(event, track); }
    });
    const active = state.targetId === target.id ? "active" : "";
    const name = activatable(el("div", { class: "tl-name", text: target.label || target.id, title: target.id, dataset: { target: target.id },
      onclick: () => this.ctx.focusTarget(target.id) }), `Target ${target.label || target.id}`, () => this.ctx.focusTarget(target.id));
    return el("div", { class: `tl-row ${active}`, dataset: { target: target.id } }, name, track);
  }

  rangeBar(targetId, index, raw, flags) {
    const [start, end] = raw.range;
    const every = raw.every_s ?? this.ctx.state.detail.every_s;
    const times = rawTimes(raw, this.ctx.state.detail.every_s);
    const pins = times.map((t) => pinAt(targetId, t));
    const bad = pins.filter((p) => p?.problem);
    const pinText = bad.length ? `frame lock: ${bad.length} of ${times.length} samples ${[...new Set(bad.map((p) => p.label))].join(", ")}`
      : pins.some(Boolean) ? "frame lock: pin ok" : "";
    const bar = el("div", { class: `tl-range ${flags}`, dataset: { block: index },
      title: `range [${start}, ${end}) every ${every}: ${times.length} samples${pinText ? `\n${pinText}` : ""}` });
    activatable(bar, `${targetId}: range ${start} to ${end} s, ${times.length} samples, ${"expect" in raw ? `expect ${JSON.stringify(raw.expect)}` : "draft"}${pinText ? `, ${pinText}` : ""}`,
      () => this.ctx.select(targetId, index, null, start));
    this.placeRange(bar, start, end);
    bar.append(el("span", { class: "tl-value", text: "expect" in raw ? compact(raw.expect, 24) : "draft" }));
    times.forEach((t, k) => {
      const dot = el("div", { class: `tl-dot${pins[k]?.problem ? " pin-problem" : ""}` });
      dot.style.left = `${this.x(t - start)}px`;
      bar.append(dot);
    });
    if (bad.length) bar.append(el("span", { class: "tl-pin problem", "aria-hidden": "true", text: "!" }));
    else if (pins.some(Boolean)) bar.append(pinMark(pins.find(Boolean)));
    const startHandle = el("div", { class: "tl-handle start", title: "Drag to change the start (a shared boundary moves both ranges; Alt: this edge only)" });
    const endHandle = el("div", { class: "tl-handle end", title: "Drag to change the end (a shared boundary moves both ranges; Alt: this edge only)" });
    bar.append(startHandle, endHandle);
    bar.addEventListener("pointerdown", (event) => {
      const mode = event.target === startHandle ? "start" : event.target === endHandle ? "end" : "move";
      this.drag(event, bar, targetId, index, mode);
    });
    this.bars[targetId][index] = bar;
    return bar;
  }

  placeRange(bar, start, end) {
    bar.style.left = `${this.x(start)}px`;
    bar.style.width = `${Math.max(4, this.x(end) - this.x(start))}px`;
  }

  atTick(targetId, index, tick, t, flags) {
    const raw = this.ctx.state.raws[targetId][index];
    const pin = pinAt(targetId, t);
    const node = el("div", { class: `tl-at ${flags}`, dataset: { block: index, tick, time: t, ...(pin ? { pin: pin.status } : {}) },
      title: `at ${t}${pin ? `\nframe lock: ${pin.label} (${pin.message})` : ""}` });
    activatable(node, `${targetId}: sample at ${t} s, ${"expect" in raw ? `expect ${JSON.stringify(raw.expect)}` : "draft"}${pin ? `, frame lock: ${pin.label}` : ""}`,
      () => this.ctx.select(targetId, index, tick, t));
    if (pin) node.append(pinMark(pin));
    node.style.left = `${this.x(t)}px`;
    node.addEventListener("pointerdown", (event) => this.drag(event, node, targetId, index, "at", tick, t));
    return node;
  }

  // Pointer drags preview on the bars and write once, on release. A press without a move selects.
  drag(event, node, targetId, index, mode, tick = 0, atTime = 0) {
    if (event.button !== 0) return;
    event.preventDefault();
    event.stopPropagation();
    node.setPointerCapture(event.pointerId);
    const x0 = event.clientX;
    const blocks = this.ctx.state.raws[targetId];
    const original = blocks[index];
    const options = { frameAfter: this.ctx.frameAfter, duration: this.duration };
    let moved = false;
    let result = null;
    const onMove = (move) => {
      const dx = move.clientX - x0;
      if (!moved && Math.abs(dx) < DRAG_THRESHOLD_PX) return;
      moved = true;
      const dt = dx / this.pxPerSecond;
      if (mode === "at") {
        const t = clearOfRanges(blocks, index, this.ctx.snap(Math.min(this.duration, Math.max(0, atTime + dt))), this.ctx.frameBefore);
        node.style.left = `${this.x(t)}px`;
        result = moveTick(blocks, index, tick, t);
        return;
      }
      if (mode === "move") result = moveRange(blocks, index, this.ctx.snap(Math.max(0, original.range[0] + dt)), options);
      else {
        const from = mode === "start" ? original.range[0] : original.range[1];
        result = dragEdge(blocks, index, mode, this.ctx.snap(Math.max(0, from + dt)), { ...options, alone: move.altKey });
      }
      for (const [i, bar] of Object.entries(this.bars[targetId])) this.placeRange(bar, ...result.blocks[i].range);
    };
    const onUp = (up) => {
      node.removeEventListener("pointermove", onMove);
      node.removeEventListener("pointerup", onUp);
      node.removeEventListener("pointercancel", onUp);
      if (moved && result && result.changed !== false) this.ctx.commit(targetId, result);
      else if (moved) this.render();
      else if (mode === "at") this.ctx.select(targetId, index, tick, atTime);
      else this.ctx.select(targetId, index, null, this.timeAt(up, node.parentElement, original));
    };
    node.addEventListener("pointermove", onMove);
    node.addEventListener("pointerup", onUp);
    node.addEventListener("pointercancel", onUp);
  }

  // Where a click on a range lands: that frame, inside the range.
  timeAt(event, track, raw) {
    const rect = track.getBoundingClientRect();
    const t = this.ctx.snap((event.clientX - rect.left) / this.pxPerSecond);
    return Math.min(Math.max(t, raw.range[0]), raw.range[1] - 1e-6);
  }

  addPlayhead(track) {
    const line = el("div", { class: "tl-playhead" });
    track.append(line);
    this.playheads.push(line);
  }

  movePlayhead(t) {
    for (const line of this.playheads) line.style.left = `${this.x(t)}px`;
  }

  reveal(t) {
    const x = this.x(t) + NAME_WIDTH;
    const view = this.root.parentElement;
    if (!view) return;
    if (x < view.scrollLeft + NAME_WIDTH || x > view.scrollLeft + view.clientWidth - 20) {
      view.scrollLeft = Math.max(0, x - view.clientWidth / 2);
    }
  }

  seekFromEvent(event, track) {
    const rect = track.getBoundingClientRect();
    this.ctx.seek(Math.max(0, Math.min(this.duration, (event.clientX - rect.left) / this.pxPerSecond)));
  }
}

// The small mark over a sample of a locked case: a dot when its frame is the pinned one, "!" when
// the lock reports a problem. Decorative for screen readers: the tick's label says the same.
function pinMark(pin) {
  const kind = pin.problem ? "problem" : pin.status;
  return el("span", { class: `tl-pin ${kind}`, "aria-hidden": "true", text: pin.problem ? "!" : "" });
}

function niceStep(raw) {
  const steps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
  return steps.find((s) => s >= raw) || 1200;
}
