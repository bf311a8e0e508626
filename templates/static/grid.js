// The telemetry grid of the trial and compare pages (the telemetry_grid macro): every
// series a small chart, redrawn from the page's #grid-data (the same lines the server
// drew as SVG, which is what shows without this file). Here: a search box over the
// charts, smoothing with the raw curve faint behind the smoothed one, per chart a log
// scale, an outlier cap that says what it hid (the rule of api/pages/chart_scale.py) and
// full screen; hover snaps to each curve's nearest logged point; drag a span to zoom,
// double-click resets; alert steps are dashed lines; a running trial's page looks for
// new points every few seconds until it stops running.
"use strict";

(function () {
  var SVGNS = "http://www.w3.org/2000/svg";
  var FENCE = 3, CAP_GAIN = 3, POLL_MS = 5000;
  var data = null, smooth = 0, states = {};

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVGNS, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }

  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "—";
    var a = Math.abs(v);
    return a !== 0 && (a >= 1e6 || a < 1e-3) ? v.toExponential(3) : String(Number(v.toPrecision(6)));
  }

  function ema(ys, alpha) {
    if (!alpha) return ys;
    var out = new Array(ys.length), last = 0, weight = 0;
    for (var i = 0; i < ys.length; i++) {
      last = last * alpha + (1 - alpha) * ys[i];
      weight = weight * alpha + (1 - alpha);
      out[i] = last / weight;
    }
    return out;
  }

  // a tick label: round numbers, exponents without trailing zeros (1e-4, 2.5e-7)
  function tickFmt(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return Number(v.toPrecision(4)).toExponential().replace("e+", "e");
    var r = Number(v.toPrecision(6));
    return a >= 1000 && r === Math.round(r) ? r.toLocaleString("en-US") : String(r);
  }

  function toLog(v) { return v > 0 ? Math.log10(v) : null; }

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    var raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && out.length < 30; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  // ticks of the value axis as {at, label}; on a log axis 1-2-5 x 10^k
  function yTicks(lo, hi, log) {
    if (!log) return niceTicks(lo, hi, 4).map(function (v) { return { at: v, label: tickFmt(v) }; });
    var out = [];
    for (var k = Math.floor(lo); k <= Math.ceil(hi); k++) {
      (hi - lo <= 3 ? [1, 2, 5] : [1]).forEach(function (m) {
        var at = k + Math.log10(m);
        if (at >= lo - 1e-9 && at <= hi + 1e-9) out.push({ at: at, label: tickFmt(m * Math.pow(10, k)) });
      });
    }
    if (out.length >= 3) return out;
    return niceTicks(Math.pow(10, lo), Math.pow(10, hi), 4).filter(function (v) { return v > 0; })
      .map(function (v) { return { at: Math.log10(v), label: tickFmt(v) }; });
  }

  // the outlier cap (api/pages/chart_scale.py's outlier_cap): every curve weighs the same;
  // values beyond FENCE interquartile ranges are hidden when they stretch the axis CAP_GAIN times
  function outlierCap(curves) {
    var pairs = [];
    curves.forEach(function (ys) {
      var finite = ys.filter(function (v) { return v !== null && isFinite(v); });
      finite.forEach(function (v) { pairs.push([v, 1 / finite.length]); });
    });
    if (pairs.length < 4) return null;
    pairs.sort(function (a, b) { return a[0] - b[0]; });
    var total = pairs.reduce(function (s, p) { return s + p[1]; }, 0);
    function quantile(q) {
      var run = 0;
      for (var i = 0; i < pairs.length; i++) { run += pairs[i][1]; if (run >= q * total - 1e-12) return pairs[i][0]; }
      return pairs[pairs.length - 1][0];
    }
    var q1 = quantile(0.25), q3 = quantile(0.75), iqr = q3 - q1;
    if (!(iqr > 0)) iqr = Math.abs(q3) * 0.05 || 1;
    var flo = q1 - FENCE * iqr, fhi = q3 + FENCE * iqr;
    var inside = pairs.filter(function (p) { return p[0] >= flo && p[0] <= fhi; });
    if (!inside.length || inside.length === pairs.length) return null;
    var lo = inside[0][0], hi = inside[inside.length - 1][0];
    var all = pairs[pairs.length - 1][0] - pairs[0][0];
    if (all < CAP_GAIN * ((hi - lo) || Math.abs(hi) * 0.05 || 1)) return null;
    return { lo: lo, hi: hi, above: pairs.filter(function (p) { return p[0] > hi; }).length,
             below: pairs.filter(function (p) { return p[0] < lo; }).length };
  }

  function capNote(cap, log) {
    function value(v) { return String(Number((log ? Math.pow(10, v) : v).toPrecision(3))); }
    var parts = [];
    if (cap.above) parts.push(cap.above + " point" + (cap.above === 1 ? "" : "s") + " above " + value(cap.hi));
    if (cap.below) parts.push(cap.below + " point" + (cap.below === 1 ? "" : "s") + " below " + value(cap.lo));
    return parts.join(" and ") + " hidden";
  }

  function pathOf(xs, ys, sx, sy) {
    var d = "", pen = "M";
    for (var i = 0; i < xs.length; i++) {
      if (ys[i] === null) { pen = "M"; continue; }
      d += pen + sx(xs[i]).toFixed(1) + "," + sy(ys[i]).toFixed(1);
      pen = "L";
    }
    return d;
  }

  // the index of the x in sorted xs nearest to x
  function nearestIndex(xs, x) {
    var lo = 0, hi = xs.length - 1;
    if (hi < 0) return -1;
    while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid; else hi = mid; }
    return Math.abs(xs[lo] - x) <= Math.abs(xs[hi] - x) ? lo : hi;
  }

  // -- one chart ----------------------------------------------------------------------------

  function model(plot, st) {
    // the curves as drawn: raw and smoothed values, in log10 units on a log axis
    var curves = plot.series.map(function (s) {
      var xs = s.xy[0], raw = s.xy[1];
      var shown = smooth ? ema(raw, smooth) : raw;
      return { s: s, xs: xs, raw: st.log ? raw.map(toLog) : raw, y: st.log ? shown.map(toLog) : shown };
    });
    var full = [Infinity, -Infinity];
    curves.forEach(function (c) { if (c.xs.length) { full[0] = Math.min(full[0], c.xs[0]); full[1] = Math.max(full[1], c.xs[c.xs.length - 1]); } });
    if (!(full[1] > full[0])) full = [full[0] - 1, full[0] + 1];
    var xd = st.zoom || full;
    function inView(c, ys) { return ys.filter(function (v, i) { return v !== null && c.xs[i] >= xd[0] && c.xs[i] <= xd[1]; }); }
    var values = [];
    curves.forEach(function (c) { values.push(inView(c, c.raw)); if (smooth) values.push(inView(c, c.y)); });
    var cap = st.cap ? outlierCap(curves.map(function (c) { return inView(c, c.raw); })) : null;
    var flat = [].concat.apply([], values);
    (plot.bands || []).forEach(function (b) {
      b.hi[1].forEach(function (v, i) { if (b.hi[0][i] >= xd[0] && b.hi[0][i] <= xd[1]) { var t = st.log ? toLog(v) : v; if (t !== null) flat.push(t); } });
      if (!st.log) b.lo[1].forEach(function (v, i) { if (b.lo[0][i] >= xd[0] && b.lo[0][i] <= xd[1]) flat.push(v); });
    });
    (plot.hlines || []).forEach(function (h) { var t = st.log ? toLog(h.y) : h.y; if (t !== null) flat.push(t); });
    var lo = cap ? cap.lo : Math.min.apply(null, flat.length ? flat : [0]);
    var hi = cap ? cap.hi : Math.max.apply(null, flat.length ? flat : [1]);
    if (lo === hi) { var pad = Math.abs(lo) * 0.05 || 1; lo -= pad; hi += pad; }
    var span = hi - lo;
    return { curves: curves, xd: xd, full: full, yd: [lo - span * 0.05, hi + span * 0.05], cap: cap };
  }

  function draw(figure) {
    var key = figure.getAttribute("data-plot"), plot = plotOf(key);
    if (!plot) return;
    var st = states[key], m = model(plot, st);
    var W = Math.max(280, Math.round(figure.clientWidth || 460));
    var H = figure.classList.contains("full") ? Math.max(300, window.innerHeight - 140) : Math.round(Math.max(200, Math.min(300, W * 0.55)));
    var L = 58, R = 12, T = 16, B = 34;
    var xd = m.xd, yd = m.yd;
    function sx(x) { return L + (x - xd[0]) * (W - L - R) / ((xd[1] - xd[0]) || 1); }
    function sy(y) { return H - B - (y - yd[0]) * (H - T - B) / ((yd[1] - yd[0]) || 1); }
    var svg = el("svg", { class: "chart grid-svg", viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": plot.label + (st.log ? " (log scale)" : "") });
    yTicks(yd[0], yd[1], st.log).forEach(function (t) {
      el("line", { class: "grid", x1: L, x2: W - R, y1: sy(t.at).toFixed(1), y2: sy(t.at).toFixed(1) }, svg);
      el("text", { class: "tick", x: L - 5, y: (sy(t.at) + 4).toFixed(1), "text-anchor": "end" }, svg).textContent = t.label;
    });
    niceTicks(xd[0], xd[1], W < 420 ? 3 : 5).forEach(function (v) {
      el("line", { class: "tickmark", x1: sx(v).toFixed(1), x2: sx(v).toFixed(1), y1: H - B, y2: H - B + 4 }, svg);
      el("text", { class: "tick xt", x: sx(v).toFixed(1), y: H - B + 16, "text-anchor": "middle" }, svg).textContent = tickFmt(v);
    });
    el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }, svg);
    el("text", { class: "label", x: (L + W - R) / 2, y: H - 3, "text-anchor": "middle" }, svg).textContent = "step";
    var clip = "g" + Math.random().toString(36).slice(2);
    el("rect", { x: L, y: T - 3, width: W - L - R, height: H - T - B + 6 }, el("clipPath", { id: clip }, el("defs", {}, svg)));
    var area = el("g", { "clip-path": "url(#" + clip + ")" }, svg);
    (plot.bands || []).forEach(function (b) {
      // on a log axis a lower bound at or below 0 sits on the floor: no dive, no edge, no stretch
      var lows = b.lo[1].map(function (v) { var t = st.log ? toLog(v) : v; return t === null || t < yd[0] ? yd[0] : t; });
      var highs = b.hi[1].map(function (v) { var t = st.log ? toLog(v) : v; return t === null ? yd[0] : t; });
      var d = "M" + b.lo[0].map(function (x, i) { return sx(x).toFixed(1) + "," + sy(lows[i]).toFixed(1); }).join("L");
      d += "L" + b.hi[0].map(function (x, i) { return [x, i]; }).reverse().map(function (p) { return sx(p[0]).toFixed(1) + "," + sy(highs[p[1]]).toFixed(1); }).join("L") + "Z";
      el("title", {}, el("path", { class: "band " + b.css, d: d }, area)).textContent = b.name;
    });
    (plot.hlines || []).forEach(function (h) {
      var t = st.log ? toLog(h.y) : h.y;
      if (t === null) return;
      el("title", {}, el("line", { class: "hl bound", x1: L, x2: W - R, y1: sy(t).toFixed(1), y2: sy(t).toFixed(1) }, area)).textContent = h.name;
    });
    (data.alerts || []).forEach(function (a) {
      if (a.x < xd[0] || a.x > xd[1]) return;
      el("title", {}, el("line", { class: "vl " + a.css, x1: sx(a.x).toFixed(1), x2: sx(a.x).toFixed(1), y1: T, y2: H - B }, svg)).textContent = a.name;
    });
    m.curves.forEach(function (c) {
      if (smooth) el("path", { class: "ln raw " + c.s.css, d: pathOf(c.xs, c.raw, sx, sy) }, area);
      el("title", {}, el("path", { class: "ln " + c.s.css, d: pathOf(c.xs, c.y, sx, sy) }, area)).textContent = c.s.name;
      if (c.xs.length <= 40) c.xs.forEach(function (x, i) {
        if (c.y[i] !== null) el("circle", { class: "dot " + c.s.css, cx: sx(x).toFixed(1), cy: sy(c.y[i]).toFixed(1), r: 2.4 }, area);
      });
    });
    var notes = [];
    if (m.cap) notes.push(capNote(m.cap, st.log));
    if (st.log) {
      var dropped = 0;
      m.curves.forEach(function (c) { c.raw.forEach(function (v) { if (v === null) dropped++; }); });
      if (dropped) notes.push(dropped + " value" + (dropped === 1 ? "" : "s") + " ≤ 0 not on the log scale");
    }
    if (notes.length) el("text", { class: "cap-note", x: W - R, y: T - 4, "text-anchor": "end" }, svg).textContent = notes.join(" · ");
    if (plot.series.length > 1) legend(figure, plot);
    var old = figure.querySelector("svg.grid-svg");
    if (old) old.replaceWith(svg); else figure.appendChild(svg);
    figure.classList.toggle("zoomed", !!st.zoom);
    figure.__view = { svg: svg, m: m, sx: sx, sy: sy, W: W, H: H, L: L, R: R, T: T, B: B };
    interact(figure, svg);
  }

  function legend(figure, plot) {
    if (figure.querySelector(".grid-legend")) return;
    var list = document.createElement("p");
    list.className = "grid-legend";
    plot.series.forEach(function (s) {
      var item = document.createElement("span"), swatch = document.createElement("span");
      swatch.className = "swatch " + s.css; swatch.setAttribute("aria-hidden", "true");
      item.appendChild(swatch); item.appendChild(document.createTextNode(" " + s.name));
      list.appendChild(item);
    });
    figure.appendChild(list);
  }

  // -- hover, zoom --------------------------------------------------------------------------

  function interact(figure, svg) {
    var v = figure.__view, tip = figure.querySelector(".grid-tip"), start = null;
    var marks = el("g", { class: "snap" }, svg);
    var brush = el("rect", { class: "zoom-brush", x: 0, y: v.T, width: 0, height: v.H - v.T - v.B, visibility: "hidden" }, svg);
    function unitX(event) {
      var box = svg.getBoundingClientRect();
      return Math.max(v.L, Math.min(v.W - v.R, (event.clientX - box.left) * v.W / box.width));
    }
    function valueAt(px) { return v.m.xd[0] + (px - v.L) * (v.m.xd[1] - v.m.xd[0]) / (v.W - v.L - v.R); }
    svg.addEventListener("mousemove", function (event) {
      var px = unitX(event), x = valueAt(px);
      if (start !== null) {
        brush.setAttribute("x", Math.min(start, px)); brush.setAttribute("width", Math.abs(px - start));
        brush.setAttribute("visibility", "visible");
      }
      marks.replaceChildren();
      var lines = [];
      v.m.curves.forEach(function (c) {
        var i = nearestIndex(c.xs, x);
        if (i < 0 || c.y[i] === null) return;
        el("circle", { class: "dot snap-dot " + c.s.css, cx: v.sx(c.xs[i]).toFixed(1), cy: v.sy(c.y[i]).toFixed(1), r: 4 }, marks);
        var raw = c.s.xy[1][i], text = c.s.name + ": " + fmt(raw) + " at step " + fmt(c.xs[i]);
        if (smooth) text += " (smoothed " + fmt(states[figure.getAttribute("data-plot")].log ? Math.pow(10, c.y[i]) : c.y[i]) + ")";
        lines.push(text);
      });
      (data.alerts || []).forEach(function (a) { if (Math.abs(v.sx(a.x) - px) < 4) lines.push(a.name); });
      if (!lines.length) { tip.hidden = true; return; }
      tip.replaceChildren.apply(tip, lines.map(function (t) { var d = document.createElement("div"); d.textContent = t; return d; }));
      tip.hidden = false;
      var box = figure.getBoundingClientRect();
      tip.style.left = Math.max(0, Math.min(box.width - 240, event.clientX - box.left + 12)) + "px";
      tip.style.top = (event.clientY - box.top + 14) + "px";
    });
    svg.addEventListener("mouseleave", function () { marks.replaceChildren(); tip.hidden = true; });
    svg.addEventListener("mousedown", function (event) { if (event.button === 0) { start = unitX(event); event.preventDefault(); } });
    svg.addEventListener("mouseup", function (event) {
      if (start === null) return;
      var px = unitX(event), from = start;
      start = null;
      brush.setAttribute("visibility", "hidden");
      if (Math.abs(px - from) < 6) return;
      setZoom(figure, [valueAt(Math.min(from, px)), valueAt(Math.max(from, px))]);
    });
    svg.addEventListener("dblclick", function () { setZoom(figure, null); });
  }

  function setZoom(figure, range) {
    var st = states[figure.getAttribute("data-plot")], full = figure.__view.m.full;
    if (range && range[1] - range[0] >= full[1] - full[0]) range = null;
    st.zoom = range;
    draw(figure);
  }

  // -- the figure's buttons and the grid's bar --------------------------------------------

  function button(text, title, pressed, onClick) {
    var b = document.createElement("button");
    b.type = "button"; b.className = "button"; b.textContent = text; b.title = title;
    b.setAttribute("aria-label", title);
    if (pressed !== null) b.setAttribute("aria-pressed", String(pressed));
    b.addEventListener("click", onClick);
    return b;
  }

  function setupFigure(figure) {
    var key = figure.getAttribute("data-plot");
    if (!states[key]) states[key] = { log: data.log, cap: data.cap, zoom: null };
    var st = states[key];
    figure.querySelectorAll(".zoom-bar, svg[data-zoom]").forEach(function (node) { node.remove(); });
    var bar = document.createElement("div");
    bar.className = "zoom-bar grid-tools";
    var log = button("log", "log scale for this chart", st.log, function () {
      st.log = !st.log; log.setAttribute("aria-pressed", String(st.log)); draw(figure);
    });
    var cap = button("cap", "hide outliers in this chart (it says how many)", st.cap, function () {
      st.cap = !st.cap; cap.setAttribute("aria-pressed", String(st.cap)); draw(figure);
    });
    var reset = button("reset", "show every step (or double-click the chart)", null, function () { setZoom(figure, null); });
    var full = button("⤢", "full screen (Esc closes)", false, function () { fullScreen(figure, !figure.classList.contains("full")); });
    [log, cap, reset, full].forEach(function (b) { bar.appendChild(b); });
    figure.insertBefore(bar, figure.querySelector("figcaption").nextSibling);
    var tip = document.createElement("div");
    tip.className = "grid-tip"; tip.hidden = true; tip.setAttribute("role", "status");
    figure.appendChild(tip);
    draw(figure);
  }

  function fullScreen(figure, on) {
    document.querySelectorAll(".tgrid figure.full").forEach(function (f) { if (f !== figure) fullScreen(f, false); });
    figure.classList.toggle("full", on);
    document.body.classList.toggle("has-full", on);
    var b = figure.querySelector('.grid-tools button[aria-label^="full"]');
    if (b) b.setAttribute("aria-pressed", String(on));
    draw(figure);
  }

  function plotOf(key) {
    for (var i = 0; i < data.plots.length; i++) if (data.plots[i].key === key) return data.plots[i];
    return null;
  }

  function setupBar(wrap) {
    var bar = wrap.querySelector(".tgrid-bar"), figures = wrap.querySelectorAll(".tgrid figure");
    if (!bar || bar.querySelector("input")) return;
    var search = document.createElement("input");
    search.type = "search"; search.placeholder = "search charts"; search.setAttribute("aria-label", "search the charts by name");
    var count = document.createElement("span");
    count.className = "muted";
    search.addEventListener("input", function () {
      var q = search.value.trim().toLowerCase(), shown = 0;
      figures.forEach(function (f) {
        var plot = plotOf(f.getAttribute("data-plot")) || { series: [] };
        var text = (f.getAttribute("data-title") + " " + plot.series.map(function (s) { return s.name; }).join(" ")).toLowerCase();
        f.hidden = q !== "" && text.indexOf(q) < 0;
        if (!f.hidden) shown++;
      });
      count.textContent = q ? shown + " of " + figures.length + " charts" : "";
    });
    var label = document.createElement("label"), slider = document.createElement("input"), out = document.createElement("output");
    slider.type = "range"; slider.min = "0"; slider.max = "0.99"; slider.step = "0.01"; slider.value = String(smooth);
    out.textContent = smooth.toFixed(2);
    label.appendChild(document.createTextNode("smooth ")); label.appendChild(slider); label.appendChild(out);
    slider.addEventListener("input", function () {
      smooth = parseFloat(slider.value) || 0; out.textContent = smooth.toFixed(2);
      wrap.querySelectorAll(".tgrid figure").forEach(draw);
    });
    bar.insertBefore(count, bar.firstChild);
    bar.insertBefore(label, bar.firstChild);
    bar.insertBefore(search, bar.firstChild);
  }

  function setup() {
    var wrap = document.getElementById("telemetry"), node = document.getElementById("grid-data");
    if (!wrap) return;
    if (node) {
      data = JSON.parse(node.textContent);
      setupBar(wrap);
      wrap.querySelectorAll(".tgrid figure[data-plot]").forEach(setupFigure);
    }
    if (wrap.hasAttribute("data-live") && !wrap.__polling) poll(wrap);
  }

  // -- live: the page of a running trial looks for new points ---------------------------

  function poll(wrap) {
    wrap.__polling = true;
    var note = wrap.querySelector(".badge.running + .muted");
    if (note) note.textContent = "this trial is running; new points appear every " + POLL_MS / 1000 + " s";
    var timer = setInterval(function () {
      if (document.hidden) return;
      fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) { return response.ok ? response.text() : Promise.reject(new Error("HTTP " + response.status)); })
        .then(function (html) {
          var page = new DOMParser().parseFromString(html, "text/html");
          var fresh = page.getElementById("telemetry");
          if (!fresh) return;
          ["lease", "alerts"].forEach(function (id) {
            var now = document.getElementById(id), next = page.getElementById(id);
            if (now && next) now.replaceWith(document.importNode(next, true));
          });
          var freshData = page.getElementById("grid-data");
          var sameCharts = freshData && data && JSON.stringify(JSON.parse(freshData.textContent).plots.map(function (p) { return p.key; })) ===
            JSON.stringify(data.plots.map(function (p) { return p.key; }));
          if (sameCharts) {
            data = JSON.parse(freshData.textContent);
            wrap.querySelectorAll(".tgrid figure[data-plot]").forEach(draw);
          } else {
            var replacement = document.importNode(fresh, true);
            wrap.replaceWith(replacement);
            wrap = replacement;
            wrap.__polling = true;
            setup();
          }
          if (!fresh.hasAttribute("data-live")) {
            clearInterval(timer);
            var h1 = document.querySelector("h1"), freshH1 = page.querySelector("h1");
            if (h1 && freshH1) h1.replaceWith(document.importNode(freshH1, true));
            wrap.removeAttribute("data-live");
            wrap.setAttribute("data-finished", "1");
          }
        })
        .catch(function () { /* the next tick tries again */ });
    }, POLL_MS);
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") document.querySelectorAll(".tgrid figure.full").forEach(function (f) { fullScreen(f, false); });
  });
  var drawnWidth = window.innerWidth, resized = null;
  window.addEventListener("resize", function () {
    if (window.innerWidth === drawnWidth) return;
    clearTimeout(resized);
    resized = setTimeout(function () {
      drawnWidth = window.innerWidth;
      document.querySelectorAll(".tgrid figure[data-plot]").forEach(draw);
    }, 150);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
