// signoff web inbox: live updates (SSE), countdowns, relative times, keyboard shortcuts.
// Everything works without this file; it only makes the pages update themselves.
(function () {
  "use strict";

  function ago(iso) {
    var s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return Math.floor(s / 86400) + " d ago";
  }

  function left(iso) {
    var s = Math.round((Date.parse(iso) - Date.now()) / 1000);
    if (s <= 0) return { text: "deadline passed", soon: true };
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    var text = h > 0 ? h + "h " + m + "m left" : m + ":" + (sec < 10 ? "0" : "") + sec + " left";
    return { text: text, soon: s < 300 };
  }

  function tick() {
    document.querySelectorAll(".ago[data-at]").forEach(function (el) {
      if (el.dataset.at) el.textContent = ago(el.dataset.at);
    });
    document.querySelectorAll(".countdown[data-deadline]").forEach(function (el) {
      var l = left(el.dataset.deadline);
      el.textContent = l.text;
      el.classList.toggle("soon", l.soon);
    });
  }

  function refresh(container) {
    if (!container) return;
    if (container.dataset.loading) { container.dataset.again = "1"; return; }
    container.dataset.loading = "1";
    fetch(container.dataset.partial, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        if (r.redirected || r.status === 401) { location.reload(); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html === null || html === undefined || container.innerHTML === html) return;
        // A request page is replaced only when the request changed (its version), so an
        // inline error or a half-typed reason is not wiped by an unrelated refresh.
        var current = container.querySelector("[data-version]");
        var fresh = /data-version="(\d+)"/.exec(html);
        if (current && fresh && current.dataset.version === fresh[1]) return;
        container.innerHTML = html;
        wireForms(container);
        tick();
      })
      .finally(function () {
        delete container.dataset.loading;
        if (container.dataset.again) { delete container.dataset.again; refresh(container); }
      });
  }

  function live() {
    var rows = document.getElementById("rows");
    var body = document.getElementById("request-body");
    if (!rows && !body) return;
    var badge = document.getElementById("live");
    var source = new EventSource("/v1/events");
    var timer = null;
    source.onopen = function () {
      if (badge) badge.dataset.state = "open";
      // Catch up on anything that changed between rendering the page and connecting.
      if (rows) refresh(rows);
      if (body) refresh(body);
    };
    source.onerror = function () { if (badge) badge.dataset.state = "reconnecting"; };
    ["created", "decided", "escalated", "expired", "cancelled"].forEach(function (type) {
      source.addEventListener(type, function (ev) {
        var data = {};
        try { data = JSON.parse(ev.data); } catch (e) { /* keep {} */ }
        if (rows) {
          var li = rows.querySelector('[data-id="' + data.id + '"]');
          if (li && type !== "created" && data.status !== "pending") li.classList.add("leaving");
          clearTimeout(timer);
          timer = setTimeout(function () { refresh(rows); }, 150);
        }
        if (body && data.id === body.dataset.id) refresh(body);
      });
    });
    window.addEventListener("beforeunload", function () { source.close(); });
  }

  function wireForms(root) {
    root.querySelectorAll("form.decide").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        var ok = true;
        form.querySelectorAll("textarea.json").forEach(function (ta) {
          var err = ta.parentElement.querySelector(".field-error");
          try { JSON.parse(ta.value); if (err) err.textContent = ""; }
          catch (e) { ok = false; if (err) err.textContent = "not valid JSON: " + e.message; }
        });
        if (!ok) { ev.preventDefault(); return; }
        form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      });
    });
  }

  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT");
  }

  function keys() {
    var selected = -1;
    document.addEventListener("keydown", function (ev) {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (typing(document.activeElement)) {
        if (ev.key === "Escape") document.activeElement.blur();
        return;
      }
      var rows = Array.prototype.slice.call(document.querySelectorAll(".req"));
      var focus = function (sel) { var el = document.querySelector(sel); if (el) { el.focus(); ev.preventDefault(); } };
      if ((ev.key === "j" || ev.key === "k") && rows.length) {
        selected = Math.max(0, Math.min(rows.length - 1, selected + (ev.key === "j" ? 1 : -1)));
        rows.forEach(function (r, i) { r.classList.toggle("selected", i === selected); });
        rows[selected].scrollIntoView({ block: "nearest" });
      } else if ((ev.key === "o" || ev.key === "Enter") && rows[selected]) {
        location.href = rows[selected].querySelector("a").href;
      } else if (ev.key === "a") {
        focus("form.approve button");
      } else if (ev.key === "r") {
        focus("form.reject textarea");
      } else if (ev.key === "e") {
        focus("form.edit input, form.edit textarea, form.edit select");
      } else if (ev.key === "g") {
        location.href = "/inbox";
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    wireForms(document);
    live();
    keys();
  });
})();
