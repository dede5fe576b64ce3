// The inspector: edit one sample block's raw mapping. Every change goes through
// ctx.update(mutator), which redraws and schedules the autosave.
import { MODES, atList, clone, fmtS, typeOf, el, compact } from "./util.js";

const $ = (id) => document.getElementById(id);

export class Inspector {
  constructor(ctx) {
    this.ctx = ctx; // {state, update, remove, playheadTime}
    const modeSelect = $("f-mode");
    for (const mode of MODES) modeSelect.append(el("option", { value: mode, text: mode }));
    this.bind();
  }

  current() {
    const sel = this.ctx.state.selected;
    if (!sel) return null;
    return this.ctx.state.raws[sel.target]?.[sel.block] || null;
  }

  edit(mutate) {
    if (this.current()) this.ctx.update((raw) => mutate(raw));
  }

  showError(message) {
    $("insp-error").hidden = !message;
    $("insp-error").textContent = message || "";
  }

  bind() {
    $("insp-form").addEventListener("submit", (event) => event.preventDefault());
    $("f-kind").addEventListener("change", (event) => this.edit((raw) => {
      const every = this.ctx.state.detail.every_s || 0.5;
      if (event.target.value === "range" && "at" in raw) {
        const start = Math.min(...atList(raw));
        delete raw.at;
        raw.range = [start, Number((start + every * 2).toFixed(6))];
      } else if (event.target.value === "at" && "range" in raw) {
        const start = raw.range[0];
        delete raw.range;
        delete raw.every_s;
        raw.at = start;
      }
    }));
    $("f-at").addEventListener("input", (event) => {
      const parts = event.target.value.split(/[\s,]+/).filter(Boolean);
      const values = parts.map(Number);
      if (!parts.length || values.some((v) => !Number.isFinite(v) || v < 0)) {
        this.showError("Timestamps must be nonnegative numbers of seconds, separated by commas.");
        return;
      }
      this.showError("");
      this.edit((raw) => { raw.at = values.length === 1 ? values[0] : values; });
    });
    for (const button of document.querySelectorAll("[data-shift]")) {
      button.addEventListener("click", () => this.edit((raw) => {
        const shift = Number(button.dataset.shift);
        const moved = atList(raw).map((t) => Number(Math.max(0, t + shift).toFixed(6)));
        raw.at = Array.isArray(raw.at) ? moved : moved[0];
      }));
    }
    $("f-at-here").addEventListener("click", () => this.edit((raw) => {
      const t = this.ctx.playheadTime();
      if (Array.isArray(raw.at) && raw.at.length > 1) {
        // Move the entry nearest to the playhead; the others stay.
        const list = raw.at.slice();
        let best = 0;
        list.forEach((v, i) => { if (Math.abs(v - t) < Math.abs(list[best] - t)) best = i; });
        list[best] = t;
        raw.at = list;
      } else raw.at = t;
    }));
    const rangeInput = (id, position) => $(id).addEventListener("input", (event) => {
      const value = Number(event.target.value);
      if (event.target.value === "" || !Number.isFinite(value) || value < 0) return;
      this.edit((raw) => { raw.range = raw.range.slice(); raw.range[position] = value; });
    });
    rangeInput("f-start", 0);
    rangeInput("f-end", 1);
    $("f-start-here").addEventListener("click", () => this.edit((raw) => { raw.range = [this.ctx.playheadTime(), raw.range[1]]; }));
    $("f-end-here").addEventListener("click", () => this.edit((raw) => { raw.range = [raw.range[0], this.ctx.playheadTime()]; }));
    $("f-every").addEventListener("input", (event) => this.edit((raw) => {
      const value = Number(event.target.value);
      if (event.target.value === "") delete raw.every_s;
      else if (Number.isFinite(value) && value > 0) raw.every_s = value;
    }));
    $("f-type").addEventListener("change", (event) => this.edit((raw) => {
      const defaults = { null: null, boolean: true, number: 0, string: "", array: [], object: {} };
      if (event.target.value === "draft") delete raw.expect;
      else raw.expect = convert(raw.expect, event.target.value, defaults[event.target.value]);
    }));
    for (const button of document.querySelectorAll("[data-bool]")) {
      button.addEventListener("click", () => this.edit((raw) => { raw.expect = button.dataset.bool === "true"; }));
    }
    $("f-number").addEventListener("input", (event) => {
      const value = Number(event.target.value);
      if (event.target.value === "" || !Number.isFinite(value)) return;
      this.edit((raw) => { raw.expect = value; });
    });
    $("f-string").addEventListener("input", (event) => this.edit((raw) => { raw.expect = event.target.value; }));
    $("f-json").addEventListener("input", (event) => {
      let value;
      try { value = JSON.parse(event.target.value); } catch (error) {
        this.showError(`Not valid JSON yet: ${error.message}`);
        return;
      }
      this.showError("");
      this.edit((raw) => { raw.expect = value; });
    });
    $("f-field").addEventListener("input", (event) => this.edit((raw) => {
      if (event.target.value.trim() === "") delete raw.field; else raw.field = event.target.value.trim();
    }));
    $("f-mode").addEventListener("change", (event) => this.edit((raw) => {
      if (!event.target.value) { delete raw.compare; return; }
      const tolerance = raw.compare?.tolerance;
      raw.compare = { mode: event.target.value };
      if (event.target.value === "numeric" && tolerance !== undefined) raw.compare.tolerance = tolerance;
    }));
    $("f-tol").addEventListener("input", (event) => this.edit((raw) => {
      if (!raw.compare) return;
      const value = Number(event.target.value);
      if (event.target.value === "") delete raw.compare.tolerance;
      else if (Number.isFinite(value) && value >= 0) raw.compare = { ...raw.compare, tolerance: value };
    }));
    $("f-ignore").addEventListener("change", (event) => this.edit((raw) => {
      if (event.target.checked) raw.ignore = $("f-ignore-reason").value.trim() || "ignored in review";
      else delete raw.ignore;
    }));
    $("f-ignore-reason").addEventListener("input", (event) => this.edit((raw) => {
      if ("ignore" in raw && event.target.value.trim()) raw.ignore = event.target.value;
    }));
    $("f-comment").addEventListener("input", (event) => this.edit((raw) => {
      if (event.target.value === "") delete raw.comment; else raw.comment = event.target.value;
    }));
    $("f-delete").addEventListener("click", () => this.ctx.remove());
  }

  // Fill the form from the selected block; skip the element the user is typing in.
  render() {
    const raw = this.current();
    const state = this.ctx.state;
    $("insp-empty").hidden = !!raw;
    $("insp-form").hidden = !raw;
    if (!raw) { $("insp-where").textContent = ""; return; }
    const sel = state.selected;
    const target = state.detail.targets.find((t) => t.id === sel.target);
    $("insp-where").textContent = `${target?.label || sel.target} · samples[${sel.block}]`;
    const active = document.activeElement;
    const set = (id, value) => { if ($(id) !== active) $(id).value = value; };
    const isRange = "range" in raw;
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
    const type = typeOf(raw);
    set("f-type", type);
    $("f-bool").hidden = type !== "boolean";
    $("f-number").hidden = type !== "number";
    $("f-string").hidden = type !== "string";
    $("f-json").hidden = type !== "array" && type !== "object";
    for (const button of document.querySelectorAll("[data-bool]")) {
      button.classList.toggle("on", raw.expect === (button.dataset.bool === "true"));
    }
    if (type === "number") set("f-number", raw.expect);
    if (type === "string") set("f-string", raw.expect);
    if (type === "array" || type === "object") set("f-json", JSON.stringify(raw.expect, null, 2));
    const inherited = target?.defaults || {};
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
    this.renderResults(sel.target, raw);
  }

  renderResults(targetId, raw) {
    const box = $("insp-results");
    box.replaceChildren();
    const markers = this.ctx.state.detail.markers.filter((m) => m.target === targetId);
    if (!markers.length) return;
    const times = new Set(this.ctx.blockTimes(raw).map((t) => t.toFixed(6)));
    const mine = markers.filter((m) => times.has(m.time_s.toFixed(6)));
    if (!mine.length) return;
    box.append(el("div", { class: "muted", text: "Run report" }));
    for (const m of mine) {
      box.append(el("div", { class: `st-${m.status}` },
        `${fmtS(m.time_s)} ${m.status}: observed ${compact(m.observed_value, 40)}`,
        m.reason && m.status !== "passed" ? ` (${m.reason})` : ""));
    }
  }
}

function convert(value, type, fallback) {
  if (type === "number") { const n = Number(value); return Number.isFinite(n) && typeof value !== "boolean" ? n : fallback; }
  if (type === "string") return value === undefined || value === null ? "" : typeof value === "string" ? value : JSON.stringify(value);
  if (type === "boolean") return typeof value === "boolean" ? value : fallback;
  if (type === "array") return Array.isArray(value) ? value : value === undefined ? [] : [clone(value)];
  if (type === "object") return value && typeof value === "object" && !Array.isArray(value) ? value : fallback;
  return fallback;
}
