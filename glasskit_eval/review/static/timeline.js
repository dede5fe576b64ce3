// The zoomable timeline: one row per target, ranges as bars, timestamps as ticks,
// run-report markers as dots. Ranges drag to move, their ends drag to resize.
import { el, rawTimes, atList, fmtS, clone } from "./util.js";

const NAME_WIDTH = 140;
const DRAG_THRESHOLD_PX = 3;

export class Timeline {
  constructor(root, ctx) {
    this.root = root;
    this.ctx = ctx; // {state, seek, select, commit, focusTarget, snap}
    this.zoom = 1;
    this.playheads = [];
    root.addEventListener("wheel", (event) => {
      if (!event.ctrlKey) return;
      event.preventDefault();
      this.setZoom(this.zoom * (event.deltaY < 0 ? 1.25 : 0.8));
    }, { passive: false });
    new ResizeObserver(() => this.render()).observe(root);
  }

  setZoom(zoom) {
    this.zoom = Math.min(256, Math.max(1, zoom));
    this.render();
    this.reveal(this.ctx.state.time);
  }

  get duration() {
    const video = this.ctx.state.detail?.video;
    return Math.max(0.001, video?.duration_s || this.lastSampleTime() + 1);
  }

  lastSampleTime() {
    const state = this.ctx.state;
    let last = 0;
    for (const target of state.detail?.targets || []) {
      for (const raw of state.raws[target.id] || []) last = Math.max(last, ...rawTimes(raw, state.detail.every_s), 0);
    }
    return last;
  }

  get pxPerSecond() {
    const width = Math.max(200, this.root.clientWidth - NAME_WIDTH - 16);
    return (width * this.zoom) / this.duration;
  }

  x(t) { return t * this.pxPerSecond; }

  render() {
    const state = this.ctx.state;
    this.root.replaceChildren();
    this.playheads = [];
    if (!state.detail || !state.detail.targets.length) return;
    const width = this.x(this.duration);
    this.root.append(this.ruler(width));
    for (const target of state.detail.targets) this.root.append(this.row(target, width));
    this.movePlayhead(state.time);
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
    raws.forEach((raw, index) => {
      const selected = state.selected && state.selected.target === target.id && state.selected.block === index;
      const flags = [raw.ignore ? "ignored" : "", "expect" in raw || raw.ignore ? "" : "draft", selected ? "selected" : ""].join(" ");
      if ("range" in raw) track.append(this.rangeBar(target.id, index, raw, flags));
      else atList(raw).forEach((t, position) => track.append(this.atTick(target.id, index, position, t, flags)));
    });
    for (const marker of state.detail.markers.filter((m) => m.target === target.id)) {
      const dot = el("div", { class: `tl-marker ${marker.status}`,
        title: `${marker.status} @ ${fmtS(marker.time_s)} — ${marker.reason || ""}\nexpected ${JSON.stringify(marker.expected)}, observed ${JSON.stringify(marker.observed_value)}` });
      dot.style.left = `${this.x(marker.time_s)}px`;
      dot.addEventListener("pointerdown", (event) => { event.stopPropagation(); this.ctx.seek(marker.time_s); });
      track.append(dot);
    }
    this.addPlayhead(track);
    track.addEventListener("pointerdown", (event) => {
      if (event.target === track) { this.ctx.focusTarget(target.id); this.seekFromEvent(event, track); }
    });
    const active = state.targetId === target.id ? "active" : "";
    const name = el("div", { class: "tl-name", text: target.label || target.id, title: target.id,
      onclick: () => this.ctx.focusTarget(target.id) });
    return el("div", { class: `tl-row ${active}`, dataset: { target: target.id } }, name, track);
  }

  rangeBar(targetId, index, raw, flags) {
    const [start, end] = raw.range;
    const bar = el("div", { class: `tl-range ${flags}`, dataset: { block: index },
      title: `range [${start}, ${end}) every ${raw.every_s ?? this.ctx.state.detail.every_s}` });
    this.placeRange(bar, start, end);
    for (const t of rawTimes(raw, this.ctx.state.detail.every_s)) {
      const dot = el("div", { class: "tl-dot" });
      dot.style.left = `${this.x(t - start)}px`;
      bar.append(dot);
    }
    const startHandle = el("div", { class: "tl-handle start", title: "Drag to change the start" });
    const endHandle = el("div", { class: "tl-handle end", title: "Drag to change the end" });
    bar.append(startHandle, endHandle);
    bar.addEventListener("pointerdown", (event) => {
      const mode = event.target === startHandle ? "start" : event.target === endHandle ? "end" : "move";
      this.drag(event, bar, targetId, index, raw, mode);
    });
    return bar;
  }

  placeRange(bar, start, end) {
    bar.style.left = `${this.x(start)}px`;
    bar.style.width = `${Math.max(4, this.x(end) - this.x(start))}px`;
  }

  atTick(targetId, index, position, t, flags) {
    const tick = el("div", { class: `tl-at ${flags}`, dataset: { block: index }, title: `at ${t}` });
    tick.style.left = `${this.x(t)}px`;
    tick.addEventListener("pointerdown", (event) => this.drag(event, tick, targetId, index, null, "at", position, t));
    return tick;
  }

  drag(event, node, targetId, index, raw, mode, position = 0, atTime = 0) {
    event.preventDefault();
    event.stopPropagation();
    node.setPointerCapture(event.pointerId);
    const x0 = event.clientX;
    const original = clone(this.ctx.state.raws[targetId][index]);
    let moved = false;
    let result = null;
    const onMove = (move) => {
      const dx = move.clientX - x0;
      if (!moved && Math.abs(dx) < DRAG_THRESHOLD_PX) return;
      moved = true;
      const dt = dx / this.pxPerSecond;
      if (mode === "at") {
        const t = this.ctx.snap(Math.min(this.duration, Math.max(0, atTime + dt)));
        node.style.left = `${this.x(t)}px`;
        result = { ...original, at: Array.isArray(original.at)
          ? original.at.map((v, i) => (i === position ? t : v)) : t };
        return;
      }
      let [start, end] = original.range;
      if (mode === "move") {
        const shift = Math.max(-start, Math.min(this.duration - end, dt));
        start = this.ctx.snap(start + shift);
        end = Number((start + (original.range[1] - original.range[0])).toFixed(6));
      } else if (mode === "start") {
        start = Math.min(this.ctx.snap(Math.max(0, start + dt)), end - 0.001);
      } else {
        end = Math.max(this.ctx.snap(Math.min(this.duration, end + dt)), start + 0.001);
      }
      this.placeRange(node, start, end);
      result = { ...original, range: [start, Number(end.toFixed(6))] };
    };
    const onUp = () => {
      node.removeEventListener("pointermove", onMove);
      node.removeEventListener("pointerup", onUp);
      node.removeEventListener("pointercancel", onUp);
      if (moved && result) this.ctx.commit(targetId, index, result);
      else this.ctx.select(targetId, index, mode === "at" ? atTime : original.range[0]);
    };
    node.addEventListener("pointermove", onMove);
    node.addEventListener("pointerup", onUp);
    node.addEventListener("pointercancel", onUp);
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

function niceStep(raw) {
  const steps = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
  return steps.find((s) => s >= raw) || 1200;
}
