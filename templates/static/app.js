// Progressive enhancement for the Lineage Ledger pages. Every page works without this
// file; with it: a "copy KNOWLEDGE.md" button, expand/collapse-all on the lineage tree,
// a "compare selected" button that waits for two ticked trials, and a column picker
// that applies on change.
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
    setupColumnPicker();
    setupCopyButtons();
    setupTree();
    setupCompare();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
