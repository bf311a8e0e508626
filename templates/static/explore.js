// The metric explorer (/projects/{p}/explore): redraws the server's answer, embedded in
// the page as JSON, into interactive SVG. What only the browser does lives here: EMA
// smoothing (the slider), log scale, hover (trial and value at the nearest bucket), click
// to the trial page, shift-click to tick a curve for "compare", zoom and pan (drag a span
// to zoom into it, ctrl+wheel or pinch, the buttons; double-click resets; the y axis
// fits what is in view). smooth and log are kept
// in the URL (history entries), every other choice is a GET of the form, so a URL always
// reproduces the view and the back button walks through it.
"use strict";

(function () {
  var SVG = "http://www.w3.org/2000/svg";
  // the drawing's size follows its box (one SVG unit = one CSS pixel), so text stays
  // legible and a phone gets a chart as tall as it is useful
  var W = 900, H = 350, L = 64, R = 16, T = 24, B = 40;
  // a curve with at most this many points gets a marker on each (an eval every N steps)
  var SPARSE = 60;
  var data = null, css = [];

  function size(figure) {
    W = Math.max(300, Math.round(figure.clientWidth || 900));
    H = Math.round(Math.max(260, Math.min(400, W * 0.5)));
    L = W < 500 ? 52 : 64;
  }

  function cssOf(group) { return css[group] || "s" + (group % 8); }

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }

  function state() {
    var params = new URLSearchParams(location.search);
    var smooth = parseFloat(params.get("smooth") || "0");
    if (!(smooth >= 0 && smooth <= 0.99)) smooth = 0;
    return { smooth: smooth, log: params.get("log") === "1", cap: params.get("cap") !== "0" };
  }

  // EMA with TensorBoard's debiasing; gaps (null) are skipped, not bridged.
  function ema(values, alpha) {
    if (!alpha) return values;
    var out = new Array(values.length), last = 0, weight = 0;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null) { out[i] = null; continue; }
      last = last * alpha + (1 - alpha) * v;
      weight = weight * alpha + (1 - alpha);
      out[i] = last / weight;
    }
    return out;
  }

  function transform(values, st) {
    var smoothed = ema(values, st.smooth);
    if (!st.log) return smoothed;
    return smoothed.map(function (v) { return v !== null && v > 0 ? Math.log10(v) : null; });
  }

  // a band's lower edge on a log axis: a bound at or below 0 sits on the floor (-Infinity
  // here, the axis floor when drawn), so the band neither dives, nor stops at an edge,
  // nor stretches the axis
  function lowerEdge(values, st) {
    var smoothed = ema(values, st.smooth);
    if (!st.log) return smoothed;
    return smoothed.map(function (v) { return v === null ? null : v > 0 ? Math.log10(v) : -Infinity; });
  }

  // the outlier cap (api/pages/chart_scale.py's outlier_cap; grid.js has the same): every
  // curve weighs the same; values beyond 3 interquartile ranges are hidden when they
  // stretch the axis 3 times or more
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
    var inside = pairs.filter(function (p) { return p[0] >= q1 - 3 * iqr && p[0] <= q3 + 3 * iqr; });
    if (!inside.length || inside.length === pairs.length) return null;
    var lo = inside[0][0], hi = inside[inside.length - 1][0];
    if (pairs[pairs.length - 1][0] - pairs[0][0] < 3 * ((hi - lo) || Math.abs(hi) * 0.05 || 1)) return null;
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

  // the y range: what is in view, or its capped part (and what the cap hid)
  function yRange(xs, arrays, xd, st, capArrays) {
    var cap = st.cap ? outlierCap((capArrays || arrays).map(function (arr) {
      return arr.filter(function (v, i) { return v !== null && xs[i] >= xd[0] && xs[i] <= xd[1]; });
    })) : null;
    if (!cap) return { yd: extentIn(xs, arrays, xd), cap: null };
    return { yd: extent([[cap.lo, cap.hi]]), cap: cap };
  }

  function ticks(lo, hi, count) {
    if (!isFinite(lo) || !isFinite(hi) || hi <= lo) return [lo];
    var raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9 && out.length < 30; v += step) out.push(v);
    return out;
  }

  // ticks of a log10 axis: 1-2-5 x 10^k inside [lo, hi] (log10 values), as positions
  // and labels; within one decade, round numbers of the values themselves
  function logTicks(lo, hi) {
    var out = [];
    for (var k = Math.floor(lo); k <= Math.ceil(hi); k++) {
      [1, 2, 5].forEach(function (m) {
        var v = Number((m * Math.pow(10, k)).toPrecision(6)), at = Math.log10(v);
        if (at >= lo - 1e-9 && at <= hi + 1e-9) out.push({ at: at, label: tickFmt(v), m: m });
      });
    }
    if (out.length > 10) out = out.filter(function (t) { return t.m === 1; });
    if (out.length >= 3) return out;
    return ticks(Math.pow(10, lo), Math.pow(10, hi), 5).filter(function (v) { return v > 0; })
      .map(function (v) { return { at: Math.log10(v), label: tickFmt(v) }; });
  }

  // a tick label: round numbers, exponents without trailing zeros (1e-4, 2.5e-7)
  function tickFmt(v) {
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return Number(v.toPrecision(4)).toExponential().replace("e+", "e");
    var r = Number(v.toPrecision(6));
    return a >= 1000 && r === Math.round(r) ? r.toLocaleString("en-US") : String(r);
  }

  function fmt(v) {
    if (v === null || v === undefined) return "—";
    var a = Math.abs(v);
    return a !== 0 && (a >= 1e6 || a < 1e-3) ? v.toExponential(4) : String(Number(v.toPrecision(6)));
  }

  function extent(arrays) {
    var lo = Infinity, hi = -Infinity;
    arrays.forEach(function (arr) {
      arr.forEach(function (v) { if (v !== null) { if (v < lo) lo = v; if (v > hi) hi = v; } });
    });
    if (lo === Infinity) return [0, 1];
    if (lo === hi) { var pad = Math.abs(lo) * 0.05 || 1; return [lo - pad, hi + pad]; }
    var span = hi - lo;
    return [lo - span * 0.05, hi + span * 0.05];
  }

  // a curve through the values it has: buckets without a value are bridged, so a metric
  // logged every N steps is a line through its points, not one gap per bucket
  function linePath(xs, ys, sx, sy) {
    var d = "", open = false;
    for (var i = 0; i < xs.length; i++) {
      if (ys[i] === null) continue;
      d += (open ? "L" : "M") + sx(xs[i]).toFixed(1) + "," + sy(ys[i]).toFixed(1);
      open = true;
    }
    return d;
  }

  function present(ys) {
    var n = 0;
    for (var i = 0; i < ys.length; i++) if (ys[i] !== null) n++;
    return n;
  }

  function bandPath(xs, lo, hi, sx, sy) {
    var run = [];
    for (var i = 0; i < xs.length; i++) if (lo[i] !== null && hi[i] !== null) run.push(i);
    if (!run.length) return "";
    var d = "M" + run.map(function (i) { return sx(xs[i]).toFixed(1) + "," + sy(lo[i]).toFixed(1); }).join("L");
    return d + "L" + run.slice().reverse().map(function (i) { return sx(xs[i]).toFixed(1) + "," + sy(hi[i]).toFixed(1); }).join("L") + "Z";
  }

  function frame(svg, xd, yd, xLabel, yLabel, st) {
    var sx = function (x) { return L + (x - xd[0]) * (W - L - R) / ((xd[1] - xd[0]) || 1); };
    var sy = function (y) { return H - B - (y - yd[0]) * (H - T - B) / ((yd[1] - yd[0]) || 1); };
    var yt = st.log ? logTicks(yd[0], yd[1]) : ticks(yd[0], yd[1], H < 300 ? 4 : 5).map(function (v) { return { at: v, label: tickFmt(v) }; });
    yt.forEach(function (t) {
      el("line", { class: "grid", x1: L, x2: W - R, y1: sy(t.at), y2: sy(t.at) }, svg);
      el("text", { x: L - 6, y: sy(t.at) + 4, "text-anchor": "end" }, svg).textContent = t.label;
    });
    ticks(xd[0], xd[1], W < 500 ? 4 : 6).forEach(function (v) {
      el("line", { class: "tickmark", x1: sx(v), x2: sx(v), y1: H - B, y2: H - B + 4 }, svg);
      el("text", { x: sx(v), y: H - B + 16, "text-anchor": "middle" }, svg).textContent = tickFmt(v);
    });
    el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }, svg);
    el("text", { class: "label", x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, svg).textContent = xLabel;
    el("text", { class: "label", x: 4, y: 12 }, svg).textContent = yLabel + (st.log ? " (log)" : "");
    var clip = "clip-" + Math.random().toString(36).slice(2);
    el("rect", { x: L, y: T - 6, width: W - L - R, height: H - T - B + 12 }, el("clipPath", { id: clip }, el("defs", {}, svg)));
    var plot = el("g", { "clip-path": "url(#" + clip + ")" }, svg);
    return { sx: sx, sy: sy, plot: plot };
  }

  // the extent of the values whose x lies in [xd0, xd1] (what is in view)
  function extentIn(xs, arrays, xd) {
    return extent(arrays.map(function (arr) {
      return arr.map(function (v, i) { return xs[i] >= xd[0] && xs[i] <= xd[1] ? v : null; });
    }));
  }

  function draw(figure, panel, answer, slug, st) {
    size(figure);
    var svg = el("svg", { class: "chart explore-svg", viewBox: "0 0 " + W + " " + H, role: "img",
                          "aria-label": panel.metric + " of " + answer.trials.length + " trials" });
    var model = { panel: panel, points: [], W: W, H: H };
    var zoom = figure.__zoom || null;
    if (panel.kind === "trial") {
      var ys = transform(panel.y, { smooth: 0, log: st.log });
      var xd = zoom || extent([panel.x]), range = yRange(panel.x, [ys], xd, st), yd = range.yd;
      var f = frame(svg, xd, yd, "trial seq", panel.metric, st);
      model.cap = range.cap;
      panel.x.forEach(function (x, i) {
        if (ys[i] === null || ys[i] < yd[0] || ys[i] > yd[1]) return;
        var t = answer.trials[i];
        el("circle", { class: "dot " + cssOf(t.group), cx: f.sx(x).toFixed(1), cy: f.sy(ys[i]).toFixed(1), r: 4,
                       "data-exp": t.exp_id }, f.plot);
        model.points.push({ px: f.sx(x), py: f.sy(ys[i]), exp: t.exp_id, value: panel.y[i], x: x, group: t.group });
      });
      model.sx = f.sx; model.xd = xd; model.full = extent([panel.x]);
    } else {
      var grid = panel.grid;
      var raw = { smooth: 0, log: st.log };
      var curves = panel.trials.map(function (t) { return { t: t, y: transform(t.y, st), raw: transform(t.y, raw) }; });
      var groups = panel.groups.map(function (g) {
        return { g: g, mean: transform(g.mean, st), rawMean: transform(g.mean, raw),
                 lo: g.lo ? lowerEdge(g.lo, st) : null, hi: g.hi ? transform(g.hi, st) : null };
      });
      var all = curves.map(function (c) { return c.y; });
      groups.forEach(function (g) { all.push(g.mean); if (g.lo) { all.push(g.hi); if (!st.log) all.push(g.lo); } });
      var full = extent([grid]), xd2 = zoom || full;
      var range2 = yRange(grid, all, xd2, st, curves.length ? curves.map(function (c) { return c.raw; }) : null);
      var f2 = frame(svg, xd2, range2.yd, answer.x === "wall" ? "seconds since the trial's first point" : answer.x, panel.metric, st);
      model.cap = range2.cap;
      var floor = range2.yd[0];
      groups.forEach(function (g) { if (g.lo) g.lo = g.lo.map(function (v) { return v === null ? null : Math.max(v, floor); }); });
      var banded = answer.band !== "none";
      curves.forEach(function (c) {
        var cls = cssOf(c.t.group);
        if (st.smooth && !banded) el("path", { class: "ln trial raw " + cls, d: linePath(grid, c.raw, f2.sx, f2.sy) }, f2.plot);
        el("path", { class: "ln trial " + cls + (banded ? " faint" : ""), d: linePath(grid, c.y, f2.sx, f2.sy),
                     "data-exp": c.t.exp_id }, f2.plot);
        if (!banded && present(c.y) <= SPARSE) marks(f2, grid, c.y, "dot " + cls, { "data-exp": c.t.exp_id }, 2.6);
      });
      groups.forEach(function (g) {
        var cls = cssOf(g.g.index);
        if (g.lo) el("path", { class: "band " + cls, d: bandPath(grid, g.lo, g.hi, f2.sx, f2.sy), "data-group": g.g.key }, f2.plot);
        if (banded && st.smooth) el("path", { class: "ln mean raw " + cls, d: linePath(grid, g.rawMean, f2.sx, f2.sy) }, f2.plot);
        if (banded) {
          el("path", { class: "ln mean " + cls, d: linePath(grid, g.mean, f2.sx, f2.sy), "data-group": g.g.key }, f2.plot);
          if (present(g.mean) <= SPARSE) marks(f2, grid, g.mean, "dot " + cls, { "data-group": g.g.key }, 3.2);
        }
      });
      model.grid = grid; model.curves = curves; model.groups = groups; model.sx = f2.sx; model.sy = f2.sy;
      model.xd = xd2; model.full = full;
    }
    if (model.cap) el("text", { class: "cap-note", x: W - R, y: T - 8, "text-anchor": "end" }, svg).textContent = capNote(model.cap, st.log);
    var rule = el("line", { class: "hover-rule", x1: 0, x2: 0, y1: T, y2: H - B, visibility: "hidden" }, svg);
    var brush = el("rect", { class: "zoom-brush", x: 0, y: T, width: 0, height: H - T - B, visibility: "hidden" }, svg);
    figure.querySelectorAll("svg.explore-svg").forEach(function (old) { old.remove(); });
    var fallback = figure.querySelector(".explore-fallback");
    if (fallback) fallback.hidden = true;
    figure.appendChild(svg);
    figure.classList.toggle("zoomed", !!zoom);
    hover(svg, rule, model, answer, slug);
    zoomable(figure, svg, brush, model);
  }

  // a marker on each value (sparse curves; isolated points would not show as a line)
  function marks(f, xs, ys, cls, attrs, r) {
    for (var i = 0; i < xs.length; i++) {
      if (ys[i] === null) continue;
      var a = { class: cls, cx: f.sx(xs[i]).toFixed(1), cy: f.sy(ys[i]).toFixed(1), r: r };
      for (var k in attrs) a[k] = attrs[k];
      el("circle", a, f.plot);
    }
  }

  // -- zoom and pan: the x range in view lives on the figure; y fits what is in view -------

  function setZoom(figure, range) {
    var model = figure.__model;
    if (range) {
      var full = model.full, span = range[1] - range[0], fullSpan = full[1] - full[0];
      if (!(span > 0)) return;
      if (span >= fullSpan) range = null;
      else {
        if (range[0] < full[0]) range = [full[0], full[0] + span];
        if (range[1] > full[1]) range = [full[1] - span, full[1]];
      }
    }
    figure.__zoom = range;
    redraw(figure);
  }

  function zoomBy(figure, factor, centre) {
    var xd = figure.__model.xd, c = centre === undefined ? (xd[0] + xd[1]) / 2 : centre;
    setZoom(figure, [c - (c - xd[0]) * factor, c + (xd[1] - c) * factor]);
  }

  function panBy(figure, fraction) {
    var xd = figure.__model.xd, shift = (xd[1] - xd[0]) * fraction;
    setZoom(figure, [xd[0] + shift, xd[1] + shift]);
  }

  function toolbar(figure) {
    if (figure.querySelector(".zoom-bar")) return;
    var bar = document.createElement("div");
    bar.className = "zoom-bar";
    [["−", "zoom out", function () { zoomBy(figure, 2); }], ["+", "zoom in", function () { zoomBy(figure, 0.5); }],
     ["←", "pan left", function () { panBy(figure, -0.25); }], ["→", "pan right", function () { panBy(figure, 0.25); }],
     ["reset", "show everything (or double-click the chart)", function () { setZoom(figure, null); }]].forEach(function (b) {
      var button = document.createElement("button");
      button.type = "button"; button.className = "button"; button.textContent = b[0]; button.title = b[1];
      button.setAttribute("aria-label", b[1]);
      button.addEventListener("click", b[2]);
      bar.appendChild(button);
    });
    var hint = document.createElement("span");
    hint.className = "muted"; hint.textContent = "drag across the chart to zoom";
    bar.appendChild(hint);
    figure.insertBefore(bar, figure.firstChild);
  }

  function zoomable(figure, svg, brush, model) {
    figure.__model = model;
    toolbar(figure);
    var start = null;
    function unitX(event) {
      var box = svg.getBoundingClientRect();
      return Math.max(L, Math.min(model.W - R, (event.clientX - box.left) * model.W / box.width));
    }
    function value(px) { return model.xd[0] + (px - L) * (model.xd[1] - model.xd[0]) / (model.W - L - R); }
    svg.addEventListener("mousedown", function (event) {
      if (event.button !== 0 || event.shiftKey) return;
      start = unitX(event);
      event.preventDefault();
    });
    svg.addEventListener("mousemove", function (event) {
      if (start === null) return;
      var x = unitX(event);
      brush.setAttribute("x", Math.min(start, x)); brush.setAttribute("width", Math.abs(x - start));
      brush.setAttribute("visibility", "visible");
    });
    window.addEventListener("mouseup", function (event) {
      if (start === null) return;
      var x = unitX(event), from = start;
      start = null;
      brush.setAttribute("visibility", "hidden");
      if (Math.abs(x - from) < 8) return;
      svg.__dragged = true;
      setZoom(figure, [value(Math.min(from, x)), value(Math.max(from, x))]);
    });
    svg.addEventListener("dblclick", function (event) {
      event.preventDefault();
      clearTimeout(svg.__pending);
      setZoom(figure, null);
    });
    svg.addEventListener("wheel", function (event) {
      if (!event.ctrlKey && !event.metaKey) return;  // a plain wheel scrolls the page; ctrl+wheel and pinch zoom
      event.preventDefault();
      zoomBy(figure, event.deltaY > 0 ? 1.25 : 0.8, value(unitX(event)));
    }, { passive: false });
  }

  function redraw(figure) {
    if (!data) return;
    draw(figure, data.answer.panels[Number(figure.getAttribute("data-panel"))], data.answer, data.slug, state());
  }

  function nearest(svg, event, model) {
    var box = svg.getBoundingClientRect();
    var px = (event.clientX - box.left) * model.W / box.width, py = (event.clientY - box.top) * model.H / box.height;
    if (model.panel.kind === "trial") {
      var best = null, dist = Infinity;
      model.points.forEach(function (p) {
        var d = Math.hypot(p.px - px, p.py - py);
        if (d < dist) { dist = d; best = p; }
      });
      return best ? { px: best.px, lines: ["exp_" + best.exp + ": " + fmt(best.value), "seq " + best.x], exp: best.exp } : null;
    }
    // each curve snaps to its own logged point nearest the pointer (a sparse series has a
    // value in few buckets); the trial named is the curve whose snapped point is closest
    var grid = model.grid;
    function snap(ys) {
      var best = -1, gap = Infinity;
      for (var i = 0; i < grid.length; i++) {
        if (ys[i] === null) continue;
        var d = Math.abs(model.sx(grid[i]) - px);
        if (d < gap) { gap = d; best = i; }
      }
      return best;
    }
    var exp = null, close = Infinity, value = null, at = -1, shown = st0();
    model.curves.forEach(function (c) {
      var i = snap(c.raw);
      if (i < 0) return;
      var d = Math.hypot(model.sx(grid[i]) - px, model.sy(c.y[i] === null ? c.raw[i] : c.y[i]) - py);
      if (d < close) { close = d; exp = c.t.exp_id; value = c.t.y[i]; at = i; }
    });
    var lines = [];
    if (exp !== null) lines.push("exp_" + exp + ": " + fmt(value) + " at " + fmt(grid[at]));
    model.groups.forEach(function (g) {
      var i = snap(g.rawMean);
      if (i < 0) return;
      // the mean as drawn (smoothed, back from log10), and the raw mean beside it when smoothed
      var drawnMean = g.mean[i] === null ? g.g.mean[i] : shown.log ? Math.pow(10, g.mean[i]) : g.mean[i];
      var text = g.g.key + ": mean " + fmt(drawnMean) + " (n=" + g.g.n[i] + ") at " + fmt(grid[i]);
      if (shown.smooth) text += " raw " + fmt(g.g.mean[i]);
      if (g.g.lo && g.g.lo[i] !== null) text += " [" + fmt(g.g.lo[i]) + ", " + fmt(g.g.hi[i]) + "]";
      lines.push(text);
      if (at < 0) at = i;
    });
    if (at < 0) return null;
    lines.unshift(model.panel.metric + (shown.smooth ? " (raw values)" : ""));
    return { px: model.sx(grid[at]), lines: lines, exp: exp, index: at };
  }

  function st0() { return state(); }

  function hover(svg, rule, model, answer, slug) {
    var tip = document.getElementById("explore-tip");
    svg.addEventListener("mousemove", function (event) {
      var found = nearest(svg, event, model);
      if (!found) return;
      rule.setAttribute("x1", found.px); rule.setAttribute("x2", found.px); rule.setAttribute("visibility", "visible");
      tip.hidden = false;
      tip.replaceChildren.apply(tip, found.lines.map(function (line) {
        var div = document.createElement("div"); div.textContent = line; return div;
      }));
      tip.setAttribute("data-index", found.index === undefined ? "" : String(found.index));
      tip.setAttribute("data-exp", found.exp || "");
      tip.style.left = Math.min(window.innerWidth - 320, event.pageX + 14) + "px";
      tip.style.top = event.pageY + 14 + "px";
      svg.querySelectorAll(".hot").forEach(function (p) { p.classList.remove("hot"); });
      if (found.exp !== null) svg.querySelectorAll('[data-exp="' + CSS.escape(found.exp) + '"]').forEach(function (p) { p.classList.add("hot"); });
    });
    svg.addEventListener("mouseleave", function () {
      rule.setAttribute("visibility", "hidden");
      tip.hidden = true;
    });
    svg.addEventListener("click", function (event) {
      if (svg.__dragged) { svg.__dragged = false; return; }
      var found = nearest(svg, event, model);
      if (!found || found.exp === null) return;
      if (event.shiftKey) {
        var box = document.querySelector('.explore-trials input[name=exp][value="' + CSS.escape(found.exp) + '"]');
        if (box) { box.checked = !box.checked; box.dispatchEvent(new Event("change", { bubbles: true })); }
        return;
      }
      var href = "/projects/" + encodeURIComponent(slug) + "/trials/" + encodeURIComponent(found.exp);
      clearTimeout(svg.__pending);  // a second click is a double-click: reset the zoom instead
      if (event.detail > 1) return;
      svg.__pending = setTimeout(function () { location.href = href; }, 300);
    });
  }

  function render() {
    var node = document.getElementById("explore-data");
    if (!node) return;
    data = data || JSON.parse(node.textContent);
    css = data.css || [];
    var st = state();
    document.querySelectorAll("figure.explore-plot").forEach(function (figure) {
      draw(figure, data.answer.panels[Number(figure.getAttribute("data-panel"))], data.answer, data.slug, st);
    });
    var slider = document.getElementById("smooth"), log = document.getElementById("log");
    if (slider) { slider.value = String(st.smooth); document.getElementById("smooth-out").textContent = st.smooth.toFixed(2); }
    if (log) log.checked = st.log;
    var cap = document.getElementById("cap");
    if (cap) cap.checked = !st.cap;
  }

  function setClientParam(name, value, push) {
    var params = new URLSearchParams(location.search);
    if (value === null) params.delete(name); else params.set(name, value);
    var url = location.pathname + "?" + params.toString();
    if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
    render();
  }

  function setup() {
    var form = document.getElementById("explore-form");
    if (!form) return;
    var slider = document.getElementById("smooth"), log = document.getElementById("log");
    var pushed = false;
    slider.addEventListener("input", function () {
      // the first move of a drag adds a history entry, the rest of the drag updates it
      setClientParam("smooth", slider.value === "0" ? null : slider.value, !pushed);
      pushed = true;
    });
    slider.addEventListener("change", function () { pushed = false; });
    log.addEventListener("change", function () { setClientParam("log", log.checked ? "1" : null, true); });
    var cap = document.getElementById("cap");
    if (cap) cap.addEventListener("change", function () { setClientParam("cap", cap.checked ? "0" : null, true); });
    form.addEventListener("change", function (event) {
      // a drop-down choice redraws at once; text, several metrics or a selection mode
      // wait for "Show" (a subtree needs its root typed first)
      if (event.target.tagName !== "SELECT" || event.target.multiple) return;
      if (event.target.name === "select" && event.target.value === "subtree" && !form.elements.root.value) {
        document.getElementById("explore-more").open = true;  // a subtree needs its root first
        form.elements.root.focus();
        return;
      }
      form.requestSubmit();
    });
    form.addEventListener("submit", function () {
      // keep the URL short: leave out empty fields and the defaults
      form.querySelectorAll("input, select").forEach(function (input) {
        if (input.name && !input.multiple && input.type !== "checkbox" && input.type !== "radio" && input.value === "") input.disabled = true;
      });
      if (slider.value === "0") slider.disabled = true;
    });
    var picker = document.getElementById("metric-picker");
    if (picker) {
      picker.addEventListener("change", function () {
        var chosen = Array.prototype.map.call(picker.querySelectorAll("input:checked"), function (i) { return i.value; });
        var strong = picker.querySelector("summary strong");
        if (strong) strong.textContent = chosen.join(", ") || "(none)";
      });
      document.addEventListener("click", function (event) { if (!picker.contains(event.target)) picker.open = false; });
    }
    // redrawn when the window gets narrower or wider (the charts follow its width); a
    // change of height alone (a full-page screenshot, a phone's toolbar) leaves them be
    var resized = null, drawnWidth = window.innerWidth;
    window.addEventListener("resize", function () {
      if (window.innerWidth === drawnWidth) return;
      clearTimeout(resized);
      resized = setTimeout(function () {
        drawnWidth = window.innerWidth;
        document.querySelectorAll("figure.explore-plot").forEach(redraw);
      }, 150);
    });
    window.addEventListener("popstate", render);
    window.addEventListener("pageshow", function () {
      form.querySelectorAll("[disabled]").forEach(function (input) { input.disabled = false; });
    });
    render();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
