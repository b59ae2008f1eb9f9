// The Files tab (documents: upload, progress, download through /documents) and stored
// glossaries (pick one of the key's glossaries for the pair; save the inline terms as one
// through /glossaries). Uses app.js's helpers (window.MT); shown only when /ui/config says
// the server has documents or stored glossaries.
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const MT = window.MT;
  const POLL_MS = 1000;
  const glossaries = { all: [], on: false, picked: "" };

  // -- tabs --------------------------------------------------------------------------------

  function selectTab(name) {
    for (const tab of ["text", "files"]) {
      const on = tab === name;
      const button = $("tab-" + tab);
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
      $(tab + "-panel").hidden = !on;
    }
    // The pickers serve both tabs; of the options, documents use the stored glossary only.
    document.body.classList.toggle("files-tab", name === "files");
    $("options").classList.toggle("none-here", name === "files" && $("opt-stored").hidden);
  }

  function onTabKey(event) {
    if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
    const next = event.target.id === "tab-text" ? "files" : "text";
    selectTab(next);
    $("tab-" + next).focus();
  }

  // -- documents ---------------------------------------------------------------------------

  function jobItem(name) {
    const item = document.createElement("li");
    const title = document.createElement("span");
    title.className = "job-name";
    title.textContent = name;
    const progress = document.createElement("progress");
    progress.max = 1;
    progress.value = 0;
    progress.setAttribute("aria-label", "Progress of " + name);
    const status = document.createElement("span");
    status.className = "hint job-status";
    status.textContent = "Uploading…";
    item.append(title, progress, status);
    $("jobs").prepend(item);
    return { item, progress, status };
  }

  function statusText(job) {
    if (job.status === "queued") return "Queued";
    if (job.status === "error") return "Failed: " + (job.error || "unknown error");
    if (job.status === "done") return "Done";
    const percent = Math.floor(job.progress * 100) + "%";
    const left = job.seconds_remaining === null ? "" : ", about " + job.seconds_remaining + " s left";
    return "Translating " + percent + left;
  }

  async function upload(file) {
    if (!file) return;
    const [source, target] = MT.pairNow();
    const view = jobItem(file.name);
    const form = new FormData();
    form.append("file", file);
    form.append("target_lang", target);
    if (source !== "auto") form.append("source_lang", source);
    const glossary = $("opt-stored").hidden ? "" : $("stored-glossary").value;
    if (glossary) form.append("glossary_id", glossary);
    try {
      const job = await (await MT.api("/documents", { method: "POST", body: form })).json();
      MT.showMessage("");
      await follow(job, view);
    } catch (error) {
      view.status.textContent = "Failed";
      MT.handleError(error, () => upload(file));
    }
  }

  async function follow(job, view) {
    for (;;) {
      view.progress.value = job.status === "done" ? 1 : job.progress;
      view.status.textContent = statusText(job);
      if (job.status === "done") return offerDownload(job, view);
      if (job.status === "error") return;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      job = await (await MT.api("/documents/" + encodeURIComponent(job.id))).json();
    }
  }

  function offerDownload(job, view) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "primary";
    button.textContent = "Download";
    button.setAttribute("aria-label", "Download " + job.name);
    button.addEventListener("click", () => download(job).catch((e) => MT.handleError(e, () => download(job))));
    view.item.append(button);
    MT.loadUsage();
  }

  async function download(job) {
    const response = await MT.api("/documents/" + encodeURIComponent(job.id) + "/result");
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = job.name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  function bindDrop() {
    const drop = $("drop");
    drop.addEventListener("dragover", (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      drop.classList.remove("over");
      for (const file of event.dataTransfer.files) upload(file);
    });
    $("file-input").addEventListener("change", (event) => {
      for (const file of event.target.files) upload(file);
      event.target.value = "";
    });
  }

  // -- stored glossaries -------------------------------------------------------------------

  function servesPair(glossary, source, target) {
    const base = (code) => code.toLowerCase().split("-")[0];
    return glossary.dictionaries.some(
      (d) => [source.toLowerCase(), base(source)].includes(d.source_lang)
        && [target.toLowerCase(), base(target)].includes(d.target_lang)
    );
  }

  function showGlossaries() {
    if (!glossaries.on) return;
    const [source, target] = MT.pairNow();
    const select = $("stored-glossary");
    select.replaceChildren(new Option("None", ""));
    const hint = $("stored-hint");
    if (source === "auto") {
      select.disabled = true;
      hint.textContent = "Choose the source language to use a stored glossary.";
      return;
    }
    const usable = glossaries.all.filter((g) => servesPair(g, source, target));
    for (const g of usable) select.add(new Option(g.name + " (" + g.entry_count + " terms)", g.id));
    select.disabled = usable.length === 0;
    if (usable.some((g) => g.id === glossaries.picked)) select.value = glossaries.picked;
    const count = usable.length === 1 ? "1 stored glossary" : usable.length + " stored glossaries";
    hint.textContent = usable.length
      ? count + " of your key for this pair."
      : "Your key has no stored glossary for this pair.";
  }

  async function loadGlossaries() {
    try {
      glossaries.all = (await (await MT.api("/glossaries")).json()).glossaries;
    } catch (_) {
      glossaries.all = [];
    }
    showGlossaries();
  }

  async function saveGlossary() {
    const [source, target] = MT.pairNow();
    const name = $("glossary-name").value.trim();
    let entries;
    try {
      entries = MT.glossaryEntries();
      if (source === "auto") throw new Error("Choose the source language before saving a glossary.");
      if (!name) throw new Error("Name the glossary before saving it.");
      if (!entries.length) throw new Error("Write the terms in the Glossary box first.");
    } catch (error) {
      MT.showMessage(error.message);
      return;
    }
    const dictionaries = [{ source_lang: source, target_lang: target, entries }];
    try {
      const body = JSON.stringify({ name, dictionaries });
      const created = await (await MT.api("/glossaries", { method: "POST", body })).json();
      $("glossary-name").value = "";
      $("glossary").value = "";
      await loadGlossaries();
      glossaries.picked = created.id;
      showGlossaries();
      MT.showMessage("Glossary \u201c" + created.name + "\u201d saved.", "info");
      MT.scheduleTranslation();
    } catch (error) {
      MT.handleError(error, saveGlossary);
    }
  }

  // -- wiring ------------------------------------------------------------------------------

  function onConfig(config) {
    $("tabs").hidden = !config.documents;
    if (!config.documents) selectTab("text");
    const extensions = config.document_extensions || [];
    $("file-input").accept = extensions.join(",");
    $("file-hint").textContent = extensions.length ? "Formats: " + extensions.join(" ") : "";
    glossaries.on = Boolean(config.glossaries) && config.options.includes("glossary");
    $("opt-stored").hidden = !glossaries.on;
    if (glossaries.on) {
      $("options").hidden = false;
      loadGlossaries();
    }
  }

  MT.hooks.config.push(onConfig);
  MT.hooks.pair.push(showGlossaries);
  $("tab-text").addEventListener("click", () => selectTab("text"));
  $("tab-files").addEventListener("click", () => selectTab("files"));
  $("tabs").addEventListener("keydown", onTabKey);
  $("save-glossary").addEventListener("click", saveGlossary);
  $("stored-glossary").addEventListener("change", (event) => { glossaries.picked = event.target.value; });
  bindDrop();
})();
