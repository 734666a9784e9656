// gpubroker dashboard: progressive enhancement only. Every page works
// without it; with it, pages refresh themselves. Loaded from /ui/static
// (the CSP allows no inline script).
(function () {
  "use strict";
  var body = document.body;
  var period = parseInt(body.getAttribute("data-refresh") || "0", 10);
  var dirty = false;
  document.addEventListener("input", function () { dirty = true; });
  if (period > 0) {
    var tick = function () {
      var a = document.activeElement;
      var busy = dirty || (a && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName));
      if (!busy && document.visibilityState === "visible") {
        window.location.reload();
        return;
      }
      window.setTimeout(tick, period * 1000);
    };
    window.setTimeout(tick, period * 1000);
  }
})();
