
// The HTML report's stream timelines: event windows, emissions by class, missed onsets, and the
// frame at each miss and false alarm. Report values reach the page only through textContent.
(function () {
  "use strict";
  var root = document.getElementById("stream-root");
  if (!root) return;
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var W = 1000, H = 34;
  var CLASS = ["hit", "repeat", "false-alarm"];
  var WORD = ["hit", "repeat", "false alarm"];

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs, title) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    if (title) {
      var t = document.createElementNS("http://www.w3.org/2000/svg", "title");
      t.textContent = title;
      node.appendChild(t);
    }
    return node;
  }
  function seconds(t) { return (Math.round(t * 1000) / 1000) + " s"; }
  function clip(text, n) { return text.length > n ? text.slice(0, n) + "…" : text; }

  function strip(s) {
    var scale = W / s.duration;
    var box = svg("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", "class": "st-strip" });
    s.windows.forEach(function (w) {
      var what = (w[3] ? "detected" : "missed") + ": event @ " + seconds(w[2]) + ", window [" + seconds(w[0]) +
        ", " + seconds(w[1]) + "], expect " + clip(w[4], 120) + (w[5] === null ? "" : ", latency " + seconds(w[5]));
      box.appendChild(svg("rect", {
        "class": "st-window " + (w[3] ? "st-detected" : "st-missed"), x: w[0] * scale, y: 1, height: H - 2,
        width: Math.max(2, (w[1] - w[0]) * scale), "data-at": w[2]
      }, what));
      box.appendChild(svg("line", { "class": "st-onset", x1: w[2] * scale, x2: w[2] * scale, y1: 1, y2: H - 1,
        "vector-effect": "non-scaling-stroke" }));
    });
    s.misses.forEach(function (m) {
      var x = m[0] * scale;
      box.appendChild(svg("path", { "class": "st-miss", d: "M" + (x - 5) + " 4L" + (x + 5) + " 14M" + (x + 5) + " 4L" + (x - 5) + " 14",
        "vector-effect": "non-scaling-stroke", "data-at": m[0] }, m[3]));
    });
    s.emissions.forEach(function (e) {
      var x = e[0] * scale;
      box.appendChild(svg("line", { "class": "st-em st-" + CLASS[e[1]], x1: x, x2: x, y1: e[1] === 2 ? 8 : 14, y2: H - 3,
        "vector-effect": "non-scaling-stroke", "data-time": e[0] }, WORD[e[1]] + " @ " + seconds(e[0]) + ": " + clip(e[2], 200)));
    });
    return box;
  }

  function figure(kind, item) {
    var fig = el("figure", "st-frame st-frame-" + kind);
    fig.dataset.kind = kind;
    fig.dataset.time = String(item[0]);
    if (item[1] !== null) fig.dataset.frame = String(item[1]);
    if (typeof item[2] === "number") {
      var img = el("img");
      img.src = data.thumbs[item[2]];
      img.alt = (kind === "miss" ? "onset frame " : "frame ") + item[1];
      fig.appendChild(img);
    } else {
      fig.appendChild(el("span", "st-none", item[1] === null ? "no frame kept" : "not embedded"));
    }
    var caption = el("figcaption", "", (kind === "miss" ? "missed @ " : "false alarm @ ") + seconds(item[0]) +
      (item[1] === null ? "" : " · frame " + item[1]));
    caption.title = item[3];
    fig.appendChild(caption);
    return fig;
  }

  data.streams.forEach(function (s) {
    var block = el("div", "st-stream");
    block.dataset["case"] = s["case"];
    block.dataset.target = s.target;
    block.dataset.trial = String(s.trial);
    var detected = s.windows.filter(function (w) { return w[3]; }).length;
    var alarms = s.emissions.filter(function (e) { return e[1] === 2; }).length;
    block.appendChild(el("h3", "", s["case"] + " / " + s.target + (data.repeat > 1 ? " · trial " + s.trial : "")));
    block.appendChild(el("p", "hint", detected + " of " + s.windows.length + " events detected · " + alarms +
      " false alarm" + (alarms === 1 ? "" : "s") + " · " + s.emissions.length + " scored emissions"));
    if (s.error) block.appendChild(el("p", "note", s.error));
    block.appendChild(strip(s));
    var axis = el("div", "st-axis");
    axis.appendChild(el("span", "", "0 s"));
    axis.appendChild(el("span", "", seconds(s.duration)));
    block.appendChild(axis);
    var frames = el("div", "st-frames");
    s.misses.forEach(function (m) { frames.appendChild(figure("miss", m)); });
    s.alarms.forEach(function (a) { frames.appendChild(figure("alarm", a)); });
    var unkept = alarms - s.alarms.length;
    if (unkept > 0) frames.appendChild(el("p", "hint", unkept + " more false alarm(s) without a kept frame"));
    if (frames.childNodes.length) block.appendChild(frames);
    root.appendChild(block);
  });
})();
