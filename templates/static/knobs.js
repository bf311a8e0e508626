// The knob view without a submit button: a changed knob, scale or axis list applies at
// once; hovering a trial in one figure lights it in the other; dragging along an axis of
// the parallel coordinates brushes a range (the trials outside dim), written to the URL
// as brush=KEY:LO:HI, the same the server draws without script. The page works without it.
"use strict";

(function () {
  function setupForm() {
    var form = document.querySelector("form.knob-form");
    if (!form) return;
    form.addEventListener("change", function (event) {
      if (["x", "log", "ylog", "cap"].indexOf(event.target.name) >= 0) form.requestSubmit();
    });
  }

  function setupHover() {
    var lit = [];
    function clear() {
      lit.forEach(function (el) { el.classList.remove("lit"); });
      lit = [];
    }
    var status = document.getElementById("brush-status");
    document.querySelectorAll("figure.knob-plot svg").forEach(function (svg) {
      svg.addEventListener("mouseover", function (event) {
        var mark = event.target.closest("[data-exp]");
        clear();
        if (!mark) return;
        var exp = mark.getAttribute("data-exp");
        document.querySelectorAll("figure.knob-plot [data-exp]").forEach(function (a) {
          if (a.getAttribute("data-exp") === exp) { a.classList.add("lit"); lit.push(a); }
        });
        if (mark.tagName.toLowerCase() === "path" && status && !status.dataset.brushed) status.textContent = "exp_" + exp;
      });
      svg.addEventListener("mouseleave", function () {
        clear();
        if (status && !status.dataset.brushed) status.textContent = "";
      });
      // a parallel line opens its trial (the scatter's marks are links already)
      var base = svg.getAttribute("data-trials");
      if (base) {
        svg.addEventListener("click", function (event) {
          var line = event.target.closest("path[data-exp]");
          if (line) location.href = base + "/" + encodeURIComponent(line.getAttribute("data-exp"));
        });
      }
    });
  }

  var SVGNS = "http://www.w3.org/2000/svg";

  function round(v) { return Number(v.toPrecision(6)); }

  // pixel <-> value along one axis (the server's linear scale, or category bands)
  function scaleOf(g) {
    var y0 = +g.getAttribute("data-y0"), y1 = +g.getAttribute("data-y1");
    if (g.getAttribute("data-kind") === "category") {
      var n = +g.getAttribute("data-n") || 1, band = (y1 - y0) / n;
      return { value: function (py) { return (py - y0) / band - 0.5; }, pixel: function (v) { return y0 + band * (v + 0.5); } };
    }
    var lo = +g.getAttribute("data-lo"), hi = +g.getAttribute("data-hi"), span = (hi - lo) || 1;
    return { value: function (py) { return lo + (py - y0) * span / (y1 - y0); }, pixel: function (v) { return y0 + (v - lo) * (y1 - y0) / span; } };
  }

  function setupBrush() {
    var svg = document.querySelector('figure[data-plot="knob-parallel"] svg');
    if (!svg) return;
    var axes = Array.prototype.slice.call(svg.querySelectorAll("g.pc-axis"));
    var lines = Array.prototype.slice.call(svg.querySelectorAll("path.pc"));
    var values = lines.map(function (path) {
      return (path.getAttribute("data-v") || "").split(";").map(function (t) { return t === "" ? null : +t; });
    });
    var status = document.getElementById("brush-status");
    var brushes = {};  // axis index -> [lo, hi]
    var rects = {};
    var params = new URLSearchParams(location.search);
    params.getAll("brush").forEach(function (raw) {
      var parts = raw.split(":"), hi = +parts.pop(), lo = +parts.pop(), key = parts.join(":");
      axes.forEach(function (g, i) { if (g.getAttribute("data-key") === key) brushes[i] = [lo, hi]; });
    });
    svg.querySelectorAll("rect.pc-brush").forEach(function (r) { r.remove(); });

    function point(event) {
      var m = svg.getScreenCTM();
      if (!m) return null;
      var p = svg.createSVGPoint();
      p.x = event.clientX; p.y = event.clientY;
      return p.matrixTransform(m.inverse());
    }

    function draw(i) {
      if (rects[i]) { rects[i].remove(); delete rects[i]; }
      if (!brushes[i]) return;
      var g = axes[i], hit = g.querySelector("rect.pc-hit"), s = scaleOf(g);
      var ya = s.pixel(brushes[i][0]), yb = s.pixel(brushes[i][1]);
      var r = document.createElementNS(SVGNS, "rect");
      r.setAttribute("class", "pc-brush");
      r.setAttribute("x", +hit.getAttribute("x") + 5);
      r.setAttribute("width", 18);
      r.setAttribute("y", Math.min(ya, yb));
      r.setAttribute("height", Math.max(2, Math.abs(yb - ya)));
      g.appendChild(r);
      rects[i] = r;
    }

    function apply() {
      var keys = Object.keys(brushes), inside = 0;
      lines.forEach(function (path, j) {
        var ok = keys.every(function (i) {
          var v = values[j][i];
          return v !== null && v !== undefined && v >= brushes[i][0] && v <= brushes[i][1];
        });
        path.classList.toggle("pc-dim", keys.length > 0 && !ok);
        if (ok) inside += 1;
      });
      var url = new URL(location.href);
      url.searchParams.delete("brush");
      keys.forEach(function (i) {
        url.searchParams.append("brush", axes[i].getAttribute("data-key") + ":" + round(brushes[i][0]) + ":" + round(brushes[i][1]));
      });
      history.replaceState(null, "", url);
      if (status) {
        if (keys.length) status.dataset.brushed = "1"; else delete status.dataset.brushed;
        status.textContent = keys.length
          ? inside.toLocaleString() + " of " + lines.length.toLocaleString() + " trials in the brush (" +
            keys.map(function (i) { return axes[i].getAttribute("data-key") + " " + round(brushes[i][0]) + "–" + round(brushes[i][1]); }).join(", ") + ")"
          : "";
      }
    }

    axes.forEach(function (g, i) {
      var hit = g.querySelector("rect.pc-hit");
      var start = null;
      hit.addEventListener("pointerdown", function (event) {
        var p = point(event);
        if (!p) return;
        event.preventDefault();
        hit.setPointerCapture(event.pointerId);
        start = p.y;
      });
      hit.addEventListener("pointermove", function (event) {
        if (start === null) return;
        var p = point(event), s = scaleOf(g);
        if (!p || Math.abs(p.y - start) < 3) return;
        var a = s.value(start), b = s.value(p.y);
        brushes[i] = [Math.min(a, b), Math.max(a, b)];
        draw(i);
        apply();
      });
      hit.addEventListener("pointerup", function (event) {
        var p = point(event);
        if (start !== null && p && Math.abs(p.y - start) < 3) { delete brushes[i]; draw(i); apply(); }
        start = null;
      });
    });
    Object.keys(brushes).forEach(draw);
    if (Object.keys(brushes).length) apply();
  }

  function ready() { setupForm(); setupHover(); setupBrush(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
