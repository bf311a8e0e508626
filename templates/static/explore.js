// The metric explorer (/projects/{p}/explore): redraws the server's answer, embedded in
// the page as JSON, into interactive SVG. What only the browser does lives here: EMA
// smoothing (the slider), log scale, hover (trial and value at the nearest bucket), click
// to the trial page, shift-click to tick a curve for "compare". smooth and log are kept
// in the URL (history entries), every other choice is a GET of the form, so a URL always
// reproduces the view and the back button walks through it.
"use strict";

(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var W = 900, H = 350, L = 64, R = 16, T = 24, B = 40;

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
    return { smooth: smooth, log: params.get("log") === "1" };
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

  function ticks(lo, hi, count) {
    if (!isFinite(lo) || !isFinite(hi) || hi <= lo) return [lo];
    var raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9 && out.length < 30; v += step) out.push(v);
    return out;
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

  function linePath(xs, ys, sx, sy) {
    var d = "", open = false;
    for (var i = 0; i < xs.length; i++) {
      if (ys[i] === null) { open = false; continue; }
      d += (open ? "L" : "M") + sx(xs[i]).toFixed(1) + "," + sy(ys[i]).toFixed(1);
      open = true;
    }
    return d;
  }

  function bandPath(xs, lo, hi, sx, sy) {
    var d = "", run = [];
    function flush() {
      if (run.length) {
        d += "M" + run.map(function (i) { return sx(xs[i]).toFixed(1) + "," + sy(lo[i]).toFixed(1); }).join("L");
        d += "L" + run.slice().reverse().map(function (i) { return sx(xs[i]).toFixed(1) + "," + sy(hi[i]).toFixed(1); }).join("L") + "Z";
      }
      run = [];
    }
    for (var i = 0; i < xs.length; i++) {
      if (lo[i] === null || hi[i] === null) flush(); else run.push(i);
    }
    flush();
    return d;
  }

  function frame(svg, xd, yd, xLabel, yLabel, st) {
    var sx = function (x) { return L + (x - xd[0]) * (W - L - R) / ((xd[1] - xd[0]) || 1); };
    var sy = function (y) { return H - B - (y - yd[0]) * (H - T - B) / ((yd[1] - yd[0]) || 1); };
    ticks(yd[0], yd[1], 5).forEach(function (v) {
      el("line", { class: "grid", x1: L, x2: W - R, y1: sy(v), y2: sy(v) }, svg);
      el("text", { x: L - 6, y: sy(v) + 4, "text-anchor": "end" }, svg).textContent = st.log ? fmt(Math.pow(10, v)) : fmt(v);
    });
    ticks(xd[0], xd[1], 6).forEach(function (v) {
      el("line", { class: "tickmark", x1: sx(v), x2: sx(v), y1: H - B, y2: H - B + 4 }, svg);
      el("text", { x: sx(v), y: H - B + 16, "text-anchor": "middle" }, svg).textContent = fmt(v);
    });
    el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }, svg);
    el("text", { class: "label", x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, svg).textContent = xLabel;
    el("text", { class: "label", x: 4, y: 12 }, svg).textContent = yLabel + (st.log ? " (log)" : "");
    return { sx: sx, sy: sy };
  }

  function draw(figure, panel, answer, slug, st) {
    var svg = el("svg", { class: "chart explore-svg", viewBox: "0 0 " + W + " " + H, role: "img",
                          "aria-label": panel.metric + " of " + answer.trials.length + " trials" });
    var model = { panel: panel, points: [] };
    if (panel.kind === "trial") {
      var ys = transform(panel.y, { smooth: 0, log: st.log });
      var xd = extent([panel.x]), yd = extent([ys]);
      var f = frame(svg, xd, yd, "trial seq", panel.metric, st);
      panel.x.forEach(function (x, i) {
        if (ys[i] === null) return;
        var t = answer.trials[i];
        el("circle", { class: "dot s" + (t.group % 8), cx: f.sx(x).toFixed(1), cy: f.sy(ys[i]).toFixed(1), r: 4,
                       "data-exp": t.exp_id }, svg);
        model.points.push({ px: f.sx(x), py: f.sy(ys[i]), exp: t.exp_id, value: panel.y[i], x: x, group: t.group });
      });
    } else {
      var grid = panel.grid;
      var curves = panel.trials.map(function (t) { return { t: t, y: transform(t.y, st) }; });
      var groups = panel.groups.map(function (g) {
        return { g: g, mean: transform(g.mean, st), lo: g.lo ? transform(g.lo, st) : null, hi: g.hi ? transform(g.hi, st) : null };
      });
      var all = curves.map(function (c) { return c.y; });
      groups.forEach(function (g) { if (g.lo) { all.push(g.lo); all.push(g.hi); } });
      var f2 = frame(svg, extent([grid]), extent(all), answer.x === "wall" ? "seconds since the trial's first point" : answer.x, panel.metric, st);
      var banded = answer.band !== "none";
      curves.forEach(function (c) {
        el("path", { class: "ln trial s" + (c.t.group % 8) + (banded ? " faint" : ""), d: linePath(grid, c.y, f2.sx, f2.sy),
                     "data-exp": c.t.exp_id }, svg);
      });
      groups.forEach(function (g) {
        var css = "s" + (g.g.index % 8);
        if (g.lo) el("path", { class: "band " + css, d: bandPath(grid, g.lo, g.hi, f2.sx, f2.sy), "data-group": g.g.key }, svg);
        if (banded) el("path", { class: "ln mean " + css, d: linePath(grid, g.mean, f2.sx, f2.sy), "data-group": g.g.key }, svg);
      });
      model.grid = grid; model.curves = curves; model.groups = groups; model.sx = f2.sx; model.sy = f2.sy;
    }
    var rule = el("line", { class: "hover-rule", x1: 0, x2: 0, y1: T, y2: H - B, visibility: "hidden" }, svg);
    figure.querySelectorAll("svg.explore-svg").forEach(function (old) { old.remove(); });
    var fallback = figure.querySelector(".explore-fallback");
    if (fallback) fallback.hidden = true;
    figure.appendChild(svg);
    hover(svg, rule, model, answer, slug);
  }

  function nearest(svg, event, model) {
    var box = svg.getBoundingClientRect();
    var px = (event.clientX - box.left) * W / box.width, py = (event.clientY - box.top) * H / box.height;
    if (model.panel.kind === "trial") {
      var best = null, dist = Infinity;
      model.points.forEach(function (p) {
        var d = Math.hypot(p.px - px, p.py - py);
        if (d < dist) { dist = d; best = p; }
      });
      return best ? { px: best.px, lines: ["exp_" + best.exp + ": " + fmt(best.value), "seq " + best.x], exp: best.exp } : null;
    }
    var grid = model.grid, index = -1, gap = Infinity;
    for (var i = 0; i < grid.length; i++) {
      var d = Math.abs(model.sx(grid[i]) - px);
      if (d < gap) { gap = d; index = i; }
    }
    if (index < 0) return null;
    var exp = null, close = Infinity, value = null;
    model.curves.forEach(function (c) {
      var v = c.y[index];
      if (v === null) return;
      var d = Math.abs(model.sy(v) - py);
      if (d < close) { close = d; exp = c.t.exp_id; value = v; }
    });
    var lines = [model.panel.metric + " at " + (grid[index] === null ? "—" : fmt(grid[index]))];
    if (exp !== null) lines.push("exp_" + exp + ": " + fmt(value));
    model.groups.forEach(function (g) {
      var m = g.mean[index];
      if (m === null) return;
      var text = g.g.key + ": mean " + fmt(m) + " (n=" + g.g.n[index] + ")";
      if (g.lo && g.lo[index] !== null) text += " [" + fmt(g.lo[index]) + ", " + fmt(g.hi[index]) + "]";
      lines.push(text);
    });
    return { px: model.sx(grid[index]), lines: lines, exp: exp, index: index };
  }

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
      var found = nearest(svg, event, model);
      if (!found || found.exp === null) return;
      if (event.shiftKey) {
        var box = document.querySelector('.explore-trials input[name=exp][value="' + CSS.escape(found.exp) + '"]');
        if (box) { box.checked = !box.checked; box.dispatchEvent(new Event("change", { bubbles: true })); }
        return;
      }
      location.href = "/projects/" + encodeURIComponent(slug) + "/trials/" + encodeURIComponent(found.exp);
    });
  }

  function render() {
    var node = document.getElementById("explore-data");
    if (!node) return;
    var data = JSON.parse(node.textContent), st = state();
    document.querySelectorAll("figure.explore-plot").forEach(function (figure) {
      draw(figure, data.answer.panels[Number(figure.getAttribute("data-panel"))], data.answer, data.slug, st);
    });
    var slider = document.getElementById("smooth"), log = document.getElementById("log");
    if (slider) { slider.value = String(st.smooth); document.getElementById("smooth-out").textContent = st.smooth.toFixed(2); }
    if (log) log.checked = st.log;
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
    form.addEventListener("change", function (event) {
      // a drop-down choice redraws at once; text, several metrics or a selection mode
      // wait for "Show" (a subtree needs its root typed first)
      if (event.target.tagName === "SELECT" && !event.target.multiple) form.requestSubmit();
    });
    form.addEventListener("submit", function () {
      // keep the URL short: leave out empty fields and the defaults
      form.querySelectorAll("input, select").forEach(function (input) {
        if (input.name && !input.multiple && input.type !== "checkbox" && input.type !== "radio" && input.value === "") input.disabled = true;
      });
      if (slider.value === "0") slider.disabled = true;
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
