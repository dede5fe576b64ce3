// Saving: every edit is written at once, one write at a time and in order. An accepted write
// becomes an undo step: for samples the whole file before and after, for one stream event the
// edit and its inverse (eventsync.js), so a long list of events never crosses the wire. Undo and
// redo are writes too, through the same revision check, so undoing an edit whose file changed
// on disk is a conflict. A refused write leaves the file as it was and the page is drawn again
// from the file.
import { api } from "./api.js";
import { confirmEvent, inverseOf, reanchor } from "./eventsync.js";
import { state, history } from "./state.js";
import { clone } from "./util.js";

export class Writer {
  // ctx: {adopt(detail, selection, {keepRaws}), reload(selection), status(kind, text), notify(text, kind),
  //       conflict(message), done()}
  constructor(ctx) {
    this.ctx = ctx;
    this.queue = [];
    this.running = null;
  }

  get busy() { return this.queue.length > 0 || this.running !== null; }

  // Resolves when every queued write has finished (opening another case waits for it).
  settled() { return this.running || Promise.resolve(); }

  // One target's new blocks, shown at once and written next.
  edit(targetId, result) {
    const selectionBefore = clone(state.selection);
    state.raws[targetId] = result.blocks;
    state.selection = result.selection && { target: targetId, ...result.selection };
    this.push({ kind: "edit", label: result.label, selectionBefore, selectionAfter: clone(state.selection),
      send: (revision) => api.saveSamples(state.caseId, targetId, revision, result.blocks) });
  }

  // A stream target's new events, shown at once; only `edit` ({op, index, event}) is written next.
  // `eventSel` is the event to select.
  editEvents(targetId, events, label, eventSel, edit) {
    state.events[targetId] = events;
    state.eventSel = eventSel;
    this.push({ kind: "edit", label, target: targetId, event: edit, selectionBefore: clone(state.selection),
      selectionAfter: clone(state.selection), send: (revision) => api.saveEvent(state.caseId, targetId, revision, edit) });
  }

  removeTarget(targetId) {
    this.push({ kind: "edit", label: `remove target ${targetId}`, selectionBefore: clone(state.selection),
      selectionAfter: null, send: (revision) => api.removeTarget(state.caseId, targetId, revision) });
  }

  undo() { this.push({ kind: "undo" }); }
  redo() { this.push({ kind: "redo" }); }

  push(job) {
    this.queue.push({ ...job, caseId: state.caseId });
    this.ctx.status("saving", job.kind === "edit" ? "Saving…" : job.kind === "undo" ? "Undoing…" : "Redoing…");
    if (!this.running) this.running = this.drain().finally(() => { this.running = null; });
  }

  async drain() {
    while (this.queue.length) {
      const job = this.queue.shift();
      if (job.caseId !== state.caseId || state.conflict) continue;
      await this.run(job);
    }
  }

  async run(job) {
    const steps = history(job.caseId);
    const step = job.kind === "undo" ? steps.nextUndo : job.kind === "redo" ? steps.nextRedo : null;
    if (job.kind !== "edit" && !step) {
      this.ctx.status("", "Saved");
      this.ctx.notify(job.kind === "undo" ? "Nothing to undo." : "Nothing to redo.");
      return;
    }
    const before = { text: state.detail.source, revision: state.detail.revision, selection: job.selectionBefore };
    const oneEvent = job.kind === "edit" ? !!job.event : !!step.event;
    let answer;
    let inverse = null;
    try {
      if (job.kind === "edit") {
        if (job.event) inverse = inverseOf(job.target, job.event, state.detail);
        answer = await job.send(before.revision);
      } else if (step.event) {
        // Like a restore, only onto the exact state the step left (merge: false).
        // With the page's copy of the text the step replaced: written back byte for byte when it holds
        // exactly the inverse edit's events (the server checks), as a restore would write it.
        const [revision, edit, text] = job.kind === "undo" ? [step.after.revision, step.inverse, step.inverseText]
          : [step.before.revision, step.event, step.forwardText];
        answer = await api.saveEvent(job.caseId, step.target, revision, { ...edit, merge: false, ...(text ? { source_edit: text } : {}) });
      } else if (job.kind === "undo") answer = await api.restore(job.caseId, step.after.revision, step.before.text);
      else answer = await api.restore(job.caseId, step.before.revision, step.after.text);
    } catch (error) {
      this.queue = []; // later edits were made on top of this one: they are dropped with it
      return this.refused(job, error, oneEvent);
    }
    if (job.caseId !== state.caseId) return;
    const saved = answer.saved;
    const detail = answer.edit ? confirmEvent(state.detail, answer) : answer;
    let selection = job.selectionAfter;
    if (job.kind === "edit" && saved?.changed) {
      // A merged save went onto the file as changed on disk: undo goes back to that, not to what the page saw.
      const base = saved.before ? { ...saved.before, selection: before.selection } : before;
      const after = { text: detail.source, revision: detail.revision, selection };
      if (job.event) {
        const { op, index, event } = answer.edit;
        const text = answer.source_edit;
        steps.record({ label: job.label, target: job.target, event: { op, index, event }, inverse,
          forwardText: text && { start: text.start, end: text.end, text: text.text },
          inverseText: text && { start: text.start, end: text.start + text.text.length, text: text.old },
          before: { revision: base.revision, selection: base.selection }, after: { revision: after.revision, selection } });
      } else steps.record({ label: job.label, before: base, after });
    } else if (job.kind === "undo") {
      steps.undone();
      selection = step.before.selection;
      if (step.event) reanchor(step, "before", steps.nextUndo, "after", detail);
    } else if (job.kind === "redo") {
      steps.redone();
      selection = step.after.selection;
      if (step.event) reanchor(step, "after", steps.nextRedo, "before", detail);
    }
    state.saves += 1;
    // While later edits are queued the page stays ahead of the file; the last write draws it anew.
    this.ctx.adopt(detail, selection, { keepRaws: this.queue.length > 0, reveal: job.kind !== "edit",
      eventsOf: answer.edit && !answer.case ? answer.edit.target : null });
    if (saved?.pins?.error) {
      this.ctx.notify(`Saved, but ${saved.pins.error}`);
    } else if (saved?.fallback) {
      this.ctx.notify(`Saved, but the whole file was re-rendered (${saved.reason}); YAML comments may be gone.`);
    } else if (saved?.merged) {
      this.ctx.notify("Saved. The file had changed on disk elsewhere; your edit was merged onto it and the page shows the file as it is now.", "info");
    } else if (job.kind !== "edit") {
      this.ctx.notify(`${job.kind === "undo" ? "Undid" : "Redid"}: ${step.label}`, "info");
    } else {
      this.ctx.notify("");
    }
    if (!this.queue.length) this.ctx.status("", "Saved");
    this.ctx.done();
  }

  // `oneEvent`: a stream event's edit (or its undo): the page's copy of the case is still the file's.
  async refused(job, error, oneEvent = false) {
    if (error.status === 409) {
      state.conflict = true;
      this.ctx.status("error", "Conflict");
      const what = job.kind === "edit" ? "your edit" : `the ${job.kind}`;
      this.ctx.conflict(error.message.replace("(nothing was written)", `(${what} was not written)`));
      // The page shows the file as it last saw it; the banner offers the version on disk.
      this.ctx.adopt(state.detail, job.selectionBefore, { keepRaws: false });
      return;
    }
    this.ctx.status("error", job.kind === "edit" ? "Not saved" : `${job.kind === "undo" ? "Undo" : "Redo"} refused`);
    // A refused event edit wrote nothing onto the file the page holds: drawn again from that copy,
    // not reloaded (a long list would cost the whole case). A file gone invalid is reloaded to show why.
    if (oneEvent && error.body?.code === "invalid_edit") this.ctx.adopt(state.detail, job.selectionBefore, { keepRaws: false });
    else await this.ctx.reload(job.selectionBefore);
    // The validator's words, once, after the page shows the file again; they name the YAML path,
    // which the refused candidate and the file share.
    this.ctx.notify(`Not saved: ${error.message}`);
  }
}
