/**
 * The inspector page's workflows views: a workflow's instances by status (the Workflows tab), and one
 * instance's timeline (its steps in call order with their sleeps, waits and results, the events sent to
 * it, consumed or not) with its actions: pause, resume, terminate, restart, send an event. Runs in the
 * same function scope as `pageCore.ts` and `pageViews.ts` (joined in `page.ts`); the same rules hold:
 * text through DOM APIs only, no template literals.
 * @internal
 */
export const WORKFLOWS_JS = String.raw`
// ---------------------------------------------------------------------------------------------
// Workflows

var WORKFLOW_STATUSES = ["queued", "running", "paused", "waiting", "complete", "errored", "terminated"];
var LIVE_STATUSES = ["queued", "running", "paused", "waiting"];

function workflowsCount(overview) {
  if (!overview.workflows) return "";
  var live = [];
  overview.workflows.definitions.forEach(function (d) { LIVE_STATUSES.forEach(function (s) { live.push(d.counts[s] || 0); }); });
  return countSum(live) + " live";
}

/** The buttons for one instance: only the actions its status allows (the server answers changed: 0 otherwise). */
function instanceActions(object, instance) {
  var path = ["objects", object, "workflows", instance.workflow, "instances", instance.id];
  var live = LIVE_STATUSES.indexOf(instance.status) >= 0;
  var name = function () { return [u(instance.workflow), " ", quoted(instance.id)]; };
  return h("div", { class: "actions", testid: "workflow-actions" },
    live && instance.status !== "paused" ? actionButton({ label: "Pause", testid: "workflow-pause", path: path.concat("pause"),
      confirm: ["Pause instance "].concat(name(), ["? A running step finishes; nothing new starts until it is resumed."]) }) : null,
    instance.status === "paused" ? actionButton({ label: "Resume", testid: "workflow-resume", primary: true, path: path.concat("resume"),
      confirm: ["Resume instance "].concat(name(), ["?"]) }) : null,
    live ? actionButton({ label: "Terminate", testid: "workflow-terminate", danger: true, path: path.concat("terminate"),
      confirm: ["Terminate instance "].concat(name(), ["? It ends for good; a running step's signal is aborted."]) }) : null,
    actionButton({ label: "Restart", testid: "workflow-restart", danger: true, path: path.concat("restart"),
      confirm: ["Restart instance "].concat(name(), ["? Its steps and events are deleted and it runs again from its first step."]) }));
}

function workflowsTab(object, overview, workflowName, status) {
  var definitions = overview.workflows ? overview.workflows.definitions : [];
  if (definitions.length === 0) return Promise.resolve(card(empty("No workflows.")));
  var selected = definitions.filter(function (d) { return d.name === workflowName; })[0] || definitions[0];
  var filter = WORKFLOW_STATUSES.indexOf(status) >= 0 ? status : "";
  var pageState = paging("workflows:" + object + ":" + selected.name + ":" + filter);
  return api(["objects", object, "workflows", selected.name, "instances"], { query: { status: filter, cursor: pageState.cursor, limit: PAGE_SIZE } }).then(function (page) {
    var chip = function (value, count) {
      return h("a", { class: "chip", href: link("objects", object, "workflows", selected.name, value ? { status: value } : undefined),
        testid: "workflow-status-filter-" + (value || "all"), "aria-current": value === filter ? "page" : null },
        value || "all", count === undefined ? null : h("span", { class: "count" }, countText(count)));
    };
    var columns = [
      { label: "Instance", className: "id", cell: function (i) {
        return idLink(link("objects", object, "workflows", i.workflow, "instances", i.id), i.id, "workflow-instance-link");
      } },
      { label: "Status", cell: function (i) { return badge(i.status, null, "workflow-status"); } },
      { label: "Created", cell: function (i) { return when(i.createdAt); } },
      { label: "When", cell: function (i) {
        var at = i.endedAt !== null ? ["ended ", i.endedAt] : i.wakeAt !== null ? ["wakes ", i.wakeAt] : ["updated ", i.updatedAt];
        return h("span", null, h("span", { class: "muted" }, at[0]), when(at[1]));
      } },
      { label: "Waiting for", className: "wrap", cell: function (i) {
        return i.waitingFor.length === 0 ? h("span", { class: "muted" }, "—") : h("code", null, u(i.waitingFor.join(", ")));
      } },
      { label: "Params", cell: function (i) { return jsonInline(i.params); } },
      { label: "Error", className: "wrap", cell: function (i) { return errorText(i.error); } },
      { label: "Actions", cell: function (i) { return instanceActions(object, i); } }
    ];
    return card(
      h("div", { class: "head" }, h("h3", null, "Workflow ", u(selected.name))),
      definitions.length > 1 ? h("nav", { class: "chips", testid: "workflow-names", "aria-label": "Workflows" }, definitions.map(function (d) {
        return h("a", { class: "chip", href: link("objects", object, "workflows", d.name), testid: "workflow-name-link",
          "aria-current": d.name === selected.name ? "page" : null }, u(d.name));
      })) : null,
      h("nav", { class: "chips", testid: "workflow-status-filter", "aria-label": "Filter by status" },
        chip("", undefined), WORKFLOW_STATUSES.map(function (s) { return chip(s, selected.counts[s] || 0); })),
      page.items.length === 0 ? empty(filter ? "No " + filter + " instances." : "No instances.") :
        table(columns, page.items, function (i) { return { testid: "workflow-row", "data-instance-id": i.id, "data-status": i.status }; }),
      pager(page, pageState));
  });
}

/** Instances whose every step the user asked to see: a refresh loads them all again. */
var allStepsOf = new Set();
var STEP_PAGES = 50;

/** Every step, page after page (at most STEP_PAGES pages of 100). */
function allSteps(object, workflow, id) {
  var steps = [];
  var next = function (cursor, left) {
    return api(["objects", object, "workflows", workflow, "instances", id, "steps"], { query: { cursor: cursor, limit: 100 } }).then(function (page) {
      steps = steps.concat(page.items);
      return page.cursor && left > 1 ? next(page.cursor, left - 1) : steps;
    });
  };
  return next(undefined, STEP_PAGES);
}

function workflowView(object, workflow, id) {
  var key = JSON.stringify([object, workflow, id]);
  return api(["objects", object, "workflows", workflow, "instances", id]).then(function (detail) {
    var partial = detail.steps.total > detail.steps.items.length;
    return (partial && allStepsOf.has(key) ? allSteps(object, workflow, id) : Promise.resolve(detail.steps.items)).then(function (steps) {
      return workflowPage(object, detail, steps, partial && steps.length < detail.steps.total ? function () {
        allStepsOf.add(key);
        render(true);
      } : null);
    });
  });
}

/** What a step's time means, by its kind: a sleep ends, a wait times out, a retry is due. */
function stepWake(step) {
  if (step.wakeAt === null) return null;
  var label = step.kind === "sleep" ? "wakes " : step.kind === "event" ? (step.status === "waiting" ? "times out " : "timeout ") : "retry ";
  return h("span", null, h("span", { class: "muted" }, label), when(step.wakeAt));
}

function timeline(object, steps, events) {
  return h("ol", { class: "timeline", testid: "workflow-timeline" }, steps.map(function (step) {
    var received = events.filter(function (e) { return e.consumedBy === step.position; })[0];
    var childSlash = step.child ? step.child.indexOf("/") : -1;
    return h("li", { testid: "workflow-step", "data-position": String(step.position), "data-status": step.status },
      h("span", { class: "pos" }, "#" + step.position),
      h("div", null,
        h("div", { class: "step-head" }, h("code", null, step.kind), " ", h("strong", null, u(step.name)), " ", badge(step.status, null, "step-status"),
          step.kind === "do" && step.attempt > 0 ? h("span", { class: "muted" }, " attempt " + step.attempt) : null),
        h("div", { class: "step-times" }, h("span", { class: "muted" }, "started "), when(step.startedAt),
          step.endedAt !== null ? [h("span", { class: "muted" }, " \u00b7 ended "), when(step.endedAt)] : null,
          stepWake(step) ? [h("span", { class: "muted" }, " \u00b7 "), stepWake(step)] : null),
        received ? h("div", { class: "muted" }, "received event #" + received.id + " ", h("code", null, u(received.type))) : null,
        childSlash > 0 ? h("div", null, h("span", { class: "muted" }, "child "), h("a", { testid: "step-child",
          href: link("objects", object, "workflows", step.child.slice(0, childSlash), "instances", step.child.slice(childSlash + 1)) }, u(step.child))) : null,
        step.error ? h("div", null, errorText(step.error)) : null,
        step.result ? disclose("step:" + step.position, "result", jsonBlock(step.result, "step-result")) : null));
  }));
}

function eventsTable(events) {
  return table([
    { label: "#", className: "num", cell: function (e) { return String(e.id); } },
    { label: "Type", className: "wrap", cell: function (e) { return h("code", null, u(e.type)); } },
    { label: "Sent", cell: function (e) { return when(e.sentAt); } },
    { label: "Consumed", cell: function (e) {
      return e.consumedBy === null ? badge("unconsumed", "waiting", "event-consumed") : badge("by step #" + e.consumedBy, "completed", "event-consumed");
    } },
    { label: "Payload", cell: function (e) { return disclose("event:" + e.id, "payload", jsonBlock(e.payload, "event-payload")); } }
  ], events, function (e) { return { testid: "workflow-event-row", "data-event-id": String(e.id) }; });
}

/** Type and JSON payload; the payload is parsed here, so a typo is named before anything is sent. */
function sendEventForm(object, instance) {
  var type = h("input", { type: "text", maxlength: "256", placeholder: "type, e.g. approved", "aria-label": "Event type", testid: "event-type" });
  var payload = h("textarea", { rows: "3", placeholder: "payload as JSON (optional), e.g. {\"by\": \"ops\"}", "aria-label": "Event payload (JSON)", testid: "event-payload-input" });
  var button = actionButton({
    label: "Send event",
    testid: "workflow-send-event",
    primary: true,
    path: ["objects", object, "workflows", instance.workflow, "instances", instance.id, "events"],
    check: function () {
      if (type.value.trim() === "") return "Give the event a type.";
      if (payload.value.trim() === "") return undefined;
      try { JSON.parse(payload.value); return undefined; } catch (e) { return "The payload is not valid JSON: " + e.message; }
    },
    confirm: function () { return ["Send an event of type ", quoted(type.value.trim()), " to instance ", quoted(instance.id), "?"]; },
    body: function () {
      var body = { type: type.value.trim() };
      if (payload.value.trim() !== "") body.payload = JSON.parse(payload.value);
      return body;
    },
    done: function () { return ["Event ", quoted(type.value.trim()), " sent"]; }
  });
  return disclose("send-event", "Send an event", h("div", { class: "form-row send-event", testid: "send-event-form" }, type, payload, button));
}

function workflowPage(object, detail, steps, showAll) {
  var i = detail.instance;
  var field = function (label, value) { return [h("dt", null, label), h("dd", null, value)]; };
  var slash = i.parent ? i.parent.indexOf("/") : -1;
  var live = LIVE_STATUSES.indexOf(i.status) >= 0;
  return {
    title: i.id + " \u00b7 " + i.workflow,
    crumbs: objectCrumbs(object).concat([["Workflows", link("objects", object, "workflows")], [i.workflow, link("objects", object, "workflows", i.workflow)], [i.id]]),
    node: [
      card(
        h("div", { class: "head" }, h("h2", { testid: "workflow-instance-id" }, "Instance ", u(i.id)), badge(i.status, null, "workflow-status"),
          h("span", { class: "spacer" }), instanceActions(object, i)),
        h("dl", { class: "fields", testid: "workflow-fields" },
          field("Workflow", h("a", { href: link("objects", object, "workflows", i.workflow) }, u(i.workflow))),
          field("Created", when(i.createdAt)),
          field("Started", when(i.startedAt, "not yet")),
          field("Updated", when(i.updatedAt)),
          field("Ended", when(i.endedAt)),
          i.wakeAt !== null ? field("Wakes", when(i.wakeAt)) : null,
          i.waitingFor.length > 0 ? field("Waiting for", h("code", { testid: "workflow-waiting-for" }, u(i.waitingFor.join(", ")))) : null,
          i.parent ? field("Parent", slash > 0 ? h("a", { testid: "workflow-parent",
            href: link("objects", object, "workflows", i.parent.slice(0, slash), "instances", i.parent.slice(slash + 1)) }, u(i.parent)) : u(i.parent)) : null),
        i.error ? h("div", { class: "card error-box", testid: "workflow-error" }, h("h3", null, "Error"),
          h("pre", { class: "block" }, i.error.name + ": " + i.error.message)) : null,
        live ? sendEventForm(object, i) : null),
      h("div", { class: "sections" },
        card(h("h3", null, "Params"), jsonBlock(i.params, "workflow-params")),
        i.output ? card(h("h3", null, "Output"), jsonBlock(i.output, "workflow-output")) : null),
      card(h("div", { class: "head" }, h("h3", null, "Steps"), h("span", { class: "muted" }, countText(detail.steps.total) + " in all")),
        steps.length === 0 ? empty("No steps yet.") : timeline(object, steps, detail.events.items),
        showAll ? h("button", { type: "button", class: "small", testid: "more-steps", onclick: showAll }, "Show all " + countText(detail.steps.total) + " steps") : null),
      card(h("div", { class: "head" }, h("h3", null, "Events"), h("span", { class: "muted" }, countText(detail.events.total) + " kept" +
        (detail.events.total > detail.events.items.length ? ", oldest " + detail.events.items.length + " shown" : ""))),
        detail.events.items.length === 0 ? empty("No events were sent to this instance.") : eventsTable(detail.events.items))
    ]
  };
}
`
