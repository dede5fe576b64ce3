// The review page: cases, targets, the exact eval frame, stepping, the timeline,
// the samples table and autosave. Plain ES modules, no build step.
import { el, clone, fmtClock, fmtS, compact, typeOf, nearestIndex, frameTime, snapTime,
  rawTimes, blockStart, ordered } from "./util.js";
import { Timeline } from "./timeline.js";
import { Inspector } from "./inspector.js";

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const FILMSTRIP_SIDE = 4;

const state = {
  session: null, cases: [], caseId: null, detail: null, raws: {}, targetId: null,
  selected: null, time: 0, frameTimes: [], frame: null, conflict: false, unsaved: new Set(),
};

// --- API ------------------------------------------------------------------------------------

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (options.body !== undefined) Object.assign(headers, { "Content-Type": "application/json", "X-CSRF-Token": CSRF });
  const response = await fetch(path, { credentials: "same-origin", ...options, headers });
  const type = response.headers.get("content-type") || "";
  const body = type.includes("application/json") ? await response.json() : response;
  if (!response.ok) {
    const error = new Error(body?.message || `HTTP ${response.status}`);
    Object.assign(error, { status: response.status, body });
    throw error;
  }
  return body;
}

function setStatus(kind, text) {
  const node = $("save-status");
  node.className = `save-status ${kind}`;
  node.textContent = text;
}

function showBanner(text, { conflict = false, reload = false } = {}) {
  $("banner").hidden = false;
  $("banner").classList.toggle("conflict", conflict);
  $("banner-text").textContent = text;
  $("banner-reload").hidden = !reload;
}

// --- loading --------------------------------------------------------------------------------

async function init() {
  state.session = await api("/api/session");
  $("eval-dir").textContent = state.session.eval_dir;
  await refreshCases();
  const initial = state.session.initial || {};
  const first = initial.case || (state.cases.find((c) => c.status !== "invalid") || state.cases[0])?.id;
  if (first) await openCase(first, { target: initial.target, time: initial.time });
  else setStatus("", "No cases");
}

async function refreshCases() {
  state.cases = (await api("/api/cases")).cases;
  renderCases();
}

async function openCase(caseId, { target = null, time = null } = {}) {
  const detail = await api(`/api/cases/${enc(caseId)}`);
  Object.assign(state, { caseId, conflict: false, selected: null, frame: null, frameTimes: [] });
  state.unsaved.clear();
  adopt(detail);
  state.targetId = detail.targets.some((t) => t.id === target) ? target : detail.targets[0]?.id || null;
  $("frame").removeAttribute("src");
  $("frame-label").textContent = "–";
  delete $("frame-label").dataset.index;
  $("filmstrip").replaceChildren();
  const video = $("video");
  const ok = detail.video && !detail.video.error;
  if (ok) {
    if (video.dataset.src !== detail.video.url) { video.src = detail.video.url; video.dataset.src = detail.video.url; }
    state.frameTimes = (await api(`/api/cases/${enc(caseId)}/frames`)).times;
  } else {
    video.removeAttribute("src");
    delete video.dataset.src;
  }
  renderAll();
  $("banner").hidden = true;
  const firstTime = state.targetId ? targetTimes(state.targetId)[0] : undefined;
  const start = time ?? firstTime ?? 0;
  seek(start);
  const hit = findBlockAt(state.targetId, start);
  if (hit !== null) select(state.targetId, hit, null);
  setStatus("", detail.editable ? "Saved" : "Read-only");
}

function adopt(detail) {
  state.detail = detail;
  state.raws = {};
  for (const target of detail.targets) state.raws[target.id] = target.blocks.map((b) => clone(b.raw));
}

// --- time and frames -----------------------------------------------------------------------

const duration = () => state.detail?.video?.duration_s || 0;
const frameIndexNow = () => (state.frame && Math.abs(state.frame.requested - state.time) < 1e-9
  ? state.frame.index : nearestIndex(state.frameTimes, state.time));
const playheadTime = () => snapTime(state.frameTimes, state.time);

function seek(t, { fromVideo = false } = {}) {
  const end = duration();
  state.time = Math.max(0, end ? Math.min(t, end) : t);
  const video = $("video");
  if (!fromVideo && video.src && Math.abs(video.currentTime - state.time) > 1e-6) video.currentTime = state.time;
  $("clock").textContent = `${fmtClock(state.time)} / ${fmtClock(end)}`;
  if (document.activeElement !== $("time-input")) $("time-input").value = state.time.toFixed(3);
  timeline.movePlayhead(state.time);
  timeline.reveal(state.time);
  if (!fromVideo) requestFrame(state.time);
}

let frameAbort = null;
let frameUrl = null;
async function requestFrame(t) {
  if (!state.detail?.video || state.detail.video.error) return;
  frameAbort?.abort();
  const abort = (frameAbort = new AbortController());
  $("frame-label").classList.add("stale");
  try {
    const response = await api(`/api/cases/${enc(state.caseId)}/frame?t=${t}`, { signal: abort.signal });
    const blob = await response.blob();
    if (abort.signal.aborted) return;
    if (frameUrl) URL.revokeObjectURL(frameUrl);
    frameUrl = URL.createObjectURL(blob);
    $("frame").src = frameUrl;
    const h = response.headers;
    state.frame = { requested: t, index: Number(h.get("X-Frame-Index")), media: h.get("X-Media-Time"),
      hash: h.get("X-Pixel-Hash") };
    const label = $("frame-label");
    label.textContent = `Exact eval frame ${state.frame.index} · media ${state.frame.media} s · #${state.frame.hash.slice(0, 8)}`;
    label.title = `requested ${h.get("X-Requested-Time")} s, pixel SHA-256 ${state.frame.hash}`;
    label.classList.remove("stale");
    label.dataset.index = String(state.frame.index);
    scheduleFilmstrip();
  } catch (error) {
    if (error.name === "AbortError") return;
    $("frame-label").textContent = `No frame: ${error.message}`;
  }
}

let stripTimer = null;
function scheduleFilmstrip() {
  clearTimeout(stripTimer);
  stripTimer = setTimeout(renderFilmstrip, 150);
}

async function renderFilmstrip() {
  const times = state.frameTimes;
  if (!times.length || !state.frame) return;
  const k = state.frame.index;
  const lo = Math.max(0, k - FILMSTRIP_SIDE);
  const hi = Math.min(times.length - 1, k + FILMSTRIP_SIDE);
  const wanted = [];
  for (let i = lo; i <= hi; i++) wanted.push(times[i]);
  try {
    const { thumbs } = await api(`/api/cases/${enc(state.caseId)}/thumbs?t=${wanted.join(",")}`);
    if (state.frame?.index !== k) return;
    $("filmstrip").replaceChildren(...thumbs.map((thumb, i) => el("figure", {
      class: thumb.frame_index === k ? "current" : "", title: `frame ${thumb.frame_index} · ${fmtS(thumb.media_time_s)}`,
      onclick: () => seek(wanted[i]) }, el("img", { src: thumb.src, alt: `frame ${thumb.frame_index}` }),
    el("figcaption", { text: String(thumb.frame_index) }))));
  } catch (error) {
    $("filmstrip").replaceChildren(el("span", { class: "muted small", text: error.message }));
  }
}

function stepFrame(delta) {
  if (!state.frameTimes.length) return nudge(delta * 0.04);
  const k = Math.min(state.frameTimes.length - 1, Math.max(0, frameIndexNow() + delta));
  seek(state.frameTimes[k]);
}

function nudge(seconds) { seek(Number((state.time + seconds).toFixed(6))); }

function togglePlay() {
  const video = $("video");
  if (!video.src) return;
  if (video.paused) video.play().catch((error) => showBanner(`This browser cannot play the video: ${error.message}. Exact frames still work.`));
  else video.pause();
}

// --- samples ----------------------------------------------------------------------------------

const blockTimes = (raw) => rawTimes(raw, state.detail?.every_s);

function targetTimes(targetId) {
  return (state.raws[targetId] || []).flatMap((raw) => blockTimes(raw)).sort((a, b) => a - b);
}

function findBlockAt(targetId, t) {
  const raws = state.raws[targetId] || [];
  for (let i = 0; i < raws.length; i++) {
    const raw = raws[i];
    if ("range" in raw ? t >= raw.range[0] - 1e-9 && t < raw.range[1] : blockTimes(raw).some((v) => Math.abs(v - t) < 1e-6)) return i;
  }
  return null;
}

function stepSample(direction) {
  const times = targetTimes(state.targetId);
  const next = direction > 0 ? times.find((t) => t > state.time + 1e-6) : times.filter((t) => t < state.time - 1e-6).pop();
  if (next === undefined) return;
  seek(next);
  const index = findBlockAt(state.targetId, next);
  if (index !== null) select(state.targetId, index, null);
}

function select(targetId, index, time) {
  state.selected = index === null ? null : { target: targetId, block: index };
  if (targetId !== state.targetId) { state.targetId = targetId; renderTargets(); }
  if (time !== null && time !== undefined) seek(time);
  renderEditing();
}

function canEdit() {
  if (!state.detail?.editable) { showBanner("This case is invalid or read-only; fix it in an editor first."); return false; }
  if (state.conflict) return false;
  return !!state.targetId;
}

function insertBlock(raw) {
  const list = state.raws[state.targetId];
  let at = list.findIndex((other) => blockStart(other) > blockStart(raw));
  if (at < 0) at = list.length;
  list.splice(at, 0, ordered(raw));
  state.selected = { target: state.targetId, block: at };
  seek(blockStart(raw));
  changed(state.targetId);
}

function template() {
  // New samples copy the expectation of the nearest earlier block: runs of equal labels are common.
  const list = state.raws[state.targetId];
  const before = list.filter((raw) => blockStart(raw) <= state.time).pop() || list[0];
  const out = {};
  for (const key of ["expect", "field", "compare"]) if (before && key in before) out[key] = clone(before[key]);
  return out;
}

function addSample() {
  if (!canEdit()) return;
  const t = playheadTime();
  if (findBlockAt(state.targetId, t) !== null) { setStatus("error", "A sample already exists here"); return; }
  insertBlock({ at: t, ...template() });
}

function addRange() {
  if (!canEdit()) return;
  const start = playheadTime();
  if (findBlockAt(state.targetId, start) !== null) { setStatus("error", "A sample already exists here"); return; }
  const every = state.detail.every_s || 0.5;
  let end = Math.min(duration() || start + 4 * every, start + 4 * every);
  for (const raw of state.raws[state.targetId]) {
    const s = blockStart(raw);
    if (s > start && s < end) end = s;
  }
  if (end <= start) { setStatus("error", "No room for a range here"); return; }
  insertBlock({ range: [start, Number(end.toFixed(6))], ...template() });
}

function update(mutate) {
  const sel = state.selected;
  if (!sel || !canEdit()) return;
  const raw = clone(state.raws[sel.target][sel.block]);
  mutate(raw);
  state.raws[sel.target][sel.block] = raw;
  changed(sel.target);
}

function commitBlock(targetId, index, raw) {
  if (!canEdit()) { timeline.render(); return; }
  state.raws[targetId][index] = raw;
  state.selected = { target: targetId, block: index };
  state.targetId = targetId;
  changed(targetId);
}

function removeSelected() {
  const sel = state.selected;
  if (!sel || !canEdit()) return;
  state.raws[sel.target].splice(sel.block, 1);
  state.selected = null;
  changed(sel.target);
}

function setBoolean(value) {
  const raw = state.selected && state.raws[state.selected.target][state.selected.block];
  if (raw) update((r) => { r.expect = value; });
}

// --- autosave ---------------------------------------------------------------------------------

const dirty = new Set();
let saveTimer = null;
let saving = false;
let saveCount = 0;

function changed(targetId) {
  dirty.add(targetId);
  setStatus("saving", "Unsaved…");
  renderEditing();
  clearTimeout(saveTimer);
  saveTimer = setTimeout(flush, 350);
}

async function flush() {
  if (saving || state.conflict || !dirty.size) return;
  const targetId = dirty.values().next().value;
  dirty.delete(targetId);
  saving = true;
  setStatus("saving", "Saving…");
  const caseId = state.caseId;
  try {
    const detail = await api(`/api/cases/${enc(caseId)}/targets/${enc(targetId)}/samples`, {
      method: "PUT", body: JSON.stringify({ revision: state.detail.revision, blocks: state.raws[targetId] }) });
    if (caseId !== state.caseId) return;
    state.unsaved.delete(targetId);
    if (dirty.size) state.detail.revision = detail.revision;
    else { const raws = state.raws; adopt(detail); keepUnsaved(raws); }
    inspector.showError("");
    if (detail.saved?.fallback) showBanner(`Saved, but the whole file was re-rendered (${detail.saved.reason}); YAML comments may be gone.`);
    setStatus("", state.unsaved.size ? "Not saved" : "Saved");
    $("save-status").dataset.saves = String(++saveCount);
    renderAll(false);
    refreshCases().catch(() => {});
  } catch (error) {
    if (error.status === 409) {
      state.conflict = true;
      setStatus("error", "Conflict");
      showBanner(`${error.message}`, { conflict: true, reload: true });
    } else {
      state.unsaved.add(targetId);
      setStatus("error", "Not saved");
      const problems = error.body?.problems?.join("\n");
      inspector.showError(`Not saved: ${error.message}${problems && problems !== error.message ? `\n${problems}` : ""}`);
    }
  } finally {
    saving = false;
    if (dirty.size && !state.conflict) flush();
  }
}

function keepUnsaved(previous) {
  // Targets whose last save was refused keep the user's edits until they are fixed.
  for (const targetId of state.unsaved) if (previous[targetId]) state.raws[targetId] = previous[targetId];
}

// --- rendering --------------------------------------------------------------------------------

function badge(summary) {
  if (summary.status === "invalid") return el("span", { class: "badge invalid", text: "invalid" });
  if (summary.status === "drafts") return el("span", { class: "badge drafts", text: `${summary.drafts} draft${summary.drafts > 1 ? "s" : ""}` });
  return el("span", { class: "badge ready", text: "ready" });
}

function renderCases() {
  const filter = $("case-filter").value.trim().toLowerCase();
  const shown = state.cases.filter((c) => !filter || c.id.toLowerCase().includes(filter) || (c.description || "").toLowerCase().includes(filter));
  $("case-count").textContent = String(state.cases.length);
  $("case-list").replaceChildren(...shown.map((c) => el("li", {
    class: c.id === state.caseId ? "active" : "", dataset: { case: c.id },
    title: c.problems.map((p) => p.text).join("\n") || c.description || "",
    onclick: () => openCase(c.id).catch(fail) },
  el("div", { class: "row" }, el("strong", { text: c.id }), el("span", { class: "count", text: String(c.sample_count) })),
  el("div", { class: "row" }, el("span", { class: "sub", text: c.description || c.file_name }), badge(c)))));
}

function renderTargets() {
  const filter = $("target-filter").value.trim().toLowerCase();
  const targets = state.detail?.targets || [];
  $("target-count").textContent = String(targets.length);
  $("target-list").replaceChildren(...targets.filter((t) => !filter || t.id.toLowerCase().includes(filter) || (t.label || "").toLowerCase().includes(filter))
    .map((t) => el("li", { class: t.id === state.targetId ? "active" : "", dataset: { target: t.id }, onclick: () => focusTarget(t.id) },
      el("div", { class: "row" }, el("strong", { text: t.label || t.id }), el("span", { class: "count", text: String(targetTimes(t.id).length) })),
      t.label ? el("div", { class: "sub", text: t.id }) : null)));
  const target = targets.find((t) => t.id === state.targetId);
  $("crumb-target").textContent = target ? target.label || target.id : "–";
}

function focusTarget(targetId) {
  if (state.targetId === targetId) return;
  state.targetId = targetId;
  state.selected = null;
  renderTargets();
  renderEditing();
}

function renderSamplesTable() {
  const raws = state.raws[state.targetId] || [];
  const target = state.detail?.targets.find((t) => t.id === state.targetId);
  const markers = (state.detail?.markers || []).filter((m) => m.target === state.targetId);
  $("samples-body").replaceChildren(...raws.map((raw, index) => {
    const times = blockTimes(raw);
    const when = "range" in raw ? `${raw.range[0]}–${raw.range[1]} s · every ${raw.every_s ?? state.detail.every_s} · ${times.length} samples`
      : times.map((t) => `${t} s`).join(", ");
    const type = typeOf(raw);
    const mine = markers.filter((m) => times.some((t) => Math.abs(t - m.time_s) < 1e-6));
    const failed = mine.filter((m) => m.status !== "passed" && m.status !== "ignored").length;
    const selected = state.selected?.target === state.targetId && state.selected.block === index;
    return el("tr", { class: selected ? "selected" : "", dataset: { block: index },
      onclick: () => select(state.targetId, index, times[0]) },
    el("td", { class: "mono", text: when }),
    el("td", {}, el("span", { class: "pill", text: type }), type === "draft" ? "" : compact(raw.expect)),
    el("td", { class: "mono" }, raw.field ?? el("span", { class: "muted", text: target?.defaults.field ?? "" })),
    el("td", { text: raw.compare ? `${raw.compare.mode}${raw.compare.tolerance !== undefined ? ` ±${raw.compare.tolerance}` : ""}` : "auto" }),
    el("td", { text: raw.ignore ?? "" }), el("td", { text: raw.comment ?? "" }),
    el("td", { class: failed ? "st-failed" : "st-passed", text: mine.length ? `${mine.length - failed}/${mine.length} passed` : "" }));
  }));
}

function renderEditing() {
  timeline.render();
  renderSamplesTable();
  inspector.render();
  const editable = !!state.detail?.editable && !!state.detail?.video && !state.detail.video.error;
  $("add-at").disabled = !editable;
  $("add-range").disabled = !editable;
}

function renderAll(resetView = true) {
  const detail = state.detail;
  $("crumb-case").textContent = state.caseId || "–";
  $("video-name").textContent = detail?.video?.display_path || "–";
  $("video-desc").textContent = detail?.video?.error || detail?.video?.description || "";
  $("source").textContent = detail?.source || "";
  const problems = detail?.problems || [];
  const videoError = detail?.video?.error;
  $("problems").hidden = !problems.length && !videoError;
  $("problems").replaceChildren(el("strong", { text: problems.length ? "This case file is invalid:" : "Video problem:" }),
    el("ul", {}, ...(problems.length ? problems.map((p) => el("li", { text: p.text })) : [el("li", { text: videoError || "" })])));
  const markers = detail?.markers || [];
  $("report-badge").hidden = !state.session?.report;
  if (state.session?.report) {
    const count = (s) => markers.filter((m) => m.status === s).length;
    $("report-badge").textContent = `report: ${count("passed")} passed · ${count("failed")} failed · ${count("error")} errors`;
  }
  if (resetView) $("filmstrip").replaceChildren();
  renderCases();
  renderTargets();
  renderEditing();
}

function fail(error) {
  showBanner(error.message || String(error));
}

// --- keyboard ---------------------------------------------------------------------------------

const KEYS = [
  ["Space", "Play or pause", () => togglePlay()],
  [", / .", "Previous / next frame (the video's own frame table)", null],
  ["← / →", "Move 0.1 s back / forward", null],
  ["Shift + ← / →", "Move 1 s back / forward", null],
  ["[ / ]", "Previous / next sample of the target", null],
  ["↑ / ↓", "Previous / next target", null],
  ["Home / End", "Start / end of the video", null],
  ["A", "Add a sample at this frame", () => addSample()],
  ["R", "Add a range starting at this frame", () => addRange()],
  ["Y / N", "Set the selected sample's expectation to true / false", null],
  ["Delete", "Delete the selected sample", () => removeSelected()],
  ["+ / − / 0", "Zoom the timeline in / out / fit", null],
  ["?", "Show this help", () => $("help").showModal()],
  ["Esc", "Close help, clear the selection", null],
];

function onKey(event) {
  if ($("help").open) return; // the dialog handles its own keys (Esc closes it)
  const typing = event.target.closest?.("input, textarea, select");
  if (typing) { if (event.key === "Escape") event.target.blur(); return; }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const targets = state.detail?.targets || [];
  const at = targets.findIndex((t) => t.id === state.targetId);
  const actions = {
    " ": togglePlay, ",": () => stepFrame(-1), ".": () => stepFrame(1),
    ArrowLeft: () => nudge(event.shiftKey ? -1 : -0.1), ArrowRight: () => nudge(event.shiftKey ? 1 : 0.1),
    "[": () => stepSample(-1), "]": () => stepSample(1),
    ArrowUp: () => targets[at - 1] && focusTarget(targets[at - 1].id),
    ArrowDown: () => targets[at + 1] && focusTarget(targets[at + 1].id),
    Home: () => seek(0), End: () => seek(state.frameTimes.at(-1) ?? duration()),
    a: addSample, A: addSample, r: addRange, R: addRange, y: () => setBoolean(true), n: () => setBoolean(false),
    Y: () => setBoolean(true), N: () => setBoolean(false), Delete: removeSelected, Backspace: removeSelected,
    "+": () => timeline.setZoom(timeline.zoom * 2), "=": () => timeline.setZoom(timeline.zoom * 2),
    "-": () => timeline.setZoom(timeline.zoom / 2), 0: () => timeline.setZoom(1),
    "?": () => $("help").showModal(), Escape: () => { state.selected = null; renderEditing(); },
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
}

// --- wiring -----------------------------------------------------------------------------------

const timeline = new Timeline($("timeline"), {
  state, seek: (t) => seek(t), select, commit: commitBlock, focusTarget, snap: (t) => snapTime(state.frameTimes, t),
});
const inspector = new Inspector({ state, update, remove: removeSelected, playheadTime, blockTimes });

function wire() {
  $("help-keys").replaceChildren(...KEYS.map(([keys, what]) => el("tr", {}, el("td", {}, el("kbd", { text: keys })), el("td", { text: what }))));
  $("help-button").addEventListener("click", () => $("help").showModal());
  $("help-close").addEventListener("click", () => $("help").close());
  $("banner-close").addEventListener("click", () => { $("banner").hidden = true; });
  $("banner-reload").addEventListener("click", () => openCase(state.caseId, { target: state.targetId, time: state.time }).catch(fail));
  $("case-filter").addEventListener("input", renderCases);
  $("target-filter").addEventListener("input", renderTargets);
  $("prev-sample").addEventListener("click", () => stepSample(-1));
  $("next-sample").addEventListener("click", () => stepSample(1));
  $("prev-frame").addEventListener("click", () => stepFrame(-1));
  $("next-frame").addEventListener("click", () => stepFrame(1));
  $("nudge-back").addEventListener("click", () => nudge(-0.1));
  $("nudge-fwd").addEventListener("click", () => nudge(0.1));
  $("play").addEventListener("click", togglePlay);
  $("add-at").addEventListener("click", addSample);
  $("add-range").addEventListener("click", addRange);
  $("rate").addEventListener("change", (event) => { $("video").playbackRate = Number(event.target.value); });
  $("time-input").addEventListener("change", (event) => {
    const value = Number(event.target.value);
    if (Number.isFinite(value) && value >= 0) seek(value);
  });
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => {
      for (const other of document.querySelectorAll(".tab")) other.classList.toggle("active", other === tab);
      for (const name of ["timeline", "samples", "file"]) $(`tab-${name}`).hidden = name !== tab.dataset.tab;
      if (tab.dataset.tab === "timeline") timeline.render();
    });
  }
  for (const button of document.querySelectorAll("[data-zoom]")) {
    button.addEventListener("click", () => {
      for (const other of document.querySelectorAll("[data-zoom]")) other.classList.toggle("active", other === button);
      timeline.setZoom(Number(button.dataset.zoom));
    });
  }
  const video = $("video");
  video.addEventListener("play", () => { $("stage").classList.add("playing"); $("play").textContent = "⏸"; tick(); });
  video.addEventListener("pause", () => {
    $("stage").classList.remove("playing");
    $("play").textContent = "▶";
    seek(state.frameTimes.length ? frameTime(state.frameTimes, nearestIndex(state.frameTimes, video.currentTime)) : video.currentTime);
  });
  document.addEventListener("keydown", onKey);
}

function tick() {
  const video = $("video");
  if (video.paused) return;
  seek(video.currentTime, { fromVideo: true });
  requestAnimationFrame(tick);
}

wire();
init().catch(fail);
