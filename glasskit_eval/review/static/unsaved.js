// Text typed into the inspector but not committed yet (Enter or leaving the field commits it).
// It lives in this tab's sessionStorage, so a reload puts it back into its field, and closing the
// tab while it exists asks first (beforeunload). One field is typed in at a time: one entry.
const KEY = "glasskit-review-unsaved";
const FIELDS = ["f-at", "f-start", "f-end", "f-every", "f-number", "f-string", "f-json", "f-field", "f-tol",
  "f-ignore-reason", "f-comment"];

// where(): {caseId, target, block, time} of the block the inspector shows, or null.
export function trackUnsaved(where) {
  for (const id of FIELDS) {
    const node = document.getElementById(id);
    node.addEventListener("input", () => {
      const at = where();
      if (!at || node.value === node.dataset.committed) forget();
      else sessionStorage.setItem(KEY, JSON.stringify({ ...at, id, value: node.value }));
    });
    // Committed, or refused with the reason shown: either way no longer pending.
    node.addEventListener("change", forget);
    // A value put back by restoreUnsaved was not typed in this page: the browser would not
    // report it as changed, so leaving the field (or Enter) commits it as typing would.
    const commitRestored = () => {
      if (!node.classList.contains("unsaved")) return;
      node.classList.remove("unsaved");
      node.dispatchEvent(new Event("change"));
    };
    node.addEventListener("blur", commitRestored);
    node.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && node.tagName !== "TEXTAREA") commitRestored();
    });
  }
}

export function unsaved() {
  try {
    const entry = JSON.parse(sessionStorage.getItem(KEY) || "null");
    return entry && FIELDS.includes(entry.id) ? entry : null;
  } catch {
    return null;
  }
}

export function forget() { sessionStorage.removeItem(KEY); }

// Put the kept text back into its field if the inspector shows the block it was typed for.
export function restoreUnsaved(entry, where) {
  const at = where();
  if (!entry || !at || at.caseId !== entry.caseId || at.target !== entry.target || at.block !== entry.block) return false;
  const node = document.getElementById(entry.id);
  if (node.hidden || node.disabled) return false;
  node.value = entry.value;
  node.classList.add("unsaved");
  return true;
}
