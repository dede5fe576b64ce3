// The server's API: every request the page makes, and its errors as ApiError.
// The write key comes once, in the fragment of the login redirect, and never in a page the
// session cookie alone could fetch; it stays in this tab's sessionStorage (bound to this exact
// origin, port included), so reloads keep it and other local servers never see it.
const WRITE_KEY = "glasskit-review-write-key";
const fragment = /^#write=([A-Za-z0-9_.-]+)$/.exec(location.hash);
if (fragment) {
  sessionStorage.setItem(WRITE_KEY, fragment[1]);
  history.replaceState(null, "", location.pathname + location.search);
}
const CSRF = sessionStorage.getItem(WRITE_KEY) || "";
const enc = encodeURIComponent;

export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }
}

async function request(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (options.body !== undefined) Object.assign(headers, { "Content-Type": "application/json", "X-CSRF-Token": CSRF });
  const response = await fetch(path, { credentials: "same-origin", ...options, headers });
  const type = response.headers.get("content-type") || "";
  const body = type.includes("application/json") ? await response.json() : response;
  if (!response.ok) throw new ApiError(body?.message || `HTTP ${response.status}`, response.status, body);
  return body;
}

const write = (method, path, value) => request(path, { method, body: JSON.stringify(value) });

export const api = {
  session: () => request("/api/session"),
  cases: async () => (await request("/api/cases")).cases,
  detail: (caseId) => request(`/api/cases/${enc(caseId)}`),
  frameTimes: async (caseId) => (await request(`/api/cases/${enc(caseId)}/frames`)).times,
  // The exact eval frame: a Response whose headers say which frame the decoder chose.
  frame: (caseId, t, signal) => request(`/api/cases/${enc(caseId)}/frame?t=${t}`, { signal }),
  // Each sample's frame-lock status (decodes the case's frames on the server; only for a locked case).
  pins: (caseId) => request(`/api/cases/${enc(caseId)}/pins`),
  // The clip of targetId's sample at t: its window and exact frames (null clip: a single frame).
  clip: (caseId, targetId, t) => request(`/api/cases/${enc(caseId)}/clip?target=${enc(targetId)}&t=${t}`),
  thumbs: async (caseId, times) => (await request(`/api/cases/${enc(caseId)}/thumbs?t=${times.join(",")}`)).thumbs,
  saveSamples: (caseId, targetId, revision, blocks) =>
    write("PUT", `/api/cases/${enc(caseId)}/targets/${enc(targetId)}/samples`, { revision, blocks }),
  // A stream target's events, all of them (the whole list; kept for scripts).
  saveEvents: (caseId, targetId, revision, events) =>
    write("PUT", `/api/cases/${enc(caseId)}/targets/${enc(targetId)}/events`, { revision, events }),
  // One event added, changed or deleted: {op: "add" | "set" | "delete", index, event} (undo and redo
  // add merge: false). The page sends only this and gets back only the edit as written (eventsync.js),
  // so a target of many thousands of events costs one event per save, both ways.
  saveEvent: (caseId, targetId, revision, edit) =>
    write("PATCH", `/api/cases/${enc(caseId)}/targets/${enc(targetId)}/events`, { revision, ...edit }),
  removeTarget: (caseId, targetId, revision) =>
    write("DELETE", `/api/cases/${enc(caseId)}/targets/${enc(targetId)}`, { revision }),
  // Undo and redo: write back a whole earlier state of the file, if the file is still `revision`.
  restore: (caseId, revision, text) => write("PUT", `/api/cases/${enc(caseId)}/restore`, { revision, text }),
};
