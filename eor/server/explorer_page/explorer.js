// The eor explorer: asks through POST /v1/answer (passages and the vote's explanation included) and shows
// the answer, a row per member, the members' agreement as a heatmap and each member's passages; lists the
// benchmark reports of GET /v1/reports. Text from the server is only ever set as text, never as markup.
"use strict";

const KEY_STORE = "eor-api-key";
const $ = (id) => document.getElementById(id);
let pool = [];  // the pool's member names, in the config's order (GET /healthz)

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function number(value, digits = 3) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

function headers() {
  const result = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) result.Authorization = `Bearer ${key}`;
  return result;
}

class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.error ? body.error : { type: "http_error", message: `HTTP ${status}` };
    super(detail.message);
    this.status = status;
    this.type = detail.type;
  }
}

async function call(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers() });
  const type = response.headers.get("Content-Type") || "";
  const body = type.includes("application/json") ? await response.json() : await response.text();
  if (!response.ok) throw new ApiError(response.status, typeof body === "object" ? body : null);
  return body;
}

function needKey(statusNode) {
  const box = $("key-box");
  box.open = true;
  $("api-key").focus();
  say(statusNode, "This server needs its API key: enter it in the API key box above and press Enter.", true);
}

function say(node, text, isError = false) {
  node.textContent = text;
  node.classList.toggle("error", isError);
}

// -- the pool ----------------------------------------------------------------------------------------------

async function loadPool() {
  try {
    const response = await fetch("/healthz");
    const health = await response.json();
    if (health.status === "ok") {
      pool = health.members || [];
      const count = pool.length === 1 ? "One member" : `${pool.length} members`;
      $("pool").textContent = `${count} in the pool: ${pool.join(", ")}`;
    } else {
      $("pool").textContent = `The server is ${health.status}: ${health.error ? health.error.message : ""}`;
      setTimeout(loadPool, 2000);
    }
  } catch (error) {
    $("pool").textContent = "The server cannot be reached.";
    setTimeout(loadPool, 2000);
  }
}

// -- asking ------------------------------------------------------------------------------------------------

async function ask(event) {
  if (event) event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const started = performance.now();
  const progress = watchProgress(started);
  $("ask").disabled = true;
  $("results").setAttribute("aria-busy", "true");
  say($("status"), "Asking every member… the reader is working.");
  try {
    const asked = { question, return_passages: true, explain: true };
    const risk = $("risk").value.trim();
    if (risk) asked.risk = Number(risk);
    const body = JSON.stringify(asked);
    const result = await call("/v1/answer", { method: "POST", body });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    show(result);
    say($("status"), `Answered in ${seconds} s.`);
    $("results").focus();
  } catch (error) {
    if (error.status === 401) needKey($("status"));
    else say($("status"), error.message || String(error), true);
  } finally {
    progress.stop();
    $("ask").disabled = false;
    $("results").removeAttribute("aria-busy");
  }
}

function watchProgress(started) {
  $("working").hidden = false;
  let waiting = null;
  const tick = () => {
    const seconds = Math.round((performance.now() - started) / 1000);
    const queue = waiting ? `; ${waiting} question${waiting === 1 ? "" : "s"} in the queue` : "";
    $("elapsed").textContent = `${seconds} s${queue}`;
  };
  const poll = async () => {
    try {
      const health = await (await fetch("/healthz")).json();
      waiting = health.waiting || 0;
    } catch (error) { waiting = null; }
  };
  tick();
  const timers = [setInterval(tick, 250), setInterval(poll, 1000)];
  return { stop() { timers.forEach(clearInterval); $("working").hidden = true; } };
}

// -- the result --------------------------------------------------------------------------------------------

function show(result) {
  const explanation = result.explanation || { members: {} };
  $("results").hidden = false;
  const answer = $("answer");
  const judged = result.judge ? result.judge.candidates[result.judge.chosen] : null;
  const chosen = judged ? { answer: judged.text } : result.members[result.member];
  if (result.abstained) {
    // the two reasons of a decline (abstention.kind), said plainly before the figures behind them
    const why = result.abstention.kind === "not_in_documents"
      ? "your documents do not seem to hold this" : "not sure enough";
    answer.replaceChildren(element("strong", "I don't know"), ` (${why}) — ${result.abstention.reason}`);
    answer.dataset.kind = result.abstention.kind || "";
  } else {
    delete answer.dataset.kind;
    answer.replaceChildren(element("strong", result.answer || "(empty)"));
  }
  $("probability").textContent = probabilityText(result);
  const reasons = result.degraded_reasons || {};
  const givers = judged && !judged.members.length
    ? `no member (a span of the passages of ${judged.supported_by.join(", ") || "no member"})`
    : (result.given_by || [result.member]).join(", ");
  const parts = [result.abstained ? `declined the answer of ${givers}: ${chosen.answer}` : `given by ${givers}`];
  if (judged) parts.push(`chosen by the judge (${result.judge.fit})`);
  if (result.degraded.length) parts.push(`left out: ${result.degraded.join(", ")}`);
  if (result.cascade) parts.push(`cascade ${result.cascade.reason}`);
  else if ((result.skipped || []).length) parts.push(`not needed: ${result.skipped.join(", ")}`);
  $("answer-note").textContent = parts.join("; ");
  fillSources(result.sources || []);
  const names = pool.length ? pool : Object.keys(result.members).concat(result.degraded, result.skipped || []);
  fillMembers(names, result, explanation, reasons);
  fillCandidates(result.judge);
  fillHeatmap(Object.keys(result.members), explanation);
  fillEvidence(names, result, reasons);
}

function probabilityText(result) {
  if (result.probability === null || result.probability === undefined) return "";
  const p = result.probability.toFixed(2);
  const risk = result.abstention ? ` (the threshold for at most ${result.abstention.alpha} wrong: ` +
    `${result.abstention.threshold === null ? "none" : result.abstention.threshold.toFixed(2)})` : "";
  const fit = result.probability_fit ? `, by its fit "${result.probability_fit}"` : "";
  // an answer given at a risk: where its guarantee does not hold (another corpus or reader), said as for a decline
  const outside = result.abstention && !result.abstained && result.abstention.outside_guarantee
    ? `; outside its guarantee here: ${result.abstention.outside_guarantee}` : "";
  return `P(right) ${p}: the chance that this answer is right, calibrated on the training questions` +
    `${fit}${risk}${outside}`;
}

function status(name, result, account, reasons) {
  if (name in reasons) return ["degraded", `degraded: ${reasons[name]}`];
  if ((result.skipped || []).includes(name)) {
    return ["skipped", result.cascade ? "skipped (cascade stopped)" : "skipped (lazy vote)"];
  }
  if (!(name in result.members)) return ["skipped", "not asked"];
  if (name === result.member) return ["chosen", "chosen"];
  if (account && account.dropped) return ["dropped", "dropped (weight)"];
  return ["voted", "voted"];
}

function fillMembers(names, result, explanation, reasons) {
  const body = $("members").tBodies[0];
  body.replaceChildren();
  for (const name of names) {
    const output = result.members[name];
    const account = explanation.members[name];
    const [kind, label] = status(name, result, account, reasons);
    const row = element("tr", null, kind === "chosen" ? "chosen" : "");
    row.dataset.member = name;
    row.append(element("th", name));
    row.firstChild.scope = "row";
    row.append(element("td", output ? output.answer : "–"));
    row.append(element("td", number(output ? output.score : null), "num"));
    row.append(element("td", number(account ? account.weight : null), "num"));
    row.append(element("td", confidenceText(output && output.confidence), "num"));
    const cell = element("td");
    cell.append(element("span", label, `tag ${kind}`));
    row.append(cell);
    row.append(element("td", output ? number(output.seconds, 2) : "–", "num"));
    body.append(row);
  }
}

function fillCandidates(judge) {
  $("judge").hidden = !judge;
  const body = $("candidates").tBodies[0];
  body.replaceChildren();
  if (!judge) return;
  judge.candidates.forEach((candidate, index) => {
    const row = element("tr", null, index === judge.chosen ? "chosen" : "");
    const head = element("th", candidate.text);
    head.scope = "row";
    row.append(head);
    row.append(element("td", candidate.members.join(", ") || "(span)"));
    row.append(element("td", candidate.supported_by.join(", ") || "–"));
    row.append(element("td", number(candidate.score, 2), "num"));
    row.append(element("td", bestLikelihood(candidate.scores), "num"));
    body.append(row);
  });
}

function bestLikelihood(scores) {
  const entries = Object.entries(scores || {});
  if (!entries.length) return "–";
  const [prompt, best] = entries.reduce((a, b) => (b[1].logprob > a[1].logprob ? b : a));
  return `${Math.exp(best.logprob).toFixed(3)} (${prompt})`;
}

function confidenceText(confidence) {
  if (!confidence || confidence.mean_logprob === null || confidence.mean_logprob === undefined) return "–";
  const mean = Math.exp(confidence.mean_logprob).toFixed(2);
  const margin = confidence.first_margin === null ? "" : ` · margin ${confidence.first_margin.toFixed(2)}`;
  return `p ${mean}${margin}`;
}

function fillHeatmap(names, explanation) {
  const table = $("heatmap");
  table.replaceChildren();
  const voting = names.filter((name) => explanation.members[name]);
  $("heatmap-note").hidden = voting.length < 2;
  if (voting.length < 2) {
    table.append(element("caption", "Fewer than two members voted: there is nothing to compare."));
    return;
  }
  const head = element("thead");
  const top = element("tr");
  top.append(element("td"));
  for (const name of voting) {
    const th = element("th", name);
    th.scope = "col";
    top.append(th);
  }
  head.append(top);
  const body = element("tbody");
  for (const row of voting) {
    const tr = element("tr");
    const th = element("th", row);
    th.scope = "row";
    tr.append(th);
    for (const column of voting) {
      tr.append(row === column ? element("td", "—", "self") : similarityCell(row, column, explanation));
    }
    body.append(tr);
  }
  table.append(element("caption", "Combined similarity of each pair of member answers", "visually-hidden"),
               head, body);
}

function similarityCell(row, column, explanation) {
  const similarity = (explanation.members[row].similarity || {})[column] || {};
  const value = similarity.combined;
  const cell = element("td", number(value, 2));
  cell.className = "cell";
  if (value !== undefined && value !== null) {
    const light = 96 - 58 * Math.max(0, Math.min(1, value));
    cell.style.background = `hsl(212, 62%, ${light}%)`;
    cell.style.color = light < 60 ? "#fff" : "inherit";
  }
  const detail = Object.entries(similarity).map(([metric, v]) => `${metric} ${number(v, 2)}`).join(", ");
  cell.title = `${row} vs ${column}: ${detail}`;
  return cell;
}

function fillEvidence(names, result, reasons) {
  const evidence = $("evidence");
  evidence.replaceChildren();
  for (const name of names) {
    const output = result.members[name];
    const details = element("details");
    details.dataset.member = name;
    const passages = output ? output.passages || [] : [];
    const count = output ? `${passages.length} passage${passages.length === 1 ? "" : "s"}` :
      name in reasons ? "failed" : "not run";
    details.append(element("summary", `${name}: ${count}`));
    if (!output) {
      details.append(element("p", reasons[name] || "The lazy vote did not need this member.", "muted"));
    } else if (!passages.length) {
      details.append(element("p", "No passages: this member reads the question alone.", "muted"));
    } else {
      const list = element("ol");
      for (const passage of passages) list.append(passageItem(passage, output.answer));
      details.append(list);
    }
    if (output && output.prompt) {
      const prompt = element("details");
      prompt.append(element("summary", "The reader's prompt"), element("pre", output.prompt, "prompt"));
      details.append(prompt);
    }
    evidence.append(details);
  }
}

// The answer's sources: those that hold it (where, then the sentence), then in a line those read only.
function fillSources(sources) {
  const holding = sources.filter((source) => source.holds);
  const read = sources.filter((source) => !source.holds);
  $("sources-block").hidden = !sources.length;
  $("sources").replaceChildren(...holding.map((source) => {
    const item = element("li", null, "source");
    item.append(element("span", source.title || source.url || "(untitled)", "passage-head"));
    if (source.file) item.append(documentLink(source.file, source.page));
    if (source.id) item.append(element("span", `id ${source.id} · ${source.member}`, "passage-meta"));
    item.append(element("q", source.sentence, "source-sentence"));
    return item;
  }));
  const names = read.map((source) => {
    const where = source.file ? `${source.file}${source.page ? `, page ${source.page}` : ""}` : source.title;
    return `${where || "(untitled)"} (id ${source.id})`;
  });
  $("sources-read").textContent = !read.length ? ""
    : holding.length ? `Read, not holding the answer: ${names.join("; ")}`
      : `No passage read holds this answer. Read: ${names.join("; ")}`;
}

// The imported document a passage cites, fetched with the API key (GET /v1/documents/FILE) and opened at its
// page: a plain link would not send the key.
function documentLink(file, page) {
  const label = page ? `${file}, page ${page}` : file;
  const button = element("button", label, "document-link");
  button.type = "button";
  button.title = "Open the document this passage comes from";
  button.addEventListener("click", async () => {
    try {
      const path = file.split("/").map(encodeURIComponent).join("/");
      const response = await fetch(`/v1/documents/${path}`, { headers: headers() });
      if (!response.ok) throw new Error(`${response.status}: ${(await response.json()).error.message}`);
      const url = URL.createObjectURL(await response.blob());
      window.open(page ? `${url}#page=${page}` : url, "_blank", "noopener");
    } catch (error) {
      say($("status"), `Cannot open ${file}: ${error.message || error}`, true);
    }
  });
  return button;
}

function passageItem(passage, answer) {
  const item = element("li");
  const head = element("div");
  const title = passage.title || "(untitled)";
  if (passage.url && /^https?:\/\//i.test(passage.url)) {
    const link = element("a", title, "passage-head");
    link.href = passage.url;
    link.rel = "noopener noreferrer";
    link.target = "_blank";
    head.append(link);
  } else {
    head.append(element("span", title, "passage-head"));
  }
  if (passage.file) head.append(documentLink(passage.file, passage.page));
  const meta = [passage.id ? `id ${passage.id}` : null, passage.score !== null && passage.score !== undefined ?
    `score ${number(passage.score, 3)}` : null, passage.url || null].filter(Boolean).join(" · ");
  if (meta) head.append(element("span", meta, "passage-meta"));
  const text = element("p", null, "passage-text");
  text.append(...highlighted(passage.text || "", answer));
  item.append(head, text);
  return item;
}

function highlighted(text, answer) {
  const needle = (answer || "").trim().replace(/[.,;:!?]+$/, "");
  if (!needle || needle.split(/\s+/).length > 20) return [document.createTextNode(text)];
  const pattern = new RegExp(needle.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gi");
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    nodes.push(document.createTextNode(text.slice(last, match.index)), element("mark", match[0]));
    last = match.index + match[0].length;
  }
  nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

// -- reports -----------------------------------------------------------------------------------------------

async function loadReports() {
  const list = $("report-list");
  list.replaceChildren();
  say($("reports-status"), "Loading the reports…");
  try {
    const { reports } = await call("/v1/reports");
    say($("reports-status"), reports.length ? `${reports.length} report${reports.length === 1 ? "" : "s"}:` :
      "No reports under the server's reports folder yet: write one with `eor bench`.");
    for (const report of reports) list.append(reportItem(report));
  } catch (error) {
    if (error.status === 401) needKey($("reports-status"));
    else say($("reports-status"), error.message, error.type !== "reports_disabled");
  }
}

function reportItem(report) {
  const item = element("li");
  const button = element("button", report.name, "link");
  button.type = "button";
  button.addEventListener("click", () => openReport(report.name));
  item.append(button);
  if (report.metric) {
    const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(1));
    item.append(element("span", ` ${report.questions} questions, ${report.members} members; ` +
      `${report.metric}: EoR ${pct(report.eor)}, Top R ${pct(report.top_r)}, oracle ${pct(report.oracle)}`,
      "muted"));
  }
  return item;
}

async function openReport(name) {
  const frame = $("report-frame");
  say($("reports-status"), `Opening ${name}…`);
  try {
    const page = await call(`/v1/reports/${name.split("/").map(encodeURIComponent).join("/")}`);
    frame.srcdoc = page;
    frame.hidden = false;
    for (const button of $("report-list").querySelectorAll("button")) {
      button.toggleAttribute("aria-current", button.textContent === name);
    }
    frame.title = `benchmark report ${name}`;
    say($("reports-status"), `Showing ${name}.`);
  } catch (error) {
    if (error.status === 401) needKey($("reports-status"));
    else say($("reports-status"), error.message, true);
  }
}

// -- views -------------------------------------------------------------------------------------------------

function route() {
  const reports = location.hash === "#reports";
  $("ask-view").hidden = reports;
  $("reports-view").hidden = !reports;
  for (const [tab, current] of [[$("tab-ask"), !reports], [$("tab-reports"), reports]]) {
    if (current) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  if (reports) loadReports();
}

// A new key is kept for the tab and retried at once on the view that asked for it.
function useKey(event) {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORE, $("api-key").value);
  if (location.hash === "#reports") loadReports();
  else if ($("question").value.trim()) ask();
}

document.addEventListener("DOMContentLoaded", () => {
  $("api-key").value = sessionStorage.getItem(KEY_STORE) || "";
  $("ask-form").addEventListener("submit", ask);
  $("key-form").addEventListener("submit", useKey);
  window.addEventListener("hashchange", route);
  route();
  loadPool();
});
