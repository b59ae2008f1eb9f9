// The translation page: talks to the service's own API (the same requests any client sends),
// streams translations from POST /translate/stream (server-sent events read from fetch), keeps
// the API key and recent language pairs in localStorage. No dependencies, no build step.
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const DEBOUNCE_MS = 600;
  const MAX_RETRIES = 5;
  const MAX_RECENT = 5;
  const FORMAT_NAMES = { text: "Plain text", html: "HTML", markdown: "Markdown", xml: "XML" };
  // Status of an error that arrives inside a stream (the HTTP status was already 200).
  const STREAM_STATUS = { overloaded: 503, engine_unavailable: 503, timeout: 504, text_too_long: 413 };

  const store = {
    get(name, fallback) {
      try {
        const raw = localStorage.getItem("mt." + name);
        return raw === null ? fallback : JSON.parse(raw);
      } catch (_) {
        return fallback;
      }
    },
    set(name, value) {
      try { localStorage.setItem("mt." + name, JSON.stringify(value)); } catch (_) { /* private mode */ }
    },
    remove(name) {
      try { localStorage.removeItem("mt." + name); } catch (_) { /* private mode */ }
    },
  };

  const state = {
    config: null,
    languages: new Map(), // code -> {code, name, targets}
    controller: null,
    timer: 0,
    retryTimer: 0,
    retries: 0,
    seq: 0,
    detected: null,
    afterKey: null,
  };
  // files.js (the Files tab, stored glossaries) listens: config(config), pair(source, target).
  const hooks = { config: [], pair: [] };
  const pairChanged = () => hooks.pair.forEach((f) => f(...pairNow()));

  // -- the API ---------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter;
    }
  }

  function requestHeaders(json) {
    const headers = {};
    if (json) headers["Content-Type"] = "application/json";
    const key = store.get("key", "");
    if (key) headers.Authorization = "Bearer " + key;
    return headers;
  }

  function retryAfterSeconds(value) {
    if (!value) return null;
    const seconds = Number(value);
    if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds));
    const date = Date.parse(value);
    return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
  }

  async function errorOf(response) {
    let code = "";
    let message = "";
    try {
      const body = await response.json();
      const error = body.error || body;
      code = typeof error.code === "string" ? error.code : "";
      message = typeof error === "string" ? error : error.message || body.message || "";
    } catch (_) { /* not JSON: a proxy's page */ }
    const retry = retryAfterSeconds(response.headers.get("Retry-After"));
    return new ApiError(response.status, code, message || response.statusText, retry);
  }

  async function api(path, options = {}) {
    const response = await fetch(path, {
      ...options,
      headers: requestHeaders(typeof options.body === "string"),
      cache: "no-store",
    });
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  // Server-sent events from a fetch body: "event: NAME\ndata: JSON\n\n" blocks.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      let end;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
        const event = parseEvent(block);
        if (event) onEvent(event.name, event.data);
      }
      if (done) return;
    }
  }

  function parseEvent(block) {
    let name = "message";
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (!data.length) return null;
    return { name, data: JSON.parse(data.join("\n")) };
  }

  // -- messages --------------------------------------------------------------------------

  function showMessage(text, kind) {
    const box = $("message");
    box.textContent = text;
    box.classList.toggle("info", kind === "info");
    box.hidden = !text;
  }

  function describe(error) {
    if (!(error instanceof ApiError)) {
      return "Cannot reach the translation service (" + error.message + "). Check the connection and try again.";
    }
    const detail = error.message ? ": " + error.message : ".";
    if (error.status === 413) return "Text too long" + detail;
    if (error.code === "unsupported_language_pair") return "Unsupported language pair" + detail;
    if (error.code === "unsupported_language") return "Unsupported language" + detail;
    if (error.code === "language_detection_failed") {
      return "The language could not be detected; choose the source language.";
    }
    if (error.code === "glossary_not_found") return "Glossary not found" + detail;
    if (error.code === "invalid_glossary") return "Glossary problem" + detail;
    if (error.code === "limit_reached") return "Limit reached" + detail;
    if (error.code === "unsupported_option") return "Option not supported by this model" + detail;
    if (error.status === 504) return "The translation took too long and was stopped. Try a shorter text.";
    if (error.status === 422) return "The request was refused" + detail;
    return "Translation failed (" + (error.code || "HTTP " + error.status) + ")" + detail;
  }

  // 401: ask for a key, then run `again`; 503/429: retry after Retry-After; else say why.
  function handleError(error, again) {
    if (error instanceof ApiError && error.status === 401) {
      openKeyDialog(store.get("key", "") ? "The key was refused. Enter a valid API key." : "", again);
      showMessage("This server needs an API key.", "info");
      return;
    }
    if (error instanceof ApiError && (error.status === 503 || error.status === 429)) {
      if (state.retries < MAX_RETRIES) {
        const wait = error.retryAfter ?? Math.min(2 ** state.retries, 30);
        state.retries += 1;
        showMessage("The service is overloaded, retrying in " + wait + " s.", "info");
        clearTimeout(state.retryTimer);
        state.retryTimer = setTimeout(again, wait * 1000);
        return;
      }
      state.retries = 0;
      showMessage("The service is still overloaded. Try again in a moment.");
      return;
    }
    showMessage(describe(error));
  }

  // -- languages -------------------------------------------------------------------------

  function languageName(code) {
    if (code === "auto") return "Detect language";
    const language = state.languages.get(code);
    return language ? language.name : code;
  }

  function matches(language, query) {
    if (!query) return true;
    const q = query.toLowerCase();
    return language.name.toLowerCase().includes(q) || language.code.toLowerCase().startsWith(q);
  }

  function fillSelect(select, codes, query, keep) {
    const wanted = keep ?? select.value;
    select.replaceChildren();
    const shown = codes.filter((code) => code === "auto" || matches(state.languages.get(code), query));
    for (const code of shown) select.add(new Option(languageName(code), code));
    if (shown.includes(wanted)) select.value = wanted;
    else if (query) select.value = shown.find((code) => code !== "auto") ?? shown[0] ?? "";
    return select.value !== wanted;
  }

  function sortedByName(codes) {
    return [...codes].sort((a, b) => languageName(a).localeCompare(languageName(b)));
  }

  function targetCodes() {
    const source = $("source").value;
    if (source !== "auto" && state.languages.has(source)) {
      return sortedByName(state.languages.get(source).targets);
    }
    const all = new Set();
    for (const language of state.languages.values()) language.targets.forEach((c) => all.add(c));
    return sortedByName(all);
  }

  function fillSource(keep) {
    const codes = ["auto", ...sortedByName(state.languages.keys())];
    return fillSelect($("source"), codes, $("source-filter").value.trim(), keep);
  }

  function fillTarget(keep) {
    return fillSelect($("target"), targetCodes(), $("target-filter").value.trim(), keep);
  }

  function setPair(source, target) {
    fillSource(state.languages.has(source) ? source : "auto");
    fillTarget(target);
    pairChanged();
  }

  function pairNow() {
    return [$("source").value, $("target").value];
  }

  // -- recent pairs ----------------------------------------------------------------------

  function remember(source, target) {
    const recent = store.get("recent", []).filter((p) => !(p[0] === source && p[1] === target));
    recent.unshift([source, target]);
    store.set("recent", recent.slice(0, MAX_RECENT));
    showRecent();
  }

  function showRecent() {
    const nav = $("recent");
    const recent = store.get("recent", []).filter(
      (p) => Array.isArray(p) && (p[0] === "auto" || state.languages.has(p[0])) && state.languages.has(p[1])
    );
    nav.replaceChildren();
    if (!recent.length) {
      nav.hidden = true;
      return;
    }
    const label = document.createElement("span");
    label.textContent = "Recent:";
    nav.append(label);
    for (const [source, target] of recent) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = languageName(source) + " → " + languageName(target);
      button.addEventListener("click", () => {
        $("source-filter").value = "";
        $("target-filter").value = "";
        setPair(source, target);
        translateNow();
      });
      nav.append(button);
    }
    nav.hidden = false;
  }

  // -- configuration ---------------------------------------------------------------------

  function applyConfig(config) {
    state.config = config;
    $("model").textContent = config.model;
    const options = new Set(config.options);
    for (const name of ["formality", "glossary", "context"]) $("opt-" + name).hidden = !options.has(name);
    $("options").hidden = options.size === 0;
    const format = $("format");
    format.replaceChildren();
    for (const value of config.formats) format.add(new Option(FORMAT_NAMES[value] || value, value));
    format.value = config.formats.includes(store.get("format", "text")) ? store.get("format", "text") : config.formats[0] || "";
    $("opt-format").hidden = config.formats.length === 0;
    updateCounter();
    hooks.config.forEach((f) => f(config));
  }

  function applyLanguages(body) {
    state.languages = new Map(body.languages.map((language) => [language.code, language]));
    const [source, target] = store.get("recent", [])[0] || ["auto", defaultTarget()];
    setPair(source, target);
    showRecent();
  }

  function defaultTarget() {
    const browser = (navigator.language || "en").split("-")[0];
    if (state.languages.has(browser) && browser !== "en") return browser;
    return state.languages.has("de") ? "de" : state.languages.keys().next().value;
  }

  async function loadUsage() {
    if (!state.config || !state.config.usage) return;
    try {
      const usage = await (await api("/usage")).json();
      const text = usageText(usage);
      $("usage").textContent = text;
      $("usage").hidden = !text;
    } catch (_) {
      $("usage").hidden = true;
    }
  }

  // The remaining quota, from the usual field names (a nested object counts too).
  function usageText(usage) {
    const flat = { ...usage };
    for (const value of Object.values(usage)) if (value && typeof value === "object") Object.assign(flat, value);
    const pick = (...names) => names.map((n) => flat[n]).find((v) => typeof v === "number");
    const limit = pick("character_limit", "characters_limit", "limit", "quota");
    const used = pick("character_count", "characters", "characters_used", "used", "count");
    let left = pick("remaining", "characters_remaining", "remaining_characters", "left");
    if (left === undefined && limit !== undefined && used !== undefined) left = limit - used;
    if (left === undefined || left === null) return "";
    const fmt = (n) => n.toLocaleString();
    return "Quota: " + fmt(left) + " characters left" + (limit !== undefined ? " of " + fmt(limit) : "");
  }

  async function boot() {
    try {
      const [config, languages] = await Promise.all([
        api("/ui/config").then((r) => r.json()),
        api("/languages").then((r) => r.json()),
      ]);
      state.retries = 0;
      applyConfig(config);
      applyLanguages(languages);
      $("translate").disabled = false;
      showMessage("");
      loadUsage();
      if ($("text").value.trim()) translateNow();
    } catch (error) {
      handleError(error, boot);
    }
  }

  // -- translating -----------------------------------------------------------------------

  function glossaryEntries() {
    const entries = [];
    const lines = $("glossary").value.split("\n");
    lines.forEach((line, index) => {
      if (!line.trim()) return;
      const parts = line.split(/\s*(?:=>|=|\t)\s*/);
      if (parts.length !== 2 || !parts[0].trim() || !parts[1].trim()) {
        throw new Error("Glossary line " + (index + 1) + ": write 'term = translation'.");
      }
      entries.push({ source: parts[0].trim(), target: parts[1].trim() });
    });
    return entries;
  }

  function requestBody(text) {
    const [source, target] = pairNow();
    const body = { text, source_lang: source, target_lang: target };
    const options = new Set(state.config.options);
    if (options.has("glossary")) {
      const glossary = glossaryEntries();
      if (glossary.length) body.glossary = glossary;
    }
    if (!$("opt-stored").hidden && $("stored-glossary").value) body.glossary_id = $("stored-glossary").value;
    if (options.has("context") && $("context").value.trim()) body.context = $("context").value;
    if (options.has("formality") && $("formality").value !== "default") body.formality = $("formality").value;
    if (state.config.formats.length) body.format = $("format").value;
    return body;
  }

  function setBusy(busy) {
    $("output").setAttribute("aria-busy", String(busy));
    $("translate").textContent = busy ? "Translating…" : "Translate";
  }

  function onEvent(name, data) {
    const output = $("output");
    if (name === "start") {
      output.textContent = "";
      showDetected(data.detected_source_lang, data.detection_confidence);
    } else if (name === "delta") {
      output.textContent += data.text;
    } else if (name === "done") {
      output.textContent = data.translation;
      showMeta(data);
    } else if (name === "error") {
      const error = data.error || {};
      throw new ApiError(STREAM_STATUS[error.code] || 500, error.code || "", error.message || "", null);
    }
    $("copy").disabled = !output.textContent;
  }

  function showDetected(code, confidence) {
    state.detected = code || null;
    const line = $("detected");
    if (!code) {
      line.textContent = "";
      return;
    }
    const percent = confidence === null || confidence === undefined ? "" : " (" + Math.round(confidence * 100) + "% sure)";
    line.textContent = "Detected: " + languageName(code) + percent;
  }

  function showMeta(done) {
    const parts = [];
    if (done.cached) parts.push("from cache");
    if (done.segments > 1) parts.push(done.segments + " pieces");
    if (done.truncated) parts.push("may be incomplete (output limit)");
    if (done.usage && !done.cached) parts.push(done.usage.output_tokens + " tokens generated");
    if (!done.translation) parts.push("empty translation");
    $("meta").textContent = parts.join(" · ");
  }

  function stopCurrent() {
    clearTimeout(state.timer);
    clearTimeout(state.retryTimer);
    if (state.controller) state.controller.abort();
    state.controller = null;
  }

  async function translateNow() {
    stopCurrent();
    const text = $("text").value;
    if (!state.config || !text.trim()) return;
    let body;
    try {
      body = requestBody(text);
    } catch (error) {
      showMessage(error.message);
      return;
    }
    const controller = new AbortController();
    const seq = ++state.seq;
    state.controller = controller;
    setBusy(true);
    $("meta").textContent = "";
    try {
      const init = { method: "POST", body: JSON.stringify(body), signal: controller.signal };
      const response = await api("/translate/stream", init);
      await readEvents(response, (name, data) => {
        if (seq === state.seq) onEvent(name, data);
      });
      if (seq !== state.seq) return;
      state.retries = 0;
      showMessage("");
      remember(body.source_lang, body.target_lang);
      loadUsage();
    } catch (error) {
      if (error.name === "AbortError" || seq !== state.seq) return;
      handleError(error, translateNow);
    } finally {
      if (seq === state.seq) {
        setBusy(false);
        state.controller = null;
      }
    }
  }

  function scheduleTranslation() {
    clearTimeout(state.timer);
    state.retries = 0;
    state.timer = setTimeout(translateNow, DEBOUNCE_MS);
  }

  function updateCounter() {
    const length = $("text").value.length;
    const counter = $("counter");
    const max = state.config ? state.config.max_text_chars : null;
    counter.textContent = max === null
      ? length.toLocaleString() + " characters"
      : length.toLocaleString() + " / " + max.toLocaleString() + " characters";
    counter.classList.toggle("over", max !== null && length > max);
  }

  // -- actions ---------------------------------------------------------------------------

  function clearAll() {
    stopCurrent();
    state.seq += 1;
    setBusy(false);
    $("text").value = "";
    $("output").textContent = "";
    $("meta").textContent = "";
    $("copy").disabled = true;
    showDetected(null);
    showMessage("");
    updateCounter();
    $("text").focus();
  }

  function swap() {
    let [source, target] = pairNow();
    if (source === "auto") source = state.detected;
    if (!source) {
      showMessage("Choose the source language first: nothing has been detected yet.", "info");
      return;
    }
    $("source-filter").value = "";
    $("target-filter").value = "";
    setPair(target, source);
    const output = $("output").textContent;
    if (output) $("text").value = output;
    updateCounter();
    translateNow();
  }

  async function copy() {
    const text = $("output").textContent;
    if (!text) return;
    try {
      await navigator.clipboard.writeText(text);
    } catch (_) {
      // Plain http on another host is no secure context: no clipboard API there.
      const area = document.createElement("textarea");
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    showMessage("Translation copied.", "info");
  }

  // -- the key dialog --------------------------------------------------------------------

  function openKeyDialog(problem, again) {
    const dialog = $("key-dialog");
    state.afterKey = again || null;
    $("key-error").textContent = problem || "";
    $("key-input").value = store.get("key", "");
    $("key-forget").hidden = !store.get("key", "");
    if (!dialog.open) dialog.showModal();
    $("key-input").focus();
  }

  function saveKey(event) {
    event.preventDefault();
    const key = $("key-input").value.trim();
    if (!key) {
      $("key-error").textContent = "Enter a key.";
      return;
    }
    store.set("key", key);
    $("key-dialog").close();
    const again = state.afterKey || boot;
    state.afterKey = null;
    again();
  }

  function forgetKey() {
    store.remove("key");
    $("key-input").value = "";
    $("key-forget").hidden = true;
    $("key-error").textContent = "The key was removed from this browser.";
  }

  // -- wiring ----------------------------------------------------------------------------

  function onKey(event) {
    if ($("key-dialog").open) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      translateNow();
    } else if (event.key === "Escape") {
      event.preventDefault();
      clearAll();
    }
  }

  function bind() {
    $("text").addEventListener("input", () => {
      updateCounter();
      scheduleTranslation();
    });
    $("source").addEventListener("change", () => {
      fillTarget();
      pairChanged();
      scheduleTranslation();
    });
    $("target").addEventListener("change", () => {
      pairChanged();
      scheduleTranslation();
    });
    $("source-filter").addEventListener("input", () => {
      if (fillSource()) fillTarget();
      pairChanged();
      scheduleTranslation();
    });
    $("target-filter").addEventListener("input", () => {
      if (fillTarget()) {
        pairChanged();
        scheduleTranslation();
      }
    });
    for (const id of ["formality", "glossary", "context", "format", "stored-glossary"]) $(id).addEventListener("change", scheduleTranslation);
    $("format").addEventListener("change", () => store.set("format", $("format").value));
    $("translate").addEventListener("click", translateNow);
    $("clear").addEventListener("click", clearAll);
    $("swap").addEventListener("click", swap);
    $("copy").addEventListener("click", copy);
    $("key-button").addEventListener("click", () => openKeyDialog("", boot));
    $("key-form").addEventListener("submit", saveKey);
    $("key-cancel").addEventListener("click", () => $("key-dialog").close());
    $("key-forget").addEventListener("click", forgetKey);
    document.addEventListener("keydown", onKey);
  }

  window.MT = {
    api, handleError, showMessage, languageName, pairNow, glossaryEntries, loadUsage,
    hooks, scheduleTranslation,
  };
  bind();
  updateCounter();
  boot();
})();
