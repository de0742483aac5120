// The live ask page: poll /ask/ID/events.json and draw every leg as its events come (started,
// progress, streamed text, ended), the stages or rounds, and the cost so far. Model text goes
// in with textContent only: it never becomes markup here.
(function () {
  "use strict";
  var box = document.getElementById("run");
  if (!box) { return; }
  var run = box.dataset.run, url = "/ask/" + encodeURIComponent(run) + "/events.json";
  var after = 0, legs = new Map(), costs = new Map(), streamed = new Set();
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function note(text) { document.getElementById("notes").appendChild(el("li", "", text)); }
  function leg(id, snap) {
    var row = legs.get(id);
    if (!row) {
      row = {box: el("section", "leg")};
      row.box.dataset.leg = id;
      row.title = el("h3", "", id);
      row.status = el("span", "status", "");
      row.meta = el("span", "muted", "");
      row.answer = el("pre", "answer", "");
      row.box.append(row.title, row.status, el("span", "", " "), row.meta, row.answer);
      document.getElementById("legs").appendChild(row.box);
      legs.set(id, row);
    }
    if (snap) {
      row.title.textContent = (snap.model || "") + " · " + id;
      row.status.textContent = snap.status || "";
      row.status.className = "status s-" + (snap.status || "");
      var u = snap.usage || {};
      row.meta.textContent = (u.input_tokens || 0) + " in / " + (u.output_tokens || 0) +
        " out · " + (typeof snap.cost_usd === "number" ? "$" + snap.cost_usd.toFixed(4) : "?");
      if (typeof snap.cost_usd === "number") { costs.set(id, snap.cost_usd); }
    }
    return row;
  }
  function total() {
    var sum = 0;
    costs.forEach(function (c) { sum += c; });
    document.getElementById("run-cost").textContent = "$" + sum.toFixed(4);
  }
  function apply(ev, answers) {
    var t = ev.type;
    if (t === "leg_started" || t === "leg_progress" || t === "leg_ended") {
      var row = leg(ev.leg.leg_id, ev.leg);
      if (t === "leg_ended") {
        var said = answers[ev.leg.leg_id];
        if (said) { row.answer.textContent = said; }
        else if (ev.leg.reason) { row.answer.textContent = ev.leg.reason; }
        row.box.dataset.ended = "yes";
      }
      document.getElementById("run-status").textContent = "running";
    } else if (t === "text") {
      var r = leg(ev.leg_id, null);
      if (!streamed.has(ev.leg_id)) { streamed.add(ev.leg_id); r.answer.textContent = ""; }
      r.answer.textContent += ev.text;
      r.box.dataset.streamed = "yes";
    } else if (t === "stage_started") {
      document.getElementById("stage").textContent = "stage: " + ev.name;
      note("stage " + ev.name + " started (" + (ev.models || []).join(", ") + ")");
    } else if (t === "stage_ended") {
      note("stage " + ev.name + " " + ev.status);
    } else if (t === "round_started") {
      document.getElementById("stage").textContent = "round " + ev.round + " of " + ev.of;
      note("round " + ev.round + " of " + ev.of + ": " + ev.legs + " legs asked");
    } else if (t === "round_ended") {
      note("round " + ev.round + " ended: " + ev.changed + " changed");
    } else if (t === "trial_ended") {
      note("trial " + (ev.row.task || "") + " · " + (ev.row.contestant || "") + ": " +
           (ev.row.status || (ev.row.passed ? "pass" : "fail")));
    } else if (t === "notice") {
      note(ev.text);
    } else if (t === "failed") {
      document.getElementById("run-status").textContent = "failed";
      note(ev.error);
    } else if (t === "ended") {
      document.getElementById("run-status").textContent =
        ev.exit_code === 0 ? "complete" : "ended (exit " + ev.exit_code + ")";
      document.getElementById("record").hidden = false;
      var follow = document.getElementById("follow-form");
      if (follow && ev.exit_code === 0) { follow.hidden = false; }
    }
  }
  function tick() {
    fetch(url + "?after=" + after, {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (doc) {
        if (!doc) { setTimeout(tick, 2000); return; }
        if (typeof doc.record === "string" && /^\/[a-z]/.test(doc.record)) {
          window.location.assign(doc.record);  // orch ui restarted: the run's recorded page
          return;
        }
        doc.events.forEach(function (ev) { apply(ev, doc.answers || {}); });
        total();
        after = doc.next;
        if (!doc.done || doc.events.length) { setTimeout(tick, 300); }
        else { box.dataset.done = "yes"; }
      }).catch(function () { setTimeout(tick, 2000); });
  }
  tick();
})();
