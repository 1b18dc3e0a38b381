// rxllm's dev UI: plain JavaScript against ADK's development-server API (no build step).
// The page state (app, user, session) lives in the URL hash, so a reload resumes the session
// and shows its stored history.
"use strict";

const API = location.pathname.replace(/\/dev-ui(\/.*)?$/, "");
const $ = (id) => document.getElementById(id);
let current = null; // the AbortController of the turn streaming now

function hashState() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { app: params.get("app"), user: params.get("user"), session: params.get("session") };
}

function saveHash() {
  const params = new URLSearchParams();
  if ($("app").value) params.set("app", $("app").value);
  params.set("user", $("user").value);
  if ($("session").value) params.set("session", $("session").value);
  history.replaceState(null, "", "#" + params.toString());
}

async function api(path, options) {
  const response = await fetch(API + path, options);
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error((body && body.detail) ? JSON.stringify(body.detail) : response.statusText);
  return body;
}

function sessionPath(sessionId) {
  const base = `/apps/${encodeURIComponent($("app").value)}/users/${encodeURIComponent($("user").value)}/sessions`;
  return sessionId === undefined ? base : `${base}/${encodeURIComponent(sessionId)}`;
}

function setStatus(text) { $("status").textContent = text; }

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function scrollDown() { $("messages").scrollTop = $("messages").scrollHeight; }

function addMessage(role, author, text) {
  const node = el("div", `msg ${role}`);
  if (author && role !== "user") node.appendChild(el("span", "author", author));
  const body = el("span", "text", text);
  node.appendChild(body);
  $("messages").appendChild(node);
  scrollDown();
  return body;
}

function partsOf(event) { return (event.content && event.content.parts) || []; }

function textOf(event) {
  return partsOf(event).filter((p) => p.text !== undefined && !p.thought).map((p) => p.text).join("");
}

// One event of a turn or of the stored history into the chat: text bubbles, tool calls and results.
function renderEvent(event, streaming) {
  const author = event.author;
  if (event.error) { addMessage("error", "", event.error); return; }
  if (author === "user") {
    const text = textOf(event);
    if (text) addMessage("user", "user", text);
    return;
  }
  if (event.partial) {
    const text = textOf(event);
    if (!text) return;
    if (!streaming.bubble) streaming.bubble = addMessage("model", author, "");
    streaming.bubble.textContent += text;
    scrollDown();
    return;
  }
  const text = textOf(event);
  if (text) {
    if (streaming.bubble) { streaming.bubble.textContent = text; } else { addMessage("model", author, text); }
  }
  streaming.bubble = null;
  for (const part of partsOf(event)) {
    if (part.functionCall) {
      const call = part.functionCall;
      $("messages").appendChild(el("div", "tool tool-call", `\u2192 ${call.name}(${JSON.stringify(call.args || {})})`));
    }
    if (part.functionResponse) {
      const resp = part.functionResponse;
      $("messages").appendChild(el("div", "tool tool-response", `\u2190 ${resp.name}: ${JSON.stringify(resp.response || {})}`));
    }
  }
  if (event.errorCode || event.errorMessage) addMessage("error", author, `${event.errorCode || ""} ${event.errorMessage || ""}`);
  scrollDown();
}

// The events panel: every event, with its state delta and usage, expandable to its JSON.
function logEvent(event) {
  const item = el("li", event.partial ? "partial" : "");
  const bits = [event.error ? "error" : event.author, event.partial ? "partial" : ""];
  const calls = partsOf(event).filter((p) => p.functionCall).map((p) => "call " + p.functionCall.name);
  const results = partsOf(event).filter((p) => p.functionResponse).map((p) => "result " + p.functionResponse.name);
  bits.push(...calls, ...results);
  const delta = event.actions && event.actions.stateDelta;
  if (delta && Object.keys(delta).length) bits.push("state " + JSON.stringify(delta));
  if (event.usageMetadata) bits.push(`tokens ${event.usageMetadata.promptTokenCount || 0}\u2192${event.usageMetadata.candidatesTokenCount || 0}`);
  item.appendChild(document.createTextNode(bits.filter(Boolean).join(" \u00b7 ")));
  item.appendChild(el("pre", "", JSON.stringify(event, null, 2)));
  item.addEventListener("click", () => item.classList.toggle("open"));
  $("events").appendChild(item);
}

async function loadApps() {
  const { apps } = await api("/list-apps?detailed=true");
  const select = $("app");
  select.innerHTML = "";
  for (const app of apps) {
    const option = el("option", "", app.error ? `${app.name} (failed to load)` : app.name);
    option.value = app.name;
    option.dataset.error = app.error || "";
    select.appendChild(option);
  }
  const wanted = hashState().app;
  if (wanted && apps.some((a) => a.name === wanted)) select.value = wanted;
  showAppError();
}

function showAppError() {
  const option = $("app").selectedOptions[0];
  const error = option ? option.dataset.error : "";
  $("app-error").hidden = !error;
  $("app-error").textContent = error || "";
}

async function loadSessions(selectId) {
  const select = $("session");
  select.innerHTML = "";
  if (!$("app").value) return;
  let sessions = [];
  try { sessions = await api(sessionPath()); } catch (error) { setStatus(String(error.message)); }
  sessions.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime);
  for (const session of sessions) {
    const option = el("option", "", session.id);
    option.value = session.id;
    select.appendChild(option);
  }
  if (selectId && sessions.some((s) => s.id === selectId)) select.value = selectId;
  await showSession();
}

async function showSession() {
  $("messages").innerHTML = "";
  $("events").innerHTML = "";
  $("state").textContent = "";
  saveHash();
  const id = $("session").value;
  if (!id) return;
  const session = await api(sessionPath(id));
  const streaming = {};
  for (const event of session.events || []) { renderEvent(event, streaming); logEvent(event); }
  $("state").textContent = JSON.stringify(session.state || {}, null, 2);
  await loadArtifacts();
  setStatus("idle");
}

async function newSession() {
  const session = await api(sessionPath(), { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
  await loadSessions(session.id);
  return session.id;
}

async function refreshSidePanels() {
  const id = $("session").value;
  if (!id) return;
  const session = await api(sessionPath(id));
  $("state").textContent = JSON.stringify(session.state || {}, null, 2);
  await loadArtifacts();
}

async function loadArtifacts() {
  const list = $("artifacts");
  list.innerHTML = "";
  const id = $("session").value;
  if (!id) return;
  for (const name of await api(sessionPath(id) + "/artifacts")) {
    const item = el("li", "", name);
    item.addEventListener("click", async () => {
      const part = await api(sessionPath(id) + "/artifacts/" + encodeURIComponent(name));
      $("artifact").textContent = part.text !== undefined ? part.text : JSON.stringify(part, null, 2);
    });
    list.appendChild(item);
  }
}

async function loadTrace() {
  const list = $("trace");
  list.innerHTML = "";
  const id = $("session").value;
  if (!id) return;
  const spans = await api("/debug/trace/session/" + encodeURIComponent(id));
  const depth = {};
  for (const span of spans) {
    depth[span.span_id] = span.parent_span_id in depth ? depth[span.parent_span_id] + 1 : 0;
    const ms = span.end_time && span.start_time ? ((span.end_time - span.start_time) / 1e6).toFixed(1) + " ms" : "";
    const usage = span.attributes["gen_ai.usage.input_tokens"] !== undefined
      ? ` tokens ${span.attributes["gen_ai.usage.input_tokens"]}\u2192${span.attributes["gen_ai.usage.output_tokens"]}` : "";
    const item = el("li", "", `${"\u00a0\u00a0".repeat(depth[span.span_id])}${span.name} ${ms}${usage}`);
    item.title = JSON.stringify(span.attributes, null, 2);
    list.appendChild(item);
  }
  if (!spans.length) list.appendChild(el("li", "", "no spans (start the server with tracing and opentelemetry-sdk)"));
}

// One turn: POST /run_sse, read the SSE body as it arrives, render each event.
async function send(text) {
  if (!$("session").value) await newSession();
  const sessionId = $("session").value;
  addMessage("user", "user", text);
  const controller = new AbortController();
  current = controller;
  $("send").disabled = true;
  $("stop").disabled = false;
  setStatus("streaming");
  const streaming = {};
  try {
    const response = await fetch(API + "/run_sse", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        appName: $("app").value, userId: $("user").value, sessionId,
        newMessage: { role: "user", parts: [{ text }] }, streaming: true,
      }),
      signal: controller.signal,
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error(JSON.stringify(body.detail || response.statusText));
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (!data) continue;
        const event = JSON.parse(data);
        renderEvent(event, streaming);
        logEvent(event);
      }
    }
    setStatus("idle");
  } catch (error) {
    if (error.name === "AbortError") { setStatus("stopped"); } else { addMessage("error", "", String(error.message)); setStatus("error"); }
  } finally {
    current = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    await refreshSidePanels().catch(() => {});
  }
}

function wire() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("prompt").value.trim();
    if (!text || current) return;
    $("prompt").value = "";
    send(text);
  });
  $("stop").addEventListener("click", () => { if (current) current.abort(); });
  $("new-session").addEventListener("click", () => newSession());
  $("app").addEventListener("change", () => { showAppError(); loadSessions(); });
  $("user").addEventListener("change", () => loadSessions());
  $("session").addEventListener("change", () => showSession());
  $("refresh-trace").addEventListener("click", () => loadTrace());
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => {
      for (const other of document.querySelectorAll("nav button")) other.classList.toggle("active", other === button);
      for (const tab of document.querySelectorAll(".tab")) tab.hidden = tab.id !== "tab-" + button.dataset.tab;
      if (button.dataset.tab === "trace") loadTrace();
    });
  }
}

async function main() {
  wire();
  const saved = hashState();
  if (saved.user) $("user").value = saved.user;
  await loadApps();
  await loadSessions(saved.session);
  document.body.dataset.ready = "true";
}

main().catch((error) => { setStatus("error: " + error.message); });
