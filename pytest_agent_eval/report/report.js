"use strict";
(function () {
  const cases = JSON.parse(document.getElementById("data").textContent);
  const esc = (s) => String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const json = (v) => esc(JSON.stringify(v, null, 1));
  const num = (v, d) => (v === null || v === undefined ? "" : Number(v).toFixed(d));
  const unpriced = (c) => (c.unpriced_models || []).length > 0;
  const body = document.querySelector("#case-table tbody");
  const f = { outcome: document.getElementById("f-outcome"), file: document.getElementById("f-file"),
              tag: document.getElementById("f-tag"), text: document.getElementById("f-text") };
  let haystack = null; // built with the first text filter
  const text = (i) => {
    if (haystack === null) {
      haystack = cases.map((c) => [c.nodeid, c.description, c.output, c.error,
        ...(c.checks || []).map((k) => k.name + " " + k.message)].join("\n").toLowerCase());
    }
    return haystack[i];
  };
  const PAGE = 500; // rows drawn at a time: a large run opens fast
  let limit = PAGE;
  let order = cases.map((_, i) => i);
  let sortKey = null, sortDir = 1;
  const open = new Set();

  function row(i) {
    const c = cases[i];
    return `<tr class="case" data-i="${i}"><td><code>${esc(c.nodeid)}</code></td>` +
      `<td class="o-${esc(c.outcome)}">${esc(c.outcome)}${c.cached ? " (cached)" : ""}</td>` +
      `<td>${num(c.score, 2)}</td>` +
      `<td>${c.latency_s === null || c.latency_s === undefined ? "" : num(c.latency_s, 3) + " s"}</td>` +
      `<td>${unpriced(c) ? "unpriced" : num(c.cost, 4)}</td><td>${esc((c.tags || []).join(", "))}</td></tr>` +
      (open.has(i) ? `<tr class="detail"><td colspan="6">${detail(c)}</td></tr>` : "");
  }

  function checks(list) {
    return (list || []).map((k) => `<div class="${k.passed ? "check-ok" : "check-bad"}">${esc(k.name)}` +
      `${k.score === null || k.score === undefined ? " (not scored)" : " (" + num(k.score, 2) + ")"}` +
      `${k.message ? ": " + esc(k.message) : ""}` +
      (k.expected !== null && k.expected !== undefined ? `<br>expected: <code>${json(k.expected)}</code>` : "") +
      (k.actual !== null && k.actual !== undefined ? `<br>actual: <code>${json(k.actual)}</code>` : "") +
      `</div>`).join("");
  }

  function input(given) {
    if (!given) return "";
    const out = [];
    if (typeof given.query === "string") out.push(`<pre class="query">${esc(given.query)}</pre>`);
    if (given.turns) out.push(`<ol class="turns">` + given.turns.map((t) => `<li>${esc(t)}</li>`).join("") + `</ol>`);
    if (given.simulated_user) out.push(`simulated user: <code>${json(given.simulated_user)}</code>`);
    if (given.context) out.push(`context: <code>${json(given.context)}</code>`);
    return `<h4>Input</h4><div class="input">${out.join("")}</div>`;
  }

  function detail(c) {
    const parts = [`<p><code>${esc(c.file)}:${esc(c.line)}</code>${c.description ? " — " + esc(c.description) : ""}` +
      `${c.agent ? " — agent " + esc(c.agent) : ""}` +
      `${c.content_hash ? " — content hash <code>" + esc(c.content_hash) + "</code>" : ""}` +
      `${c.cached ? ' — <span class="cached">from the verdict cache' + (c.run_id ? " (run <code>" +
        esc(c.run_id) + "</code>)" : "") + "</span>" : ""}` +
      `${c.trace_id ? " — trace " + (c.trace_url && /^https?:/.test(c.trace_url) ? '<a href="' + esc(c.trace_url) +
        '">' + esc(c.trace_id) + "</a>" : "<code>" + esc(c.trace_id) + "</code>") : ""}</p>`, input(c.input)];
    if (c.error) parts.push(`<h4>Error</h4><pre>${esc(c.error)}</pre>`);
    if (c.reason) parts.push(`<h4>Reason</h4><pre>${esc(c.reason)}</pre>`);
    if (c.checks && c.checks.length) parts.push(`<h4>Checks</h4>${checks(c.checks)}`);
    const trials = c.trials || [];
    if (trials.length > 1) {
      parts.push(`<h4>Trials: ${esc(c.passes)}/${trials.length} passed</h4>` + trials.map((t, n) => t.passed ? "" :
        `<div>trial ${n + 1}: ${t.error ? esc(t.error) : "score " + num(t.score, 2)}` +
        `${checks((t.checks || []).filter((k) => !k.passed))}</div>`).join(""));
    }
    if (c.tool_calls && c.tool_calls.length) {
      parts.push(`<h4>Tool calls</h4><ol class="tools">` + c.tool_calls.map((t) => `<li><b>${esc(t.name)}</b>` +
        `(<code>${json(t.args)}</code>) → <code>${json(t.result)}</code>` +
        `${t.error ? ' <span class="o-error">' + esc(t.error) + "</span>" : ""}</li>`).join("") + `</ol>`);
    }
    if (c.transcript && c.transcript.length) {
      parts.push(`<h4>Transcript</h4><ol class="transcript">` + c.transcript.map((m) => `<li><b>${esc(m.role)}</b>` +
        `${m.latency_s !== undefined && m.latency_s !== null ? " (" + num(m.latency_s, 2) + " s)" : ""}: ` +
        `<pre>${esc(typeof m.content === "string" ? m.content : JSON.stringify(m.content))}</pre></li>`).join("") +
        `</ol>`);
    }
    if (c.output) parts.push(`<h4>Output</h4><pre>${esc(c.output)}</pre>`);
    if (c.conversation) parts.push(`<h4>Conversation scores</h4><code>${json(c.conversation)}</code>`);
    if (c.tokens || c.cost !== null && c.cost !== undefined) {
      parts.push(`<h4>Usage</h4><code>${json({ tokens: c.tokens, cost: c.cost })}</code>`);
    }
    if (unpriced(c)) {
      parts.push(`<p>Cost unknown: no price for ${esc(c.unpriced_models.join(", "))} (give it in agent_eval_prices)</p>`);
    }
    if (c.metadata && Object.keys(c.metadata).length) parts.push(`<h4>Metadata</h4><pre>${json(c.metadata)}</pre>`);
    return parts.join("");
  }

  function draw() {
    const want = { outcome: f.outcome.value, file: f.file.value, tag: f.tag.value, text: f.text.value.toLowerCase() };
    const shown = order.filter((i) => {
      const c = cases[i];
      return (!want.outcome || c.outcome === want.outcome) && (!want.file || c.file === want.file) &&
        (!want.tag || (c.tags || []).includes(want.tag)) && (!want.text || text(i).includes(want.text));
    });
    const more = shown.length - limit;
    body.innerHTML = shown.slice(0, limit).map(row).join("") + (more > 0 ?
      `<tr class="more"><td colspan="6"><button id="more">show ${Math.min(more, PAGE)} more (${more} not shown)` +
      `</button></td></tr>` : "");
    document.getElementById("shown").textContent = `${shown.length} of ${cases.length} cases`;
  }

  function sortBy(key) {
    sortDir = sortKey === key ? -sortDir : 1;
    sortKey = key;
    limit = PAGE;
    const value = (c) => (key === "tags" ? (c.tags || []).join(",") : c[key]);
    order = cases.map((_, i) => i).sort((a, b) => {
      const x = value(cases[a]), y = value(cases[b]);
      if (x === y) return a - b;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sortDir;
    });
    draw();
  }

  for (const el of Object.values(f)) el.addEventListener("input", () => { limit = PAGE; draw(); });
  document.querySelectorAll("#case-table th").forEach((th) => th.addEventListener("click", () => sortBy(th.dataset.key)));
  body.addEventListener("click", (event) => {
    if (event.target.id === "more") { limit += PAGE; draw(); return; }
    const tr = event.target.closest("tr.case");
    if (!tr) return;
    const i = Number(tr.dataset.i);
    if (open.has(i)) open.delete(i); else open.add(i);
    draw();
  });
  draw();
})();
