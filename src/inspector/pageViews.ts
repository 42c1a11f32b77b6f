/**
 * The second half of the inspector page's script: the views (objects, an object's summary and
 * tabs, a queue's jobs, a job, dead letters, schedules, operations, alarms; workflows are in
 * `pageWorkflows.ts`), sign-in, auto-refresh and start-up. Runs in the same function scope as `pageCore.ts` (joined in `page.ts`); the same
 * rules hold: text through DOM APIs only, no template literals.
 * @internal
 */
export const VIEWS_JS = String.raw`
// ---------------------------------------------------------------------------------------------
// Views: each returns { title, crumbs: [[label, href?]], node }.

function objectsView() {
  return api(["objects"]).then(function (answer) {
    var objects = answer.objects || [];
    return {
      title: "Objects",
      crumbs: [["Objects"]],
      node: card(
        h("div", { class: "head" }, h("h2", null, "Objects"), h("span", { class: "muted" }, objects.length + " listed")),
        openByName(),
        objects.length === 0 ? empty("No objects are listed; open one by its name.") :
          h("ul", { class: "object-list", testid: "object-list" }, objects.map(function (o) {
            return h("li", null, h("a", { href: link("objects", o.name), testid: "object-link" }, u(o.name)));
          })))
    };
  });
}

/**
 * Opens any object by its name: an inspector with a resolver reaches objects it does not list (one per
 * user), and a long list is quicker to skip. The server decides whether the name is reachable (404 if not).
 */
function openByName() {
  var input = h("input", { type: "text", id: "object-name", name: "object", autocomplete: "off", spellcheck: "false",
    required: true, maxlength: "256", placeholder: "e.g. account:acct_123", testid: "open-object-input" });
  var form = h("form", { class: "open-object", testid: "open-object-form" },
    h("label", { for: "object-name" }, "Open an object by name"), input,
    h("button", { type: "submit", testid: "open-object-submit" }, "Open"));
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var name = input.value.trim();
    if (name !== "") location.hash = link("objects", name);
  });
  return form;
}

function objectCrumbs(object) { return [["Objects", "#/"], [object, link("objects", object)]]; }

function summaryCard(object, overview) {
  var s = overview.scheduler;
  var running = s.runningCount === 0 ? h("span", { class: "muted" }, "nothing") :
    h("span", null, String(s.runningCount), ": ", s.running.map(function (r, i) {
      return h("span", null, i > 0 ? ", " : "", h("code", null, r.capability + " ", u(r.key)));
    }), s.runningCount > s.running.length ? " …" : "");
  var field = function (label, value, testid) { return h("div", null, h("dt", null, label), h("dd", { testid: testid }, value)); };
  return card(
    h("div", { class: "head" }, h("h2", { testid: "object-name" }, u(object)), h("span", { class: "spacer" }),
      s.capabilities.map(function (c) { return badge(c, "waiting"); })),
    h("dl", { class: "summary", testid: "scheduler-summary" },
      field("Physical alarm", when(s.physicalAlarm, "none set"), "summary-alarm"),
      field("Early timer", when(s.earlyTimer, "not armed"), "summary-timer"),
      field("Permits", s.permits.available + " of " + s.permits.capacity + " free" + (s.permits.waiting > 0 ? ", " + s.permits.waiting + " waiting" : ""), "summary-permits"),
      field("Running now", running, "summary-running"),
      field("Object id", s.objectId === null ? h("span", { class: "muted" }, "unknown") : h("code", { class: "wrap" }, u(s.objectId)), "summary-id"),
      field("Object time", when(s.now), "summary-now")),
    purgeForm(object, s.capabilities));
}

/** The purge form's choices per object, so a refresh (which rebuilds the form) keeps them. */
var purgeChoices = new Map();

function purgeForm(object, attached) {
  // Fanout's deliveries are settled, never purged.
  var capabilities = attached.filter(function (c) { return c !== "fanout"; });
  if (capabilities.length === 0) return null;
  var week = new Date(Date.now() - 7 * 86400000);
  var choice = purgeChoices.get(object) || { capability: capabilities[0], date: week.getFullYear() + "-" + pad(week.getMonth() + 1) + "-" + pad(week.getDate()) };
  var select = h("select", { testid: "purge-capability", "aria-label": "Capability" },
    capabilities.map(function (c) { return h("option", { value: c, selected: c === choice.capability }, c); }));
  var date = h("input", { type: "date", testid: "purge-before", "aria-label": "Created before", value: choice.date });
  var remember = function () { purgeChoices.set(object, { capability: select.value, date: date.value }); };
  select.addEventListener("change", remember);
  date.addEventListener("change", remember);
  var button = actionButton({
    label: "Purge",
    testid: "purge",
    danger: true,
    confirm: function () {
      return "Delete every " + select.value + " record created before " + date.value + " (local midnight), pending ones too? This cannot be undone.";
    },
    path: ["objects", object, "purge"],
    body: function () {
      var before = new Date(date.value + "T00:00:00").getTime();
      // An empty or partial date reaches the API as a wrong value and comes back as its 400 message.
      return { capability: select.value, before: isNaN(before) ? date.value : before };
    },
    done: function (changed) { return "Purged " + changed + " record" + (changed === 1 ? "" : "s"); }
  });
  return disclose("purge", "Purge old records", h("div", { class: "form-row" }, "Delete every", select, "record created before", date, "(pending ones too)", button));
}

function tabBar(object, tabs, current, overview) {
  var counts = {
    jobs: overview.jobs ? overview.jobs.queues.length + (overview.jobs.queues.length === 1 ? " queue" : " queues") : "",
    "dead-letters": overview.jobs ? countSum(overview.jobs.queues.map(function (q) { return q.deadLetters; })) : "",
    schedules: overview.schedules ? countText(overview.schedules.active) + " active" : "",
    operations: overview.operations ? countText(overview.operations.counts.pending) + " pending" : "",
    alarms: overview.alarms ? countText(overview.alarms.pending) + " pending" : "",
    workflows: workflowsCount(overview),
    log: overview.log ? countText(overview.log.nextOffset - overview.log.oldestOffset) + " records" : "",
    fanout: overview.fanout ? countSum(overview.fanout.targets.map(function (t) { return t.pending; })) + " pending" : ""
  };
  return h("nav", { class: "tabs", testid: "tabs", "aria-label": "Capabilities" }, tabs.map(function (t) {
    return h("a", { href: link("objects", object, t.id), testid: "tab-" + t.id, "aria-current": t.id === current ? "page" : null },
      t.label, counts[t.id] ? h("span", { class: "count" }, counts[t.id]) : null);
  }));
}

function objectView(object, tabId, sub, query) {
  return api(["objects", object]).then(function (overview) {
    var tabs = TABS.filter(function (t) { return overview.scheduler.capabilities.indexOf(t.capability) >= 0; });
    var current = tabId || (tabs[0] && tabs[0].id);
    var tab = tabs.filter(function (t) { return t.id === current; })[0];
    var content = tab === undefined ?
      Promise.resolve(tabs.length === 0 ? empty("Nothing is attached to this object's scheduler yet.") : empty("This object has no " + current + ".")) :
      current === "jobs" ? Promise.resolve(queuesTab(object, overview)) :
      current === "dead-letters" ? deadLettersTab(object, overview, sub) :
      current === "schedules" ? schedulesTab(object) :
      current === "operations" ? operationsTab(object, overview, query.get("status")) :
      current === "workflows" ? workflowsTab(object, overview, sub, query.get("status")) :
      current === "log" ? logTab(object) :
      current === "fanout" ? fanoutTab(object) :
      alarmsTab(object);
    return content.then(function (node) {
      return {
        title: object,
        crumbs: objectCrumbs(object).concat(tab ? [[tab.label]] : []),
        node: [summaryCard(object, overview), tabBar(object, tabs, current, overview), node]
      };
    });
  });
}

function queueToggle(object, queue) {
  return queue.paused ?
    actionButton({ label: "Resume", testid: "queue-resume", confirm: ["Resume queue ", quoted(queue.name), "? Its waiting jobs start running again."],
      path: ["objects", object, "queues", queue.name, "resume"], done: function () { return ["Queue ", quoted(queue.name), " resumed"]; } }) :
    actionButton({ label: "Pause", testid: "queue-pause", confirm: ["Pause queue ", quoted(queue.name), "? No new job starts until it is resumed; running jobs finish."],
      path: ["objects", object, "queues", queue.name, "pause"], done: function () { return ["Queue ", quoted(queue.name), " paused"]; } });
}

function queueStatus(queue) { return badge(queue.paused ? "paused" : "running", null, "queue-status"); }

// Counted from storage (finished_at), so they survive evictions; a count at the cap means "at least".
function rateWindow(queues) {
  var ms = queues.length > 0 && queues[0].rates ? queues[0].rates.windowMs : 0;
  return ms > 0 ? Math.round(ms / 60000) + " min" : "minutes";
}

function perMinute(count, windowMs) {
  var rate = count / (windowMs / 60000);
  return (count >= COUNT_CAP ? "≥ " : "") + (rate >= 10 || rate === 0 ? String(Math.round(rate)) : rate.toFixed(1));
}

function queueRates(q) {
  if (!q.rates) return h("span", { class: "muted" }, "—");
  return h("span", { testid: "queue-rates", title: countText(q.rates.completed) + " completed, " + countText(q.rates.failed) + " failed" },
    perMinute(q.rates.completed, q.rates.windowMs) + " completed · " + perMinute(q.rates.failed, q.rates.windowMs) + " failed");
}

function queuesTab(object, overview) {
  var queues = overview.jobs ? overview.jobs.queues : [];
  if (queues.length === 0) return card(empty("No queues."));
  var columns = [
    { label: "Queue", cell: function (q) { return h("a", { href: link("objects", object, "queues", q.name), testid: "queue-link" }, u(q.name)); }, className: "wrap" },
    { label: "Status", cell: queueStatus },
    { label: "Processing", cell: function (q) { return q.processing; } },
    { label: "Jobs", className: "wrap", cell: function (q) {
      var shown = JOB_STATES.filter(function (state) { return (q.counts[state] || 0) > 0; });
      if (shown.length === 0) return h("span", { class: "muted" }, "none");
      return h("span", { class: "counts" }, shown.map(function (state) {
        return h("a", { class: "badge " + state, href: link("objects", object, "queues", q.name, { state: state }), testid: "count-" + state }, state + " " + countText(q.counts[state]));
      }));
    } },
    { label: "Dead letters", className: "num", cell: function (q) {
      return q.deadLetters === 0 ? h("span", { class: "muted" }, "0") : h("a", { href: link("objects", object, "dead-letters", q.name) }, countText(q.deadLetters));
    } },
    { label: "Last " + rateWindow(queues) + " (per min)", className: "num", cell: queueRates },
    { label: "Actions", cell: function (q) { return h("div", { class: "actions" }, queueToggle(object, q)); } }
  ];
  return card(h("h3", null, "Queues"), table(columns, queues, function (q) { return { testid: "queue-row", "data-queue": q.name }; }));
}

function jobsView(object, queueName, query) {
  var state = query.get("state") || "";
  var route = parseRoute();
  var pageState = paging(route.key);
  return Promise.all([
    api(["objects", object]),
    api(["objects", object, "queues", queueName, "jobs"], { query: { state: state, cursor: pageState.cursor, limit: PAGE_SIZE } })
  ]).then(function (answers) {
    var overview = answers[0];
    var page = answers[1];
    var queue = (overview.jobs ? overview.jobs.queues : []).filter(function (q) { return q.name === queueName; })[0];
    var total = queue ? countSum(JOB_STATES.map(function (s) { return queue.counts[s] || 0; })) : "0";
    var chip = function (value, label, count) {
      return h("a", { class: "chip", href: link("objects", object, "queues", queueName, value ? { state: value } : undefined),
        testid: "state-filter-" + (value || "all"), "aria-current": value === state ? "page" : null },
        label, count === undefined ? null : h("span", { class: "count" }, typeof count === "number" ? countText(count) : count));
    };
    var columns = [
      { label: "Job", className: "id", cell: function (j) { return idLink(link("objects", object, "queues", queueName, "jobs", j.id), j.id, "job-link"); } },
      { label: "State", cell: function (j) { return badge(j.state, null, "job-state"); } },
      { label: "Attempt", className: "num", cell: function (j) { return j.attempt + "/" + j.maxAttempts; } },
      { label: "Priority", className: "num", cell: function (j) { return String(j.priority); } },
      { label: "Progress", cell: function (j) { return jsonInline(j.progress); } },
      { label: "Payload", cell: function (j) { return jsonInline(j.payload); } },
      { label: "Created", cell: function (j) { return when(j.createdAt); } },
      { label: "When", cell: function (j) {
        var at = j.finishedAt !== undefined ? ["finished ", j.finishedAt] : j.state === "active" && j.startedAt !== undefined ? ["started ", j.startedAt] : ["due ", j.runAt];
        return h("span", null, h("span", { class: "muted" }, at[0]), when(at[1]));
      } },
      { label: "Error", className: "wrap", cell: function (j) { return errorText(j.error); } }
    ];
    return {
      title: queueName + " \u00b7 " + object,
      crumbs: objectCrumbs(object).concat([["Jobs", link("objects", object, "jobs")], [queueName]]),
      node: card(
        h("div", { class: "head" }, h("h2", { testid: "queue-name" }, "Queue ", u(queueName)), queue ? queueStatus(queue) : null,
          queue ? h("span", { class: "muted" }, queue.processing) : null, h("span", { class: "spacer" }),
          queue && queue.deadLetters > 0 ? h("a", { href: link("objects", object, "dead-letters", queueName) }, countText(queue.deadLetters) + " dead letters") : null,
          queue ? queueToggle(object, queue) : null),
        h("nav", { class: "chips", testid: "state-filter", "aria-label": "Filter by state" },
          chip("", "all", queue ? total : undefined),
          JOB_STATES.map(function (s) { return chip(s, s, queue ? queue.counts[s] || 0 : undefined); })),
        bulkForm(object, queueName, state),
        page.items.length === 0 ? empty(state ? "No " + state + " jobs." : "No jobs.") :
          table(columns, page.items, function (j) { return { testid: "job-row", "data-job-id": j.id, "data-state": j.state }; }),
        pager(page, pageState))
    };
  });
}

/** The bulk form's choices per queue, so a refresh (which rebuilds the form) keeps them. */
var bulkChoices = new Map();
/** The states each bulk action applies to (as Jobs.bulk): a state filter outside them is not offered the action. */
var BULK_STATES = {
  cancel: ["waiting", "delayed", "active", "waiting-children"],
  retry: ["failed", "canceled"],
  promote: ["delayed"],
  remove: ["waiting", "delayed", "waiting-children", "completed", "failed", "canceled"],
  redrive: []
};
var BULK_CHUNKS = 10000;

/**
 * Acts on every job of the queue in the chosen state (all it applies to without one), by id prefix and age: one
 * chunk per request (one transaction of at most 100 jobs on the object), until the run is done or the view changes.
 */
function bulkForm(object, queueName, state) {
  var key = JSON.stringify([object, queueName]);
  var choice = bulkChoices.get(key) || { action: state === "failed" || state === "canceled" ? "retry" : "cancel", prefix: "", minutes: "" };
  var actions = Object.keys(BULK_STATES).filter(function (a) { return a === "redrive" ? !state : !state || BULK_STATES[a].indexOf(state) >= 0; });
  if (actions.length === 0) return null;
  if (actions.indexOf(choice.action) < 0) choice.action = actions[0];
  var select = h("select", { testid: "bulk-action", "aria-label": "Bulk action" },
    actions.map(function (a) { return h("option", { value: a, selected: a === choice.action }, a === "redrive" ? "redrive dead letters" : a); }));
  var prefix = h("input", { type: "text", testid: "bulk-prefix", "aria-label": "Id prefix", placeholder: "id prefix (optional)", maxlength: "512", value: choice.prefix });
  var minutes = h("input", { type: "number", min: "0", step: "1", class: "priority", testid: "bulk-minutes", "aria-label": "Older than (minutes)", placeholder: "min", value: choice.minutes });
  var remember = function () { bulkChoices.set(key, { action: select.value, prefix: prefix.value, minutes: minutes.value }); };
  select.addEventListener("change", remember);
  prefix.addEventListener("input", remember);
  minutes.addEventListener("input", remember);
  var button = h("button", { type: "button", class: "small danger", testid: "bulk-run" }, "Run");
  button.addEventListener("click", function () {
    var action = select.value;
    var body = { action: action };
    if (state && action !== "redrive") body.states = [state];
    if (prefix.value !== "") body.idPrefix = prefix.value;
    if (minutes.value !== "") {
      var m = Number(minutes.value);
      if (!(m >= 0) || Math.floor(m) !== m) { toast("Older than: a whole number of minutes", true); return; }
      body.olderThanMs = m * 60000;
    }
    var what = action === "redrive" ? "every dead letter of queue " : "every " + (state && action !== "redrive" ? state + " " : "") + "job of queue ";
    var question = [action.charAt(0).toUpperCase() + action.slice(1) + " " + what, quoted(queueName),
      prefix.value !== "" ? [" whose id starts with ", quoted(prefix.value)] : "", minutes.value !== "" ? " created (failed) at least " + minutes.value + " minutes ago" : "",
      action === "remove" ? "? This cannot be undone." : "?"];
    confirmAction(question, "Run " + action, action === "cancel").then(function (answer) {
      if (answer === null) return;
      if (answer.reason) body.reason = answer.reason;
      var route = parseRoute().key;
      var changed = 0;
      var chunks = 0;
      button.disabled = true;
      inFlight += 1;
      var next = function (cursor) {
        return api(["objects", object, "queues", queueName, "bulk"], { method: "POST", body: cursor === undefined ? body : Object.assign({}, body, { cursor: cursor }) }).then(function (result) {
          changed += result.changed;
          chunks += 1;
          button.textContent = "Running\u2026 " + changed;
          // Leaving the view stops the run between chunks; each chunk is complete on its own.
          if (result.done || !result.cursor || chunks >= BULK_CHUNKS || parseRoute().key !== route) return result.done === true;
          return next(result.cursor);
        });
      };
      return next(undefined).then(function (done) {
        toast(action + ": " + changed + " job" + (changed === 1 ? "" : "s") + " changed" + (done ? "" : " (stopped before the end)"));
      }, function (error) {
        if (error.status !== 401) toast(action + " failed after " + changed + " changed: " + error.message, true);
      }).then(function () {
        inFlight -= 1;
        return render(true);
      });
    });
  });
  return disclose("bulk:" + key, "Bulk action", h("div", { class: "form-row", testid: "bulk-form" }, select, state ? h("span", { class: "muted" }, state) : null, prefix, minutes, button));
}

function jobActions(object, job) {
  var path = ["objects", object, "queues", job.queue, "jobs", job.id];
  var buttons = [];
  if (job.state === "failed") {
    buttons.push(actionButton({ label: "Retry", testid: "job-retry", primary: true, confirm: ["Retry job ", quoted(job.id), "? It goes back to waiting with a fresh attempt count."],
      path: path.concat("retry") }));
  }
  if (job.state === "delayed") {
    buttons.push(actionButton({ label: "Promote", testid: "job-promote", confirm: ["Run job ", quoted(job.id), " now instead of at its scheduled time?"], path: path.concat("promote") }));
  }
  if (["waiting", "delayed", "active", "waiting-children"].indexOf(job.state) >= 0) {
    buttons.push(actionButton({ label: "Cancel", testid: "job-cancel", danger: true, reason: true, confirm: ["Cancel job ", quoted(job.id), "?"],
      path: path.concat("cancel"), body: function (answer) { return answer.reason ? { reason: answer.reason } : {}; } }));
  }
  buttons.push(actionButton({ label: "Remove", testid: "job-remove", danger: true, confirm: ["Remove job ", quoted(job.id), " and its logs? This cannot be undone."],
    path: path.concat("remove") }));
  if (job.state === "waiting" || job.state === "delayed") {
    var input = h("input", { type: "number", step: "1", value: String(job.priority), class: "priority", testid: "priority-input", "aria-label": "Priority" });
    buttons.push(h("span", { class: "form-row" }, input, actionButton({ label: "Set priority", testid: "job-priority",
      confirm: ["Change the priority of job ", quoted(job.id), "?"], path: path.concat("priority"),
      body: function () { return { priority: Math.trunc(Number(input.value)) }; } })));
  }
  return h("div", { class: "actions", testid: "job-actions" }, buttons);
}

function logList(items) {
  return h("ol", { class: "logs", testid: "job-logs" }, items.map(function (line) {
    return h("li", { testid: "log-line" }, h("time", { datetime: new Date(line.at).toISOString(), title: new Date(line.at).toISOString() }, formatTime(line.at)),
      h("span", { class: "msg" }, line.message));
  }));
}

/** Jobs whose every kept log line the user asked to see: a refresh loads them all again. */
var allLogsOf = new Set();
var LOG_PAGES = 50;

/** Every kept line, page after page (at most LOG_PAGES pages of 100). */
function allLogs(object, queueName, id) {
  var lines = [];
  var next = function (cursor, left) {
    return api(["objects", object, "queues", queueName, "jobs", id, "logs"], { query: { cursor: cursor, limit: 100 } }).then(function (page) {
      lines = lines.concat(page.items);
      return page.cursor && left > 1 ? next(page.cursor, left - 1) : lines;
    });
  };
  return next(undefined, LOG_PAGES);
}

function jobView(object, queueName, id) {
  var key = JSON.stringify([object, queueName, id]);
  return api(["objects", object, "queues", queueName, "jobs", id]).then(function (detail) {
    var partial = detail.logs.total > detail.logs.items.length;
    return (partial && allLogsOf.has(key) ? allLogs(object, queueName, id) : Promise.resolve(detail.logs.items)).then(function (lines) {
      return jobPage(object, queueName, id, detail, lines, partial && lines.length < detail.logs.total ? function () {
        allLogsOf.add(key);
        render(true);
      } : null);
    });
  });
}

function jobPage(object, queueName, id, detail, lines, showAll) {
  var job = detail.job;
  var field = function (label, value) { return [h("dt", null, label), h("dd", null, value)]; };
  var logs = logList(lines);
  var moreLogs = showAll ? h("button", { type: "button", class: "small", testid: "more-logs", onclick: showAll },
    "Show all " + detail.logs.total + " lines") : null;
  var children = detail.children.items;
  return {
    title: id + " \u00b7 " + queueName,
    crumbs: objectCrumbs(object).concat([["Jobs", link("objects", object, "jobs")], [queueName, link("objects", object, "queues", queueName)], [id]]),
    node: [
      card(
        h("div", { class: "head" }, h("h2", { testid: "job-id" }, "Job ", u(job.id)), badge(job.state, null, "job-state"), h("span", { class: "spacer" }), jobActions(object, job)),
        h("dl", { class: "fields", testid: "job-fields" },
          field("Queue", h("a", { href: link("objects", object, "queues", job.queue) }, u(job.queue))),
          field("Attempt", job.attempt + " of " + job.maxAttempts),
          field("Priority", String(job.priority)),
          field("Created", when(job.createdAt)),
          field("Runs at", when(job.runAt)),
          field("Started", when(job.startedAt)),
          field("Finished", when(job.finishedAt)),
          job.parent ? field("Parent", h("a", { href: link("objects", object, "queues", job.parent.queue, "jobs", job.parent.id), testid: "job-parent" }, u(job.parent.queue), " / ", u(job.parent.id))) : null),
        job.error ? h("div", { class: "card error-box", testid: "job-error" }, h("h3", null, "Error"),
          h("pre", { class: "block" }, job.error.name + ": " + job.error.message)) : null),
      h("div", { class: "sections" },
        card(h("h3", null, "Payload"), jsonBlock(job.payload, "job-payload")),
        card(h("h3", null, "Progress"), jsonBlock(job.progress, "job-progress")),
        job.result ? card(h("h3", null, "Result"), jsonBlock(job.result, "job-result")) : null),
      card(h("div", { class: "head" }, h("h3", null, "Logs"), h("span", { class: "muted" }, detail.logs.total + " kept")),
        lines.length === 0 ? empty("No log lines.") : logs, moreLogs),
      detail.children.total === 0 ? null : card(
        h("div", { class: "head" }, h("h3", null, "Children"), h("span", { class: "muted" }, detail.children.total + " in all" + (detail.children.total > children.length ? ", first " + children.length + " shown" : ""))),
        table([
          { label: "Queue", className: "wrap", cell: function (c) { return u(c.queue); } },
          { label: "Job", className: "id", cell: function (c) { return idLink(link("objects", object, "queues", c.queue, "jobs", c.id), c.id); } },
          { label: "State", cell: function (c) { return c.state === null ? h("span", { class: "muted" }, "removed") : badge(c.state); } }
        ], children, function (c) { return { testid: "child-row", "data-job-id": c.id }; }))
    ]
  };
}

function deadLettersTab(object, overview, queueName) {
  var queues = overview.jobs ? overview.jobs.queues : [];
  if (queues.length === 0) return Promise.resolve(card(empty("No queues.")));
  var selected = queues.filter(function (q) { return q.name === queueName; })[0] ||
    queues.filter(function (q) { return q.deadLetters > 0; })[0] || queues[0];
  var pageState = paging("dead-letters:" + object + ":" + selected.name);
  return api(["objects", object, "queues", selected.name, "dead-letters"], { query: { cursor: pageState.cursor, limit: PAGE_SIZE } }).then(function (page) {
    var base = ["objects", object, "queues", selected.name, "dead-letters", "redrive"];
    var columns = [
      { label: "Job", className: "id", cell: function (d) { return idLink(link("objects", object, "queues", d.queue, "jobs", d.id), d.id); } },
      { label: "Attempts", className: "num", cell: function (d) { return String(d.attempts); } },
      { label: "Failed", cell: function (d) { return when(d.failedAt); } },
      { label: "Error", className: "wrap", cell: function (d) { return errorText(d.error); } },
      { label: "Payload", cell: function (d) { return disclose("dl-payload:" + d.queue + ":" + d.id, "payload", jsonBlock(d.payload, "dead-letter-payload")); } },
      { label: "Actions", cell: function (d) {
        return actionButton({ label: "Redrive", testid: "redrive", confirm: ["Redrive dead letter ", quoted(d.id), "? It is added to queue ", quoted(d.queue), " again."],
          path: base, body: { ids: [d.id] }, done: function (n) { return n === 0 ? "Nothing redriven" : ["Redriven ", u(d.id)]; } });
      } }
    ];
    return card(
      h("div", { class: "head" }, h("h3", null, "Dead letters of ", u(selected.name)), h("span", { class: "spacer" }),
        selected.deadLetters > 0 ? actionButton({ label: "Redrive all", testid: "redrive-all", confirm: ["Redrive every dead letter of queue ", quoted(selected.name), "?"],
          path: base, done: function (n) { return "Redriven " + n + " dead letter" + (n === 1 ? "" : "s"); } }) : null),
      queues.length > 1 ? h("nav", { class: "chips", testid: "dead-letter-queues" }, queues.map(function (q) {
        return h("a", { class: "chip", href: link("objects", object, "dead-letters", q.name), "aria-current": q.name === selected.name ? "page" : null },
          u(q.name), h("span", { class: "count" }, countText(q.deadLetters)));
      })) : null,
      page.items.length === 0 ? empty("No dead letters.") :
        table(columns, page.items, function (d) { return { testid: "dead-letter-row", "data-job-id": d.id }; }),
      pager(page, pageState));
  });
}

function schedulesTab(object) {
  var pageState = paging("schedules:" + object);
  return api(["objects", object, "schedules"], { query: { cursor: pageState.cursor, limit: PAGE_SIZE } }).then(function (page) {
    var path = function (s, action) { return ["objects", object, "schedules", s.key, action]; };
    var columns = [
      { label: "Key", className: "wrap", cell: function (s) { return h("code", null, u(s.key)); } },
      { label: "Schedule", className: "wrap", cell: function (s) { return u(s.description); } },
      { label: "Status", cell: function (s) { return badge(s.status, s.status === "active" ? "active-schedule" : s.status, "schedule-status"); } },
      { label: "Next run", cell: function (s) { return when(s.nextRunAt, "none"); } },
      { label: "Current run", className: "wrap", cell: function (s) {
        if (!s.currentRun) return h("span", { class: "muted" }, "—");
        return h("span", null, "#" + s.currentRun.runNumber + ", attempt " + s.currentRun.attempt + (s.currentRun.manual ? " (manual)" : ""),
          s.currentRun.error ? h("div", null, errorText(s.currentRun.error)) : null);
      } },
      { label: "Last run", className: "wrap", cell: function (s) {
        if (!s.lastRun) return h("span", { class: "muted" }, "never");
        return h("span", null, badge(s.lastRun.outcome), " ", when(s.lastRun.settledAt), s.lastRun.error ? h("div", null, errorText(s.lastRun.error)) : null);
      } },
      { label: "Runs", className: "num", cell: function (s) { return String(s.runCount); } },
      { label: "Missed", className: "num", cell: function (s) { return String(s.missedCount); } },
      { label: "Actions", cell: function (s) {
        return h("div", { class: "actions" },
          s.status === "ended" ? null : actionButton({ label: "Trigger", testid: "schedule-trigger", confirm: ["Run schedule ", quoted(s.key), " once now?"], path: path(s, "trigger") }),
          s.status === "active" ? actionButton({ label: "Pause", testid: "schedule-pause", confirm: ["Pause schedule ", quoted(s.key), "?"], path: path(s, "pause") }) : null,
          s.status === "paused" ? actionButton({ label: "Resume", testid: "schedule-resume", confirm: ["Resume schedule ", quoted(s.key), "?"], path: path(s, "resume") }) : null);
      } }
    ];
    return card(h("h3", null, "Schedules"),
      page.items.length === 0 ? empty("No schedules.") : table(columns, page.items, function (s) { return { testid: "schedule-row", "data-key": s.key }; }),
      pager(page, pageState));
  });
}

function operationsTab(object, overview, status) {
  var filter = status || "";
  var pageState = paging("operations:" + object + ":" + filter);
  var counts = overview.operations ? overview.operations.counts : {};
  return api(["objects", object, "operations"], { query: { status: filter, cursor: pageState.cursor, limit: PAGE_SIZE } }).then(function (page) {
    var chip = function (value, count) {
      return h("a", { class: "chip", href: link("objects", object, "operations", value ? { status: value } : undefined), testid: "status-filter-" + (value || "all"),
        "aria-current": value === filter ? "page" : null }, value || "all", count === undefined ? null : h("span", { class: "count" }, countText(count)));
    };
    var columns = [
      { label: "Operation", className: "wrap", cell: function (o) { return h("code", null, u(o.operation)); } },
      { label: "Id", className: "id", cell: function (o) { return h("span", { class: "id-text", title: o.id }, u(o.id)); } },
      { label: "Status", cell: function (o) { return badge(o.status, null, "operation-status"); } },
      { label: "Attempt", className: "num", cell: function (o) { return String(o.attempt); } },
      { label: "Next attempt", cell: function (o) { return when(o.nextAttemptAt, "—"); } },
      { label: "Created", cell: function (o) { return when(o.createdAt); } },
      { label: "Error", className: "wrap", cell: function (o) { return errorText(o.error); } },
      { label: "Data", cell: function (o) {
        return disclose("op:" + o.operation + ":" + o.id, "payload" + (o.result ? " + result" : ""),
          [jsonBlock(o.payload, "operation-payload"), o.result ? jsonBlock(o.result, "operation-result") : null]);
      } },
      { label: "Actions", cell: function (o) {
        return o.status !== "pending" ? null : actionButton({ label: "Cancel", testid: "operation-cancel", danger: true,
          confirm: ["Cancel operation ", u(o.operation), " ", quoted(o.id), "? It will not run again."], path: ["objects", object, "operations", o.operation, o.id, "cancel"] });
      } }
    ];
    return card(h("h3", null, "Operations"),
      h("nav", { class: "chips", testid: "status-filter" }, chip("", undefined), ["pending", "completed", "failed"].map(function (s) { return chip(s, counts[s]); })),
      page.items.length === 0 ? empty(filter ? "No " + filter + " operations." : "No operations.") :
        table(columns, page.items, function (o) { return { testid: "operation-row", "data-id": o.id }; }),
      pager(page, pageState));
  });
}

function fanoutTab(object) {
  var pageState = paging("fanout:" + object);
  return api(["objects", object, "fanout"], { query: { cursor: pageState.cursor, limit: PAGE_SIZE } }).then(function (page) {
    var columns = [
      { label: "Target", cell: function (d) { return h("code", null, u(d.target)); } },
      { label: "Message", className: "wrap", cell: function (d) { return h("code", null, u(d.messageId)); } },
      { label: "Phase", cell: function (d) { return badge(d.phase === "dead_letter" ? "dead letter" : "delivery", null, "fanout-phase"); } },
      { label: "Attempt", className: "num", cell: function (d) { return String(d.attempt); } },
      { label: "Next attempt", cell: function (d) { return when(d.nextAttemptAt); } },
      { label: "Error", className: "wrap", cell: function (d) { return errorText(d.error); } }
    ];
    return card(h("h3", null, "Pending deliveries"),
      page.items.length === 0 ? empty("No deliveries pending.") : table(columns, page.items, function (d) { return { testid: "fanout-row", "data-target": d.target }; }),
      pager(page, pageState));
  });
}

function alarmsTab(object) {
  var pageState = paging("alarms:" + object);
  return api(["objects", object, "alarms"], { query: { cursor: pageState.cursor, limit: PAGE_SIZE } }).then(function (page) {
    var columns = [
      { label: "Name", className: "wrap", cell: function (a) { return h("code", null, u(a.name)); } },
      { label: "Status", cell: function (a) { return badge(a.status, null, "alarm-status"); } },
      { label: "Scheduled", cell: function (a) { return when(a.scheduledTime); } },
      { label: "Next attempt", cell: function (a) { return when(a.nextAttemptAt); } },
      { label: "Attempt", className: "num", cell: function (a) { return String(a.attempt); } },
      { label: "Error", className: "wrap", cell: function (a) { return errorText(a.error); } },
      { label: "Actions", cell: function (a) {
        return actionButton({ label: "Cancel", testid: "alarm-cancel", danger: true, confirm: ["Cancel alarm ", quoted(a.name), "?"], path: ["objects", object, "alarms", a.name, "cancel"] });
      } }
    ];
    return card(h("h3", null, "Alarms"),
      page.items.length === 0 ? empty("No pending or failed alarms.") : table(columns, page.items, function (a) { return { testid: "alarm-row", "data-name": a.name }; }),
      pager(page, pageState));
  });
}

function logTab(object) {
  return api(["objects", object, "log"]).then(function (log) {
    var window = h("p", { testid: "log-window" }, "Offsets " + log.oldestOffset + " to " + (log.nextOffset - 1) +
      " readable; from " + log.hotOffset + " in the object (" + log.bytes + " bytes); next offset " + log.nextOffset + ".");
    var consumers = [
      { label: "Consumer", className: "wrap", cell: function (c) { return h("code", null, u(c.consumer)); } },
      { label: "Cursor", className: "num", cell: function (c) { return String(c.offset); } },
      { label: "Lag", className: "num", cell: function (c) { return String(c.lag); } },
      { label: "Committed", cell: function (c) { return when(c.committedAt); } }
    ];
    var segments = [
      { label: "Offsets", cell: function (g) { return g.firstOffset + "–" + g.lastOffset; } },
      { label: "Locator", className: "wrap", cell: function (g) { return h("code", null, u(g.locator)); } },
      { label: "Bytes", className: "num", cell: function (g) { return String(g.bytes); } },
      { label: "Flushed", cell: function (g) { return when(g.flushedAt); } }
    ];
    var leases = [
      { label: "Consumer", className: "wrap", cell: function (l) { return h("code", null, u(l.consumer)); } },
      { label: "Offsets", cell: function (l) { return l.firstOffset + "–" + l.lastOffset; } },
      { label: "State", cell: function (l) { return badge(l.state, null, "log-lease-state"); } },
      { label: "Attempt", className: "num", cell: function (l) { return String(l.attempt); } },
      { label: "Expires", cell: function (l) { return when(l.expiresAt); } }
    ];
    return card(h("h3", null, "Log"), window,
      h("h4", null, "Consumers"),
      log.consumers.length === 0 ? empty("No consumer has committed.") : table(consumers, log.consumers, function (c) { return { testid: "log-consumer-row", "data-consumer": c.consumer }; }),
      h("h4", null, "Cold segments (" + log.segments.count + ", " + log.segments.bytes + " bytes)"),
      log.segments.first.length === 0 ? empty("Nothing flushed to cold storage.") : table(segments, log.segments.first, function () { return { testid: "log-segment-row" }; }),
      h("h4", null, "Leases held"),
      log.leases.length === 0 ? empty("No lease held.") : table(leases, log.leases, function () { return { testid: "log-lease-row" }; }));
  });
}

function viewFor(route) {
  var s = route.segments;
  if (s.length === 0) return objectsView();
  if (s[0] === "objects" && s.length >= 2) {
    var object = s[1];
    if (s.length === 2) return objectView(object, undefined, undefined, route.query);
    if (s[2] === "queues" && s.length === 4) return jobsView(object, s[3], route.query);
    if (s[2] === "queues" && s.length === 6 && s[4] === "jobs") return jobView(object, s[3], s[5]);
    if (s[2] === "workflows" && s.length === 6 && s[4] === "instances") return workflowView(object, s[3], s[5]);
    if (s.length <= 4) return objectView(object, s[2], s[3], route.query);
  }
  return Promise.reject(new ApiError(404, "NotFound", "No such page: " + location.hash));
}

// ---------------------------------------------------------------------------------------------
// Rendering, sign-in, auto-refresh

var renders = 0;

function setCrumbs(crumbs) {
  var nav = byId("crumbs");
  nav.replaceChildren();
  crumbs.forEach(function (c, i) {
    if (i > 0) nav.append(h("span", { class: "sep" }, "/"));
    // Each label isolated: a name's right-to-left text cannot pull the separators into it.
    nav.append(c[1] ? h("a", { href: c[1] }, u(c[0])) : h("span", { "aria-current": "page" }, u(c[0])));
  });
}

/** Draws the route. quiet: a refresh (keeps the old view until the new one is ready). */
function render(quiet) {
  if (!token && !tokenless) { signIn(""); return Promise.resolve(); }
  byId("controls").hidden = false;
  byId("logout").hidden = !token;
  var app = byId("app");
  var id = ++renders;
  if (!quiet) app.setAttribute("aria-busy", "true");
  return viewFor(parseRoute()).then(function (view) {
    if (id !== renders || (!token && !tokenless)) return;
    var keep = openDetails(app);
    app.replaceChildren();
    add(app, view.node);
    restoreDetails(app, keep);
    setCrumbs(view.crumbs);
    document.title = visible(view.title, true) + " \u00b7 durability inspector";
    byId("last-updated").textContent = "updated " + formatTime(Date.now()).slice(11);
  }, function (error) {
    if (id !== renders || (!token && !tokenless) || error.status === 401) return;
    app.replaceChildren(card(h("h2", null, error.tag || "Error"), h("p", { class: "err", testid: "error" }, error.message || String(error)),
      h("p", null, h("a", { href: "#/" }, "Back to the objects"))));
  }).then(function () {
    if (id === renders) app.removeAttribute("aria-busy");
  });
}

function signedOut(message) {
  token = "";
  tokenless = false;
  saveToken("");
  renders += 1;
  signIn(message);
}

/** The way in the inspector offers: a token form, or (Cloudflare Access alone) a way back to Access. */
function signIn(message) {
  if (accessOnly) showAccess(message);
  else showLogin(message);
}

/**
 * Cloudflare Access is the only way in and its session is missing or over: a token form would ask
 * for something that does not exist. Loading the page again goes through Access, which signs in.
 */
function showAccess(message) {
  byId("controls").hidden = true;
  setCrumbs([]);
  document.title = "Sign in \u00b7 durability inspector";
  var reload = h("button", { type: "button", class: "primary", testid: "access-reload", onclick: function () { location.reload(); } }, "Sign in through Access");
  byId("app").replaceChildren(h("section", { class: "card login", testid: "access-required" },
    h("h2", null, "Signed out of Cloudflare Access"),
    h("p", { class: "muted" }, "This inspector takes no token: Cloudflare Access in front of it lets you in. Your Access session is missing or has expired; load the page again to sign in."),
    reload,
    message ? h("p", { class: "error-text", testid: "access-error", role: "alert" }, message) : null));
  reload.focus();
}

function showLogin(message) {
  byId("controls").hidden = true;
  setCrumbs([]);
  document.title = "Sign in \u00b7 durability inspector";
  var input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", spellcheck: "false", required: true, testid: "token-input" });
  var error = h("p", { class: "error-text", testid: "login-error", role: "alert" }, message || "");
  var button = h("button", { type: "submit", class: "primary", testid: "login-submit" }, "Sign in");
  var form = h("form", { class: "card login", testid: "login-form" },
    h("h2", null, "Sign in"),
    h("p", { class: "muted" }, "Paste the inspector's token. It stays in this tab only and is sent as a bearer header."),
    h("label", { for: "token" }, "Token"), input, button, error);
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var candidate = input.value.trim();
    if (candidate === "") return;
    button.disabled = true;
    error.textContent = "";
    token = candidate;
    api(["objects"], { probe: true }).then(function () {
      saveToken(candidate);
      render();
    }, function (failure) {
      token = "";
      button.disabled = false;
      error.textContent = failure.status === 401 ? "That token was refused." : failure.message;
    });
  });
  byId("app").replaceChildren(form);
  input.focus();
}

/** A refresh would replace what the user is using: an open dialog, a focused field, an action in flight. */
function busy() {
  if (document.hidden || inFlight > 0 || byId("confirm").open) return true;
  var active = document.activeElement;
  return !!active && byId("app").contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName);
}

function start() {
  var toggle = byId("auto-refresh");
  var stored = null;
  try { stored = sessionStorage.getItem(REFRESH_KEY); } catch (e) { stored = null; }
  toggle.checked = stored !== "off";
  toggle.addEventListener("change", function () {
    try { sessionStorage.setItem(REFRESH_KEY, toggle.checked ? "on" : "off"); } catch (e) { /* private mode */ }
  });
  byId("refresh").addEventListener("click", function () { render(true); });
  byId("logout").addEventListener("click", function () { signedOut(""); });
  window.addEventListener("hashchange", function () { render(); });
  setInterval(function () { if (toggle.checked && (token || tokenless) && !busy()) render(true); }, REFRESH_MS);
  if (token) { render(); return; }
  // Without a token: behind Cloudflare Access the API may answer as it is; otherwise sign in (and say
  // why when the inspector answered something else, e.g. that it is off).
  api(["objects"], { probe: true }).then(function () {
    tokenless = true;
    render();
  }, function (error) {
    if (error.status === 401) signIn("");
    else showLogin(error.message);
  });
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
`
