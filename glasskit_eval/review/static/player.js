// The playhead: seeking, the exact eval frame from the server, the filmstrip and playback.
import { api } from "./api.js";
import { state, duration, frameIndexNow } from "./state.js";
import { activatable, el, fmtClock, fmtS, frameTime, nearestIndex } from "./util.js";

const $ = (id) => document.getElementById(id);
const FILMSTRIP_SIDE = 4;

export class Player {
  // ctx: {timeline, onError(message)}
  constructor(ctx) {
    this.ctx = ctx;
    this.frameAbort = null;
    this.frameUrl = null;
    this.stripTimer = null;
    const video = $("video");
    video.addEventListener("play", () => { $("stage").classList.add("playing"); $("play").textContent = "⏸"; this.tick(); });
    video.addEventListener("pause", () => {
      $("stage").classList.remove("playing");
      $("play").textContent = "▶";
      const times = state.frameTimes;
      this.seek(times.length ? frameTime(times, nearestIndex(times, video.currentTime)) : video.currentTime);
    });
  }

  reset() {
    $("frame").removeAttribute("src");
    $("frame-label").textContent = "–";
    delete $("frame-label").dataset.index;
    $("filmstrip").replaceChildren();
    const video = $("video");
    const info = state.detail?.video;
    if (info && !info.error) {
      if (video.dataset.src !== info.url) { video.src = info.url; video.dataset.src = info.url; }
    } else {
      video.removeAttribute("src");
      delete video.dataset.src;
    }
  }

  seek(t, { fromVideo = false } = {}) {
    const end = duration();
    state.time = Math.max(0, end ? Math.min(t, end) : t);
    const video = $("video");
    if (!fromVideo && video.src && Math.abs(video.currentTime - state.time) > 1e-6) video.currentTime = state.time;
    $("clock").textContent = `${fmtClock(state.time)} / ${fmtClock(end)}`;
    if (document.activeElement !== $("time-input")) $("time-input").value = state.time.toFixed(3);
    this.ctx.timeline.movePlayhead(state.time);
    this.ctx.timeline.reveal(state.time);
    if (!fromVideo) this.requestFrame(state.time);
  }

  stepFrame(delta) {
    if (!state.frameTimes.length) return this.nudge(delta * 0.04);
    const k = Math.min(state.frameTimes.length - 1, Math.max(0, frameIndexNow() + delta));
    return this.seek(state.frameTimes[k]);
  }

  nudge(seconds) { this.seek(Number((state.time + seconds).toFixed(6))); }

  togglePlay() {
    const video = $("video");
    if (!video.src) return;
    if (video.paused) video.play().catch((error) => this.ctx.onError(`This browser cannot play the video: ${error.message}. Exact frames still work.`));
    else video.pause();
  }

  tick() {
    const video = $("video");
    if (video.paused) return;
    this.seek(video.currentTime, { fromVideo: true });
    requestAnimationFrame(() => this.tick());
  }

  async requestFrame(t) {
    if (!state.detail?.video || state.detail.video.error) return;
    this.frameAbort?.abort();
    const abort = (this.frameAbort = new AbortController());
    const label = $("frame-label");
    label.classList.add("stale");
    try {
      const response = await api.frame(state.caseId, t, abort.signal);
      const blob = await response.blob();
      if (abort.signal.aborted) return;
      if (this.frameUrl) URL.revokeObjectURL(this.frameUrl);
      this.frameUrl = URL.createObjectURL(blob);
      $("frame").src = this.frameUrl;
      const h = response.headers;
      state.frame = { requested: t, index: Number(h.get("X-Frame-Index")), media: h.get("X-Media-Time"), hash: h.get("X-Pixel-Hash") };
      label.textContent = `Exact eval frame ${state.frame.index} · media ${state.frame.media} s · #${state.frame.hash.slice(0, 8)}`;
      label.title = `requested ${h.get("X-Requested-Time")} s, pixel SHA-256 ${state.frame.hash}`;
      label.classList.remove("stale");
      label.dataset.index = String(state.frame.index);
      clearTimeout(this.stripTimer);
      this.stripTimer = setTimeout(() => this.renderFilmstrip(), 150);
    } catch (error) {
      if (error.name === "AbortError") return;
      label.textContent = `No frame: ${error.message}`;
    }
  }

  async renderFilmstrip() {
    const times = state.frameTimes;
    if (!times.length || !state.frame) return;
    const k = state.frame.index;
    const wanted = [];
    for (let i = Math.max(0, k - FILMSTRIP_SIDE); i <= Math.min(times.length - 1, k + FILMSTRIP_SIDE); i++) wanted.push(times[i]);
    try {
      const thumbs = await api.thumbs(state.caseId, wanted);
      if (state.frame?.index !== k) return;
      const focused = document.activeElement?.closest?.("#filmstrip figure")?.dataset.index;
      $("filmstrip").replaceChildren(...thumbs.map((thumb, i) => {
        const figure = el("figure", { class: thumb.frame_index === k ? "current" : "", title: `frame ${thumb.frame_index} · ${fmtS(thumb.media_time_s)}`,
          dataset: { index: thumb.frame_index }, onclick: () => this.seek(wanted[i]) },
        el("img", { src: thumb.src, alt: "" }), el("figcaption", { text: String(thumb.frame_index) }));
        return activatable(figure, `Go to frame ${thumb.frame_index} (${fmtS(thumb.media_time_s)})`, () => this.seek(wanted[i]));
      }));
      // Stepping through the filmstrip by keyboard keeps the focus on the frame just chosen.
      if (focused !== undefined) $("filmstrip").querySelector(`figure[data-index="${k}"]`)?.focus();
    } catch (error) {
      $("filmstrip").replaceChildren(el("span", { class: "muted small", text: error.message }));
    }
  }
}
