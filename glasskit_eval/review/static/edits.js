// Edits as pure functions of one target's raw sample blocks: each returns the new list, what
// to select afterwards and a label for the undo history, or {error}. Nothing here touches the
// page; app.js sends the result through the writer.
import { atList, blockStart, clone, ordered, rawTimes, round6, compact } from "./util.js";

const MIN_RANGE = 0.001;

function without(raw, keys) {
  const out = clone(raw);
  for (const key of keys) delete out[key];
  return out;
}

const fmt = (t) => `${round6(t)} s`;
const valueText = (value) => compact(value, 40);

// Set the expectation of one block (every sample of a range).
export function setBlockValue(blocks, index, value) {
  const out = clone(blocks);
  out[index] = ordered({ ...out[index], expect: clone(value) });
  const raw = out[index];
  const where = "range" in raw ? `range [${raw.range[0]}, ${raw.range[1]})` : fmt(atList(raw)[0]);
  return { blocks: out, selection: { block: index, tick: "range" in raw ? null : 0 }, label: `set ${where} to ${valueText(value)}` };
}

// Set the expectation of one timestamp of an `at` block: a list is split, the rest keeps its keys.
export function setTickValue(blocks, index, tick, value) {
  const raw = blocks[index];
  const times = atList(raw);
  if (times.length <= 1) return setBlockValue(blocks, index, value);
  const t = times[tick];
  const rest = times.filter((_, i) => i !== tick);
  const out = clone(blocks);
  out[index] = { ...clone(raw), at: rest.length === 1 ? rest[0] : rest };
  const single = ordered({ ...without(raw, ["comment"]), at: t, expect: clone(value) });
  out.splice(index + 1, 0, single);
  return { blocks: out, selection: { block: index + 1, tick: 0 }, label: `set ${fmt(t)} to ${valueText(value)}` };
}

// Cut a range at t: [start, t) keeps the block (and its comment), [t, end) is new and selected.
export function splitRange(blocks, index, t, value = undefined) {
  const raw = blocks[index];
  if (!raw || !("range" in raw)) return { error: "Select a range to split it." };
  const [start, end] = raw.range;
  if (!(t > start + 1e-9 && t < end - 1e-9)) {
    return { error: `Move the playhead inside the range (after ${fmt(start)}, before ${fmt(end)}) to split it there.` };
  }
  const out = clone(blocks);
  const second = without(raw, ["comment"]);
  second.range = [t, end];
  if (value !== undefined) second.expect = clone(value);
  out.splice(index, 1, { ...clone(raw), range: [start, t] }, ordered(second));
  const label = value === undefined ? `split range at ${fmt(t)}` : `split at ${fmt(t)}, set [${t}, ${end}) to ${valueText(value)}`;
  return { blocks: out, selection: { block: index + 1, tick: null }, label };
}

// Delete the selected timestamp (one tick of an `at` list) or the whole block.
export function deleteSelected(blocks, index, tick) {
  const raw = blocks[index];
  const times = atList(raw);
  const out = clone(blocks);
  if (!("range" in raw) && times.length > 1 && tick !== null && tick !== undefined) {
    const rest = times.filter((_, i) => i !== tick);
    out[index] = { ...clone(raw), at: rest.length === 1 ? rest[0] : rest };
    return { blocks: out, selection: { block: index, tick: 0 }, label: `delete ${fmt(times[tick])}` };
  }
  out.splice(index, 1);
  const what = "range" in raw ? `range [${raw.range[0]}, ${raw.range[1]})` : times.map(fmt).join(", ");
  return { blocks: out, selection: null, label: `delete ${what}`, emptied: out.length === 0 };
}

// The answer "keep it as a draft" to deleting a target's last sample: the block stays, unlabelled.
export function keepAsDraft(blocks, index) {
  const out = clone(blocks);
  out[index] = without(out[index], ["expect"]);
  return { blocks: out, selection: { block: index, tick: "range" in out[index] ? null : 0 }, label: "make the last sample a draft" };
}

// Where a dragged timestamp may land: out of any range of the target, at the nearer side
// (a range's end is outside it; before its start means the frame before).
export function clearOfRanges(blocks, index, t, frameBefore = (x) => x - 0.001) {
  for (const [i, other] of blocks.entries()) {
    if (i === index || !("range" in other)) continue;
    const [start, end] = other.range;
    if (t >= start - 1e-9 && t < end - 1e-9) return t - start < end - t ? Math.max(0, frameBefore(start)) : end;
  }
  return t;
}

export function moveTick(blocks, index, tick, t) {
  const raw = blocks[index];
  const out = clone(blocks);
  out[index] = { ...clone(raw), at: Array.isArray(raw.at) ? raw.at.map((v, i) => (i === tick ? t : v)) : t };
  return { blocks: out, selection: { block: index, tick }, label: `move ${fmt(atList(raw)[tick])} to ${fmt(t)}` };
}

// How far range `index` may grow or move without overlapping another block of the target:
// [lo, hi] for its start and end. Ticks sit at one instant; a range may end on one, not start on it.
export function room(blocks, index, frameAfter) {
  const [start, end] = blocks[index].range;
  let lo = 0;
  let hi = Infinity;
  blocks.forEach((other, i) => {
    if (i === index) return;
    if ("range" in other) {
      if (other.range[1] <= start + 1e-9) lo = Math.max(lo, other.range[1]);
      else if (other.range[0] >= end - 1e-9) hi = Math.min(hi, other.range[0]);
    } else {
      for (const t of atList(other)) {
        if (t < start) lo = Math.max(lo, frameAfter(t));
        else if (t >= end - 1e-9) hi = Math.min(hi, t);
      }
    }
  });
  return { lo, hi };
}

// The range that touches edge `edge` of range `index`: shares its end (or its start).
export function touching(blocks, index, edge) {
  const [start, end] = blocks[index].range;
  const at = edge === "end" ? end : start;
  const j = blocks.findIndex((other, i) => i !== index && "range" in other
    && Math.abs((edge === "end" ? other.range[0] : other.range[1]) - at) < 1e-9);
  return j >= 0 ? j : null;
}

// Drag one edge to t (already snapped to a frame). A shared boundary moves both ranges unless
// `alone` (Alt): then the edge that moves is the one the drag leaves room for. Overlaps snap.
export function dragEdge(blocks, index, edge, t, { alone = false, frameAfter = (x) => x, duration = Infinity } = {}) {
  const out = clone(blocks);
  const neighbour = touching(blocks, index, edge);
  if (neighbour !== null) {
    const [first, second] = edge === "end" ? [index, neighbour] : [neighbour, index];
    const a = out[first].range;
    const b = out[second].range;
    const boundary = a[1];
    const lo = a[0] + MIN_RANGE;
    const hi = b[1] - MIN_RANGE;
    const to = round6(Math.min(hi, Math.max(lo, t)));
    if (!alone) {
      out[first] = { ...out[first], range: [a[0], to] };
      out[second] = { ...out[second], range: [to, b[1]] };
      return { blocks: out, selection: { block: index, tick: null }, label: `move boundary ${fmt(boundary)} to ${fmt(to)}`, changed: to !== boundary };
    }
    // Alone: moving right frees the later range's start, moving left the earlier range's end.
    if (to > boundary) out[second] = { ...out[second], range: [to, b[1]] };
    else out[first] = { ...out[first], range: [a[0], to] };
    const moved = to > boundary ? second : first;
    return { blocks: out, selection: { block: moved, tick: null }, label: `move ${to > boundary ? "start" : "end"} ${fmt(boundary)} to ${fmt(to)}`, changed: to !== boundary };
  }
  const { lo, hi } = room(blocks, index, frameAfter);
  const [start, end] = out[index].range;
  let range;
  if (edge === "start") range = [round6(Math.min(end - MIN_RANGE, Math.max(lo, t))), end];
  else range = [start, round6(Math.max(start + MIN_RANGE, Math.min(hi, duration, t)))];
  out[index] = { ...out[index], range };
  const from = edge === "start" ? start : end;
  const to = edge === "start" ? range[0] : range[1];
  return { blocks: out, selection: { block: index, tick: null }, label: `move ${edge} ${fmt(from)} to ${fmt(to)}`, changed: to !== from };
}

// Move a whole range so it starts at `to` (snapped); it stops at its neighbours.
export function moveRange(blocks, index, to, { frameAfter = (x) => x, duration = Infinity } = {}) {
  const out = clone(blocks);
  const [start, end] = out[index].range;
  const length = end - start;
  const { lo, hi } = room(blocks, index, frameAfter);
  const newStart = round6(Math.max(lo, Math.min(Math.min(hi, duration) - length, to)));
  out[index] = { ...out[index], range: [newStart, round6(newStart + length)] };
  return { blocks: out, selection: { block: index, tick: null }, label: `move range to ${fmt(newStart)}`, changed: newStart !== start };
}

// Insert a new block where its start belongs in time order.
export function insertBlock(blocks, raw) {
  const out = clone(blocks);
  let at = out.findIndex((other) => blockStart(other) > blockStart(raw));
  if (at < 0) at = out.length;
  out.splice(at, 0, ordered(raw));
  const what = "range" in raw ? `range [${raw.range[0]}, ${raw.range[1]})` : fmt(raw.at);
  return { blocks: out, selection: { block: at, tick: "range" in raw ? null : 0 }, label: `add ${what}` };
}

// A whole-block edit from the inspector (kind, times, value type, field, comparison, ignore, comment).
export function replaceBlock(blocks, index, raw, label) {
  const out = clone(blocks);
  out[index] = raw;
  const tick = "range" in raw ? null : 0;
  return { blocks: out, selection: { block: index, tick }, label };
}

export const sampleCount = (raw, every) => rawTimes(raw, every).length;
