/**
 * The inspector page's static assets, served by `DurabilityInspector.handler` at `P/`, `P/app.js`
 * and `P/app.css`. They hold no data (the script fetches `P/api/...` with the token), so they are
 * served without auth; the page's CSP allows only these same-origin files, hence no inline script
 * or style anywhere. Relative URLs: the page lives at `P/` whatever the prefix.
 * @internal
 */
import { CORE_JS } from "./pageCore.js"
import { COUNT_CAP } from "../inspection/protocol.js"
import { APP_CSS } from "./pageStyle.js"
import { VIEWS_JS } from "./pageViews.js"
import { WORKFLOWS_JS } from "./pageWorkflows.js"

export { APP_CSS }

export const INDEX_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<title>durability inspector</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="app.css">
<script src="app.js" defer></script>
</head>
<body>
<header class="topbar">
  <a class="brand" href="#/" data-testid="home">durability <span>inspector</span></a>
  <div class="controls" id="controls" hidden>
    <label class="toggle"><input type="checkbox" id="auto-refresh" data-testid="auto-refresh"> Auto-refresh (5 s)</label>
    <span id="last-updated" class="muted" data-testid="last-updated"></span>
    <button type="button" id="refresh" data-testid="refresh">Refresh</button>
    <button type="button" id="logout" data-testid="logout">Sign out</button>
  </div>
</header>
<nav id="crumbs" class="crumbs" data-testid="breadcrumbs" aria-label="Breadcrumbs"></nav>
<main id="app" data-testid="app"><noscript>The inspector needs JavaScript.</noscript></main>
<div id="toasts" class="toasts" role="status" aria-live="polite"></div>
<dialog id="confirm" data-testid="confirm-dialog"></dialog>
</body>
</html>
`

/**
 * One function scope for both halves, so nothing leaks onto `window`. "use strict" is the scope's
 * first statement: a directive anywhere later is an ordinary string and turns nothing on.
 */
export const APP_JS = `(function () {\n"use strict";\nvar COUNT_CAP = ${COUNT_CAP};\n${CORE_JS}\n${WORKFLOWS_JS}\n${VIEWS_JS}\n})();\n`
