// The review page: loads cases, turns keys and clicks into edits, and wires the parts together.
// Plain ES modules, no build step: api (server calls), state (the one state object), render
// (drawing), autosave (writes, undo/redo), edits (pure block edits), keys, player, timeline,
// inspector.
import { api } from "./api.js";
import { Writer } from "./autosave.js";
import { ClipView } from "./clips.js";
import * as edits from "./edits.js";
import { EventInspector } from "./eventinspector.js";
import { Inspector } from "./inspector.js";
import { installKeys, renderHelp } from "./keys.js";
import { Player } from "./player.js";
import { SuspectsBar } from "./suspects.js";
import { notify, renderCases, renderHeader, renderHistory, renderPinBadge, renderPrompt, renderSamplesTable, renderTargets, setStatus, showBanner } from "./render.js";
import { state, blockTimes, duration, editable, failures, findBlockAt, history, markerFor, pinKey, pinProblems, playheadTime, selectedRaw, selectedSampleTime, target, targetTimes } from "./state.js";
import { Timeline } from "./timeline.js";
import { forget as forgetUnsaved, restoreUnsaved, trackUnsaved, unsaved } from "./unsaved.js";
import { clone, compact, el, frameTime, nearestIndex, round6, sameTime, snapTime } from "./util.js";

const $ = (id) => document.getElementById(id);

// --- loading ----------------------------------------------------------------------------------

async function init() {
  state.session = await api.session();
  $("eval-dir").textContent = state.session.eval_dir;
  setUpArms(state.session.arms || []);
  await refreshCases();
  const kept = unsaved();
  const resumed = kept && state.cases.some((c) => c.id === kept.caseId) ? kept : null;
  const initial = resumed ? { case: resumed.caseId, target: resumed.target, time: resumed.time } : state.session.initial || {};
  const first = initial.case || (state.cases.find((c) => c.status !== "invalid") || state.cases[0])?.id;
  if (first) await openCase(first, { target: initial.target, time: initial.time });
  else setStatus("", "No cases");
  suspects.start(state.session.suspects);
  if (resumed && restoreUnsaved(resumed, editedBlock)) {
    notify("The text you typed before the reload is back in its field, not saved yet: press Enter to save it.", "info");
  } else if (kept) forgetUnsaved();
}

// A report with arms: the overlay shows one arm's results, the control's first.
function setUpArms(arms) {
  const select = $("report-arm");
  select.replaceChildren(...arms.map((name, i) => el("option", { value: name, text: i === 0 ? `${name} (control)` : name })));
  state.arm = arms[0] ?? null;
  select.addEventListener("change", () => { state.arm = select.value; renderAll(false); });
}

// The block the inspector edits, for text typed but not committed.
function editedBlock() {
  const sel = state.selection;
  return sel && state.caseId ? { caseId: state.caseId, target: sel.target, block: sel.block, time: selectedSampleTime() } : null;
}

async function refreshCases() {
  state.cases = await api.cases();
  renderCases(open);
}

function open(caseId) { openCase(caseId).catch(fail); }

async function openCase(caseId, { target = null, time = null } = {}) {
  await writer.settled();
  const detail = await api.detail(caseId);
  // Frame times first: from here on the case is drawn once, in one go.
  const frameTimes = detail.video && !detail.video.error ? await api.frameTimes(caseId) : [];
  Object.assign(state, { caseId, conflict: false, selection: null, eventSel: null, frame: null, frameTimes, prompt: null, pins: null });
  state.targetId = detail.targets.some((t) => t.id === target) ? target : detail.targets[0]?.id || null;
  adopt(detail, null, { draw: false });
  player.reset();
  renderAll();
  $("banner").hidden = true;
  notify("");
  const start = time ?? (state.targetId ? targetTimes(state.targetId)[0] : undefined) ?? 0;
  seek(start);
  const hit = state.targetId ? findBlockAt(state.targetId, start) : null;
  if (hit) select(state.targetId, hit.block, hit.tick, null);
  setStatus("", detail.editable ? "Saved" : "Read-only");
}

// Take the server's view of the case; keepRaws while later edits are still on their way.
// `reveal` (undo, redo) also moves the playhead to the selection, so the change is in view.
// `eventsOf`: one event save of that target, applied to `detail` already; only its events are taken.
// `draw: false` leaves the drawing to the caller (opening a case draws once, after the selection).
function adopt(detail, selection, { keepRaws = false, reveal = false, eventsOf = null, draw = true } = {}) {
  state.detail = detail;
  if (!keepRaws && eventsOf !== null) {
    // Shared, not cloned: the page replaces an event, never changes one in place (edits clone first).
    state.events[eventsOf] = target(eventsOf).stream.events.map((e) => e.raw);
    if (state.eventSel && !state.events[state.eventSel.target]?.[state.eventSel.index]) state.eventSel = null;
    state.selection = selection && state.raws[selection.target]?.[selection.block] ? selection : null;
    if (state.selection) state.targetId = state.selection.target;
  } else if (!keepRaws) {
    state.raws = {};
    state.events = {};
    for (const t of detail.targets) state.raws[t.id] = t.blocks.map((b) => clone(b.raw));
    // Shared, not cloned, as above: 100,000 copies would cost more than the rest of the opening.
    for (const t of detail.targets) if (t.stream) state.events[t.id] = t.stream.events.map((e) => e.raw);
    if (state.eventSel && !state.events[state.eventSel.target]?.[state.eventSel.index]) state.eventSel = null;
    state.selection = selection && state.raws[selection.target]?.[selection.block] ? selection : null;
    if (state.selection) state.targetId = state.selection.target;
  }
  if (!detail.targets.some((t) => t.id === state.targetId)) state.targetId = state.selection?.target || detail.targets[0]?.id || null;
  if (!state.caseId) return;
  if (draw) renderAll(false);
  const t = reveal ? selectedSampleTime() : null;
  if (t !== null && !sameTime(t, state.time)) seek(t);
  loadPins();
}

// The frame lock's statuses for the case as the server last sent it. Only a locked case asks
// (the server decodes its frames for this); the marks of the previous answer stay until the
// new one arrives, and an answer overtaken by a later request is dropped.
let pinRequests = 0;
async function loadPins() {
  const caseId = state.caseId;
  if (!state.detail?.frame_lock) {
    if (state.pins) { state.pins = null; renderPins(); }
    return;
  }
  const mine = ++pinRequests;
  if (!state.pins || state.pins.caseId !== caseId) state.pins = { caseId, loading: true, byTime: new Map() };
  renderPins();
  let pins;
  try {
    const body = await api.pins(caseId);
    pins = { caseId, revision: body.revision, lockFile: body.lock_file, error: body.error, counts: body.counts || {},
      problems: body.problems || 0, byTime: new Map(body.samples.map((s) => [pinKey(s.target, s.time_s), s])) };
  } catch (error) {
    pins = { caseId, lockFile: state.detail?.frame_lock, error: error.message || String(error), counts: {}, problems: 0, byTime: new Map() };
  }
  if (mine !== pinRequests || caseId !== state.caseId) return;
  state.pins = pins;
  renderPins();
}

function renderPins() {
  renderPinBadge();
  timeline.render();
  renderSamplesTable(select);
  inspector.render();
}

async function reloadAfterRefusal(selection) {
  const detail = await api.detail(state.caseId);
  adopt(detail, selection);
}

function reloadCase() {
  // The file on disk is the new starting point: steps recorded against the old one cannot apply.
  history().clear();
  openCase(state.caseId, { target: state.targetId, time: state.time }).catch(fail);
}

// --- drawing -------------------------------------------------------------------------------------

function renderEditing() {
  timeline.render();
  clips.update();
  renderSamplesTable(select);
  inspector.render();
  eventInspector.render();
  renderPrompt();
  renderHistory();
  const canAdd = editable() && !!state.detail?.video && !state.detail.video.error;
  $("add-at").disabled = !canAdd;
  $("add-range").disabled = !canAdd || !!target()?.stream;
}

function renderAll(resetView = true) {
  renderHeader();
  if (resetView) $("filmstrip").replaceChildren();
  renderCases(open);
  renderTargets(focusTarget);
  renderEditing();
}

function fail(error) { showBanner(error.message || String(error)); }

// --- moving around --------------------------------------------------------------------------------

function seek(t) {
  player.seek(t);
  if (state.prompt) renderPrompt();
  if (selectedRaw() && "range" in selectedRaw()) { inspector.render(); clips.update(); }
}

function select(targetId, block, tick, time) {
  state.prompt = null;
  state.eventSel = null;
  state.selection = block === null || block === undefined ? null : { target: targetId, block, tick: tick ?? null };
  if (state.selection && "range" in (selectedRaw() || {})) state.selection.tick = null;
  if (targetId !== state.targetId) { state.targetId = targetId; renderTargets(focusTarget); }
  if (time !== null && time !== undefined) seek(time);
  renderEditing();
}

// A sample named by case, target and time (a suspect label): its case opened, the sample selected.
async function goToSample({ case: caseId, target, at }) {
  if (caseId !== state.caseId) { await openCase(caseId, { target, time: at }); return; }
  const hit = findBlockAt(target, at);
  if (hit) select(target, hit.block, hit.tick, at);
  else { focusTarget(target); seek(at); }
}

function focusTarget(targetId) {
  if (state.targetId === targetId) return;
  state.targetId = targetId;
  state.selection = null;
  state.eventSel = null;
  state.prompt = null;
  renderTargets(focusTarget);
  renderEditing();
}

function stepSample(direction) {
  const times = targetTimes(state.targetId);
  const next = direction > 0 ? times.find((t) => t > state.time + 1e-6) : times.filter((t) => t < state.time - 1e-6).pop();
  if (next === undefined) return;
  const hit = findBlockAt(state.targetId, next);
  if (hit) select(state.targetId, hit.block, hit.tick, next);
  else seek(next);
}

function stepTarget(direction) {
  const targets = state.detail?.targets || [];
  const at = targets.findIndex((t) => t.id === state.targetId);
  const next = targets[at + direction];
  if (next) focusTarget(next.id);
}

// P / Shift+P: the next / previous sample whose frame lock reports a problem.
function jumpPinProblem(direction) {
  if (!state.pins) { notify("This case has no frame lock: run `validate --pin` to pin its frames.", "info"); return; }
  const list = pinProblems();
  if (!list.length) { notify(state.pins.loading ? "Still checking the frame lock…" : "No sample of this case has a frame-lock problem.", "info"); return; }
  const rank = (state.detail.targets || []).findIndex((t) => t.id === state.targetId);
  const after = (x) => x.time > state.time + 1e-6 || (sameTime(x.time, state.time) && x.rank > rank);
  const before = (x) => x.time < state.time - 1e-6 || (sameTime(x.time, state.time) && x.rank < rank);
  const next = direction > 0 ? list.find(after) : list.filter(before).pop();
  if (!next) { notify(direction > 0 ? "No later frame-lock problem in this case." : "No earlier frame-lock problem in this case.", "info"); return; }
  notify("");
  const hit = findBlockAt(next.target, next.time);
  select(next.target, hit ? hit.block : null, hit ? hit.tick : null, next.time);
}

function jumpFailure(direction) {
  const list = failures();
  if (!list.length) { notify(state.session?.report ? "No failed or errored samples of this case in the report (or all changed since the run)." : "No report loaded: start review with --report results.json.", "info"); return; }
  const rank = (state.detail.targets || []).findIndex((t) => t.id === state.targetId);
  const after = (x) => x.time > state.time + 1e-6 || (sameTime(x.time, state.time) && x.rank > rank);
  const before = (x) => x.time < state.time - 1e-6 || (sameTime(x.time, state.time) && x.rank < rank);
  const next = direction > 0 ? list.find(after) : list.filter(before).pop();
  if (!next) { notify(direction > 0 ? "No later failure in this case." : "No earlier failure in this case.", "info"); return; }
  notify("");
  const hit = findBlockAt(next.target, next.time);
  select(next.target, hit ? hit.block : null, hit ? hit.tick : null, next.time);
}

// --- edits -------------------------------------------------------------------------------------------

function canEdit() {
  if (!state.detail?.editable) { notify("This case is invalid or read-only; fix it in an editor first."); return false; }
  if (state.conflict) { notify("The file changed on disk: reload the case (banner above) before editing."); return false; }
  return !!state.targetId;
}

function selected() {
  if (!state.selection) { notify("Select a sample first (click it, or step to it with [ and ]).", "info"); return null; }
  return canEdit() ? state.selection : null;
}

const blocksOf = (targetId) => state.raws[targetId];

function apply(targetId, result) {
  state.prompt = null;
  if (result.error) { notify(result.error, "info"); renderPrompt(); return; }
  writer.edit(targetId, result);
  if (state.targetId !== targetId) state.targetId = targetId;
  renderEditing();
}

function ask(view) {
  state.prompt = { view };
  renderPrompt();
}

function cancelPrompt() {
  state.prompt = null;
  renderPrompt();
}

// Y, N and "Use observed": one timestamp, or a whole range after saying so (or split first).
function setValue(value, key) {
  const sel = selected();
  if (!sel) return;
  const raw = selectedRaw();
  const blocks = blocksOf(sel.target);
  if (!("range" in raw)) { apply(sel.target, edits.setTickValue(blocks, sel.block, sel.tick ?? 0, value)); return; }
  const count = blockTimes(raw).length;
  if (count <= 1) { apply(sel.target, edits.setBlockValue(blocks, sel.block, value)); return; }
  const [start, end] = raw.range;
  const text = compact(value, 40);
  ask(() => {
    const t = playheadTime();
    const inside = t > start + 1e-9 && t < end - 1e-9;
    return {
      text: `${key} sets ${count} samples of this range [${start}, ${end}) to ${text}.`
        + (inside ? ` S splits the range at the playhead (${t} s) and sets only [${t}, ${end}).` : " Move the playhead inside the range to split it there instead."),
      primary: key,
      buttons: [[`Set all ${count}`, key, () => apply(sel.target, edits.setBlockValue(blocks, sel.block, value))],
        [`Split at ${t} s and set the rest`, "S", () => apply(sel.target, edits.splitRange(blocks, sel.block, playheadTime(), value)), !inside],
        ["Cancel", "Escape", cancelPrompt]],
    };
  });
}

function useObserved() {
  const sel = selected();
  if (!sel) return;
  const t = selectedSampleTime();
  const marker = t === null ? null : markerFor(sel.target, t);
  if (!marker || marker.observed_value === undefined) { notify("The report has no observed value for this sample.", "info"); return; }
  setValue(clone(marker.observed_value), "O");
}

function split() {
  let sel = state.selection;
  if (!sel || !("range" in (selectedRaw() || {}))) {
    const hit = state.targetId ? findBlockAt(state.targetId, state.time) : null;
    sel = hit && hit.tick === null ? { target: state.targetId, block: hit.block } : null;
  }
  if (!sel) { notify("Select a range (or put the playhead in one) to split it.", "info"); return; }
  if (!canEdit()) return;
  apply(sel.target, edits.splitRange(blocksOf(sel.target), sel.block, playheadTime()));
}

function remove() {
  if (state.eventSel && state.eventSel.target === state.targetId) { removeEvent(); return; }
  const sel = selected();
  if (!sel) return;
  const raw = selectedRaw();
  const count = blockTimes(raw).length;
  const doRemove = () => {
    const result = edits.deleteSelected(blocksOf(sel.target), sel.block, sel.tick);
    if (result.emptied) lastSample(sel);
    else apply(sel.target, result);
  };
  if ("range" in raw && count > 1) {
    ask(() => ({ text: `Delete removes the whole range [${raw.range[0]}, ${raw.range[1]}) with its ${count} samples.`, primary: "Delete",
      buttons: [[`Delete ${count} samples`, "Delete", doRemove], ["Cancel", "Escape", cancelPrompt]] }));
  } else doRemove();
}

// The last sample of a target: validate refuses an empty target, so ask what to do instead.
function lastSample(sel) {
  cancelPrompt();
  const dialog = $("last-sample");
  $("last-sample-target").textContent = sel.target;
  $("last-remove").onclick = () => { dialog.close(); writer.removeTarget(sel.target); };
  $("last-draft").onclick = () => { dialog.close(); apply(sel.target, edits.keepAsDraft(blocksOf(sel.target), sel.block)); };
  $("last-remove").disabled = (state.detail?.targets.length || 0) <= 1;
  $("last-remove").title = $("last-remove").disabled ? "A case needs at least one target" : "";
  dialog.showModal();
}

function addSample() {
  if (!canEdit()) return;
  if (target()?.stream) { addEvent(); return; }
  const t = playheadTime();
  if (findBlockAt(state.targetId, t)) { notify("A sample already exists here.", "info"); return; }
  apply(state.targetId, edits.insertBlock(blocksOf(state.targetId), { at: t, ...template() }));
  seek(t);
}

function addRange() {
  if (!canEdit()) return;
  const start = playheadTime();
  if (findBlockAt(state.targetId, start)) { notify("A sample already exists here.", "info"); return; }
  const every = state.detail.every_s || 0.5;
  let end = Math.min(duration() || start + 4 * every, start + 4 * every);
  for (const raw of blocksOf(state.targetId)) {
    const s = "range" in raw ? raw.range[0] : Math.min(...blockTimes(raw));
    if (s > start && s < end) end = s;
  }
  if (end <= start) { notify("No room for a range here.", "info"); return; }
  apply(state.targetId, edits.insertBlock(blocksOf(state.targetId), { range: [start, round6(end)], ...template() }));
}

function template() {
  // New samples copy the expectation of the nearest earlier block: runs of equal labels are common.
  const list = blocksOf(state.targetId);
  const before = list.filter((raw) => Math.min(...("range" in raw ? [raw.range[0]] : blockTimes(raw))) <= state.time).pop() || list[0];
  const out = {};
  for (const key of ["expect", "field", "compare"]) if (before && key in before) out[key] = clone(before[key]);
  return out;
}

// --- a stream target's events: each edit writes one event (the server checks windows, quiet time, the end) ---

function selectEvent(targetId, index) {
  state.prompt = null;
  state.selection = null;
  state.eventSel = { target: targetId, index };
  if (targetId !== state.targetId) { state.targetId = targetId; renderTargets(focusTarget); }
  const raw = state.events[targetId]?.[index];
  if (raw) seek(Number(raw.at));
  renderEditing();
}

// Show `events` (the list after the edit) at once; write only `edit` ({op, index, event}).
function editEvents(targetId, events, label, index, edit) {
  writer.editEvents(targetId, events, label, index === null ? null : { target: targetId, index }, edit);
  renderEditing();
}

function addEvent() {
  const t = playheadTime();
  const list = state.events[state.targetId] || [];
  if (list.some((e) => sameTime(Number(e.at), t))) { notify("An event already starts at this frame.", "info"); return; }
  // A new event expects what the nearest earlier one does (or the first): events of a target are alike.
  const like = list.filter((e) => Number(e.at) <= t).pop() || list[0];
  const event = { at: t };
  if (like && "expect" in like) event.expect = clone(like.expect);
  const k = list.findIndex((e) => Number(e.at) > t);
  const at = k < 0 ? list.length : k;
  const events = list.slice();
  events.splice(at, 0, event);
  editEvents(state.targetId, events, `add event at ${t} s`, at, { op: "add", index: at, event });
}

// The inspector's (and a drag's) change to one event: written as that event alone.
function commitEvent(targetId, index, raw, label) {
  if (!canEdit()) { renderEditing(); return; }
  const events = (state.events[targetId] || []).slice();
  if (!events[index]) return;
  events[index] = raw;
  editEvents(targetId, events, label, index, { op: "set", index, event: raw });
}

function moveEvent(targetId, index, t) {
  if (!canEdit()) { timeline.render(); return; }
  const old = state.events[targetId]?.[index];
  if (!old) return;
  commitEvent(targetId, index, { ...clone(old), at: round6(t) }, `move event to ${round6(t)} s`);
  seek(t);
}

function removeEvent() {
  if (!canEdit()) return;
  const sel = state.eventSel;
  const events = (state.events[sel.target] || []).slice();
  if (!events[sel.index]) return;
  const [gone] = events.splice(sel.index, 1);
  editEvents(sel.target, events, `delete event at ${gone.at} s`, null, { op: "delete", index: sel.index });
}

function commitBlock(raw, label) {
  const sel = state.selection;
  if (!sel || !canEdit()) { inspector.render({ force: true }); return; }
  apply(sel.target, edits.replaceBlock(blocksOf(sel.target), sel.block, raw, label));
}

function commitDrag(targetId, result) {
  if (!canEdit()) { timeline.render(); return; }
  apply(targetId, result);
}

function undo() {
  cancelPrompt();
  if (!state.detail?.editable) { notify("This case is read-only."); return; }
  if (state.conflict) { notify("The file changed on disk: reload the case before undoing."); return; }
  writer.undo();
}

function redo() {
  cancelPrompt();
  if (!state.detail?.editable || state.conflict) { notify("Reload the case before redoing."); return; }
  writer.redo();
}

// --- keys and wiring -------------------------------------------------------------------------------

const NAVIGATION = new Set([",", ".", "ArrowLeft", "ArrowRight", "Home", "End", " "]);

function answer(event) {
  const view = state.prompt.view();
  const key = event.key.length === 1 ? event.key.toUpperCase() : event.key === "Backspace" ? "Delete" : event.key;
  const button = view.buttons.find(([, k, , disabled]) => (k === key || (key === "Enter" && k === view.primary)) && !disabled);
  if (button) { button[2](); return true; }
  if (key === "Escape") { cancelPrompt(); return true; }
  if (!NAVIGATION.has(event.key)) cancelPrompt(); // any other key is a new command
  return false;
}

function activateTab(tab, focus = false) {
  for (const other of document.querySelectorAll("[role=tab]")) {
    const on = other === tab;
    other.classList.toggle("active", on);
    other.setAttribute("aria-selected", String(on));
    other.tabIndex = on ? 0 : -1;
    $(other.getAttribute("aria-controls")).hidden = !on;
  }
  if (focus) tab.focus();
  if (tab.dataset.tab === "timeline") timeline.render();
}

function moveTab(tab, key) {
  const tabs = [...document.querySelectorAll("[role=tab]")];
  const at = tabs.indexOf(tab);
  const next = key === "Home" ? 0 : key === "End" ? tabs.length - 1 : (at + (key === "ArrowRight" ? 1 : -1) + tabs.length) % tabs.length;
  activateTab(tabs[next], true);
}

const actions = {
  togglePlay: () => player.togglePlay(), stepFrame: (d) => player.stepFrame(d), nudge: (s) => player.nudge(s),
  stepSample, stepTarget, jumpFailure, jumpPinProblem, addSample, addRange, setValue, split, useObserved, remove, undo, redo,
  seekEnd: (end) => seek(end ? state.frameTimes.at(-1) ?? duration() : 0),
  zoom: (key) => timeline.setZoom(key === "0" ? 1 : key === "-" ? timeline.zoom / 2 : timeline.zoom * 2),
  escape: () => { if (state.prompt) cancelPrompt(); else select(state.targetId, null, null, null); },
  help: () => $("help").showModal(),
  answer, moveTab,
};

// The frame next to the one at t (its shortest selecting decimal), for snapping out of neighbours.
function neighbourFrame(t, direction) {
  const times = state.frameTimes;
  const k = nearestIndex(times, t) + direction;
  return times.length && k >= 0 && k < times.length ? frameTime(times, k) : round6(t + direction * 0.001);
}

const timeline = new Timeline($("timeline"), {
  state, seek, select, commit: commitDrag, focusTarget, snap: (t) => snapTime(state.frameTimes, t), selectEvent, moveEvent,
  frameAfter: (t) => neighbourFrame(t, 1),
  frameBefore: (t) => neighbourFrame(t, -1),
});
const player = new Player({ timeline, onError: (message) => showBanner(message) });
const clips = new ClipView({ timeline, seek });
const suspects = new SuspectsBar({ go: goToSample, relabel: (value) => { setValue(value, "C"); return !state.prompt; } });
const inspector = new Inspector({ state, commit: commitBlock, remove, playheadTime, blockTimes, useObserved, seek });
const eventInspector = new EventInspector({ state, commit: commitEvent, remove: removeEvent, playheadTime, seek });
const writer = new Writer({
  adopt, reload: (selection) => reloadAfterRefusal(selection).catch(fail), status: setStatus, notify,
  conflict: (message) => showBanner(message, { conflict: true, reload: true }),
  done: () => refreshCases().catch(() => {}),
});

function wire() {
  renderHelp($("help-keys"));
  const click = (id, run) => $(id).addEventListener("click", run);
  click("help-button", () => $("help").showModal());
  click("help-close", () => $("help").close());
  click("banner-close", () => { $("banner").hidden = true; });
  click("banner-reload", reloadCase);
  click("notice-close", () => notify(""));
  click("undo", undo);
  click("redo", redo);
  click("last-cancel", () => $("last-sample").close());
  $("case-filter").addEventListener("input", () => renderCases(open));
  $("target-filter").addEventListener("input", () => renderTargets(focusTarget));
  click("prev-sample", () => stepSample(-1));
  click("next-sample", () => stepSample(1));
  click("prev-frame", () => player.stepFrame(-1));
  click("next-frame", () => player.stepFrame(1));
  click("nudge-back", () => player.nudge(-0.1));
  click("nudge-fwd", () => player.nudge(0.1));
  click("play", () => player.togglePlay());
  click("add-at", addSample);
  click("add-range", addRange);
  click("split", split);
  click("next-failure", () => jumpFailure(1));
  click("pin-badge", () => jumpPinProblem(1));
  $("rate").addEventListener("change", (event) => { $("video").playbackRate = Number(event.target.value); });
  $("time-input").addEventListener("change", (event) => {
    const value = Number(event.target.value);
    if (Number.isFinite(value) && value >= 0) seek(value);
  });
  for (const tab of document.querySelectorAll("[role=tab]")) tab.addEventListener("click", () => activateTab(tab));
  for (const button of document.querySelectorAll("[data-zoom]")) {
    button.addEventListener("click", () => {
      for (const other of document.querySelectorAll("[data-zoom]")) other.classList.toggle("active", other === button);
      timeline.setZoom(Number(button.dataset.zoom));
    });
  }
  installKeys(actions);
  trackUnsaved(editedBlock);
  // Closing the tab would lose typed text or a write still on its way: the browser asks first.
  window.addEventListener("beforeunload", (event) => {
    if (!unsaved() && !writer.busy) return;
    event.preventDefault();
    event.returnValue = "";
  });
}

wire();
init().catch(fail);
