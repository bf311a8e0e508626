// Progressive enhancement for the Lineage Ledger pages. Every page works without this
// file; with it: a "copy KNOWLEDGE.md" button, expand/collapse-all on the lineage tree,
// a "compare selected" button that waits for two ticked trials, a column picker that
// applies on change, a tab bar that shows it scrolls (and keeps the current tab in view),
// wide charts that open at their newest end on a narrow screen, and zoom and pan on the x
// axis of the server-drawn telemetry charts (svg[data-zoom=x]): drag a span to zoom into
// it, ctrl+wheel or pinch, the buttons; double-click resets. Without this file the charts
// are the same, unzoomed.
"use strict";

(function () {
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      try {
        document.execCommand("copy") ? resolve() : reject(new Error("copy refused"));
      } catch (err) {
        reject(err);
      } finally {
        document.body.removeChild(area);
      }
    });
  }

  function setupCopyButtons() {
    document.querySelectorAll("[data-copy-url]").forEach(function (button) {
      button.hidden = false;
      var status = button.parentElement.querySelector(".copy-status");
      button.addEventListener("click", function () {
        fetch(button.getAttribute("data-copy-url"), { credentials: "same-origin" })
          .then(function (response) {
            if (!response.ok) throw new Error("HTTP " + response.status);
            return response.text();
          })
          .then(function (text) {
            button.setAttribute("data-copied", String(text.length));
            return copyText(text).then(function () {
              if (status) status.textContent = "Copied " + text.length.toLocaleString() + " characters.";
            });
          })
          .catch(function (err) {
            if (status) status.textContent = "Could not copy (" + err.message + "); open the KNOWLEDGE.md link instead.";
          });
      });
    });
  }

  function setupTree() {
    document.querySelectorAll(".tree-toggles").forEach(function (box) {
      box.hidden = false;
      box.addEventListener("click", function (event) {
        var button = event.target.closest("[data-tree]");
        if (!button) return;
        var open = button.getAttribute("data-tree") === "open";
        document.querySelectorAll("ul.tree details").forEach(function (d) { d.open = open; });
      });
    });
  }

  function setupCompare() {
    document.querySelectorAll("form.compare-form").forEach(function (form) {
      var submit = form.querySelector("button[type=submit]");
      if (!submit) return;
      function update() {
        var n = form.querySelectorAll("input[name=exp]:checked").length;
        submit.disabled = n < 2;
        submit.textContent = n >= 2 ? "Compare " + n + " selected" : "Compare selected (tick two or more)";
      }
      form.addEventListener("change", update);
      update();
    });
  }

  function setupTabs() {
    document.querySelectorAll("nav.tabs").forEach(function (bar) {
      function edges() {
        bar.classList.toggle("more-left", bar.scrollLeft > 2);
        bar.classList.toggle("more-right", bar.scrollLeft + bar.clientWidth < bar.scrollWidth - 2);
      }
      var current = bar.querySelector("[aria-current=page]");
      if (current && bar.scrollWidth > bar.clientWidth) {
        bar.scrollLeft = Math.max(0, current.offsetLeft - (bar.clientWidth - current.offsetWidth) / 2);
      }
      bar.addEventListener("scroll", edges, { passive: true });
      window.addEventListener("resize", edges);
      edges();
    });
  }

  function setupWidePlots() {
    // a chart wider than its box (the metric chart on a phone) starts at its newest trials
    document.querySelectorAll(".wide-plot").forEach(function (box) {
      if (box.scrollWidth > box.clientWidth) box.scrollLeft = box.scrollWidth;
    });
  }

  // -- zoom and pan of server-drawn charts ----------------------------------------------------

  var SVGNS = "http://www.w3.org/2000/svg";

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    var raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; });
    var out = [], first = Math.ceil(lo / step - 1e-9) * step;
    for (var i = 0; out.length < 50; i++) {
      var v = first + step * i;
      if (v > hi + step * 1e-9) break;
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return { ticks: out, step: step };
  }

  function tickLabel(v, step, integer) {
    if (integer && Math.abs(v - Math.round(v)) > 1e-9) return "";
    var decimals = Math.max(0, Math.min(8, -Math.floor(Math.log10(step) + 1e-9)));
    if ((step * Math.pow(10, decimals)) % 1 > 1e-6) decimals += 1;
    if (integer) decimals = 0;
    return v.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  }

  function zoomChart(svg) {
    var area = svg.querySelector("g.plotarea");
    if (!area) return;
    var full = [parseFloat(svg.getAttribute("data-x0")), parseFloat(svg.getAttribute("data-x1"))];
    var px0 = parseFloat(svg.getAttribute("data-px0")), px1 = parseFloat(svg.getAttribute("data-px1"));
    var axisY = parseFloat(svg.getAttribute("data-axis-y")), integer = svg.hasAttribute("data-integer-x");
    if (!(full[1] > full[0])) return;
    var view = full.slice(), width = svg.viewBox.baseVal.width;
    var circles = Array.prototype.slice.call(area.querySelectorAll("circle"));
    var brush = document.createElementNS(SVGNS, "rect");
    brush.setAttribute("class", "zoom-brush");
    brush.setAttribute("y", String(parseFloat(svg.getAttribute("data-axis-y")) - (axisY - 10)));
    brush.setAttribute("height", String(axisY - 10));
    brush.setAttribute("visibility", "hidden");
    svg.appendChild(brush);

    function draw() {
      var k = (full[1] - full[0]) / (view[1] - view[0]);
      var start = px0 + (view[0] - full[0]) * (px1 - px0) / (full[1] - full[0]);
      area.setAttribute("transform", k === 1 ? "" : "translate(" + (px0 - start * k).toFixed(2) + ",0) scale(" + k.toFixed(6) + ",1)");
      circles.forEach(function (c) {  // markers keep their shape: undo the stretch around each centre
        var cx = c.getAttribute("cx");
        c.setAttribute("transform", k === 1 ? "" : "translate(" + cx + ",0) scale(" + (1 / k).toFixed(6) + ",1) translate(" + -cx + ",0)");
      });
      svg.querySelectorAll(".xt").forEach(function (t) { t.remove(); });
      var found = niceTicks(view[0], view[1], 6);
      found.ticks.forEach(function (v) {
        var px = px0 + (v - view[0]) * (px1 - px0) / (view[1] - view[0]), label = tickLabel(v, found.step, integer);
        var mark = document.createElementNS(SVGNS, "line");
        mark.setAttribute("class", "tickmark xt");
        mark.setAttribute("x1", px.toFixed(1)); mark.setAttribute("x2", px.toFixed(1));
        mark.setAttribute("y1", String(axisY)); mark.setAttribute("y2", String(axisY + 4));
        svg.appendChild(mark);
        var text = document.createElementNS(SVGNS, "text");
        text.setAttribute("class", "tick xt"); text.setAttribute("x", px.toFixed(1)); text.setAttribute("y", String(axisY + 16));
        text.setAttribute("text-anchor", "middle"); text.textContent = label;
        svg.appendChild(text);
      });
      svg.classList.toggle("zoomed", k > 1.000001);
    }

    function set(range) {
      var span = range[1] - range[0], fullSpan = full[1] - full[0];
      if (!(span > 0)) return;
      if (span >= fullSpan) range = full.slice();
      else if (range[0] < full[0]) range = [full[0], full[0] + span];
      else if (range[1] > full[1]) range = [full[1] - span, full[1]];
      view = range;
      draw();
    }
    function zoom(factor, centre) {
      var c = centre === undefined ? (view[0] + view[1]) / 2 : centre;
      set([c - (c - view[0]) * factor, c + (view[1] - c) * factor]);
    }
    function pan(fraction) { var shift = (view[1] - view[0]) * fraction; set([view[0] + shift, view[1] + shift]); }
    function unit(event) {
      var box = svg.getBoundingClientRect();
      return Math.max(px0, Math.min(px1, (event.clientX - box.left) * width / box.width));
    }
    function value(px) { return view[0] + (px - px0) * (view[1] - view[0]) / (px1 - px0); }

    var bar = document.createElement("div");
    bar.className = "zoom-bar";
    [["−", "zoom out", function () { zoom(2); }], ["+", "zoom in", function () { zoom(0.5); }],
     ["←", "pan left", function () { pan(-0.25); }], ["→", "pan right", function () { pan(0.25); }],
     ["reset", "show every step (or double-click the chart)", function () { set(full.slice()); }]].forEach(function (b) {
      var button = document.createElement("button");
      button.type = "button"; button.className = "button"; button.textContent = b[0]; button.title = b[1];
      button.setAttribute("aria-label", b[1]);
      button.addEventListener("click", b[2]);
      bar.appendChild(button);
    });
    svg.parentNode.insertBefore(bar, svg);

    var from = null;
    svg.addEventListener("mousedown", function (event) {
      if (event.button !== 0) return;
      from = unit(event);
      event.preventDefault();
    });
    svg.addEventListener("mousemove", function (event) {
      if (from === null) return;
      var x = unit(event);
      brush.setAttribute("x", String(Math.min(from, x))); brush.setAttribute("width", String(Math.abs(x - from)));
      brush.setAttribute("visibility", "visible");
    });
    window.addEventListener("mouseup", function (event) {
      if (from === null) return;
      var x = unit(event), a = from;
      from = null;
      brush.setAttribute("visibility", "hidden");
      if (Math.abs(x - a) >= 6) set([value(Math.min(a, x)), value(Math.max(a, x))]);
    });
    svg.addEventListener("dblclick", function () { set(full.slice()); });
    svg.addEventListener("wheel", function (event) {
      if (!event.ctrlKey && !event.metaKey) return;  // a plain wheel scrolls the page
      event.preventDefault();
      zoom(event.deltaY > 0 ? 1.25 : 0.8, value(unit(event)));
    }, { passive: false });
    svg.classList.add("zoomable");
  }

  function setupZoom() {
    document.querySelectorAll("svg[data-zoom=x]").forEach(zoomChart);
  }

  // The column picker (trials table, compare): a ticked or unticked column applies at once,
  // written as one ?cols=a,b,c (the form alone repeats cols=a&cols=b, which reads the same).
  function setupColumnPicker() {
    document.querySelectorAll("details.col-picker").forEach(function (picker) {
      var form = picker.closest("form");
      if (!form) return;
      picker.addEventListener("change", function (event) {
        if (event.target.name !== "cols") return;
        var url = new URL(form.action, window.location.href);
        var params = new URLSearchParams(new FormData(form));
        var cols = params.getAll("cols");
        params.delete("cols");
        if (cols.length) params.set("cols", cols.join(","));
        params.forEach(function (value, key) { if (value !== "") url.searchParams.append(key, value); });
        window.location.assign(url.pathname + "?" + url.searchParams.toString());
      });
    });
  }

  function ready() {
    setupZoom();
    setupTabs();
    setupWidePlots();
    setupColumnPicker();
    setupCopyButtons();
    setupTree();
    setupCompare();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
