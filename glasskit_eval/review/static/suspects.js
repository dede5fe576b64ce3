// Suspect labels (`review --report R.json --suspects`): a bar that steps through the report's
// suspects in its order and relabels the one in view with the votes' consensus. The page opens
// on the first suspect (the server's initial deep link); edits go through the page's one writer.
import { clone, compact } from "./util.js";

const $ = (id) => document.getElementById(id);

export class SuspectsBar {
  // ctx: {go(suspect): Promise (open its case, select its sample), relabel(value): true once the edit is
  // on its way (false while the page asks first, as for a range)}
  constructor(ctx) {
    this.ctx = ctx;
    this.list = [];
    this.at = 0;
  }

  start(list) {
    this.list = Array.isArray(list) ? list : [];
    $("suspects-bar").hidden = this.list.length === 0;
    if (!this.list.length) return;
    $("suspect-prev").addEventListener("click", () => this.step(-1).catch(() => {}));
    $("suspect-next").addEventListener("click", () => this.step(1).catch(() => {}));
    $("suspect-relabel").addEventListener("click", () => this.relabel().catch(() => {}));
    this.render();
  }

  current() { return this.list[this.at]; }

  async step(direction) {
    const next = this.at + direction;
    if (next < 0 || next >= this.list.length) return;
    this.at = next;
    this.render();
    await this.ctx.go(this.current());
  }

  // Back to the suspect first: the selection may have moved since it was opened.
  async relabel() {
    const suspect = this.current();
    await this.ctx.go(suspect);
    if (this.ctx.relabel(clone(suspect.consensus))) {
      suspect.relabelled = true;
      this.render();
    }
  }

  render() {
    const s = this.current();
    $("suspects-bar").dataset.index = String(this.at);
    $("suspect-count").textContent = `Suspect label ${this.at + 1} of ${this.list.length}`;
    $("suspect-where").textContent = `${s.case} / ${s.target} at ${s.at} s`;
    $("suspect-label").textContent = compact(s.expected, 40);
    $("suspect-consensus").textContent = compact(s.consensus, 40);
    $("suspect-votes").textContent = `${s.votes_against} of ${s.votes} votes`;
    $("suspect-done").hidden = !s.relabelled;
    $("suspect-prev").disabled = this.at === 0;
    $("suspect-next").disabled = this.at === this.list.length - 1;
  }
}
