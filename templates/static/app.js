// Progressive enhancement for the Lineage Ledger pages. Every page works without this
// file; with it: a "copy KNOWLEDGE.md" button, expand/collapse-all on the lineage tree,
// a "compare selected" button that waits for two ticked trials, a tab bar that shows it
// scrolls (and keeps the current tab in view), and wide charts that open at their newest
// end on a narrow screen.
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

  function ready() {
    setupTabs();
    setupWidePlots();
    setupCopyButtons();
    setupTree();
    setupCompare();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
