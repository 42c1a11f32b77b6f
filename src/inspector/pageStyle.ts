/**
 * The inspector page's stylesheet (served as `P/app.css`). The page's CSP allows no inline style,
 * so every rule lives here; phone widths turn data tables into stacked cards.
 * @internal
 */
export const APP_CSS = String.raw`:root {
  --bg: #f6f7f9;
  --panel: #ffffff;
  --ink: #1c2330;
  --muted: #5d6778;
  --line: #dde1e8;
  --accent: #2456c7;
  --accent-ink: #ffffff;
  --danger: #b42318;
  --ok: #1a7f45;
  --warn: #9a5b00;
  --info: #2456c7;
  --idle: #5d6778;
  --radius: 6px;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  color-scheme: light;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0;
  background: var(--bg);
  color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, pre, .mono { font-family: var(--mono); font-size: 12.5px; }
h1, h2, h3 { line-height: 1.25; margin: 0 0 8px; }
h2 { font-size: 18px; }
h3 { font-size: 15px; }
[hidden] { display: none !important; }

.topbar {
  display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: 8px 16px;
  padding: 10px 20px; background: #1c2330; color: #e9edf3;
}
.brand { color: #ffffff; font-weight: 650; font-size: 16px; letter-spacing: .2px; }
.brand span { color: #9fb3d9; font-weight: 500; }
.brand:hover { text-decoration: none; }
.controls { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; }
.controls .muted { color: #aab4c3; }
.controls button { background: transparent; color: #e9edf3; border-color: #4a5568; }
.controls button:hover { background: #2c3646; }
.toggle { display: inline-flex; align-items: center; gap: 6px; cursor: pointer; user-select: none; }

.crumbs { max-width: 1180px; margin: 0 auto; padding: 12px 20px 0; color: var(--muted); overflow-wrap: anywhere; }
.crumbs a, .crumbs span { margin-right: 6px; }
.crumbs .sep { color: #a3abb8; }
main { max-width: 1180px; margin: 0 auto; padding: 12px 20px 48px; }

.card { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); padding: 16px; margin-bottom: 16px; }
.card > h2:first-child, .card > h3:first-child { margin-top: 0; }
.head { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; margin-bottom: 12px; }
.head h2 { margin: 0; overflow-wrap: anywhere; }
.spacer { flex: 1 1 auto; }
.muted { color: var(--muted); }
.empty { color: var(--muted); padding: 12px 0; }
.loading { color: var(--muted); }

button, .button {
  font: inherit; line-height: 1.2; padding: 6px 12px; border-radius: var(--radius);
  border: 1px solid var(--line); background: var(--panel); color: var(--ink); cursor: pointer;
}
button:hover { background: #eef1f6; }
button:disabled { opacity: .55; cursor: default; }
button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-ink); }
button.primary:hover { background: #1d47a8; }
button.danger { color: var(--danger); border-color: #e6b3ae; }
button.danger:hover { background: #fdf0ef; }
button.small { padding: 3px 8px; font-size: 12.5px; }
input, select, textarea {
  font: inherit; padding: 6px 8px; border: 1px solid var(--line); border-radius: var(--radius);
  background: var(--panel); color: var(--ink); min-width: 0;
}
input:focus, select:focus, textarea:focus, button:focus-visible, a:focus-visible { outline: 2px solid #8fb0f5; outline-offset: 1px; }
.actions { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
input.priority { width: 6.5em; padding: 3px 6px; font-size: 12.5px; }

.login { max-width: 420px; margin: 48px auto; display: grid; gap: 10px; }
.login input { width: 100%; }
.error-text { color: var(--danger); margin: 0; min-height: 1em; overflow-wrap: anywhere; }
.error-box { border-color: #efc4bf; background: #fff7f6; }
.error-box h2 { color: var(--danger); }

.summary { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px 20px; margin: 0; }
.summary dt { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; }
.summary dd { margin: 2px 0 0; overflow-wrap: anywhere; }
.fields { display: grid; grid-template-columns: max-content 1fr; gap: 6px 16px; margin: 0; }
.fields dt { color: var(--muted); }
.fields dd { margin: 0; overflow-wrap: anywhere; }

.tabs { display: flex; flex-wrap: wrap; gap: 4px; border-bottom: 1px solid var(--line); margin: 0 0 16px; }
.tabs a {
  padding: 8px 14px; border: 1px solid transparent; border-bottom: none; border-radius: var(--radius) var(--radius) 0 0;
  color: var(--muted); margin-bottom: -1px;
}
.tabs a:hover { text-decoration: none; color: var(--ink); }
.tabs a[aria-current="page"] { background: var(--panel); border-color: var(--line); color: var(--ink); font-weight: 600; }
.tabs .count { color: var(--muted); font-weight: 400; margin-left: 4px; }

.chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 12px; }
.chip { border: 1px solid var(--line); border-radius: 999px; padding: 3px 10px; background: var(--panel); color: var(--ink); font-size: 13px; }
.chip:hover { text-decoration: none; background: #eef1f6; }
.chip[aria-current="page"] { background: var(--ink); border-color: var(--ink); color: #ffffff; }
.chip .count { opacity: .7; margin-left: 4px; }

.table-wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; background: var(--panel); }
th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .4px; white-space: nowrap; }
tbody tr:hover { background: #fafbfd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
/* anywhere, not break-word: only "anywhere" lowers a cell's minimum width, so one long unbroken
   value wraps inside the table instead of stretching it past the screen. */
td.wrap, .wrap { overflow-wrap: anywhere; }
td.id { white-space: nowrap; }
/* An id in a list: one line cut with an ellipsis (the whole id in its title and on its page), narrow
   enough that a job list's nine columns still fit a 1280 px screen. */
.id-text { display: inline-block; max-width: 24ch; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; vertical-align: bottom; }
td code.clip { display: inline-block; max-width: 26ch; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; vertical-align: bottom; }
.err { color: var(--danger); overflow-wrap: anywhere; }

/* Stored text is isolated from the page's words around it (bidi: right-to-left letters or marks in
   a value cannot reorder a sentence, a crumb trail or a table row), and long values break anywhere. */
bdi, .u, code, pre, .err, .msg, .toast, dialog p, td, dd { unicode-bidi: isolate; }
.u { overflow-wrap: anywhere; }
/* A hidden character shown as its escape: boxed, so it is not read as a backslash in the value. */
.ctl {
  font-family: var(--mono); font-size: .85em; color: var(--danger); background: #fdeceb;
  border: 1px solid #efc4bf; border-radius: 3px; padding: 0 2px; margin: 0 1px; white-space: nowrap;
}
.open-object { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 8px 0 12px; }
.open-object input { flex: 1 1 16em; min-width: 0; }
.object-list { list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 8px; }
.object-list a { display: block; padding: 10px 12px; border: 1px solid var(--line); border-radius: var(--radius); overflow-wrap: anywhere; }
.object-list a:hover { background: #f3f6fc; text-decoration: none; border-color: #c5d3f0; }
.counts { display: flex; flex-wrap: wrap; gap: 4px; }
a.badge:hover { text-decoration: none; filter: brightness(.96); }

.badge {
  display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600;
  background: #eef1f6; color: var(--idle); white-space: nowrap;
}
.badge.completed, .badge.running, .badge.active-schedule { background: #e5f5ec; color: var(--ok); }
.badge.failed, .badge.dead { background: #fdeceb; color: var(--danger); }
.badge.active { background: #e8efff; color: var(--info); }
.badge.delayed, .badge.paused, .badge.pending { background: #fff3dc; color: var(--warn); }
.badge.waiting, .badge.waiting-children { background: #eef1f6; color: #38445a; }
.badge.canceled, .badge.ended { background: #eceef1; color: #6b7383; }
/* Workflow instances and steps. */
.badge.complete { background: #e5f5ec; color: var(--ok); }
.badge.errored { background: #fdeceb; color: var(--danger); }
.badge.queued { background: #e8efff; color: var(--info); }
.badge.retrying { background: #fff3dc; color: var(--warn); }
.badge.terminated { background: #eceef1; color: #6b7383; }

pre.json, pre.block {
  margin: 0; padding: 10px 12px; background: #f3f5f8; border: 1px solid var(--line); border-radius: var(--radius);
  max-height: 420px; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere;
}
.note { color: var(--warn); font-size: 12.5px; margin: 4px 0 0; }
details > summary { cursor: pointer; color: var(--accent); }
details[open] > summary { margin-bottom: 6px; }
.logs { list-style: none; margin: 0; padding: 0; font-family: var(--mono); font-size: 12.5px; }
.logs li { display: grid; grid-template-columns: max-content 1fr; gap: 10px; padding: 3px 0; border-bottom: 1px dashed var(--line); }
.logs time { color: var(--muted); }
.logs .msg { white-space: pre-wrap; overflow-wrap: anywhere; }
.timeline { list-style: none; margin: 0; padding: 0; }
.timeline li { display: grid; grid-template-columns: 4ch 1fr; gap: 10px; padding: 8px 0; border-bottom: 1px dashed var(--line); }
.timeline .pos { color: var(--muted); font-family: var(--mono); font-variant-numeric: tabular-nums; }
.timeline .step-head { overflow-wrap: anywhere; }
.timeline .step-times { font-size: 12.5px; margin: 2px 0; }
.send-event textarea { flex: 1 1 20em; min-width: 0; font-family: var(--mono); }
.sections { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 16px; }
.pager { display: flex; gap: 8px; align-items: center; margin-top: 12px; }
.form-row { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; }

.toasts { position: fixed; right: 16px; bottom: 16px; display: grid; gap: 8px; z-index: 10; max-width: min(420px, calc(100vw - 32px)); }
.toast { padding: 10px 14px; border-radius: var(--radius); background: #1c2330; color: #ffffff; box-shadow: 0 4px 14px rgba(0, 0, 0, .18); overflow-wrap: anywhere; }
.toast.error { background: var(--danger); }

dialog { border: 1px solid var(--line); border-radius: var(--radius); padding: 18px; max-width: min(480px, calc(100vw - 32px)); color: var(--ink); }
dialog::backdrop { background: rgba(20, 26, 38, .45); }
dialog p { margin: 0 0 12px; overflow-wrap: anywhere; }
dialog input { width: 100%; margin-bottom: 12px; }
.dialog-actions { display: flex; justify-content: flex-end; gap: 8px; }

@media (max-width: 640px) {
  .topbar { padding: 10px 12px; }
  .crumbs { padding: 10px 12px 0; }
  main { padding: 10px 12px 40px; }
  .card { padding: 12px; }
  .fields { grid-template-columns: 1fr; gap: 2px; }
  .fields dd { margin-bottom: 8px; }
  .sections { grid-template-columns: 1fr; }
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
  table.cards thead { display: none; }
  table.cards tr { border: 1px solid var(--line); border-radius: var(--radius); margin-bottom: 10px; padding: 6px 10px; }
  table.cards td { border: none; padding: 3px 0; display: grid; grid-template-columns: 38% 1fr; gap: 8px; text-align: left; }
  table.cards td > * { justify-self: start; min-width: 0; }
  table.cards td.id { white-space: normal; overflow-wrap: anywhere; }
  table.cards .id-text { max-width: 100%; }
  .summary { grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); }
  table.cards td::before { content: attr(data-label); color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .3px; }
  table.cards td.num { text-align: left; }
  td code.clip { max-width: 100%; }
  .logs li { grid-template-columns: 1fr; gap: 0; }
}
`
