// The live wave: poll the legs' files (through /wave/ID/legs.json) and update the table in
// place. Text goes in with textContent only: model text never becomes markup here.
(function () {
  "use strict";
  var box = document.getElementById("wave");
  if (!box || box.dataset.live !== "yes") { return; }
  var url = "/wave/" + encodeURIComponent(box.dataset.wave) + "/legs.json";
  function set(el, text, cls) {
    if (!el) { return; }
    el.textContent = text;
    if (cls) { el.className = "status s-" + cls; }
  }
  function tick() {
    fetch(url, {credentials: "same-origin", cache: "no-store"}).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (doc) {
      if (!doc) { return; }
      set(document.getElementById("wave-status"), doc.status, doc.status);
      set(document.getElementById("wave-cost"), doc.cost);
      set(document.getElementById("wave-tokens"), doc.tokens);
      doc.legs.forEach(function (leg) {
        var row = document.querySelector('tr[data-leg="' + CSS.escape(leg.leg_id) + '"]');
        if (!row) { return; }
        set(row.querySelector('[data-field="status"]'), leg.status, leg.status);
        set(row.querySelector('[data-field="cost"]'), leg.cost);
        set(row.querySelector('[data-field="tokens"]'), leg.tokens);
        set(row.querySelector('[data-field="seconds"]'), leg.seconds);
        set(row.querySelector('[data-field="steps"]'), leg.steps);
        set(row.querySelector('[data-field="reason"]'), leg.reason);
        set(document.querySelector('[data-status-of="' + CSS.escape(leg.leg_id) + '"]'),
            leg.status, leg.status);
        var answer = document.querySelector('pre[data-answer="' + CSS.escape(leg.leg_id) + '"]');
        if (answer && leg.answer) { answer.textContent = leg.answer; }
      });
      if (doc.status === "running") { setTimeout(tick, 1000); }
      else { set(document.getElementById("live"), "finished: reload for the rendered answers"); }
    }).catch(function () { setTimeout(tick, 3000); });
  }
  setTimeout(tick, 1000);
})();
