// The inspector for a stream target's selected event: its onset, window, expectation and comment,
// and what the run report made of it. Like a sample's fields, a value is committed on Enter or
// when the field loses focus; each commit writes that one event (ctx.commit), checked by the
// server as any edit is. Events are named by their onset, `event @ 12.4s`, as errors name them.
import { applyEdit, el, fmtS } from "./util.js";

const $ = (id) => document.getElementById(id);

function number(text) {
  const trimmed = text.trim();
  const value = Number(trimmed);
  return trimmed === "" || !Number.isFinite(value) ? null : value;
}

export class EventInspector {
  // ctx: {state, commit(targetId, index, raw, label), remove(), playheadTime(), seek(t)}
  constructor(ctx) {
    this.ctx = ctx;
    this.bind();
  }

  selected() {
    const sel = this.ctx.state.eventSel;
    const raw = sel ? this.ctx.state.events?.[sel.target]?.[sel.index] : null;
    return raw ? { sel, raw } : null;
  }

  showError(message) {
    $("ev-error").hidden = !message;
    $("ev-error").textContent = message || "";
  }

  edit(label, mutate) {
    const found = this.selected();
    if (found) applyEdit(this, found.raw, mutate, (next) => this.ctx.commit(found.sel.target, found.sel.index, next, label));
  }

  bind() {
    $("event-form").addEventListener("submit", (event) => event.preventDefault());
    const on = (id, label, mutate) => $(id).addEventListener("change", (event) => this.edit(label, (raw) => mutate(raw, event.target)));
    on("ev-at", "move the event", (raw, node) => {
      const value = number(node.value);
      if (value === null || value < 0) return "The onset must be a nonnegative number of seconds.";
      raw.at = value;
    });
    $("ev-at-here").addEventListener("click", () => this.edit("move the event to the playhead", (raw) => { raw.at = this.ctx.playheadTime(); }));
    const windowEdge = (id, position) => on(id, position ? "edit the window end" : "edit the window start", (raw, node) => {
      const other = $(position ? "ev-win-start" : "ev-win-end").value;
      if (node.value.trim() === "" && other.trim() === "") { delete raw.window; return undefined; }
      const value = number(node.value);
      if (value === null) return "A window edge is a number of seconds from the onset (empty both: the target's default).";
      const stream = this.stream();
      const window = Array.isArray(raw.window) ? raw.window.slice() : stream.window.slice();
      window[position] = value;
      if (window[0] > window[1]) return "The window must not end before it starts.";
      raw.window = window;
    });
    windowEdge("ev-win-start", 0);
    windowEdge("ev-win-end", 1);
    on("ev-expect", "edit the expected value", (raw, node) => {
      const text = node.value.trim();
      if (text === "") { delete raw.expect; return undefined; }
      try { raw.expect = JSON.parse(text); } catch (error) {
        return `Expect is JSON: "text" in quotes, a number, true/false, a list or an object (${error.message}).`;
      }
    });
    on("ev-comment", "edit the comment", (raw, node) => { if (node.value === "") delete raw.comment; else raw.comment = node.value; });
    $("ev-delete").addEventListener("click", () => this.ctx.remove());
  }

  stream() {
    const sel = this.ctx.state.eventSel;
    return this.ctx.state.detail.targets.find((t) => t.id === sel.target).stream;
  }

  // Fill the form from the selected event; the field being typed in is left alone unless `force`.
  render({ force = false } = {}) {
    const found = this.selected();
    $("event-form").hidden = !found;
    if (!found) return;
    const { sel, raw } = found;
    const stream = this.stream();
    $("insp-empty").hidden = true;
    const at = Number(raw.at);
    $("insp-where").textContent = `${sel.target} · event @ ${fmtS(at)}`;
    const own = Array.isArray(raw.window);
    const window = own ? raw.window : stream.window;
    $("ev-scope").textContent = `Event @ ${fmtS(at)}: an emission matching the expectation within [${fmtS(at + Number(window[0]))}, ${fmtS(at + Number(window[1]))}] detects it.`;
    const active = document.activeElement;
    const set = (id, value) => {
      const node = $(id);
      if (force || node !== active) node.value = value;
    };
    set("ev-at", String(raw.at));
    set("ev-win-start", own ? String(raw.window[0]) : "");
    set("ev-win-end", own ? String(raw.window[1]) : "");
    $("ev-win-start").placeholder = `${stream.window[0]} (target)`;
    $("ev-win-end").placeholder = `${stream.window[1]} (target)`;
    set("ev-expect", "expect" in raw ? JSON.stringify(raw.expect) : "");
    $("ev-expect").placeholder = "draft: no expect yet";
    set("ev-comment", raw.comment ?? "");
    this.renderReport(sel.target, at, window);
  }

  // What the run report says in the event's window: its hit (with latency) or its miss.
  renderReport(targetId, at, window) {
    const start = at + Number(window[0]);
    const end = at + Number(window[1]);
    const words = { hit: "detected", repeat: "repeat", false_alarm: "false alarm", missed: "missed" };
    const mine = (this.ctx.state.detail.emissions || []).filter((m) => m.target === targetId
      && m.time_s >= start - 1e-9 && m.time_s <= end + 1e-9 && m.kind !== "false_alarm");
    $("ev-report").hidden = !mine.length;
    $("ev-results").replaceChildren(...mine.map((m) => el("button", {
      type: "button", class: `result st-${m.kind === "hit" ? "passed" : m.kind === "missed" ? "failed" : "ignored"}`,
      onclick: () => this.ctx.seek(m.time_s),
    }, `${words[m.kind]} @ ${fmtS(m.time_s)}${m.trial > 1 ? ` trial ${m.trial}` : ""}`,
    m.latency_s != null ? `, latency ${fmtS(m.latency_s)}` : "", m.changed ? " (changed since the run)" : "")));
  }
}
