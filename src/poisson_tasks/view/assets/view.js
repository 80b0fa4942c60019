"use strict";
// poisson-tasks view: the report's one script. Everything a model or a server wrote is put on the
// page as text nodes (el() and textOf() below), never parsed as markup; no element gets an href,
// src or event attribute from the data, and nothing is fetched: chunks are inflated from the page
// itself.
(function () {
  const META = JSON.parse(document.getElementById("meta").textContent);
  const OUTCOMES = ["verifier_error", "replay_mismatch", "api_error", "wall_timeout",
    "malformed_call", "turn_limit", "overshoot", "wrong_state", "collateral_mutation", "passed"];
  const CLAUSES = {1: "clause 1: a call the parser or server could not read",
    2: "clause 2: a tool outside the block", 3: "clause 3: a required argument missing",
    4: "clause 4: an argument the schema does not allow"};
  const SAFE_ATTR = /^(class|id|title|type|value|colspan|open|data-[a-z-]+|aria-[a-z-]+|role|tabindex|selected|disabled)$/;
  // Every value is put on the page as text, written so it can be read: a character that is not
  // printable (a control, a bidirectional override, a zero-width space, an unassigned code point;
  // Python's str.isprintable, the rule supplied.py and errors.escape_controls apply) is shown as its
  // escape (\u202e), line breaks and tabs kept; and a value longer than LONG characters shows its
  // first LONG with buttons for the rest, since one long unbroken run (a model repeating one token,
  // a script with no spaces) takes the browser seconds to lay out.
  const LONG = 5000;
  const STEP = 10000;
  const HIDDEN = /(?![\n\t])[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|(?! )\p{Zs}/gu;
  const hex = (n, width) => n.toString(16).padStart(width, "0");
  function escapeChar(ch) {
    const code = ch.codePointAt(0);
    if (ch === "\r") return "\\r";
    return code < 0x100 ? "\\x" + hex(code, 2) : code < 0x10000 ? "\\u" + hex(code, 4) : "\\U" + hex(code, 8);
  }
  const visible = (text) => text.replace(HIDDEN, escapeChar);
  function cut(text, at) {  // a cut that never splits a surrogate pair
    const code = text.charCodeAt(at - 1);
    return code >= 0xd800 && code <= 0xdbff ? at - 1 : at;
  }
  function textOf(value) {
    const text = String(value);
    if (text.length <= LONG) return document.createTextNode(visible(text));
    const box = document.createElement("span");
    box.className = "long";
    box.setAttribute("data-role", "long");
    const shown = document.createTextNode("");
    const more = document.createElement("button");
    const all = document.createElement("button");
    let at = 0;
    const reveal = (to) => {
      to = to >= text.length ? text.length : cut(text, to);
      shown.appendData(visible(text.slice(at, to)));
      at = to;
      const left = text.length - at;
      more.textContent = `… ${left.toLocaleString("en")} more characters: show ${Math.min(STEP, left).toLocaleString("en")}`;
      all.textContent = `show all ${text.length.toLocaleString("en")}`;
      if (!left) { more.remove(); all.remove(); }
    };
    for (const [button, role, to] of [[more, "show-more", () => at + STEP], [all, "show-all", () => text.length]]) {
      button.type = "button";
      button.className = "more";
      button.setAttribute("data-role", role);
      button.addEventListener("click", (ev) => { ev.stopPropagation(); reveal(to()); });
    }
    box.append(shown, more, all);
    reveal(LONG);
    return box;
  }
  const cache = {};
  const panel = document.getElementById("panel");
  const body = document.getElementById("panelbody");
  const crumbs = document.getElementById("crumbs");

  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (!SAFE_ATTR.test(k)) throw new Error("attribute not allowed: " + k);
      node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.appendChild(kid instanceof Node ? kid : textOf(kid));
    }
    return node;
  }
  const fmt = (v) => v === null || v === undefined ? "—" : typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : typeof v === "boolean" ? (v ? "yes" : "no") : String(v);
  // a count with its noun in the number it takes (nouns.counted, the card's rule): 1 call, 2 calls
  const counted = (n, word, plural) => `${n} ${n === 1 ? word : (plural || word + "s")}`;
  const short = (arm) => arm.includes(":") ? arm.slice(arm.indexOf(":") + 1) : arm;
  const json = (v) => JSON.stringify(v, null, 1);
  function badge(outcome) { return el("span", {class: "badge o-" + outcome}, outcome); }
  function tree(v) {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const t = el("table", {class: "kv"});
      for (const [k, x] of Object.entries(v)) t.appendChild(el("tr", {}, el("th", {}, k), el("td", {}, tree(x))));
      return Object.keys(v).length ? t : el("span", {class: "dim"}, "none");
    }
    if (Array.isArray(v)) {
      if (!v.length) return el("span", {class: "dim"}, "none");
      if (v.every((x) => x && typeof x === "object")) return el("pre", {}, json(v));
      return v.map(fmt).join(", ");
    }
    return fmt(v);
  }

  function show(...kids) {
    panel.scrollTop = 0;
    body.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
  }

  async function inflate(id) {
    if (cache[id]) return cache[id];
    const text = document.getElementById(id).textContent;
    const bin = atob(text);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    cache[id] = JSON.parse(await new Response(stream).text());
    return cache[id];
  }
  async function armData(arm) {
    const [episodes, tasks] = await Promise.all([inflate(META.chunks[arm].episodes), inflate(META.chunks[arm].tasks)]);
    return {episodes, tasks};
  }
  const pairData = () => inflate("pairs");

  // ---------------------------------------------------------------- routing (#/view?key=value)
  function go(params) { location.hash = "/?" + new URLSearchParams(params).toString(); }
  function route() {
    const h = location.hash;
    if (!h.startsWith("#/")) { panel.hidden = true; return; }
    const p = new URLSearchParams(h.slice(h.indexOf("?") + 1));
    panel.hidden = false;
    body.replaceChildren(el("p", {class: "dim"}, "reading…"));
    const view = p.get("view");
    const done = view === "cell" ? showCell(p) : view === "episode" ? showEpisode(p) : view === "pair" ? showPair(p) : Promise.resolve(body.replaceChildren(el("p", {}, "nothing to show")));
    done.catch((err) => body.replaceChildren(el("p", {class: "refusal"}, "cannot show this: " + err.message)));
  }
  function setCrumbs(...items) {
    const card = el("button", {type: "button", "data-close": "1"}, "the card");
    crumbs.replaceChildren(card, ...items.map(([label, params]) => params ? el("button", {type: "button", "data-go": new URLSearchParams(params).toString()}, label) : el("strong", {}, label)));
  }

  // ---------------------------------------------------------------- a cell: its episodes
  function figureLine(cell) {
    if (!cell) return el("p", {class: "dim"}, "no card figure for this arm (the card was refused or the arm is not on it)");
    const rate = (name, f) => f ? `${name} pass@1 ${f.pass_at_1.toFixed(3)} [${f.low.toFixed(3)}, ${f.high.toFixed(3)}]` + (f.few_events ? " (few events)" : "") : `${name}: —`;
    return el("p", {}, rate("strict", cell.strict), " · ", rate("leaky", cell.leaky), " · overshoot ", fmt(cell.overshoot), " · ", `${cell.scored} scored of ${counted(cell.episodes, "episode")}`, cell.withheld ? " · withheld: " + cell.withheld : "");
  }
  function histogram(counts, active, onPick) {
    const total = Object.values(counts).reduce((a, b) => a + b, 0) || 1;
    const grid = el("div", {class: "hist", "data-role": "histogram"});
    for (const name of OUTCOMES) {
      const n = counts[name] || 0;
      if (!n) continue;
      const fill = el("div", {class: "fill o-" + name});
      fill.style.width = (100 * n / total).toFixed(1) + "%";
      const button = el("button", {type: "button", class: active === name ? "on" : null, "data-outcome": name}, name);
      button.addEventListener("click", () => onPick(active === name ? "" : name));
      grid.append(button, el("div", {}, fill), el("span", {}, String(n)));
    }
    return grid;
  }
  async function showCell(p) {
    const arm = p.get("arm");
    if (!(arm in META.chunks)) throw new Error("no arm " + arm + " in this run");
    const data = await armData(arm);
    const cell = META.cells[arm];
    const outcome = p.get("outcome") || "";
    const seed = p.get("seed") || "";
    setCrumbs([arm, null]);
    let counts = {};
    let source = "the card's outcome counts";
    if (cell) {
      counts = Object.assign({}, cell.outcomes);
      for (const [k, n] of Object.entries(cell.instrument.by_outcome || {})) counts[k] = (counts[k] || 0) + n;
    } else {
      source = "counted from the episode lines (no card)";
      for (const e of data.episodes) counts[e.outcome] = (counts[e.outcome] || 0) + 1;
    }
    const pick = (o, s) => go({view: "cell", arm, outcome: o, seed: s});
    const rows = data.episodes.filter((e) => (!outcome || e.outcome === outcome) && (!seed || String(e.seed) === seed));
    const outSel = el("select", {"data-role": "outcome-filter"}, el("option", {value: ""}, "every outcome"), OUTCOMES.filter((o) => counts[o]).map((o) => el("option", {value: o, selected: o === outcome}, `${o} (${counts[o]})`)));
    outSel.addEventListener("change", () => pick(outSel.value, seed));
    const seedSel = el("select", {"data-role": "seed-filter"}, el("option", {value: ""}, "every seed"), META.seeds.map((s) => el("option", {value: String(s), selected: String(s) === seed}, String(s))));
    seedSel.addEventListener("change", () => pick(outcome, seedSel.value));
    const table = el("table", {class: "grid", "data-role": "episodes"}, el("tr", {}, ["seed", "attempt", "outcome", "clause", "tokens", "model calls", "tool calls", "min calls", "first divergence", "session"].map((h) => el("th", {}, h))));
    for (const e of rows) {
      const div = e.task !== "ok" ? "task id differs" : e.divergence ? `step ${e.divergence.step + 1}: ${e.divergence.kind}` : "none";
      const tr = el("tr", {class: "ep", "data-line": e.line, "data-outcome": e.outcome, tabindex: 0}, el("td", {}, e.seed), el("td", {}, e.attempt), el("td", {}, badge(e.outcome)), el("td", {}, fmt(e.malformed_clause)), el("td", {}, fmt(e.tokens)), el("td", {}, e.model_calls), el("td", {}, e.tool_calls), el("td", {}, e.min_calls), el("td", {}, div), el("td", {}, e.session + (e.resumed ? " (resumed)" : "")));
      tr.addEventListener("click", () => go({view: "episode", arm, line: e.line}));
      table.appendChild(tr);
    }
    show(
      el("h2", {}, arm),
      figureLine(cell),
      el("h3", {}, "How it ended ", el("span", {class: "dim"}, "(" + source + "; click to filter)")),
      histogram(counts, outcome, (o) => pick(o, seed)),
      cell && cell.malformed_clauses && Object.keys(cell.malformed_clauses).length ? el("p", {class: "dim"}, "malformed calls by clause: " + Object.entries(cell.malformed_clauses).map(([k, n]) => `${CLAUSES[k] || "clause " + k}: ${n}`).join("; ")) : null,
      cell && cell.no_calls && cell.no_calls.episodes ? el("p", {class: "dim"}, `no tool call: ${counted(cell.no_calls.episodes, "episode")}, ${cell.no_calls.as_text} of them wrote a call as text` + (Object.keys(cell.no_calls.dialects || {}).length ? ` (${Object.entries(cell.no_calls.dialects).map(([d, n]) => `${d}: ${n}`).join(", ")})` : "")) : null,
      el("div", {class: "filters"}, el("label", {}, "outcome ", outSel), el("label", {}, "seed ", seedSel), el("span", {class: "dim", "data-role": "shown"}, `${rows.length} of ${counted(data.episodes.length, "episode")}`)),
      el("div", {class: "scroll"}, table),
      cell ? el("details", {}, el("summary", {}, "every figure of this cell on the card"), tree(cell)) : null,
    );
  }

  // ---------------------------------------------------------------- an episode, readable
  function splitThink(text) {
    // <think>…</think> blocks, and text before a lone </think>, set apart from the reply.
    const parts = [];
    if (typeof text !== "string") return parts;
    let rest = text;
    const lone = rest.search(/<\/(think|thinking|reasoning)>/i);
    const open = rest.search(/<(think|thinking|reasoning)>/i);
    if (lone >= 0 && (open < 0 || lone < open)) {
      const end = rest.indexOf(">", lone) + 1;
      parts.push(["think", rest.slice(0, lone)]);
      rest = rest.slice(end);
    }
    const re = /<(think|thinking|reasoning)>([\s\S]*?)(<\/\1>|$)/gi;
    let last = 0, m;
    while ((m = re.exec(rest))) {
      if (m.index > last) parts.push(["text", rest.slice(last, m.index)]);
      parts.push(["think", m[2]]);
      last = re.lastIndex;
      if (m[0].length === 0) break;
    }
    if (last < rest.length) parts.push(["text", rest.slice(last)]);
    return parts.filter(([, t]) => t.trim());
  }
  function messageBlock(role, content) {
    const box = el("div", {class: "msg"}, el("span", {class: "role"}, role));
    for (const [kind, text] of splitThink(content)) box.appendChild(kind === "think" ? el("div", {class: "think", "data-role": "think"}, el("span", {class: "dim"}, "thinking: "), text) : el("span", {}, text));
    if (content === null || content === undefined) box.appendChild(el("span", {class: "dim"}, "(no text)"));
    return box;
  }
  function callText(c) {
    if (!c) return "";
    const args = c.arguments === null || c.arguments === undefined ? (c.raw_arguments !== null && c.raw_arguments !== undefined ? "raw: " + c.raw_arguments : "arguments did not parse") : JSON.stringify(c.arguments);
    return `${c.name}(${args})`;
  }
  function callCell(c, bad) {
    if (!c) return el("td", {class: "dim"}, "—");
    const td = el("td", {class: "mono"});
    td.append(el("span", {class: bad && bad.includes("name") ? "argbad" : null}, c.name), "(");
    if (c.arguments && typeof c.arguments === "object") {
      Object.entries(c.arguments).forEach(([k, v], i) => {
        if (i) td.append(", ");
        td.append(el("span", {class: bad && bad.includes(k) ? "argbad" : null}, `${k}=${JSON.stringify(v)}`));
      });
    } else td.append(el("span", {class: "argbad"}, c.raw_arguments !== null && c.raw_arguments !== undefined ? "raw: " + c.raw_arguments : "arguments did not parse"));
    td.append(")");
    return td;
  }
  function referenceTable(e, task) {
    if (e.task !== "ok" || !task) {
      return el("p", {class: "refusal", "data-role": "reference-missing"}, e.task === "mismatch" ? "The episode's task id differs from the task this build generates for its arm and seed, so no reference solution is shown beside it." : "No task could be generated for this arm and seed.");
    }
    const calls = (e.transcript.tool_calls || []).flat();
    const obs = e.transcript.observations || [];
    const ref = task.reference_calls, refObs = task.reference_observations;
    const d = e.divergence;
    const n = Math.max(calls.length, ref.length);
    const t = el("table", {class: "grid steps", "data-role": "reference"}, el("tr", {}, el("th", {}, "step"), el("th", {}, "reference: call, then the engine's answer"), el("th", {}, "the model: call, then the engine's answer")));
    const side = (call, answer, bad) => { const td = callCell(call, bad); if (answer !== undefined) td.append(el("br"), el("span", {class: "answer"}, answer)); return td; };
    for (let i = 0; i < n; i++) {
      const mark = d && d.step === i;
      const tr = el("tr", {class: mark ? "diverge" : null, "data-step": i}, el("td", {}, String(i + 1)), side(ref[i], refObs[i], mark ? d.fields : null), side(calls[i], obs[i], mark ? d.fields : null));
      t.appendChild(tr);
    }
    const words = {different: "a call other than the reference's", stopped: "the model stopped before the reference's next call", extra: "every reference call made, then more"};
    const line = d ? el("p", {"data-role": "divergence"}, el("strong", {}, `First divergence at step ${d.step + 1}: `), words[d.kind] || d.kind, d.fields && d.fields.length ? ` (differs in: ${d.fields.join(", ")})` : "") : el("p", {"data-role": "divergence"}, el("strong", {}, "No divergence: "), "the model's calls are the reference's, call for call.");
    return el("div", {}, line, t);
  }
  function turnsOf(e) {
    const tr = e.transcript || {};
    const msgs = tr.messages || [];
    const out = [];
    let cur = null;
    for (let i = tr.opening_messages || 0; i < msgs.length; i++) {
      const m = msgs[i];
      if (m.role === "assistant") { cur = {message: m, answers: []}; out.push(cur); }
      else if (m.role === "tool" && cur) cur.answers.push(m);
    }
    return out;
  }
  function turnBlock(e, k, turn) {
    const tr = e.transcript;
    const resp = (tr.responses || [])[k] || {};
    const choice = (resp.choices || [])[0] || {};
    const message = choice.message || {};
    const box = el("div", {class: "turn", "data-role": "turn"});
    const usage = resp.usage ? `${resp.usage.prompt_tokens ?? "?"} in, ${resp.usage.completion_tokens ?? "?"} out` : "usage not reported";
    box.appendChild(el("div", {class: "meta"}, `model call ${k + 1} · finish ${choice.finish_reason ?? (e.finish_reasons || [])[k] ?? "?"} · ${usage} · ${fmt((tr.response_seconds || [])[k])} s · retries ${fmt((tr.response_retries || [])[k])}`));
    for (const key of ["reasoning_content", "reasoning"]) {
      if (typeof message[key] === "string" && message[key].trim()) box.appendChild(el("div", {class: "think", "data-role": "think"}, el("span", {class: "dim"}, key + ": "), message[key]));
    }
    box.appendChild(messageBlock("assistant", turn.message.content));
    const calls = turn.message.tool_calls || [];
    const parsed = (tr.tool_calls || [])[k] || [];
    calls.forEach((wire, j) => {
      const answer = turn.answers.find((a) => a.tool_call_id === wire.id);
      const fn = wire.function || {};
      box.appendChild(el("div", {class: "mono"}, "→ ", el("strong", {}, fn.name || "?"), " ", fn.arguments || "", parsed[j] && parsed[j].arguments === null ? el("span", {class: "argbad"}, " (arguments did not parse)") : null));
      box.appendChild(el("div", {}, "← ", answer ? el("span", {class: "answer", "data-role": "answer"}, answer.content) : el("span", {class: "dim"}, "no answer")));
    });
    return box;
  }
  async function showEpisode(p) {
    const arm = p.get("arm");
    const line = Number(p.get("line"));
    const data = await armData(arm);
    const e = data.episodes.find((x) => x.line === line);
    if (!e) throw new Error(`no episode at line ${line} of ${arm}`);
    const task = data.tasks[String(e.seed)];
    const tr = e.transcript || {};
    setCrumbs([arm, {view: "cell", arm}], [`seed ${e.seed} · attempt ${e.attempt}`, null]);
    const goal = task ? task.goal.map((g) => `${g.ledger} ${g.record_id} → stage ${g.stage}`).join("; ") : "—";
    const verdict = el("div", {class: "verdict", "data-role": "verdict"},
      el("div", {class: "big"}, badge(e.outcome), " ", e.passed ? "passed (strict)" : "not passed (strict)"),
      tree({"strict label": e.strict_label, "leaky pass": e.leaky_pass, "malformed clause": e.malformed_clause ? CLAUSES[e.malformed_clause] || e.malformed_clause : null,
        "goal": goal, "goal stages reached": e.goal_stages, "tool calls / min calls": `${e.tool_calls} / ${e.min_calls}`, "model calls": e.model_calls,
        "text calls (unparsed)": e.unparsed_text_calls, "context overflow": e.context_overflow, "error": e.error, "task id": e.task_id, "task id check": e.task === "ok" ? "matches this build's task" : e.task}));
    const pairs = META.pairs.filter((x) => x.lower === arm || x.upper === arm);
    const opening = (tr.messages || []).slice(0, tr.opening_messages || 0);
    const promptBox = el("div", {"data-role": "prompt"});
    opening.forEach((m, i) => {
      if (i >= 2 && opening.length > 3) return;
      promptBox.appendChild(messageBlock(m.role, m.content));
    });
    if (opening.length > 3) {
      const hist = el("details", {}, el("summary", {}, `seeded history: ${opening.length - 2} more messages`));
      opening.slice(2).forEach((m) => hist.appendChild(messageBlock(m.role, m.content !== null && m.content !== undefined ? m.content : (m.tool_calls || []).map((c) => callText({name: c.function.name, arguments: c.function.arguments})).join("; "))));
      promptBox.appendChild(hist);
    }
    const tools = task ? el("details", {"data-role": "tools"}, el("summary", {}, `tool block: ${counted(task.tools.length, "tool")} (${task.tools.map((t) => t.function.name).join(", ")})`), el("pre", {}, json(task.tools))) : null;
    const texts = (tr.text_calls || []).map((t, i) => el("div", {class: "turn"}, el("div", {class: "meta"}, `text call ${i + 1} · dialect ${(tr.text_call_dialects || [])[i] || "?"}`), el("pre", {}, t)));
    const failed = tr.failed_responses || [];
    show(
      el("h2", {}, `${arm} · seed ${e.seed} · attempt ${e.attempt}`),
      verdict,
      pairs.length ? el("p", {}, "Side by side, same seed: ", pairs.map((x) => { const b = el("button", {type: "button", "data-pair": x.key}, x.lower === arm ? `beside ${x.upper}` : `beside ${x.lower}`); b.addEventListener("click", () => go({view: "pair", pair: x.key, seed: e.seed})); return b; })) : null,
      el("h3", {}, "The reference solution beside the model's calls"),
      referenceTable(e, e.task === "ok" ? task : null),
      el("h3", {}, "The prompt"), promptBox, tools,
      el("h3", {}, `The model's turns (${turnsOf(e).length})`),
      turnsOf(e).map((t, k) => turnBlock(e, k, t)),
      texts.length ? [el("h3", {}, "Text calls (tool calls that arrived as text)"), texts] : null,
      el("h3", {}, "Usage and timing"), tree({usage: e.usage, timing: e.timing, "system fingerprints": e.system_fingerprints, "finish reasons": e.finish_reasons}),
      el("h3", {}, `Failed responses and retries (${failed.length} failed, ${counted(tr.retries ?? 0, "retry", "retries")})`),
      failed.length ? el("pre", {"data-role": "failed"}, json(failed)) : el("p", {class: "dim"}, "none"),
      el("details", {}, el("summary", {}, "the episode line's transcript, as recorded"), el("pre", {}, json(tr))),
    );
  }

  // ---------------------------------------------------------------- paired view
  function diffText(pieces) {
    return el("div", {class: "msg"}, pieces.map(([op, text]) => op === "=" ? text : el("span", {class: op === "-" ? "del" : "ins"}, text)));
  }
  function attemptsBox(arm, rows) {
    const box = el("div", {});
    for (const e of rows) {
      const calls = (e.transcript.tool_calls || []).flat().map((c) => c.name);
      const d = e.task !== "ok" ? "task id differs" : e.divergence ? `diverges at step ${e.divergence.step + 1} (${e.divergence.kind})` : "the reference's calls";
      const a = el("div", {class: "attempt", "data-line": e.line, tabindex: 0}, el("div", {}, `attempt ${e.attempt} `, badge(e.outcome), ` · ${counted(e.tool_calls, "call")} · ${d}`), el("div", {class: "mono dim"}, calls.join(" → ") || "(no tool call)"));
      a.addEventListener("click", () => go({view: "episode", arm, line: e.line}));
      box.appendChild(a);
    }
    return box;
  }
  async function showPair(p) {
    const key = p.get("pair");
    const pair = META.pairs.find((x) => x.key === key);
    if (!pair) throw new Error("no side-by-side pair " + key);
    const seed = p.get("seed") || String(META.seeds[0]);
    const [low, up, pairs] = await Promise.all([armData(pair.lower), armData(pair.upper), pairData()]);
    const changes = (pairs[key] || {})[seed];
    setCrumbs([`${short(pair.lower)} beside ${short(pair.upper)}`, null], [`seed ${seed}`, null]);
    const seedSel = el("select", {"data-role": "pair-seed"}, META.seeds.map((s) => el("option", {value: String(s), selected: String(s) === seed}, String(s))));
    seedSel.addEventListener("change", () => go({view: "pair", pair: key, seed: seedSel.value}));
    const i = META.seeds.map(String).indexOf(seed);
    const step = (d) => { const b = el("button", {type: "button"}, d < 0 ? "← previous seed" : "next seed →"); b.disabled = i + d < 0 || i + d >= META.seeds.length; b.addEventListener("click", () => go({view: "pair", pair: key, seed: META.seeds[i + d]})); return b; };
    const lowRows = low.episodes.filter((e) => String(e.seed) === seed);
    const upRows = up.episodes.filter((e) => String(e.seed) === seed);
    const passes = (rows) => `${rows.filter((e) => e.passed).length} of ${rows.filter((e) => !["verifier_error", "replay_mismatch", "api_error", "wall_timeout"].includes(e.outcome)).length} scored attempts passed (strict)`;
    const changed = changes ? el("table", {class: "grid", "data-role": "changed"}, el("tr", {}, el("th", {}, "what"), el("th", {}, pair.lower), el("th", {}, pair.upper)), changes.changed.map((c) => el("tr", {}, el("td", {}, c.what), el("td", {}, json(c.lower)), el("td", {}, json(c.upper))))) : el("p", {class: "dim"}, "no task for this seed on one side");
    show(
      el("h2", {"data-role": "pair-title"}, `${pair.lower} beside ${pair.upper}`),
      el("div", {class: "filters"}, el("label", {}, "seed ", seedSel), step(-1), step(1)),
      el("h3", {}, "What changed in the task"),
      changed,
      changes ? el("p", {class: "dim"}, "Held the same: " + changes.same.join(", ") + ".") : null,
      changes && (changes.tools_only_lower.length || changes.tools_only_upper.length) ? el("p", {}, `tools only in ${short(pair.lower)}: ${changes.tools_only_lower.join(", ") || "none"}; only in ${short(pair.upper)}: ${changes.tools_only_upper.join(", ") || "none"}`) : null,
      changes ? el("div", {class: "cols", "data-role": "instruction"}, el("div", {}, el("h3", {}, short(pair.lower)), diffText(changes.instruction.lower)), el("div", {}, el("h3", {}, short(pair.upper)), diffText(changes.instruction.upper))) : null,
      el("h3", {}, "What the model did"),
      el("div", {class: "cols", "data-role": "pair-attempts"}, el("div", {}, el("strong", {}, pair.lower), el("p", {class: "dim"}, passes(lowRows)), attemptsBox(pair.lower, lowRows)), el("div", {}, el("strong", {}, pair.upper), el("p", {class: "dim"}, passes(upRows)), attemptsBox(pair.upper, upRows))),
    );
  }

  // ---------------------------------------------------------------- the card's own buttons
  function pairPicker() {
    const host = document.getElementById("pairpicker");
    if (!host) return;
    if (!META.pairs.length) { host.appendChild(el("p", {class: "dim"}, "no pair of arms to read side by side")); return; }
    host.appendChild(el("ul", {}, META.pairs.map((x) => { const b = el("button", {type: "button", "data-pair": x.key}, `${x.lower} beside ${x.upper}`); return el("li", {}, b); })));
  }
  document.addEventListener("click", (ev) => {
    const t = ev.target instanceof Element ? ev.target.closest("[data-arm],[data-pair],[data-go],[data-close],#close") : null;
    if (!t) return;
    if (t.id === "close" || t.hasAttribute("data-close")) { history.pushState("", document.title, location.pathname + location.search); route(); return; }
    if (t.hasAttribute("data-go")) { location.hash = "/?" + t.getAttribute("data-go"); return; }
    if (t.closest("#panelbody")) return;  // buttons inside the panel carry their own handlers
    if (t.hasAttribute("data-pair")) go({view: "pair", pair: t.getAttribute("data-pair"), seed: META.seeds[0]});
    else go({view: "cell", arm: t.getAttribute("data-arm")});
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && ev.target instanceof Element && ev.target.matches("[tabindex]")) ev.target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    if (ev.key === "Escape" && !panel.hidden) { history.pushState("", document.title, location.pathname + location.search); route(); }
  });
  window.addEventListener("hashchange", route);
  pairPicker();
  route();
  document.documentElement.setAttribute("data-ready", "1");
  performance.mark("view-ready");
})();
