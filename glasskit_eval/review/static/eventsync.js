// A one-event save's small answer applied to the page's copy of the case, and the inverse edit
// that undoes it. The server answers an event save with the new revision, the event as written,
// the change to the file's text and the case's status, never the whole case (a target may hold
// 100,000 events); the page already holds the rest. Only a merged save (the file had changed
// elsewhere too) carries the whole case again, in `case`.
import { eventSpan } from "./events.js";

// The edit that takes the file back to the events before `edit`: an add is undone by a delete at
// its index, a set by setting the old event back, a delete by adding the old event at its index.
// `detail` is the case as the server confirmed it before `edit` was written.
export function inverseOf(targetId, edit, detail) {
  if (edit.op === "add") return { op: "delete", index: edit.index };
  const old = detail.targets.find((t) => t.id === targetId).stream.events[edit.index].raw;
  return { op: edit.op === "set" ? "set" : "add", index: edit.index, event: old };
}

// `detail` (the case as the server last confirmed it) brought to the state `answer` says was written.
export function confirmEvent(detail, answer) {
  if (answer.case) return answer.case;
  const { edit, source_edit: text } = answer;
  Object.assign(detail, answer.summary);
  detail.revision = answer.revision;
  // The file's text as it is now, byte for byte: a later undo of a sample edit writes it back.
  if (text) detail.source = detail.source.slice(0, text.start) + text.text + detail.source.slice(text.end);
  const target = detail.targets.find((t) => t.id === edit.target);
  const events = target.stream.events;
  if (edit.op === "delete") events.splice(edit.index, 1);
  else events.splice(edit.index, edit.op === "add" ? 0 : 1, { raw: edit.event });
  restale(detail, target);
  return detail;
}

// A report's hit or miss is "changed since the run" when its event (by position) is gone or has
// another onset or window: what the server works out on a whole load, worked out here for the edit.
function restale(detail, target) {
  const events = target.stream.events;
  for (const m of detail.emissions || []) {
    if (m.target !== target.id || (m.kind !== "hit" && m.kind !== "missed")) continue;
    const raw = Number.isInteger(m.event) ? events[m.event]?.raw : undefined;
    const now = raw ? [Number(raw.at), ...eventSpan(raw, target.stream)] : null;
    const then = [m.at, ...(m.window || [null, null])];
    m.changed = !now || then.some((a, i) => typeof a !== "number" || Math.abs(a - now[i]) > 5e-10);
  }
}

// An inverse edit whose text the server could not take as it was (see autosave.js) restores the
// events, not their bytes: the step next to it then starts (or ends) at the file as it is now, and
// the texts either step kept no longer fit that file (the server renders their events instead).
export function reanchor(step, end, neighbour, side, detail) {
  const was = step[end].revision;
  if (was === detail.revision) return;
  step[end] = { ...step[end], revision: detail.revision };
  Object.assign(step, { forwardText: null, inverseText: null });
  if (neighbour && neighbour[side].revision === was) {
    neighbour[side] = { ...neighbour[side], revision: detail.revision, ...("text" in neighbour[side] ? { text: detail.source } : {}) };
    if (neighbour.event) Object.assign(neighbour, { forwardText: null, inverseText: null });
  }
}
