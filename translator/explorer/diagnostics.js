
"use strict";
(function () {
  var log = {errors: [], blocked: [], resources: [], rendered: null, grid: null};
  function write() {
    log.resources = performance.getEntriesByType("resource").map(function (e) {
      return e.name;
    });
    log.fonts = Array.from(document.fonts, function (face) {
      return face.family + ": " + face.status;
    });
    var out = document.getElementById("diagnostics");
    if (out) { out.textContent = JSON.stringify(log); }
  }
  window.onerror = function (message, source, line, column) {
    log.errors.push(String(message) + " (line " + line + ":" + column + ")");
    write();
  };
  window.addEventListener("error", function (event) {  // failed loads of elements
    if (event.target !== window) { log.errors.push("failed to load " + event.target.tagName); }
    write();
  }, true);
  window.addEventListener("unhandledrejection", function (event) {
    log.errors.push("unhandled rejection: " + String(event.reason));
    write();
  });
  document.addEventListener("securitypolicyviolation", function (event) {
    log.blocked.push(event.violatedDirective + " " + event.blockedURI);
    write();
  });
  window.addEventListener("load", write);
  window.explorerReport = function (fields) { Object.assign(log, fields); write(); };
})();
