// Saving: every edit is written at once, one write at a time and in order. An accepted write
// becomes an undo step (the whole file before and after); undo and redo are writes too, through
// the same revision check, so undoing an edit whose file changed on disk is a conflict.
// A refused write leaves the file as it was and the page is drawn again from the file.
import { api } from "./api.js";
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
    this.push({ kind: "edit", label, selectionBefore: clone(state.selection), selectionAfter: clone(state.selection),
      send: (revision) => api.saveEvent(state.caseId, targetId, revision, edit) });
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
    let detail;
    try {
      if (job.kind === "edit") detail = await job.send(before.revision);
      else if (job.kind === "undo") detail = await api.restore(job.caseId, step.after.revision, step.before.text);
      else detail = await api.restore(job.caseId, step.before.revision, step.after.text);
    } catch (error) {
      this.queue = []; // later edits were made on top of this one: they are dropped with it
      return this.refused(job, error);
    }
    if (job.caseId !== state.caseId) return;
    let selection = job.selectionAfter;
    if (job.kind === "edit" && detail.saved?.changed) {
      // A merged save went onto the file as changed on disk: undo goes back to that, not to what the page saw.
      const base = detail.saved.before ? { ...detail.saved.before, selection: before.selection } : before;
      steps.record({ label: job.label, before: base, after: { text: detail.source, revision: detail.revision, selection } });
    } else if (job.kind === "undo") {
      steps.undone();
      selection = step.before.selection;
    } else if (job.kind === "redo") {
      steps.redone();
      selection = step.after.selection;
    }
    state.saves += 1;
    // While later edits are queued the page stays ahead of the file; the last write draws it anew.
    this.ctx.adopt(detail, selection, { keepRaws: this.queue.length > 0, reveal: job.kind !== "edit" });
    if (detail.saved?.pins?.error) {
      this.ctx.notify(`Saved, but ${detail.saved.pins.error}`);
    } else if (detail.saved?.fallback) {
      this.ctx.notify(`Saved, but the whole file was re-rendered (${detail.saved.reason}); YAML comments may be gone.`);
    } else if (detail.saved?.merged) {
      this.ctx.notify("Saved. The file had changed on disk elsewhere; your edit was merged onto it and the page shows the file as it is now.", "info");
    } else if (job.kind !== "edit") {
      this.ctx.notify(`${job.kind === "undo" ? "Undid" : "Redid"}: ${step.label}`, "info");
    } else {
      this.ctx.notify("");
    }
    if (!this.queue.length) this.ctx.status("", "Saved");
    this.ctx.done();
  }

  async refused(job, error) {
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
    await this.ctx.reload(job.selectionBefore);
    // The validator's words, once, after the page shows the file again; they name the YAML path,
    // which the refused candidate and the file share.
    this.ctx.notify(`Not saved: ${error.message}`);
  }
}
