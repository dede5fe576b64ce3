// Drawing the page from the state: lists, the samples table, the header, messages.
// Nothing here changes the state; clicks call the actions app.js passes in.
import { state, blockTimes, sampleCount, target, markersOf, history, pinAt, reportMarkers, shownArm } from "./state.js";
import { activatable, el, compact, keepFocus, sameTime, typeOf } from "./util.js";

const $ = (id) => document.getElementById(id);

export function setStatus(kind, text) {
  const node = $("save-status");
  node.className = `save-status ${kind}`;
  node.textContent = text;
  node.dataset.saves = String(state.saves);
}

export function showBanner(text, { conflict = false, reload = false } = {}) {
  $("banner").hidden = false;
  $("banner").classList.toggle("conflict", conflict);
  $("banner-text").textContent = text;
  $("banner-reload").hidden = !reload;
}

// The one place a message about an edit appears, so it is never shown twice.
export function notify(text, kind = "error") {
  const node = $("notice");
  node.hidden = !text;
  node.className = `notice ${kind}`;
  $("notice-text").textContent = text || "";
}

function badge(summary) {
  if (summary.status === "invalid") return el("span", { class: "badge invalid", text: "invalid" });
  if (summary.status === "drafts") {
    const parts = [];
    if (summary.drafts) parts.push(`${summary.drafts} draft${summary.drafts > 1 ? "s" : ""}`);
    if (summary.empty_targets?.length) parts.push(`${summary.empty_targets.length} empty`);
    return el("span", { class: "badge drafts", text: parts.join(", ") });
  }
  return el("span", { class: "badge ready", text: "ready" });
}

export function renderCases(open) {
  const filter = $("case-filter").value.trim().toLowerCase();
  const shown = state.cases.filter((c) => !filter || c.id.toLowerCase().includes(filter) || (c.description || "").toLowerCase().includes(filter));
  $("case-count").textContent = String(state.cases.length);
  keepFocus($("case-list"), () => $("case-list").replaceChildren(...shown.map((c) => {
    const item = el("li", { class: c.id === state.caseId ? "active" : "", dataset: { case: c.id },
      "aria-current": c.id === state.caseId ? "true" : null,
      title: c.problems.map((p) => p.text).join("\n") || c.description || "", onclick: () => open(c.id) },
    el("div", { class: "row" }, el("strong", { text: c.id }), el("span", { class: "count", text: String(c.sample_count) })),
    el("div", { class: "row" }, el("span", { class: "sub", text: c.description || c.file_name }), badge(c)));
    return activatable(item, `Open case ${c.id}`, () => open(c.id));
  })));
}

export function renderTargets(focusTarget) {
  const filter = $("target-filter").value.trim().toLowerCase();
  const targets = state.detail?.targets || [];
  $("target-count").textContent = String(targets.length);
  keepFocus($("target-list"), () => $("target-list").replaceChildren(...targets.filter((t) => !filter || t.id.toLowerCase().includes(filter) || (t.label || "").toLowerCase().includes(filter))
    .map((t) => {
      const item = el("li", { class: t.id === state.targetId ? "active" : "", dataset: { target: t.id },
        "aria-current": t.id === state.targetId ? "true" : null, onclick: () => focusTarget(t.id) },
      el("div", { class: "row" }, el("strong", { text: t.label || t.id }), el("span", { class: "count", text: String(sampleCount(t.id)) })),
      t.label ? el("div", { class: "sub", text: t.id }) : null);
      return activatable(item, `Target ${t.label || t.id}`, () => focusTarget(t.id));
    })));
  const current = target();
  $("crumb-target").textContent = current ? current.label || current.id : "–";
}

// A run result for the table: pass counts, or "changed since run" when the file moved on.
function runCell(mine) {
  if (!mine.length) return el("td", {});
  const changed = mine.filter((m) => m.changed).length;
  const current = mine.filter((m) => !m.changed);
  const failed = current.filter((m) => m.status !== "passed" && m.status !== "ignored").length;
  const parts = [];
  if (current.length) parts.push(`${current.length - failed}/${current.length} passed`);
  if (changed) parts.push(`${changed} changed since run`);
  return el("td", { class: changed && !current.length ? "st-changed" : failed ? "st-failed" : "st-passed", text: parts.join(" · ") });
}

// The frame lock's word on a block: its problems by kind, else "pin ok" (empty until checked).
function pinCell(times) {
  const pins = times.map((t) => pinAt(state.targetId, t)).filter(Boolean);
  const bad = pins.filter((p) => p.problem || p.status !== "ok");
  const counts = new Map();
  for (const p of bad) counts.set(p.label, (counts.get(p.label) || 0) + 1);
  const text = !pins.length ? "" : bad.length ? [...counts].map(([label, n]) => (times.length > 1 ? `${n} ${label}` : label)).join(" · ") : "pin ok";
  return el("td", { class: bad.some((p) => p.problem) ? "st-pin-problem" : bad.length ? "st-changed" : "st-passed", text });
}

export function renderSamplesTable(select) {
  $("pin-column").hidden = !state.pins;
  const raws = state.raws[state.targetId] || [];
  const current = target();
  const markers = markersOf(state.targetId);
  keepFocus($("samples-body"), () => $("samples-body").replaceChildren(...raws.map((raw, index) => {
    const times = blockTimes(raw);
    const when = "range" in raw ? `${raw.range[0]}–${raw.range[1]} s · every ${raw.every_s ?? state.detail.every_s} · ${times.length} samples`
      : times.map((t) => `${t} s`).join(", ");
    const type = typeOf(raw);
    const mine = markers.filter((m) => times.some((t) => sameTime(t, m.time_s)));
    const selected = state.selection?.target === state.targetId && state.selection.block === index;
    const row = el("tr", { class: selected ? "selected" : "", dataset: { block: index }, "aria-current": selected ? "true" : null,
      onclick: () => select(state.targetId, index, 0, times[0]) },
    el("td", { class: "mono", text: when }),
    el("td", {}, el("span", { class: "pill", text: type }), type === "draft" ? "" : compact(raw.expect)),
    el("td", { class: "mono" }, raw.field ?? el("span", { class: "muted", text: current?.defaults.field ?? "" })),
    el("td", { text: raw.compare ? `${raw.compare.mode}${raw.compare.tolerance !== undefined ? ` ±${raw.compare.tolerance}` : ""}` : "auto" }),
    el("td", { text: raw.ignore ?? "" }), el("td", { text: raw.comment ?? "" }), runCell(mine), state.pins ? pinCell(times) : null);
    return activatable(row, `Select samples[${index}]: ${when}`, () => select(state.targetId, index, 0, times[0]));
  })));
}

export function renderHeader() {
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
  const markers = reportMarkers();
  $("report-badge").hidden = !state.session?.report;
  const arm = shownArm();
  $("report-arm-box").hidden = arm === null;
  if (state.session?.report) {
    const count = (s) => markers.filter((m) => m.status === s && !m.changed).length;
    const changed = markers.filter((m) => m.changed).length;
    $("report-badge").textContent = `report${arm === null ? "" : ` (${arm})`}: ${count("passed")} passed · ${count("failed")} failed · ${count("error")} errors`
      + (changed ? ` · ${changed} changed since run` : "");
  }
  renderHistory();
  renderPinBadge();
}

// "frame lock: …" in the top bar: what the lock says about the whole case; P jumps to a problem.
export function renderPinBadge() {
  const badge = $("pin-badge");
  const pins = state.pins;
  badge.hidden = !pins;
  if (!pins) return;
  const counts = pins.counts || {};
  const words = { moved: "moved", pixels_changed: "pixels changed", time_edited: "time edited",
    pixels_slightly_changed: "pixels slightly changed", unpinned: "unpinned" };
  const parts = Object.entries(words).filter(([k]) => counts[k]).map(([k, w]) => `${counts[k]} ${w}`);
  const text = pins.loading ? "checking…" : pins.error ? "cannot check" : parts.length ? parts.join(" · ") : `all ${counts.ok || 0} pinned`;
  badge.textContent = `frame lock: ${text}`;
  badge.className = `pin-badge${pins.error || pins.problems ? " problem" : ""}`;
  badge.title = pins.error ? pins.error : `${pins.lockFile || state.detail?.frame_lock}: ${pins.problems ? "P jumps to the next sample whose frame changed" : "every sample is on its pinned frame"}`;
}

export function renderHistory() {
  const steps = state.caseId ? history() : null;
  for (const [id, step, verb] of [["undo", steps?.nextUndo, "Undo"], ["redo", steps?.nextRedo, "Redo"]]) {
    const button = $(id);
    button.disabled = !step || !state.detail?.editable;
    const keys = id === "undo" ? "Ctrl/⌘+Z" : "Ctrl/⌘+Shift+Z";
    button.title = step ? `${verb}: ${step.label} (${keys})` : `Nothing to ${verb.toLowerCase()} (${keys})`;
    button.dataset.steps = String(id === "undo" ? steps?.undoSteps.length ?? 0 : steps?.redoSteps.length ?? 0);
  }
}

// A question the next key answers (see keys.js): shown with buttons for the mouse too.
export function renderPrompt() {
  $("prompt").hidden = !state.prompt;
  if (!state.prompt) return;
  const prompt = state.prompt.view();
  $("prompt-text").textContent = prompt.text;
  $("prompt-actions").replaceChildren(...prompt.buttons.map(([text, key, run, disabled]) =>
    el("button", { type: "button", class: key === prompt.primary ? "primary" : "", disabled: !!disabled, dataset: { key },
      onclick: run }, text, " ", el("kbd", { text: key === "Escape" ? "Esc" : key }))));
}
