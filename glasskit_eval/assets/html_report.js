// The HTML report's sample table, timelines and lightbox. Report values reach the page only
// through textContent and attribute setters: never as markup.
(function () {
  "use strict";
  var STATUS = ["error", "failed", "passed", "ignored"];
  var PAGE = 100;
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var rows = data.rows;
  var withTrial = data.repeat > 1;
  // A run with arms: each row's arm is its index in data.arms (row[14]).
  var arms = data.arms || [];
  function armOf(r) { return r[14] === null || r[14] === undefined ? "" : arms[r[14]]; }
  var state = { sort: "status", dir: 1, page: 0 };
  var view = [];
  var lower = null;

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function svg(tag, attrs) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }
  // Times in the clip, to the millisecond: the same form the server-rendered tables use.
  function seconds(t) { return (Math.round(t * 1000) / 1000) + " s"; }
  function tick(t) { return seconds(t >= 100 ? Math.round(t) : Number(t.toPrecision(3))); }
  function where(r) {
    return data.cases[r[1]] + " / " + data.targetDisplay[r[2]] + " at " + seconds(r[4]) +
      (r[5] === null ? "" : " (frame " + r[5] + ")") + (withTrial ? " · trial " + r[0] : "") +
      (arms.length ? " · arm " + armOf(r) : "");
  }

  // --- the sample table ---------------------------------------------------------------
  var KEYS = {
    status: function (r) { return r[6]; }, trial: function (r) { return r[0]; },
    arm: function (r) { return r[14] === null ? -1 : r[14]; },
    "case": function (r) { return r[1]; },
    target: function (r) { return data.targetDisplay[r[2]].toLowerCase(); },
    time: function (r) { return r[4]; }, frame: function (r) { return r[5] === null ? -1 : r[5]; },
    expected: function (r) { return r[7]; }, observed: function (r) { return r[8]; },
    reason: function (r) { return r[9]; }, thumb: function (r) { return r[10] === null ? 1 : 0; }
  };
  function cmp(a, b) { return a < b ? -1 : a > b ? 1 : 0; }
  function compare(i, j) {
    var a = rows[i], b = rows[j];
    var key = KEYS[state.sort];
    var c = cmp(key(a), key(b)) * state.dir;
    // Ties: failures first, then case order, target, time, trial.
    return c || cmp(a[6], b[6]) || cmp(a[1], b[1]) || cmp(a[2], b[2]) || cmp(a[4], b[4]) ||
      cmp(a[0], b[0]) || cmp(a[3], b[3]);
  }
  function filters() {
    var statuses = {};
    document.querySelectorAll(".f-status").forEach(function (box) {
      if (box.checked) statuses[box.value] = true;
    });
    var trial = $("f-trial");
    var arm = $("f-arm");
    return {
      arm: arm ? arm.value : "",
      statuses: statuses, kase: $("f-case").value, target: $("f-target").value,
      trial: trial ? trial.value : "", text: $("f-text").value.trim().toLowerCase()
    };
  }
  function haystack(i) {
    if (lower === null) {
      lower = rows.map(function (r) {
        return [data.cases[r[1]], data.targetDisplay[r[2]], r[7], r[8], r[9], armOf(r)].join("\n").toLowerCase();
      });
    }
    return lower[i];
  }
  function recompute() {
    var f = filters();
    view = [];
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      if (!f.statuses[r[6]]) continue;
      if (f.kase !== "" && String(r[1]) !== f.kase) continue;
      if (f.target !== "" && String(r[2]) !== f.target) continue;
      if (f.trial !== "" && String(r[0]) !== f.trial) continue;
      if (f.arm !== "" && String(r[14]) !== f.arm) continue;
      if (f.text && haystack(i).indexOf(f.text) < 0) continue;
      view.push(i);
    }
    view.sort(compare);
  }
  function thumbCell(r) {
    var td = el("td", "thumb-cell");
    var t = r[10];
    if (typeof t === "number") {
      var img = el("img", "thumb");
      img.src = data.thumbs[t];
      img.alt = "frame " + r[5];
      td.appendChild(img);
    } else if (typeof t === "string") {
      var a = el("a", "artifact", "saved frame");
      a.href = t;
      a.rel = "noopener noreferrer";
      td.appendChild(a);
    } else {
      td.textContent = r[6] < 2 ? "–" : "";
    }
    return td;
  }
  function rowNode(i) {
    var r = rows[i];
    var tr = el("tr", "r-" + STATUS[r[6]]);
    tr.dataset.row = String(i);
    var st = el("td");
    st.appendChild(el("span", "s s-" + STATUS[r[6]], STATUS[r[6]]));
    tr.appendChild(st);
    if (arms.length) tr.appendChild(el("td", "arm-cell", armOf(r)));
    if (withTrial) tr.appendChild(el("td", "", r[0]));
    tr.appendChild(el("td", "", data.cases[r[1]]));
    tr.appendChild(el("td", "", data.targetDisplay[r[2]]));
    tr.appendChild(el("td", "mono", seconds(r[4])));
    tr.appendChild(el("td", "mono", r[5] === null ? "–" : r[5]));
    tr.appendChild(el("td", "v", r[7]));
    tr.appendChild(el("td", "v", r[8]));
    var reason = el("td", "reason", r[9]);
    if (r[11]) reason.appendChild(cmdBox(r[11]));
    tr.appendChild(reason);
    tr.appendChild(thumbCell(r));
    return tr;
  }
  function render() {
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * PAGE;
    var body = $("sample-body");
    var frag = document.createDocumentFragment();
    for (var k = start; k < Math.min(view.length, start + PAGE); k++) frag.appendChild(rowNode(view[k]));
    body.replaceChildren(frag);
    $("sample-count").textContent = view.length === rows.length
      ? rows.length + " attempts"
      : view.length + " of " + rows.length + " attempts match";
    $("page-label").textContent = view.length
      ? "Rows " + (start + 1) + "–" + Math.min(view.length, start + PAGE) + " of " + view.length +
        " · page " + (state.page + 1) + " of " + pages
      : "No rows";
    $("page-prev").disabled = state.page === 0;
    $("page-next").disabled = state.page >= pages - 1;
    document.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.classList.toggle("sorted", th.dataset.sort === state.sort);
      th.classList.toggle("desc", th.dataset.sort === state.sort && state.dir < 0);
    });
  }
  function refresh() { state.page = 0; recompute(); render(); }

  function clearFilters() {
    document.querySelectorAll(".f-status").forEach(function (box) { box.checked = true; });
    ["f-case", "f-target", "f-trial", "f-arm", "f-text"].forEach(function (id) { if ($(id)) $(id).value = ""; });
  }
  function jumpTo(index) {
    var pos = view.indexOf(index);
    if (pos < 0) { clearFilters(); recompute(); pos = view.indexOf(index); }
    state.page = Math.floor(pos / PAGE);
    render();
    var tr = document.querySelector('#sample-body tr[data-row="' + index + '"]');
    if (tr) {
      document.querySelectorAll("#sample-body tr.flash").forEach(function (n) { n.classList.remove("flash"); });
      tr.classList.add("flash");
      tr.scrollIntoView({ block: "center" });
    }
  }

  document.querySelectorAll(".filters input, .filters select").forEach(function (input) {
    input.addEventListener(input.type === "search" ? "input" : "change", refresh);
  });
  document.querySelectorAll("th[data-sort]").forEach(function (th) {
    function sort() {
      if (state.sort === th.dataset.sort) state.dir = -state.dir;
      else { state.sort = th.dataset.sort; state.dir = 1; }
      state.page = 0;
      view.sort(compare);
      render();
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
  });
  $("page-prev").addEventListener("click", function () { state.page--; render(); });
  $("page-next").addEventListener("click", function () { state.page++; render(); });
  $("sample-body").addEventListener("click", function (e) {
    var target = e.target;
    var tr = target.closest("tr[data-row]");
    if (target.classList.contains("thumb") && tr) openLightbox(Number(tr.dataset.row));
  });

  document.querySelectorAll("tr[data-jump]").forEach(function (tr) {
    tr.addEventListener("click", function () { jumpTo(Number(tr.dataset.jump)); });
  });

  // --- review commands: one line that scrolls in its box, and a button that copies it ------
  function copyText(text, button) {
    function done(ok) {
      button.textContent = ok ? "Copied" : "Select and copy";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallback()); });
    } else {
      done(fallback());
    }
    function fallback() {
      // Clipboard API refused (older browsers, some file:// setups): a hidden textarea and execCommand.
      var area = el("textarea", "offscreen");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      area.remove();
      return ok;
    }
  }
  function cmdBox(text) {
    var box = el("div", "cmd-box");
    var pre = el("pre", "cmd", text);
    pre.title = "the review command for this sample";
    var button = el("button", "copy", "Copy");
    button.type = "button";
    button.addEventListener("click", function (e) { e.stopPropagation(); copyText(text, button); });
    box.appendChild(pre);
    box.appendChild(button);
    return box;
  }

  // --- failed samples, the lightbox and anchors ---------------------------------------
  var failures = [];
  for (var f = 0; f < rows.length; f++) if (rows[f][6] < 2) failures.push(f);
  failures.sort(function (i, j) {
    var a = rows[i], b = rows[j];
    return cmp(a[6], b[6]) || cmp(a[1], b[1]) || cmp(a[2], b[2]) || cmp(a[4], b[4]) || cmp(a[0], b[0]) ||
      cmp(a[3], b[3]);
  });
  var anchorOf = {};
  Object.keys(data.anchors).forEach(function (id) { anchorOf[data.anchors[id]] = id; });
  var CARDS = 50;
  var shown = 0;
  var current = -1;

  // A failed clip sample's filmstrip: its anchor and evenly spaced frames, each named by time and
  // frame index (a frame beyond the image budget keeps its name without a picture).
  function filmstrip(r, list, onPick) {
    list.setAttribute("aria-label", "clip frames");
    list.replaceChildren();
    list.hidden = false;
    r[15].forEach(function (f) {
      var item = el("li", "strip-frame" + (f[3] ? " anchor" : ""));
      item.dataset.frame = String(f[1]);
      var label = seconds(f[0]) + " · frame " + f[1] + (f[3] ? " (anchor)" : "");
      if (typeof f[2] === "number") {
        var img = el("img", "strip-img");
        img.src = data.thumbs[f[2]];
        img.alt = "frame " + f[1] + " at " + seconds(f[0]);
        if (onPick) img.addEventListener("click", function (e) { e.stopPropagation(); onPick(f, img); });
        item.appendChild(img);
      } else {
        item.appendChild(el("span", "strip-img none", "not embedded"));
      }
      item.appendChild(el("span", "strip-cap", label));
      list.appendChild(item);
    });
    return list;
  }

  function card(i) {
    var r = rows[i];
    var li = el("li", "card r-" + STATUS[r[6]]);
    li.dataset.row = String(i);
    var open = el("button", "card-open");
    open.type = "button";
    open.setAttribute("aria-label", "Open " + STATUS[r[6]] + " sample: " + where(r));
    if (typeof r[10] === "number") {
      var img = el("img", "card-img");
      img.src = data.thumbs[r[10]];
      img.alt = "";
      open.appendChild(img);
    } else {
      open.appendChild(el("span", "card-img none", r[5] === null ? "no frame" : "no thumbnail"));
    }
    li.appendChild(open);
    var text = el("div", "card-text");
    var head = el("div", "card-head");
    head.appendChild(el("span", "s s-" + STATUS[r[6]], STATUS[r[6]]));
    var link = el("a", "card-where", where(r));
    link.href = "#" + (anchorOf[i] || "");
    head.appendChild(link);
    text.appendChild(head);
    text.appendChild(el("div", "card-reason", r[9]));
    if (r[15]) text.appendChild(filmstrip(r, el("ol", "strip card-strip"), null));
    li.appendChild(text);
    li.addEventListener("click", function (e) {
      if (e.target.closest("a")) return;  // the link opens it through the hash
      openLightbox(i);
    });
    return li;
  }
  function moreCards() {
    var list = $("failure-list");
    if (!list) return;
    var end = Math.min(failures.length, shown + CARDS);
    var frag = document.createDocumentFragment();
    for (; shown < end; shown++) frag.appendChild(card(failures[shown]));
    list.appendChild(frag);
    var more = $("failure-more");
    more.hidden = shown >= failures.length;
    more.textContent = "Show " + Math.min(CARDS, failures.length - shown) + " more of " +
      (failures.length - shown) + " left";
  }
  if ($("failure-more")) $("failure-more").addEventListener("click", moreCards);

  function showImage(r) {
    var img = $("lightbox-img");
    var caption = $("lightbox-caption");
    var full = r[12];
    caption.replaceChildren();
    img.hidden = false;
    if (typeof full === "number") {
      img.src = data.frames[full];
      img.dataset.kind = "full";
      caption.textContent = "Frame " + r[5] + " at full resolution";
    } else if (full === true) {
      img.src = data.thumbs[r[10]];
      img.dataset.kind = "full";
      caption.textContent = "Frame " + r[5] + " at full resolution";
    } else if (typeof r[10] === "number") {
      img.src = data.thumbs[r[10]];
      img.dataset.kind = "thumb";
      caption.textContent = "Frame " + r[5] + " (thumbnail; beyond the report's image budget). ";
    } else {
      img.removeAttribute("src");
      img.hidden = true;
      img.dataset.kind = "none";
      caption.textContent = r[5] === null ? "No frame (the sample failed before one was decoded). "
        : "Frame " + r[5] + " is not embedded. ";
    }
    var strip = $("lb-strip");
    if (r[15]) {
      filmstrip(r, strip, function (f, picked) {
        img.src = picked.src;
        img.hidden = false;
        img.dataset.kind = "strip";
        caption.textContent = "Frame " + f[1] + " at " + seconds(f[0]) + " of the clip (thumbnail)";
      });
    } else {
      strip.replaceChildren();
      strip.hidden = true;
    }
    var link = typeof full === "string" ? full : typeof r[10] === "string" ? r[10] : null;
    if (link) {
      var a = el("a", "artifact", "open the saved frame (--save-failures)");
      a.href = link;
      a.rel = "noopener noreferrer";
      a.target = "_blank";
      caption.appendChild(a);
    }
  }
  function openLightbox(i, fromHash) {
    var r = rows[i];
    current = i;
    $("lb-title").textContent = STATUS[r[6]] + ": " + where(r);
    var pos = failures.indexOf(i);
    $("lb-count").textContent = pos < 0 ? "" : (pos + 1) + " of " + failures.length;
    $("lb-prev").disabled = pos <= 0;
    $("lb-next").disabled = pos < 0 || pos >= failures.length - 1;
    showImage(r);
    $("lb-reason").textContent = r[9];
    $("lb-expected").textContent = r[7] === "" ? "(nothing)" : r[7];
    $("lb-observation").textContent = r[13] === null || r[13] === undefined ? r[8] : (r[13] || "(none)");
    $("lb-cmd").textContent = r[11] || "";
    var id = anchorOf[i];
    $("lb-link").href = "#" + (id || "");
    $("lb-link").hidden = !id;
    var box = $("lightbox");
    var wasHidden = box.hidden;
    box.hidden = false;
    document.body.classList.add("lb-open");
    if (id && !fromHash && location.hash !== "#" + id) history.replaceState(null, "", "#" + id);
    if (wasHidden) $("lb-close").focus();
  }
  function closeLightbox() {
    if ($("lightbox").hidden) return;
    $("lightbox").hidden = true;
    document.body.classList.remove("lb-open");
    if (location.hash.indexOf("#sample-") === 0) history.replaceState(null, "", location.pathname + location.search);
    var back = document.querySelector('#failure-list li[data-row="' + current + '"] .card-open');
    if (back) back.focus({ preventScroll: true });
  }
  function step(by) {
    var pos = failures.indexOf(current);
    if (pos < 0) return;
    var next = pos + by;
    if (next >= 0 && next < failures.length) openLightbox(failures[next]);
  }
  $("lb-prev").addEventListener("click", function () { step(-1); });
  $("lb-next").addEventListener("click", function () { step(1); });
  $("lb-close").addEventListener("click", closeLightbox);
  $("lb-copy").addEventListener("click", function () { copyText($("lb-cmd").textContent, $("lb-copy")); });
  $("lightbox").addEventListener("click", function (e) { if (e.target === $("lightbox")) closeLightbox(); });
  document.addEventListener("keydown", function (e) {
    if ($("lightbox").hidden) return;
    if (e.key === "Escape") { e.preventDefault(); closeLightbox(); }
    else if (e.key === "ArrowLeft") { e.preventDefault(); step(-1); }
    else if (e.key === "ArrowRight") { e.preventDefault(); step(1); }
  });
  function followHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!Object.prototype.hasOwnProperty.call(data.anchors, id)) return;
    var i = data.anchors[id];
    if (rows[i][6] < 2) openLightbox(i, true);
    else jumpTo(i);
  }
  window.addEventListener("hashchange", followHash);

  // --- timelines ------------------------------------------------------------------------
  var tip = $("tip");
  var W = 1000;
  function nearest(marks, t) {
    var lo = 0, hi = marks.length - 1;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (marks[mid][0] < t) lo = mid + 1; else hi = mid;
    }
    if (lo > 0 && t - marks[lo - 1][0] <= marks[lo][0] - t) lo--;
    return marks[lo];
  }
  function strip(tl, s) {
    var row = el("div", "tl-row");
    row.dataset.target = String(s.target);
    row.appendChild(el("span", "tl-label", data.targetDisplay[s.target]));
    var box = svg("svg", { viewBox: "0 0 " + W + " 22", preserveAspectRatio: "none" });
    var scale = W / tl.duration;
    s.bands.forEach(function (b) {
      box.appendChild(svg("rect", {
        "class": "band b-" + b[2], x: b[0] * scale, y: 1, height: 20,
        width: Math.max(1, (b[1] - b[0]) * scale)
      }));
    });
    // One path per status, failures drawn last so they stay on top: cheap at 10,000 marks.
    var paths = ["", "", "", ""];
    s.marks.forEach(function (m) { paths[m[1]] += "M" + (m[0] * scale).toFixed(2) + " 3V19"; });
    [2, 3, 1, 0].forEach(function (k) {
      if (paths[k]) {
        box.appendChild(svg("path", { "class": "m m-" + k, d: paths[k], "vector-effect": "non-scaling-stroke" }));
      }
    });
    var cursor = svg("line", { "class": "cursor", y1: 0, y2: 22, x1: -10, x2: -10, "vector-effect": "non-scaling-stroke" });
    box.appendChild(cursor);
    function at(e) {
      var rect = box.getBoundingClientRect();
      return nearest(s.marks, (e.clientX - rect.left) / rect.width * tl.duration);
    }
    box.addEventListener("mousemove", function (e) {
      var m = at(e);
      cursor.setAttribute("x1", m[0] * scale);
      cursor.setAttribute("x2", m[0] * scale);
      var r = rows[m[2]];
      tip.textContent = tl["case"] + " / " + data.targetDisplay[s.target] + " at " + seconds(m[0]) +
        (r[5] === null ? "" : " (frame " + r[5] + ")") + "\n" + STATUS[m[1]] +
        (m[3].length > 1 ? " · trials " + m[3] : "") + "\nexpected: " + r[7].slice(0, 120) +
        "\nobserved: " + r[8].slice(0, 120);
      tip.hidden = false;
      tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 300) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    });
    box.addEventListener("mouseleave", function () { tip.hidden = true; cursor.setAttribute("x1", -10); cursor.setAttribute("x2", -10); });
    box.addEventListener("click", function (e) { tip.hidden = true; jumpTo(at(e)[2]); });
    row.appendChild(box);
    return row;
  }
  function timelines() {
    var root = $("timeline-root");
    data.timelines.forEach(function (tl) {
      var block = el("div", "tl-case");
      block.dataset["case"] = tl["case"];
      block.appendChild(el("h3", "", tl["case"]));
      tl.strips.forEach(function (s) { block.appendChild(strip(tl, s)); });
      var axis = el("div", "tl-axis");
      axis.appendChild(el("span"));
      var ticks = el("span");
      ticks.appendChild(el("span", "", "0 s"));
      ticks.appendChild(el("span", "", tick(tl.duration / 2)));
      ticks.appendChild(el("span", "", tick(tl.duration)));
      axis.appendChild(ticks);
      block.appendChild(axis);
      root.appendChild(block);
    });
  }

  timelines();
  recompute();
  render();
  moreCards();
  followHash();
  // Milliseconds from navigation start until the page was usable (benchmarks read it).
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
})();
