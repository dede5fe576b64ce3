// Keyboard shortcuts: one table drives both the handler and the `?` help, so the help lists
// every key the page answers. Shortcuts work with the focus anywhere except in a text box or a
// drop-down; there, keys type (and Ctrl+Z undoes typing) until the value is committed.
import { state } from "./state.js";
import { el } from "./util.js";

const TEXT_INPUTS = "textarea, select, [contenteditable], input:not([type=checkbox]):not([type=radio]):not([type=button])";

const mod = (e) => e.ctrlKey || e.metaKey;

// [keys shown, what it does, matches(event), action(actions, event)]
export const SHORTCUTS = [
  ["Space", "Play or pause (on a button reached with Tab: press it)", (e) => e.key === " ", (a) => a.togglePlay()],
  [", / .", "Previous / next frame (the video's own frame table)", (e) => e.key === "," || e.key === ".", (a, e) => a.stepFrame(e.key === "," ? -1 : 1)],
  ["← / →", "Move 0.1 s back / forward", (e) => !e.shiftKey && (e.key === "ArrowLeft" || e.key === "ArrowRight"), (a, e) => a.nudge(e.key === "ArrowLeft" ? -0.1 : 0.1)],
  ["Shift + ← / →", "Move 1 s back / forward", (e) => e.shiftKey && (e.key === "ArrowLeft" || e.key === "ArrowRight"), (a, e) => a.nudge(e.key === "ArrowLeft" ? -1 : 1)],
  ["[ / ]", "Previous / next sample of the target (and select it)", (e) => e.key === "[" || e.key === "]", (a, e) => a.stepSample(e.key === "[" ? -1 : 1)],
  ["↑ / ↓", "Previous / next target", (e) => e.key === "ArrowUp" || e.key === "ArrowDown", (a, e) => a.stepTarget(e.key === "ArrowUp" ? -1 : 1)],
  ["Home / End", "Start / last frame of the video", (e) => e.key === "Home" || e.key === "End", (a, e) => a.seekEnd(e.key === "End")],
  ["F / Shift + F", "Next / previous failed or errored sample of the report", (e) => e.key.toLowerCase() === "f", (a, e) => a.jumpFailure(e.shiftKey ? -1 : 1)],
  ["P / Shift + P", "Next / previous sample whose frame lock reports a problem (moved, pixels changed, time edited)", (e) => e.key.toLowerCase() === "p", (a, e) => a.jumpPinProblem(e.shiftKey ? -1 : 1)],
  ["A", "Add a sample at this frame (on a stream target: an event)", (e) => e.key.toLowerCase() === "a", (a) => a.addSample()],
  ["R", "Add a range starting at this frame", (e) => e.key.toLowerCase() === "r", (a) => a.addRange()],
  ["Y / N", "Set the selected sample to true / false: a tick of an at list changes that timestamp only; a range asks first", (e) => e.key.toLowerCase() === "y" || e.key.toLowerCase() === "n", (a, e) => a.setValue(e.key.toLowerCase() === "y", e.key.toUpperCase())],
  ["S", "Split the selected range at the playhead (the new range starts here)", (e) => e.key.toLowerCase() === "s", (a) => a.split()],
  ["O", "Use the report's observed value as the expectation", (e) => e.key.toLowerCase() === "o", (a) => a.useObserved()],
  ["Delete / Backspace", "Delete the selected timestamp, the selected block, or the selected event", (e) => e.key === "Delete" || e.key === "Backspace", (a) => a.remove()],
  ["Ctrl/⌘ + Z", "Undo the last edit (a whole-file write, checked like any edit)", null, (a) => a.undo()],
  ["Ctrl/⌘ + Shift + Z, Ctrl + Y", "Redo", null, (a) => a.redo()],
  ["+ / − / 0", "Zoom the timeline in / out / fit", (e) => ["+", "=", "-", "0"].includes(e.key), (a, e) => a.zoom(e.key)],
  ["Enter", "Answer yes to a question; on a focused row, tick, frame or tab: choose it", null, null],
  ["Esc", "Cancel a question, close help, clear the selection; in a text box: put back the saved value", (e) => e.key === "Escape", (a) => a.escape()],
  ["?", "Show this help", (e) => e.key === "?", (a) => a.help()],
];

export function renderHelp(tbody) {
  tbody.replaceChildren(...SHORTCUTS.map(([keys, what]) => el("tr", {}, el("td", {}, el("kbd", { text: keys })), el("td", { text: what }))));
}

function isTyping(node) {
  return !!node?.closest?.(TEXT_INPUTS);
}

// In a text box, Ctrl+Z undoes typing only while there is typing to undo; once the value is
// committed (or nothing was typed), it undoes the page's last edit.
function typedSinceCommit(node) {
  return node.dataset.committed !== undefined ? node.value !== node.dataset.committed : node.value !== "";
}

// Whether the focused element was reached by keyboard (Tab, or focus moved by the page while
// the keyboard was in use) rather than by a click. :focus-visible cannot tell at keydown time:
// Chromium starts matching it on a focused button as soon as any key is pressed.
let modality = "keyboard";
const keyboardFocused = new WeakSet();

function trackFocus() {
  document.addEventListener("pointerdown", () => { modality = "pointer"; }, true);
  document.addEventListener("keydown", (event) => { if (event.key === "Tab") modality = "keyboard"; }, true);
  document.addEventListener("focusin", (event) => {
    if (modality === "keyboard") keyboardFocused.add(event.target);
    else keyboardFocused.delete(event.target);
  }, true);
}

export function installKeys(actions) {
  trackFocus();
  document.addEventListener("keydown", (event) => {
    if (document.querySelector("dialog[open]")) return; // dialogs handle their own keys
    const node = event.target;
    const key = event.key;
    const undoKey = mod(event) && !event.altKey && (key.toLowerCase() === "z" || (key.toLowerCase() === "y" && !event.shiftKey));
    if (isTyping(node)) {
      if (key === "Escape" && node.dataset.committed !== undefined) {
        node.value = node.dataset.committed;
        node.blur();
      } else if (key === "Escape") node.blur();
      else if (key === "Enter" && node.matches("input")) node.blur(); // commits through `change`
      else if (undoKey && !typedSinceCommit(node)) {
        event.preventDefault();
        node.blur();
        if (key.toLowerCase() === "y" || event.shiftKey) actions.redo(); else actions.undo();
      }
      return;
    }
    if (undoKey) {
      event.preventDefault();
      if (key.toLowerCase() === "y" || event.shiftKey) actions.redo(); else actions.undo();
      return;
    }
    if (mod(event) || event.altKey) return;
    // An open question takes its answer keys first (Enter included).
    if (state.prompt && actions.answer(event)) {
      event.preventDefault();
      return;
    }
    // A focused control reached by keyboard takes Enter and Space, like any button.
    const keyboardFocus = node !== document.body && keyboardFocused.has(node);
    if ((key === "Enter" || (key === " " && keyboardFocus)) && node.activate) {
      event.preventDefault();
      node.activate();
      return;
    }
    if (key === " " && keyboardFocus && node.closest("button, input, [role=tab]")) return;
    if (node.getAttribute?.("role") === "tab" && ["ArrowLeft", "ArrowRight", "Home", "End"].includes(key)) {
      event.preventDefault();
      actions.moveTab(node, key);
      return;
    }
    const shortcut = SHORTCUTS.find(([, , matches]) => matches?.(event));
    if (!shortcut) return;
    event.preventDefault();
    // A button clicked earlier still has the focus; Chromium presses it on Space's keyup.
    if (key === " ") swallowSpaceUp = true;
    shortcut[3](actions, event);
  });
  document.addEventListener("keyup", (event) => {
    if (event.key === " " && swallowSpaceUp) event.preventDefault();
    if (event.key === " ") swallowSpaceUp = false;
  });
}

let swallowSpaceUp = false;
