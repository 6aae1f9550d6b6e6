// vmplane dashboard: progressive enhancement only (every page works without it).
// 1. htmx requests carry the session's CSRF token in a header.
// 2. A running job's page listens to /ui/jobs/ID/events and swaps its live regions in place.
// 3. Wizard errors link to their line:col in the pasted text.
(function () {
  "use strict";

  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) event.detail.headers["X-CSRF-Token"] = meta.content;
  });

  function swap(id, html) {
    var old = document.getElementById(id);
    if (!old) return;
    var open = {};
    old.querySelectorAll("details[data-key]").forEach(function (d) { open[d.dataset.key] = d.open; });
    var tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    var fresh = tpl.content.firstElementChild;
    if (!fresh) return;
    fresh.querySelectorAll("details[data-key]").forEach(function (d) {
      if (open[d.dataset.key]) d.open = true;
    });
    old.replaceWith(fresh);
    if (window.htmx) window.htmx.process(fresh);  // its hx-* links (the drift check) work after the swap
  }

  function listen() {
    var live = document.getElementById("live");
    var url = live && live.dataset.events;
    if (!url || !window.EventSource) return;
    var source = new EventSource(url);
    source.addEventListener("job", function (event) {
      var data = JSON.parse(event.data);
      Object.keys(data.html).forEach(function (id) { swap(id, data.html[id]); });
    });
    source.addEventListener("end", function () {
      source.close();
      live.removeAttribute("data-events");
    });
  }

  // 3. An error's line:col link puts the cursor there in the file's text.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("#errors a[data-line]");
    var area = document.getElementById("spec");
    if (!link || !area) return;
    event.preventDefault();
    var lines = area.value.split("\n"), line = Number(link.dataset.line), offset = 0;
    for (var i = 0; i < line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
    offset += Math.max(0, Number(link.dataset.col) - 1);
    area.focus();
    area.setSelectionRange(offset, offset + 1);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", listen);
  else listen();
})();
