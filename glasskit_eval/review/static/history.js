// Undo and redo, per case: each step is the whole file text before and after one accepted write,
// or for one stream event the edit, its inverse and the text it replaced (see eventsync.js).
export const HISTORY_LIMIT = 200;

export class History {
  constructor(limit = HISTORY_LIMIT) {
    this.limit = limit;
    this.undoSteps = [];
    this.redoSteps = [];
  }

  // step: {label, target, before: {text, revision, selection}, after: {text, revision, selection}};
  // an event's: {label, target, event, inverse, forwardText, inverseText, before: {revision, selection}, after: ...}
  record(step) {
    this.undoSteps.push(step);
    if (this.undoSteps.length > this.limit) this.undoSteps.shift();
    this.redoSteps = [];
  }

  get nextUndo() { return this.undoSteps.at(-1) || null; }
  get nextRedo() { return this.redoSteps.at(-1) || null; }

  undone() { this.redoSteps.push(this.undoSteps.pop()); }
  redone() { this.undoSteps.push(this.redoSteps.pop()); }

  clear() {
    this.undoSteps = [];
    this.redoSteps = [];
  }
}
