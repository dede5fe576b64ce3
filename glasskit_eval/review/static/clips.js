// The selected sample's clip: its window drawn on the timeline and its frames as a filmstrip.
// The server picks the clip's frames by the run's rule (GET /clip); each image is the exact eval
// frame at the exact time the clip asks for (GET /frame?t=3/10), so the strip shows the very
// pixels `run` hands the adapter. Only the selected sample is asked for: clips can be long.
import { api } from "./api.js";
import { state, selectedSampleTime } from "./state.js";
import { activatable, el, fmtS } from "./util.js";

const $ = (id) => document.getElementById(id);

export class ClipView {
  // ctx: {timeline, seek(t)}
  constructor(ctx) {
    this.ctx = ctx;
    this.key = null;
    this.requests = 0;
  }

  // After anything that may change which sample is selected (selection, a seek inside a range,
  // a save): ask for its clip when it may have one, drop the old one otherwise.
  update() {
    const sel = state.selection;
    const t = sel ? selectedSampleTime() : null;
    const video = state.detail?.video;
    const target = state.detail?.targets.find((x) => x.id === sel?.target);
    const clipped = !!target?.blocks.some((b) => b.clip);
    const key = sel && t !== null && clipped && video && !video.error
      ? `${state.caseId}|${state.detail.revision}|${sel.target}|${t.toFixed(6)}` : null;
    if (key === this.key) return;
    this.key = key;
    const mine = ++this.requests;
    if (key === null) { this.show(null); return; }
    api.clip(state.caseId, sel.target, t)
      .then((body) => { if (mine === this.requests) this.show(body.clip ? body : null); })
      // A sample the server does not have yet (a write in flight) has no clip to show until it lands.
      .catch((error) => { if (mine === this.requests) this.show(error.status === 404 ? null : { target: sel.target, time_s: t, error: error.message }); });
  }

  show(body) {
    state.clip = body;
    this.ctx.timeline.render();
    this.renderStrip();
  }

  renderStrip() {
    const strip = $("clipstrip");
    const body = state.clip;
    if (!body) { strip.hidden = true; strip.replaceChildren(); return; }
    strip.hidden = false;
    const clip = body.clip;
    const error = body.error || clip?.error;
    const head = el("div", { class: "clip-head small" }, el("strong", { text: `Clip of ${body.target} @ ${fmtS(body.time_s)}` }),
      clip ? ` · ${clip.frames.length} frames · ${clip.text}` : "");
    if (error) { strip.replaceChildren(head, el("div", { class: "clip-error small", role: "alert", text: error })); return; }
    const enc = encodeURIComponent;
    const figures = clip.frames.map((frame, i) => {
      const figure = el("figure", { class: i === clip.anchor ? "anchor" : "", dataset: { index: frame.frame_index, t: frame.t },
        onclick: () => this.ctx.seek(frame.time_s),
        title: `frame ${frame.frame_index} · asked at ${fmtS(frame.time_s)} · media ${fmtS(frame.media_time_s)}${i === clip.anchor ? " · the sample's own frame" : ""}` },
      el("img", { src: `/api/cases/${enc(state.caseId)}/frame?t=${enc(frame.t)}`, alt: "", loading: "lazy" }),
      el("figcaption", { text: String(frame.frame_index) }));
      return activatable(figure, `Go to clip frame ${frame.frame_index} (${fmtS(frame.time_s)})`, () => this.ctx.seek(frame.time_s));
    });
    strip.replaceChildren(head, el("div", { class: "clip-frames" }, figures));
  }
}

// The selected sample's clip window on its target's row, with a mark at each clip frame.
export function clipWindow(x) {
  const body = state.clip;
  const clip = body?.clip;
  if (!clip) return null;
  const [start, end] = clip.window;
  const node = el("div", { class: `tl-clip${clip.error ? " refused" : ""}`, "aria-hidden": "true",
    dataset: { start, end, frames: clip.frames.length },
    title: `clip ${clip.text}: ${clip.error || `${clip.frames.length} frames`}` });
  node.style.left = `${x(start)}px`;
  node.style.width = `${Math.max(2, x(end) - x(start))}px`;
  for (const frame of clip.frames) {
    const mark = el("div", { class: "tl-clip-frame", dataset: { index: frame.frame_index } });
    mark.style.left = `${x(frame.media_time_s) - x(start)}px`;
    node.append(mark);
  }
  return node;
}
