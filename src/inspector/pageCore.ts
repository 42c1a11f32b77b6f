/**
 * The first half of the inspector page's script: DOM building, the API client, the token, hash
 * routing, the confirmation dialog and toasts. `pageViews.ts` holds the views; `page.ts` joins both
 * into one function scope as `P/app.js`.
 *
 * Plain browser JavaScript in a string (no bundler at runtime). The page's CSP has no
 * 'unsafe-inline' and no 'unsafe-eval', and everything the API returns is user data, so text only
 * ever reaches the page through `textContent`/text nodes and attributes set with fixed names: no
 * `innerHTML`, no `insertAdjacentHTML`, no `document.write`. Links are built from encoded path
 * segments after `#/`, so no value can choose a scheme. Written with String.raw and without template
 * literals so the source is served exactly as written.
 * @internal
 */
export const CORE_JS = String.raw`
var TOKEN_KEY = "durability.inspector.token";
var REFRESH_KEY = "durability.inspector.autoRefresh";
var REFRESH_MS = 5000;
var PAGE_SIZE = 25;
var JOB_STATES = ["waiting", "delayed", "active", "waiting-children", "completed", "failed", "canceled"];
var TABS = [
  { id: "jobs", label: "Jobs", capability: "jobs" },
  { id: "dead-letters", label: "Dead letters", capability: "jobs" },
  { id: "schedules", label: "Schedules", capability: "schedules" },
  { id: "operations", label: "Operations", capability: "operations" },
  { id: "alarms", label: "Alarms", capability: "alarms" },
  { id: "workflows", label: "Workflows", capability: "workflows" },
  { id: "log", label: "Log", capability: "log" },
  { id: "fanout", label: "Fanout", capability: "fanout" }
];

var byId = function (id) { return document.getElementById(id); };

// ---------------------------------------------------------------------------------------------
// DOM: every node is created here; strings become text nodes.

function h(tag, props) {
  var el = document.createElement(tag);
  if (props) {
    Object.keys(props).forEach(function (key) {
      var value = props[key];
      if (value === undefined || value === null || value === false) return;
      if (key === "text") el.replaceChildren(textOf(String(value), false));
      else if (key === "class") el.className = value;
      else if (key === "testid") el.setAttribute("data-testid", value);
      else if (key.slice(0, 2) === "on" && typeof value === "function") el.addEventListener(key.slice(2), value);
      // What a person reads (a tooltip, a label) shows hidden characters too; data-* keep the raw value.
      else if (key === "title" || key === "aria-label") el.setAttribute(key, visible(String(value), false));
      else el.setAttribute(key, value === true ? "" : String(value));
    });
  }
  for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
  return el;
}

function add(parent, child) {
  if (child === undefined || child === null || child === false) return;
  if (Array.isArray(child)) { child.forEach(function (c) { add(parent, c); }); return; }
  parent.append(typeof child === "object" ? child : textOf(String(child), false));
}

// ---------------------------------------------------------------------------------------------
// Stored text that could pass for other text. Bidi embeddings, overrides, isolates and marks
// reorder what follows them ("\u202E1-gnirps" reads "spring-1"), zero-width and separator characters
// hide or split it, controls may not render at all: each is shown as a visible \uXXXX escape in a
// span of its own look (so it is not mistaken for a backslash typed into the value). Every string
// the page adds goes through textOf; CONTROLS spares tab, line feed and carriage return, which logs,
// errors and JSON are laid out with, and ID_CONTROLS (ids, names, keys: one line by nature) does not.

var CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;
var ID_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;

function escapeChar(c) {
  var hex = c.charCodeAt(0).toString(16).toUpperCase();
  return "\\u" + "0000".slice(hex.length) + hex;
}

/** The text with hidden characters as escapes: for attributes and the document title, which hold no spans. */
function visible(text, strict) {
  var pattern = strict ? ID_CONTROLS : CONTROLS;
  var out = "";
  for (var i = 0; i < text.length; i++) out += pattern.test(text[i]) ? escapeChar(text[i]) : text[i];
  return out;
}

/** A text node, or a fragment of text and escape spans when the text holds hidden characters. */
function textOf(text, strict) {
  var pattern = strict ? ID_CONTROLS : CONTROLS;
  if (!pattern.test(text)) return document.createTextNode(text);
  var fragment = document.createDocumentFragment();
  var run = "";
  for (var i = 0; i < text.length; i++) {
    if (!pattern.test(text[i])) { run += text[i]; continue; }
    if (run !== "") fragment.append(document.createTextNode(run));
    run = "";
    var escaped = escapeChar(text[i]);
    var mark = document.createElement("span");
    mark.className = "ctl";
    mark.title = "hidden character " + escaped;
    mark.textContent = escaped;
    fragment.append(mark);
  }
  if (run !== "") fragment.append(document.createTextNode(run));
  return fragment;
}

/**
 * User text set among the page's own words (an id in a sentence, a heading, a crumb, a link):
 * isolated (<bdi>), so right-to-left letters in it cannot reorder the words around it, with every
 * hidden character shown, line breaks included. CSS lets .u break anywhere rather than widen its box.
 */
function u(text, props) {
  var el = h("bdi", props || null);
  el.classList.add("u");
  el.append(textOf(String(text), true));
  return el;
}

/** A quoted user value inside a sentence (dialogs, toasts): the quotes stay outside the isolate. */
function quoted(text) { return ["\u201c", u(text), "\u201d"]; }

/** A hash link from raw path segments: each is encoded, so a value can never leave the hash. */
function link() {
  var parts = Array.prototype.slice.call(arguments);
  var query = parts.length > 0 && typeof parts[parts.length - 1] === "object" ? parts.pop() : undefined;
  return "#/" + parts.map(function (p) { return encodeURIComponent(String(p)); }).join("/") + queryString(query);
}

function queryString(query) {
  if (!query) return "";
  var params = new URLSearchParams();
  Object.keys(query).forEach(function (key) {
    var value = query[key];
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  });
  var text = params.toString();
  return text === "" ? "" : "?" + text;
}

function pad(n) { return n < 10 ? "0" + n : String(n); }

function formatTime(ms) {
  var d = new Date(ms);
  return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

function relative(ms) {
  var diff = ms - Date.now();
  var abs = Math.abs(diff);
  var text = abs < 1000 ? "now" : abs < 60000 ? Math.round(abs / 1000) + " s" : abs < 3600000 ? Math.round(abs / 60000) + " min" :
    abs < 172800000 ? Math.round(abs / 3600000) + " h" : Math.round(abs / 86400000) + " d";
  if (text === "now") return text;
  return diff > 0 ? "in " + text : text + " ago";
}

/** A time cell: local time with a relative hint; the ISO instant on hover. */
function when(ms, empty) {
  if (ms === undefined || ms === null) return h("span", { class: "muted" }, empty || "—");
  var iso = new Date(ms).toISOString();
  return h("time", { datetime: iso, title: iso }, formatTime(ms), h("span", { class: "muted" }, " (" + relative(ms) + ")"));
}

// Overview counts stop at COUNT_CAP (the server reads no further): shown as "10 000+".
function countText(n) { return n >= COUNT_CAP ? COUNT_CAP.toLocaleString("en-US").replace(/,/g, "\u202f") + "+" : String(n); }

function countSum(counts) {
  var capped = counts.some(function (n) { return n >= COUNT_CAP; });
  return String(counts.reduce(function (sum, n) { return sum + n; }, 0)) + (capped ? "+" : "");
}

/**
 * An id in a table: one line, cut with an ellipsis by CSS (.id-text), so a 512-character id cannot
 * widen the table past the screen; the whole id is in the tooltip and on the job's own page.
 */
function idLink(href, id, testid) {
  return h("a", { href: href, class: "id-text", title: id, testid: testid }, u(id));
}

function badge(value, extraClass, testid) {
  return h("span", { class: "badge " + (extraClass || value), testid: testid }, value);
}

/** Stored JSON text, pretty-printed when whole; a cut value is shown as stored, and says so. */
function jsonBlock(value, testid) {
  if (!value) return h("p", { class: "muted" }, "—");
  var text = value.json;
  if (!value.truncated) {
    try { text = JSON.stringify(JSON.parse(value.json), null, 2); } catch (e) { text = value.json; }
  }
  return h("div", { testid: testid },
    h("pre", { class: "json" }, text),
    value.truncated ? h("p", { class: "note", testid: "truncated" }, "Cut at " + value.json.length + " characters (truncated).") : null);
}

/** One line of JSON for a table cell, clipped by CSS; the whole stored text on hover. */
function jsonInline(value) {
  if (!value) return h("span", { class: "muted" }, "—");
  return h("code", { class: "clip", title: value.json }, value.json + (value.truncated ? "…" : ""));
}

function errorText(error) {
  if (!error) return h("span", { class: "muted" }, "—");
  return h("span", { class: "err", testid: "error-text" }, error.name + ": " + error.message);
}

function empty(text) { return h("p", { class: "empty", testid: "empty" }, text); }

function card() {
  var el = h("section", { class: "card" });
  for (var i = 0; i < arguments.length; i++) add(el, arguments[i]);
  return el;
}

/**
 * A data table. columns: [{ label, cell(row) => node|string, className? }]. On a phone the rows
 * become cards labelled by the column names (CSS reads data-label).
 */
function table(columns, rows, rowProps) {
  var head = h("thead", null, h("tr", null, columns.map(function (c) { return h("th", { scope: "col" }, c.label); })));
  var body = h("tbody", null, rows.map(function (row) {
    return h("tr", rowProps ? rowProps(row) : null, columns.map(function (c) {
      return h("td", { "data-label": c.label, class: c.className }, c.cell(row));
    }));
  }));
  return h("div", { class: "table-wrap" }, h("table", { class: "cards" }, head, body));
}

/** Keeps the open/closed state of <details data-key> across a refresh. */
function openDetails(root) {
  var keys = new Set();
  root.querySelectorAll("details[open][data-key]").forEach(function (d) { keys.add(d.getAttribute("data-key")); });
  return keys;
}

function restoreDetails(root, keys) {
  root.querySelectorAll("details[data-key]").forEach(function (d) {
    if (keys.has(d.getAttribute("data-key"))) d.open = true;
  });
}

function disclose(key, label, content) {
  return h("details", { "data-key": key }, h("summary", null, label), content);
}

// ---------------------------------------------------------------------------------------------
// The token: only in this tab's sessionStorage, only ever sent as a header. The inspector reads no
// cookie; the browser sends this origin's cookies with the page's requests only so that Cloudflare
// Access, in front of it, sees its CF_Authorization cookie and passes the Access JWT on.

function readToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
}

function saveToken(value) {
  try { if (value) sessionStorage.setItem(TOKEN_KEY, value); else sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ }
}

var token = readToken();
/** The API answers without a token: Cloudflare Access in front of it vouches for the browser. */
var tokenless = false;
/**
 * The inspector takes no token at all (its 401 challenge is not Bearer: Cloudflare Access only), so
 * the page never asks for one; signing in is Access's page, reached by loading this page again.
 */
var accessOnly = false;

// ---------------------------------------------------------------------------------------------
// API

function ApiError(status, tag, message, challenge) {
  this.name = "ApiError";
  this.status = status;
  this.tag = tag;
  this.message = message;
  /** A 401's WWW-Authenticate: which credential the inspector takes. */
  this.challenge = challenge || "";
}
ApiError.prototype = Object.create(Error.prototype);

/** GET (or POST with a JSON body) under P/api/, path segments encoded one by one. */
function api(segments, options) {
  options = options || {};
  var method = options.method || "GET";
  var url = "api/" + segments.map(function (s) { return encodeURIComponent(String(s)); }).join("/") + queryString(options.query);
  var headers = { accept: "application/json" };
  if (token) headers.authorization = "Bearer " + token;
  // same-origin, not omit: behind Cloudflare Access the CF_Authorization cookie is the credential the
  // edge turns into the Cf-Access-Jwt-Assertion header; without it every call is a 401.
  var init = { method: method, headers: headers, cache: "no-store", credentials: "same-origin", redirect: "error" };
  if (method !== "GET") {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(options.body || {});
  }
  return fetch(url, init).then(function (response) {
    return response.text().then(function (text) {
      var data;
      try { data = text === "" ? undefined : JSON.parse(text); } catch (e) { data = undefined; }
      if (response.ok) return data;
      var tag = data && typeof data._tag === "string" ? data._tag : "HTTP " + response.status;
      var message = data && typeof data.message === "string" ? data.message : (text.slice(0, 300) || response.statusText || "request failed");
      var error = new ApiError(response.status, tag, message, response.headers.get("www-authenticate"));
      if (response.status === 401) {
        // Only a Bearer challenge means a token could help; any other is Cloudflare Access alone.
        accessOnly = !/^\s*bearer\b/i.test(error.challenge);
        if (!options.probe) signedOut(accessOnly ? message : "The inspector refused the token: " + message);
      }
      throw error;
    });
  }, function (cause) {
    throw new ApiError(0, "NetworkError", "Could not reach the inspector (" + (cause && cause.message ? cause.message : "network error") + ").");
  });
}

// ---------------------------------------------------------------------------------------------
// Routing: #/objects/<object>/<tab>, #/objects/<object>/queues/<queue>[/jobs/<id>],
// #/objects/<object>/workflows/<workflow>[/instances/<id>], query after "?".

function parseRoute() {
  var raw = location.hash.replace(/^#/, "");
  var at = raw.indexOf("?");
  var path = at < 0 ? raw : raw.slice(0, at);
  var query = new URLSearchParams(at < 0 ? "" : raw.slice(at + 1));
  var segments = path.split("/").filter(function (s) { return s !== ""; }).map(function (s) {
    try { return decodeURIComponent(s); } catch (e) { return s; }
  });
  return { segments: segments, query: query, key: path + "?" + query.toString() };
}

/**
 * Cursor pages per list (route): a stack of the cursors seen, so "Previous" and a refresh show the
 * same page again.
 */
var pages = new Map();

function paging(key) {
  var entry = pages.get(key);
  if (!entry) { entry = { stack: [undefined], index: 0 }; pages.set(key, entry); }
  return {
    cursor: entry.stack[entry.index],
    index: entry.index,
    next: function (cursor) { entry.stack = entry.stack.slice(0, entry.index + 1); entry.stack.push(cursor); entry.index += 1; render(); },
    previous: function () { if (entry.index > 0) { entry.index -= 1; render(); } },
    first: function () { entry.index = 0; render(); }
  };
}

function pager(page, state) {
  if (state.index === 0 && !page.cursor) return null;
  return h("div", { class: "pager", testid: "pager" },
    h("button", { type: "button", class: "small", testid: "first-page", disabled: state.index === 0, onclick: state.first }, "« First"),
    h("button", { type: "button", class: "small", testid: "previous-page", disabled: state.index === 0, onclick: state.previous }, "‹ Previous"),
    h("span", { class: "muted" }, "Page " + (state.index + 1)),
    h("button", { type: "button", class: "small", testid: "next-page", disabled: !page.cursor, onclick: function () { state.next(page.cursor); } }, "Next ›"));
}

// ---------------------------------------------------------------------------------------------
// Confirmation dialog and toasts

var inFlight = 0;

/** Resolves { reason } when confirmed, null when dismissed. message: text or nodes (see quoted). */
function confirmAction(message, confirmLabel, withReason) {
  return new Promise(function (resolve) {
    var dialog = byId("confirm");
    var settled = false;
    var reason = withReason ? h("input", { type: "text", maxlength: "1000", placeholder: "Reason (optional)", "aria-label": "Reason", testid: "confirm-reason" }) : null;
    var done = function (value) {
      if (settled) return;
      settled = true;
      if (dialog.open) dialog.close();
      resolve(value);
    };
    var ok = h("button", { type: "button", class: "primary", testid: "confirm-ok", onclick: function () { done({ reason: reason ? reason.value.trim() : "" }); } }, confirmLabel);
    var cancel = h("button", { type: "button", testid: "confirm-cancel", onclick: function () { done(null); } }, "Cancel");
    // Through add(), which skips a missing reason field (replaceChildren would print it as "null").
    dialog.replaceChildren();
    add(dialog, [h("p", { testid: "confirm-message" }, message), reason, h("div", { class: "dialog-actions" }, cancel, ok)]);
    dialog.addEventListener("close", function () { done(null); }, { once: true });
    dialog.showModal();
    (reason || ok).focus();
  });
}

function toast(text, isError) {
  var el = h("div", { class: "toast" + (isError ? " error" : ""), testid: isError ? "toast-error" : "toast" }, text);
  byId("toasts").append(el);
  setTimeout(function () { el.remove(); }, isError ? 9000 : 5000);
}

/**
 * An action button: asks first, POSTs, says what changed, then reloads the view.
 * spec: { label, testid, confirm (text, or a function giving it), path, body?, reason?, done?(changed) => string, danger?, primary?,
 * check?() => a problem to show instead of asking (a form's field the server would refuse less helpfully) }
 */
function actionButton(spec) {
  var button = h("button", { type: "button", class: "small" + (spec.danger ? " danger" : spec.primary ? " primary" : ""), testid: spec.testid }, spec.label);
  button.addEventListener("click", function () {
    var problem = spec.check ? spec.check() : undefined;
    if (problem) { toast(problem, true); return; }
    var question = typeof spec.confirm === "function" ? spec.confirm() : spec.confirm;
    confirmAction(question, spec.label, spec.reason).then(function (answer) {
      if (answer === null) return;
      var body = typeof spec.body === "function" ? spec.body(answer) : (spec.body || {});
      button.disabled = true;
      inFlight += 1;
      return api(spec.path, { method: "POST", body: body }).then(function (value) {
        var changed = value && typeof value.changed === "number" ? value.changed : 0;
        toast(spec.done ? spec.done(changed) : spec.label + ": " + (changed === 0 ? "nothing to change" : changed + " changed"));
      }, function (error) {
        if (error.status !== 401) toast(spec.label + " failed: " + error.message, true);
      }).then(function () {
        inFlight -= 1;
        return render(true);
      });
    });
  });
  return button;
}
`
