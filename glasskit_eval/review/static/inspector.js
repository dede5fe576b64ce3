// The inspector: the selected block's fields, and the run report for the selected sample.
// A field's value is committed on Enter or when the field loses focus (until then the text box
// keeps its own undo); every commit is one edit through ctx.commit, which saves it.
import { MODES, applyEdit, atList, clone, fmtS, typeOf, el, pretty } from "./util.js";
import { markersAt, markerFor, pinAt, selectedRaw, selectedSampleTime, target } from "./state.js";

const $ = (id) => document.getElementById(id);

export class Inspector {
  // ctx: {state, commit(raw, label), remove(), playheadTime(), blockTimes(raw), useObserved(), seek(t)}
  constructor(ctx) {
    this.ctx = ctx;
    const modeSelect = $("f-mode");
    for (const mode of MODES) modeSelect.append(el("option", { value: mode, text: mode }));
    this.bind();
  }

  showError(message) {
    $("insp-error").hidden = !message;
    $("insp-error").textContent = message || "";
  }

  // Commit a change to the selected block; a value that cannot be written puts the field back.
  edit(label, mutate) {
    const raw = selectedRaw();
    if (raw) applyEdit(this, raw, mutate, (next) => this.ctx.commit(next, label));
  }

  bind() {
    $("insp-form").addEventListener("submit", (event) => event.preventDefault());
    const on = (id, label, mutate, type = "change") => $(id).addEventListener(type, (event) => this.edit(label, (raw) => mutate(raw, event.target)));
    on("f-kind", "change kind", (raw, node) => {
      const every = this.ctx.state.detail.every_s || 0.5;
      if (node.value === "range" && "at" in raw) {
        const start = Math.min(...atList(raw));
        delete raw.at;
        raw.range = [start, Number((start + every * 2).toFixed(6))];
      } else if (node.value === "at" && "range" in raw) {
        const start = raw.range[0];
        delete raw.range;
        delete raw.every_s;
        raw.at = start;
      }
    });
    on("f-at", "edit timestamps", (raw, node) => {
      const parts = node.value.split(/[\s,]+/).filter(Boolean);
      const values = parts.map(Number);
      if (!parts.length || values.some((v) => !Number.isFinite(v) || v < 0)) {
        return "Timestamps must be nonnegative numbers of seconds, separated by commas.";
      }
      raw.at = values.length === 1 ? values[0] : values;
    });
    for (const button of document.querySelectorAll("[data-shift]")) {
      button.addEventListener("click", () => this.edit(`shift by ${button.dataset.shift} s`, (raw) => {
        const shift = Number(button.dataset.shift);
        const moved = atList(raw).map((t) => Number(Math.max(0, t + shift).toFixed(6)));
        raw.at = Array.isArray(raw.at) ? moved : moved[0];
      }));
    }
    $("f-at-here").addEventListener("click", () => this.edit("move to the playhead", (raw) => {
      const t = this.ctx.playheadTime();
      const tick = this.ctx.state.selection.tick ?? 0;
      if (Array.isArray(raw.at) && raw.at.length > 1) raw.at = raw.at.map((v, i) => (i === tick ? t : v));
      else raw.at = t;
    }));
    const rangeEdge = (id, position) => on(id, position ? "edit range end" : "edit range start", (raw, node) => {
      const value = Number(node.value);
      if (node.value.trim() === "" || !Number.isFinite(value) || value < 0) return "Range ends must be nonnegative numbers of seconds.";
      raw.range = raw.range.slice();
      raw.range[position] = value;
    });
    rangeEdge("f-start", 0);
    rangeEdge("f-end", 1);
    $("f-start-here").addEventListener("click", () => this.edit("start at the playhead", (raw) => { raw.range = [this.ctx.playheadTime(), raw.range[1]]; }));
    $("f-end-here").addEventListener("click", () => this.edit("end at the playhead", (raw) => { raw.range = [raw.range[0], this.ctx.playheadTime()]; }));
    on("f-every", "edit every_s", (raw, node) => {
      const value = Number(node.value);
      if (node.value.trim() === "") delete raw.every_s;
      else if (Number.isFinite(value) && value > 0) raw.every_s = value;
      else return "every_s must be a positive number of seconds (empty: the case default).";
    });
    $("f-type").addEventListener("change", (event) => this.changeType(event.target.value));
    $("draft-confirm").addEventListener("click", () => {
      $("draft-dialog").close();
      this.edit("make the block a draft", (raw) => { delete raw.expect; });
    });
    $("draft-dialog").addEventListener("close", () => this.render({ force: true }));
    for (const button of document.querySelectorAll("[data-bool]")) {
      button.addEventListener("click", () => this.edit(`set the block to ${button.dataset.bool}`, (raw) => { raw.expect = button.dataset.bool === "true"; }));
    }
    on("f-number", "edit the expected number", (raw, node) => {
      const value = Number(node.value);
      if (node.value.trim() === "" && this.typing) return undefined; // nothing typed yet: nothing to write
      if (node.value.trim() === "" || !Number.isFinite(value)) return "The expected number must be a finite number.";
      this.typing = null;
      raw.expect = value;
    });
    on("f-string", "edit the expected text", (raw, node) => { raw.expect = node.value; });
    on("f-json", "edit the expected JSON", (raw, node) => {
      try { raw.expect = JSON.parse(node.value); } catch (error) { return `Not valid JSON: ${error.message}`; }
    });
    on("f-field", "edit field", (raw, node) => { if (node.value.trim() === "") delete raw.field; else raw.field = node.value.trim(); });
    on("f-mode", "change the comparison", (raw, node) => {
      if (!node.value) { delete raw.compare; return; }
      const tolerance = raw.compare?.tolerance;
      raw.compare = { mode: node.value };
      if (node.value === "numeric" && tolerance !== undefined) raw.compare.tolerance = tolerance;
    });
    on("f-tol", "edit the tolerance", (raw, node) => {
      if (!raw.compare) return "Pick a comparison mode first.";
      const value = Number(node.value);
      if (node.validity?.badInput) return "The tolerance was not saved: it must be a number (of the expected value's units).";
      if (node.value.trim() === "") delete raw.compare.tolerance;
      else if (Number.isFinite(value) && value >= 0) raw.compare = { ...raw.compare, tolerance: value };
      else return `Tolerance ${node.value.trim() || "(not a number)"} was not saved: a tolerance is how far the observed number may be from the expected one, so it cannot be negative.`;
    });
    on("f-ignore", "toggle ignore", (raw, node) => {
      if (node.checked) raw.ignore = $("f-ignore-reason").value.trim() || "ignored in review";
      else delete raw.ignore;
    });
    on("f-ignore-reason", "edit the ignore reason", (raw, node) => {
      if (!("ignore" in raw)) return undefined;
      if (!node.value.trim()) return "An ignored sample needs a reason.";
      raw.ignore = node.value;
    });
    on("f-comment", "edit the comment", (raw, node) => { if (node.value === "") delete raw.comment; else raw.comment = node.value; });
    $("f-delete").addEventListener("click", () => this.ctx.remove());
    $("use-observed").addEventListener("click", () => this.ctx.useObserved());
    $("copy-observed").addEventListener("click", () => copy($("observed-json").textContent, $("copy-observed")));
  }

  // Switching the type writes at once, except to Draft (asked first) and to Number from a value
  // that is no number (nothing is written until a number is typed: a placeholder 0 would be a label).
  changeType(type) {
    const raw = selectedRaw();
    if (!raw) return;
    if (type === "draft") {
      if (!("expect" in raw)) return;
      $("draft-dialog").showModal();
      return;
    }
    this.typing = null;
    if (type === "number" && convert(raw.expect, "number", null) === null) {
      const sel = this.ctx.state.selection;
      this.typing = { caseId: this.ctx.state.caseId, target: sel.target, block: sel.block };
      this.showError("");
      this.render({ force: true });
      $("f-number").focus();
      return;
    }
    const defaults = { null: null, boolean: true, number: 0, string: "", array: [], object: {} };
    this.edit("change the value type", (next) => { next.expect = convert(next.expect, type, defaults[type]); });
  }

  // Whether the Number type was picked for the selected block and no number typed yet.
  typingNumber() {
    const sel = this.ctx.state.selection;
    const typing = this.typing;
    return !!typing && !!sel && typing.caseId === this.ctx.state.caseId && typing.target === sel.target && typing.block === sel.block;
  }

  // Fill the form from the selected block. The field being typed in is left alone unless `force`.
  render({ force = false } = {}) {
    const raw = selectedRaw();
    const state = this.ctx.state;
    $("insp-empty").hidden = !!raw;
    $("insp-form").hidden = !raw;
    if (!raw) { $("insp-where").textContent = ""; return; }
    const sel = state.selection;
    const current = target(sel.target);
    const times = this.ctx.blockTimes(raw);
    const isRange = "range" in raw;
    $("insp-where").textContent = `${current?.label || sel.target} · samples[${sel.block}]`;
    const t = selectedSampleTime();
    $("insp-scope").textContent = isRange
      ? `A range of ${times.length} sample${times.length === 1 ? "" : "s"}. Y/N ask before changing all of them; S splits it at the playhead. The fields below edit the whole block.`
      : times.length > 1 ? `Timestamp ${t} s of an at list of ${times.length}. Y/N, O, Delete and dragging change this timestamp only; the fields below edit the whole block.`
        : `Timestamp ${t} s.`;
    const active = document.activeElement;
    const set = (id, value) => {
      const node = $(id);
      node.dataset.committed = String(value);
      if (force || node !== active) {
        node.value = value;
        node.classList.remove("unsaved");
      }
    };
    set("f-kind", isRange ? "range" : "at");
    $("f-at-row").hidden = isRange;
    $("f-range-row").hidden = !isRange;
    if (isRange) {
      set("f-start", raw.range[0]);
      set("f-end", raw.range[1]);
      set("f-every", raw.every_s ?? "");
      $("f-every").placeholder = `${state.detail.every_s} (case default)`;
    } else {
      set("f-at", atList(raw).join(", "));
    }
    if (this.typing && !this.typingNumber()) this.typing = null;
    const type = this.typingNumber() ? "number" : typeOf(raw);
    set("f-type", type);
    $("f-number").placeholder = this.typingNumber() ? "Type the expected number" : "";
    $("f-bool").hidden = type !== "boolean";
    $("f-number").hidden = type !== "number";
    $("f-string").hidden = type !== "string";
    $("f-json").hidden = type !== "array" && type !== "object";
    for (const button of document.querySelectorAll("[data-bool]")) {
      const on = raw.expect === (button.dataset.bool === "true");
      button.classList.toggle("on", on);
      button.setAttribute("aria-pressed", String(on));
    }
    set("f-number", type === "number" && !this.typingNumber() ? raw.expect : "");
    set("f-string", type === "string" ? raw.expect : "");
    set("f-json", type === "array" || type === "object" ? JSON.stringify(raw.expect, null, 2) : "");
    const inherited = current?.defaults || {};
    set("f-field", raw.field ?? "");
    $("f-field").placeholder = inherited.field ? `${inherited.field} (inherited)` : "whole observation";
    set("f-mode", raw.compare?.mode ?? "");
    $("f-mode").options[0].textContent = inherited.compare?.mode ? `Inherited: ${inherited.compare.mode}` : "Auto (by value)";
    set("f-tol", raw.compare?.tolerance ?? "");
    $("f-tol").disabled = !raw.compare;
    $("f-ignore").checked = "ignore" in raw;
    $("f-ignore-reason").hidden = !("ignore" in raw);
    set("f-ignore-reason", raw.ignore ?? "");
    set("f-comment", raw.comment ?? "");
    $("f-delete").firstChild.textContent = !isRange && times.length > 1 ? `Delete timestamp ${t} s ` : isRange ? "Delete range " : "Delete sample ";
    this.renderPin(sel.target, times, t);
    this.renderResults(sel.target, times, t);
  }

  // What the frame lock says about the selected sample (and, for a block of several, all of it).
  renderPin(targetId, times, selectedTime) {
    const pins = this.ctx.state.pins;
    $("insp-pin").hidden = !pins;
    if (!pins) return;
    const pin = selectedTime === null ? null : pinAt(targetId, selectedTime);
    const status = $("pin-status");
    $("pin-file").textContent = pins.lockFile || this.ctx.state.detail?.frame_lock || "";
    let label = "not checked";
    let message = "";
    let kind = "pending";
    if (pins.loading) message = "Checking the frames against the lock…";
    else if (pins.error) { label = "cannot check"; kind = "error"; message = pins.error; }
    else if (pin) {
      ({ label, message } = pin);
      kind = pin.problem ? "problem" : pin.status;
      if (pin.problem) message += ". Check the label against this frame: an edit saved here pins the block again (so does `validate --pin`).";
    } else message = "This sample is not saved yet; its frame is checked after the save.";
    status.textContent = label;
    status.className = `pin-status ${kind}`;
    $("pin-message").textContent = message;
    const mine = times.map((t) => pinAt(targetId, t)).filter(Boolean);
    const counts = new Map();
    for (const p of mine) counts.set(p.label, (counts.get(p.label) || 0) + 1);
    $("pin-block").hidden = times.length < 2 || !mine.length;
    $("pin-block").textContent = `This block's ${times.length} samples: ${[...counts].map(([l, n]) => `${n} ${l}`).join(", ")}`;
  }

  // Every run result of the block, and in full the one for the selected sample.
  renderResults(targetId, times, selectedTime) {
    const box = $("insp-results");
    const mine = times.flatMap((t) => markersAt(targetId, t));
    $("insp-report").hidden = !mine.length;
    if (!mine.length) return;
    box.replaceChildren(...mine.map((m) => {
      const status = m.changed ? "changed" : m.status;
      const what = m.changed ? `changed since run (the run said ${m.status})` : m.status;
      return el("button", { type: "button", class: `result st-${status}`, onclick: () => this.ctx.seek(m.time_s) },
        `${fmtS(m.time_s)}${m.trial > 1 ? ` trial ${m.trial}` : ""} ${what}`, m.reason && m.status !== "passed" && !m.changed ? `: ${m.reason}` : "");
    }));
    const marker = selectedTime === null ? null : markerFor(targetId, selectedTime);
    $("insp-observed").hidden = !marker;
    if (!marker) return;
    $("observed-title").textContent = `Observed at ${fmtS(marker.time_s)}${marker.field ? ` (field ${marker.field})` : ""}`;
    $("observed-value").textContent = pretty(marker.observed_value);
    $("observed-json").textContent = pretty(marker.observed);
    $("use-observed").disabled = marker.observed_value === undefined || (marker.status === "error" && marker.observed === null);
  }
}

async function copy(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Without clipboard permission, select the text so Ctrl+C copies it.
    const range = document.createRange();
    range.selectNodeContents($("observed-json"));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

function convert(value, type, fallback) {
  if (type === "number") { const n = Number(value); return Number.isFinite(n) && typeof value !== "boolean" ? n : fallback; }
  if (type === "string") return value === undefined || value === null ? "" : typeof value === "string" ? value : JSON.stringify(value);
  if (type === "boolean") return typeof value === "boolean" ? value : fallback;
  if (type === "array") return Array.isArray(value) ? value : value === undefined ? [] : [clone(value)];
  if (type === "object") return value && typeof value === "object" && !Array.isArray(value) ? value : fallback;
  return fallback;
}
