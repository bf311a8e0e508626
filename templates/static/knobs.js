// The knob view without a submit button: a changed knob, scale or axis list applies at
// once; hovering a trial in one figure lights it in the other. The page works without it.
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
    document.querySelectorAll("figure.knob-plot svg").forEach(function (svg) {
      svg.addEventListener("mouseover", function (event) {
        var link = event.target.closest("a[data-exp]");
        clear();
        if (!link) return;
        var exp = link.getAttribute("data-exp");
        document.querySelectorAll("figure.knob-plot a[data-exp]").forEach(function (a) {
          if (a.getAttribute("data-exp") === exp) { a.classList.add("lit"); lit.push(a); }
        });
      });
      svg.addEventListener("mouseleave", clear);
    });
  }

  function ready() { setupForm(); setupHover(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
