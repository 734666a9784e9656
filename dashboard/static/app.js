// gpubroker dashboard: progressive enhancement only. Every page works
// without this file; with it, pages refresh themselves and filter menus
// apply on change. Loaded from /ui/static (the CSP allows no inline script).
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
  var forms = document.querySelectorAll("form.filters");
  Array.prototype.forEach.call(forms, function (f) {
    Array.prototype.forEach.call(f.querySelectorAll("select"), function (s) {
      s.addEventListener("change", function () { f.submit(); });
    });
  });
})();
