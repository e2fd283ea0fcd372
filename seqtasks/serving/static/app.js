"use strict";
// The page only talks to the server that served it (relative URLs, same origin); nothing is fetched from elsewhere.

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    // The page's Content-Security-Policy refuses style attributes; the style object is script, which it allows.
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of [].concat(children)) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const fmt = (x, digits = 3) => Number(x).toFixed(digits);
const modelUrl = (model, verb) => `v1/models/${encodeURIComponent(model.name)}:${verb}`;

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new Error(`Could not reach the server (${err.message}).`);
  }
  let data = null;
  try {
    data = await response.json();
  } catch (err) {
    // A non-JSON answer (a proxy's error page, say) is reported by its status below.
  }
  if (!response.ok) {
    const detail = data && data.error ? data.error : response.statusText;
    throw new Error(`The server answered ${response.status}: ${detail}`);
  }
  return data;
}

const HELP = {
  translation: "Type a sentence in the source language and press Translate (Ctrl+Enter in the text box works too).",
  toy: "Type an input sequence and press Translate (Ctrl+Enter in the text box works too).",
  sentiment: "Type a review and press Classify (Ctrl+Enter in the text box works too).",
  ner: "Type a sentence and press Find entities (Ctrl+Enter in the text box works too).",
  captioning: "Choose an image and press Caption. Hover, focus or click a word of the caption to see where the model looked.",
};

function main() {
  api("seqtasks/models")
    .then(({ models }) => {
      if (!models || models.length === 0) throw new Error("The server lists no models.");
      if (models.length > 1) renderModelPicker(models);
      renderModel(models[0]);
    })
    .catch((err) => {
      $("model-info").textContent = "";
      showError(err.message);
    });
}

function renderModelPicker(models) {
  const select = el("select", { id: "model-select" },
    models.map((m, i) => el("option", { value: i, text: `${m.name} (${m.task}, version ${m.version})` })));
  select.addEventListener("change", () => renderModel(models[select.value]));
  $("model-picker").replaceChildren(el("label", { for: "model-select", text: "Model" }), select);
}

function renderModel(model) {
  showError("");
  $("title").textContent = model.name;
  document.title = `${model.name} · seqtasks serve`;
  $("model-info").textContent = `${model.task} model · version ${model.version}`;
  $("help").textContent = HELP[model.task] || "";
  const views = { translation: translationView, toy: translationView, sentiment: sentimentView,
    ner: nerView, captioning: captioningView };
  const view = views[model.task];
  $("view").replaceChildren(view ? view(model) : el("p", { text: `This page has no view for the task "${model.task}".` }));
}

// The form shared by every view: its inputs, a submit button, a status line, then `between` (the image
// preview) and an empty results area. `run` fills the results element; errors it throws land in the alert box.
function taskForm(inputs, buttonText, run, between = []) {
  const status = el("p", { class: "status muted", role: "status" });
  const results = el("section", { class: "results", "aria-label": "Results" });
  const button = el("button", { id: "submit", type: "submit", text: buttonText });
  let busy = false;
  const form = el("form", { class: "task-form" }, [...inputs, el("div", { class: "actions" }, [button, status])]);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    form.setAttribute("aria-busy", "true");
    showError("");
    status.textContent = "Working…";
    results.replaceChildren();
    try {
      await run(results);
      status.textContent = "Done.";
    } catch (err) {
      status.textContent = "";
      showError(err.message);
    } finally {
      busy = false;
      form.removeAttribute("aria-busy");
    }
  });
  // Ctrl/Cmd+Enter in the text box submits, as the help line says.
  form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.tagName === "TEXTAREA") {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  return el("div", {}, [form, ...between, results]);
}

function textInput(label, placeholder) {
  return el("div", { class: "field" }, [
    el("label", { for: "text", text: label }),
    el("textarea", { id: "text", name: "text", rows: 3, placeholder, spellcheck: "false" }),
  ]);
}

function readText(model) {
  const text = $("text").value;
  if (!text.trim()) throw new Error("Type some text first.");
  const max = model.limits && model.limits.max_text_characters;
  if (max && text.length > max) throw new Error(`The text has ${text.length} characters; this server accepts at most ${max}.`);
  return text;
}

// The controls come from the server (`setting_fields`: each setting's label, meaning and bounds for this model), so a
// setting or a bound declared in seqtasks/decoding/settings.py shows here without a change to this page.
function settingsFieldset(model) {
  const s = model.settings;
  const fields = model.setting_fields.map((f) => el("div", { class: "field small" }, [
    el("label", { for: f.name, text: f.label, title: f.meaning }),
    el("input", {
      id: f.name, name: f.name, type: "number", value: s[f.name], required: true, title: f.meaning,
      min: f.min, max: capOf(f, s) ?? f.max, step: f.integer ? 1 : "any",
    }),
  ]));
  const fieldset = el("fieldset", { class: "settings" }, [el("legend", { text: "Decoding settings" }), ...fields]);
  // A setting capped by others (n_best: beam_width, or num_samples when sampling) keeps its bound in step with them,
  // so the browser's validation says so.
  fieldset.addEventListener("input", () => {
    for (const f of model.setting_fields) {
      if (f.at_most.length && $(f.name)) $(f.name).max = capOf(f, currentValues(model)) ?? f.max;
    }
  });
  return fieldset;
}

// at_most [searched, sampled]: the first setting's value, or the second's when it is above 0 (sampling).
function capOf(field, values) {
  if (!field.at_most.length) return null;
  const [searched, sampled] = field.at_most;
  const samples = Number(values[sampled]) || 0;
  const cap = samples > 0 ? samples : Number(values[searched]);
  return Number.isFinite(cap) ? cap : null;
}

function currentValues(model) {
  const values = { ...model.settings };
  for (const f of model.setting_fields) if ($(f.name)) values[f.name] = $(f.name).value;
  return values;
}

function readSettings(model) {
  const settings = {};
  for (const f of model.setting_fields) {
    const input = $(f.name);
    if (!input) continue;
    if (!input.checkValidity()) {
      input.focus();
      throw new Error(`${input.labels[0].textContent}: ${input.validationMessage}`);
    }
    settings[f.name] = f.integer ? parseInt(input.value, 10) : parseFloat(input.value);
  }
  return settings;
}

function nBestList(texts, scores) {
  return el("ol", { id: "n-best", class: "n-best" }, texts.map((text, i) => el("li", {}, [
    el("span", { text }), " ", el("span", { class: "score muted", text: `score ${fmt(scores[i])}` }),
  ])));
}

function resultBlock(title, content) {
  return el("div", { class: "block" }, [el("h2", { text: title }), ...[].concat(content)]);
}

// ---- translation / toy

function translationView(model) {
  const fields = [textInput("Source text", "una frase")];
  // Optional: the start every translation is forced to (the export's with_prefix signature).
  if (model.prefix) {
    fields.push(el("div", { class: "field" }, [
      el("label", { for: "prefix", text: "Starts with (optional)" }),
      el("input", { id: "prefix", name: "prefix", type: "text", maxlength: 200 }),
    ]));
  }
  fields.push(settingsFieldset(model));
  return taskForm(fields, "Translate",
    async (results) => {
      const text = readText(model);
      const settings = readSettings(model);
      const prefix = model.prefix ? $("prefix").value : "";
      const body = prefix
        ? { signature_name: "with_prefix", instances: [{ text, prefix, ...settings }] }
        : { signature_name: "with_settings", instances: [{ text, ...settings }] };
      const { predictions } = await api(modelUrl(model, "predict"), body);
      const prediction = predictions[0];
      const output = [el("p", { id: "translation", class: "output", text: prediction.translation })];
      if (settings.n_best > 1 && prediction.translations) output.push(nBestList(prediction.translations, prediction.scores));
      results.append(resultBlock("Translation", output));
      if (model.attention) {
        const { attention } = await api(modelUrl(model, "attention"), { instances: [text] });
        results.append(resultBlock("Attention", heatmap(attention[0], model.settings)));
      }
    });
}

function heatmap(a, defaults) {
  const cell = (w, target, source) => {
    const label = `${target} → ${source}: ${fmt(w, 4)}`;
    return el("td", { title: label, "aria-label": label, style: `background-color: rgba(37, 99, 235, ${w})` });
  };
  const table = el("table", { class: "heatmap" }, [
    el("caption", { class: "visually-hidden", text: "Attention of each target token (rows) on each source token (columns)" }),
    el("thead", {}, el("tr", {}, [
      el("td", { class: "corner" }),
      ...a.source_tokens.map((t) => el("th", { scope: "col" }, el("span", { class: "vertical", text: t }))),
    ])),
    el("tbody", {}, a.target_tokens.map((target, i) => el("tr", {}, [
      el("th", { scope: "row", text: target }),
      ...a.weights[i].map((w, j) => cell(w, target, a.source_tokens[j])),
    ]))),
  ]);
  // A scrollable region must be reachable from the keyboard, so the wrapper takes focus.
  return [
    el("p", { class: "muted" }, [
      `Of the default decoding (beam width ${defaults.beam_width}): “${a.translation}”`, el("br"),
      "Rows: target tokens; columns: source tokens; the darker the cell, the more attention (hover for the number).",
    ]),
    el("div", { id: "heatmap", class: "heatmap-scroll", tabindex: 0, role: "region", "aria-label": "Attention heatmap" }, table),
  ];
}

// ---- sentiment

function sentimentView(model) {
  return taskForm([textInput("Text", "a great film")], "Classify", async (results) => {
    const text = readText(model);
    let result;
    if (model.attention) {
      result = (await api(modelUrl(model, "attention"), { instances: [text] })).attention[0];
    } else {
      result = (await api(modelUrl(model, "predict"), { instances: [text] })).predictions[0];
    }
    const labels = model.labels || result.probabilities.map((_, i) => `class ${i}`);
    results.append(resultBlock("Label", [
      el("p", { id: "label", class: "output", text: result.label }),
      el("ul", { id: "probabilities", class: "bars" }, labels.map((name, i) => {
        const p = result.probabilities[i];
        return el("li", {}, [
          el("span", { class: "bar-name", text: name }),
          el("span", { class: "bar", "aria-hidden": "true" }, el("span", { style: `width: ${100 * p}%` })),
          el("span", { class: "bar-value", text: fmt(p) }),
        ]);
      })),
    ]));
    results.append(resultBlock("Tokens", model.attention ? shadedTokens(result.tokens, result.weights) : [
      el("p", { id: "tokens", class: "tokens", text: text }),
      el("p", { class: "muted", text: "This model pools without attention, so there are no weights to show." }),
    ]));
  });
}

function shadedTokens(tokens, weights) {
  // Shade relative to the largest weight: with many tokens every weight is small.
  const top = Math.max(...weights) || 1;
  return [
    el("p", { id: "tokens", class: "tokens" }, tokens.flatMap((t, i) => {
      const token = el("span", {
        class: "token", text: t, title: `weight ${fmt(weights[i], 4)}`,
        style: `background-color: rgba(217, 119, 6, ${(0.75 * weights[i]) / top})`,
      });
      return i ? [" ", token] : [token];
    })),
    el("p", { class: "muted", text: "Shade: the attention pooling weight of each token (hover for the number)." }),
  ];
}

// ---- ner

const ENTITY_COLOURS = { PER: "#fde68a", LOC: "#bbf7d0", ORG: "#bfdbfe", MISC: "#fbcfe8" };
const SPARE_COLOURS = ["#ddd6fe", "#fed7aa", "#a5f3fc", "#e5e7eb"];

function entityColour(type, assigned) {
  if (!assigned.has(type)) {
    assigned.set(type, ENTITY_COLOURS[type] || SPARE_COLOURS[assigned.size % SPARE_COLOURS.length]);
  }
  return assigned.get(type);
}

// The answer's entity spans, the padded entity_* outputs cut to entity_count.
function entitySpans(prediction) {
  return prediction.entity_start.slice(0, prediction.entity_count).map((start, i) => ({
    start, end: prediction.entity_end[i], type: prediction.entity_type[i], score: prediction.entity_score[i],
  }));
}

function nerView(model) {
  return taskForm([textInput("Text", "Ana vive en Madrid")], "Find entities", async (results) => {
    const text = readText(model);
    const { predictions } = await api(modelUrl(model, "predict"), { instances: [text] });
    // Offsets count Unicode characters, not the UTF-16 units of a JavaScript string.
    const characters = Array.from(text);
    const colours = new Map();
    const parts = [];
    let position = 0;
    for (const span of entitySpans(predictions[0])) {
      parts.push(characters.slice(position, span.start).join(""));
      const score = `${(100 * span.score).toFixed(1)}%`;
      parts.push(el("mark", {
        class: "entity", title: `${span.type}, probability ${score}`,
        style: `background-color: ${entityColour(span.type, colours)}`,
      }, [characters.slice(span.start, span.end).join(""), " ",
        el("span", { class: "entity-type", text: `${span.type} ${score}` })]));
      position = span.end;
    }
    parts.push(characters.slice(position).join(""));
    const legend = el("ul", { class: "legend", "aria-label": "Entity types" }, [...colours].map(([type, colour]) =>
      el("li", {}, [el("span", { class: "swatch", style: `background-color: ${colour}` }), type])));
    results.append(resultBlock("Entities", [
      el("p", { id: "entities", class: "output" }, parts),
      colours.size ? legend : el("p", { class: "muted", text: "No entities found." }),
    ]));
  });
}

// ---- captioning

function readFileBase64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result.slice(reader.result.indexOf(",") + 1));
    reader.onerror = () => reject(new Error(`Could not read ${file.name}.`));
    reader.readAsDataURL(file);
  });
}

function captioningView(model) {
  const preview = el("img", { id: "preview", alt: "" });
  const canvas = el("canvas", { class: "overlay", "aria-hidden": "true" });
  const figure = el("div", { class: "figure", hidden: true }, [preview, canvas]);
  const fileInput = el("input", { id: "image", name: "image", type: "file", accept: "image/*" });
  fileInput.addEventListener("change", () => {
    const file = fileInput.files[0];
    if (preview.src) URL.revokeObjectURL(preview.src);
    figure.hidden = !file;
    if (file) {
      preview.src = URL.createObjectURL(file);
      preview.alt = `The chosen image, ${file.name}`;
    }
    clearOverlay(canvas);
  });
  const fields = [el("div", { class: "field" }, [el("label", { for: "image", text: "Image" }), fileInput])];
  if (model.settings) fields.push(settingsFieldset(model));
  return taskForm(fields, "Caption", async (results) => {
    const file = fileInput.files[0];
    if (!file) throw new Error("Choose an image first.");
    const max = model.limits && model.limits.max_image_bytes;
    if (max && file.size > max) throw new Error(`The image has ${file.size} bytes; this server accepts at most ${max}.`);
    const b64 = await readFileBase64(file);
    clearOverlay(canvas);
    let prediction;
    if (model.settings) {
      const settings = readSettings(model);
      prediction = (await api(modelUrl(model, "predict"),
        { signature_name: "with_settings", instances: [{ image: { b64 }, ...settings }] })).predictions[0];
    } else {
      prediction = (await api(modelUrl(model, "predict"), { instances: [{ b64 }] })).predictions[0];
    }
    const captionEl = el("p", { id: "caption", class: "output" });
    const block = resultBlock("Caption", captionEl);
    results.append(block);
    if (prediction.captions && prediction.captions.length > 1) block.append(nBestList(prediction.captions, prediction.scores));
    if (!model.attention) {
      captionEl.textContent = prediction.caption;
      return;
    }
    const a = (await api(modelUrl(model, "attention"), { instances: [{ b64 }] })).attention[0];
    const draw = (i) => drawAttention(canvas, preview, a.weights[i], a.grid);
    const words = a.tokens.map((t, i) => el("button", {
      type: "button", class: t === "[END]" ? "word end" : "word", text: t,
      "aria-label": `Show where the model looked for “${t}”`,
      onmouseenter: () => draw(i), onfocus: () => draw(i), onclick: () => draw(i),
    }));
    const wordLine = words.flatMap((w, i) => (i ? [" ", w] : [w]));
    if (a.caption === prediction.caption) {
      captionEl.replaceChildren(...wordLine);
      block.append(el("p", { class: "muted", text: "Hover, focus or click a word to see its attention over the image." }));
    } else {
      captionEl.textContent = prediction.caption;
      block.append(el("p", { class: "muted", text: "Attention is of the default decoding; hover, focus or click a word:" }),
        el("p", { class: "output" }, wordLine));
    }
  }, [figure]);
}

function clearOverlay(canvas) {
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
}

// Dims each grid cell by how little attention it got, so the attended region stays bright.
function drawAttention(canvas, image, weights, [rows, cols]) {
  canvas.width = image.clientWidth;
  canvas.height = image.clientHeight;
  const ctx = canvas.getContext("2d");
  const top = Math.max(...weights) || 1;
  // Edges rounded from the same fractions, so neighbouring cells neither overlap nor leave a gap.
  const xs = Array.from({ length: cols + 1 }, (_, c) => Math.round((c * canvas.width) / cols));
  const ys = Array.from({ length: rows + 1 }, (_, r) => Math.round((r * canvas.height) / rows));
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      ctx.fillStyle = `rgba(0, 0, 0, ${0.75 * (1 - weights[r * cols + c] / top)})`;
      ctx.fillRect(xs[c], ys[r], xs[c + 1] - xs[c], ys[r + 1] - ys[r]);
    }
  }
}

main();
