
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("explorer-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const CELL = 30, ROW = 26, LINK_GAP = 110, PAD = 4;
  // matplotlib's "Blues" (ColorBrewer), as the PNG heatmaps use it
  const BLUES = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225],
    [107, 174, 214], [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107]];
  const source = data.source_words;  // the same words at every training step
  let target = data.target_words;  // the translation's; at a training step, the reference's
  const timeline = data.timeline || null;  // the attention over training, if the run kept it
  // step: a validation's index in timeline.steps; null: the final translation (the default)
  const state = {layer: data.default_layer, head: "mean", word: null, numbers: false,
    step: null, show: "attention"};  // show: "attribution", the third view, where there is one
  const parts = {};  // what a highlight touches, rebuilt by each render
  const $ = (id) => document.getElementById(id);

  function colour(weight) {
    const x = Math.min(1, Math.max(0, weight)) * (BLUES.length - 1);
    const k = Math.min(BLUES.length - 2, Math.floor(x)), f = x - k;
    const rgb = BLUES[k].map((v, n) => Math.round(v + f * (BLUES[k + 1][n] - v)));
    return "rgb(" + rgb.join(",") + ")";
  }

  function node(name, attributes, parent, text) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
    if (text !== undefined) element.textContent = text;
    if (parent) parent.appendChild(element);
    return element;
  }

  function widths(words) {
    const measure = $("measure");
    const sizes = words.map((w) => node("text", {}, measure, w).getComputedTextLength());
    measure.replaceChildren();
    return sizes.length ? sizes : [0];
  }

  function current() {
    if (state.show === "attribution" && state.step === null) return attributionView();
    const views = state.step === null ? data : timeline.steps[state.step];
    const pick = (key) => state.head === "mean" ? views[key].mean[state.layer]
      : views[key].heads[state.layer][state.head];
    return {weights: pick("weights"), links: pick("links"), eos: pick("eos_share"),
      title: pick("titles")};
  }

  // ------------------------------------------------ the URL hash and the selectors

  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    state.step = readStep(params.get("step"));
    target = state.step === null ? data.target_words : timeline.target_words;
    const layer = Number(params.get("layer")), head = params.get("head");
    state.layer = Number.isInteger(layer) && params.has("layer") && layer >= 0 &&
      layer < data.layers ? layer : data.default_layer;
    state.head = head !== null && /^\d+$/.test(head) && Number(head) < data.heads
      ? Number(head) : "mean";
    const word = /^([st])(\d+)$/.exec(params.get("word") || "");
    const count = word && (word[1] === "s" ? source.length : target.length);
    state.word = word && Number(word[2]) < count
      ? (word[1] === "s" ? {i: Number(word[2])} : {j: Number(word[2])}) : null;
    state.numbers = params.get("numbers") === "1";
    state.show = data.attribution && params.get("show") === "attribution"
      ? "attribution" : "attention";
  }

  function writeHash() {
    let hash = "layer=" + state.layer + "&head=" + state.head;
    if (state.numbers) hash += "&numbers=1";
    if (state.step !== null) hash += "&step=" + timeline.steps[state.step].step;
    if (state.show === "attribution") hash += "&show=attribution";
    location.hash = hash;  // the hashchange handler renders
  }

  function fillSelectors() {
    const layer = $("layer"), head = $("head");
    for (let l = 0; l < data.layers; l++) {
      const option = new Option("layer " + l + (l === data.default_layer ? " (default)" : ""), l);
      layer.add(option);
    }
    const heads = data.mean_heads;
    const mean = heads.length === data.heads ? "mean of all " + data.heads + " heads"
      : "mean of heads " + heads.join(",");
    head.add(new Option(mean, "mean"));
    for (let h = 0; h < data.heads; h++) head.add(new Option("head " + h, h));
    layer.addEventListener("change", () => { state.layer = Number(layer.value); writeHash(); });
    head.addEventListener("change", () => {
      state.head = head.value === "mean" ? "mean" : Number(head.value);
      writeHash();
    });
    $("numbers").addEventListener("change", () => {
      state.numbers = $("numbers").checked;
      writeHash();
    });
  }

  // ------------------------------------------------ attention over training: the slider

  function readStep(value) {  // a training step named in the URL → its index; else null
    if (!timeline || value === null) return null;
    const index = timeline.steps.findIndex((entry) => String(entry.step) === value);
    return index >= 0 ? index : null;
  }

  function fillTimeline() {  // the slider's last position is the final translation
    if (!timeline) return;
    const row = document.createElement("div"), label = document.createElement("label");
    const slider = document.createElement("input"), shown = document.createElement("span");
    row.className = "timeline";
    slider.type = "range"; slider.id = "step"; slider.min = "0"; slider.step = "1";
    slider.max = String(timeline.steps.length);
    shown.id = "step-label";
    label.append("training step ", slider);
    row.append(label, shown);
    document.querySelector(".controls").after(row);
    slider.addEventListener("input", () => {
      const k = Number(slider.value);
      state.step = k === timeline.steps.length ? null : k;
      writeHash();
    });
  }

  function showStep() {
    if (!timeline) return;
    const steps = timeline.steps;
    $("step").value = String(state.step === null ? steps.length : state.step);
    $("step-label").textContent = state.step === null
      ? "final: the model's own translation (" + steps.length + " validations before it)"
      : "step " + steps[state.step].step + " (validation " + (state.step + 1) + " of " +
        steps.length + "): attention while reading the reference, word by word";
  }

  // ------------------------------------------------ what the model weighed, and depended on

  function attributionView() {  // the third view: input × gradient, in place of attention
    const a = data.attribution;
    return {weights: a.weights, links: a.links, eos: a.weights.map(() => 0), title: a.title};
  }

  function fillAttribution() {  // a selector of what the panels show, where there is a choice
    if (!data.attribution) return;
    const label = document.createElement("label"), show = document.createElement("select");
    show.id = "show";
    show.add(new Option("attention", "attention"));
    show.add(new Option("attribution (input × gradient)", "attribution"));
    label.append("show ", show);
    document.querySelector(".controls").prepend(label);
    show.addEventListener("change", () => { state.show = show.value; writeHash(); });
  }

  function isPrefix(j) {  // an output word a forced prefix wrote (the final translation's)
    return state.step === null && j < (data.prefix_words || 0);
  }

  function weighedBars(tooltip, j) {  // the pieces the step that chose word j weighed
    const word = state.step === null && data.weighed ? data.weighed[j] : null;
    if (!word) return;
    const list = document.createElement("div");
    list.className = "weighed";
    list.append((isPrefix(j) ? "forced; the model would have written: " : "its step weighed: ") +
      "(log-prob " + word.log_prob.toFixed(2) + ")");
    for (const [piece, p] of word.alternatives) {
      const row = document.createElement("div"), bar = document.createElement("span");
      row.className = "bar-row";
      bar.className = "bar";
      bar.style.width = Math.max(1, Math.round(120 * p)) + "px";
      // a piece that starts a word without its "▁", one inside a word after a hyphen
      const shown = piece === "</s>" ? piece
        : piece.startsWith("\u2581") ? piece.slice(1) : "-" + piece;
      row.append(bar, " " + shown + " " + p.toFixed(3));
      list.append(row);
    }
    tooltip.append(list);
  }

  // ------------------------------------------------ drawing

  function drawHeatmap(view) {
    const svg = $("heatmap");
    svg.replaceChildren();
    parts.cells = []; parts.sourceLabels = []; parts.targetLabels = [];
    if (!target.length || !source.length) {
      svg.setAttribute("width", 320); svg.setAttribute("height", 30);
      node("text", {x: 0, y: 20, class: "empty"}, svg, "(empty translation: nothing to show)");
      return null;
    }
    const sourceWidths = widths(source), targetWidths = widths(target);
    const left = Math.max(...targetWidths) + 10;
    const top = Math.max(...sourceWidths) * Math.sin(Math.PI / 3) + 12;
    let right = left + source.length * CELL;
    source.forEach((word, i) => {
      const x = left + (i + 0.5) * CELL;
      right = Math.max(right, x + sourceWidths[i] / 2 + PAD);
      parts.sourceLabels.push(node("text", {class: "word", "data-i": i,
        transform: "translate(" + (x - 4) + "," + (top - 6) + ") rotate(-60)"}, svg, word));
    });
    target.forEach((word, j) => {
      parts.targetLabels.push(node("text", {class: isPrefix(j) ? "word prefix" : "word",
        "data-j": j, x: left - 8,
        y: top + (j + 0.5) * CELL + 4, "text-anchor": "end"}, svg, word));
    });
    const grid = node("g", {id: "grid"}, svg);
    view.weights.forEach((row, j) => row.forEach((w, i) => {
      const cell = node("rect", {x: left + i * CELL, y: top + j * CELL, width: CELL - 1,
        height: CELL - 1, fill: colour(w), "data-i": i, "data-j": j, "data-w": w}, grid);
      parts.cells.push(cell);
      if (state.numbers) {
        node("text", {class: "number", x: left + (i + 0.5) * CELL, y: top + (j + 0.5) * CELL + 3,
          "text-anchor": "middle", fill: w > 0.55 ? "#fff" : "#222"}, svg,
          w >= 1 ? "1" : w.toFixed(2).replace(/^0/, ""));
      }
    }));
    parts.rowBox = node("rect", {class: "box", x: left - 1, width: source.length * CELL + 1,
      height: CELL + 1, visibility: "hidden"}, svg);
    parts.columnBox = node("rect", {class: "box", y: top - 1, width: CELL + 1,
      height: target.length * CELL + 1, visibility: "hidden"}, svg);
    parts.left = left; parts.top = top;
    // the colour scale, 0 to 1
    const scaleTop = top + target.length * CELL + 14, scaleWidth = Math.min(200, right - left);
    const gradient = node("linearGradient", {id: "scale"}, node("defs", {}, svg));
    BLUES.forEach((c, k) => node("stop", {offset: k / (BLUES.length - 1),
      "stop-color": "rgb(" + c.join(",") + ")"}, gradient));
    node("rect", {x: left, y: scaleTop, width: scaleWidth, height: 10, fill: "url(#scale)",
      stroke: "#ccc"}, svg);
    node("text", {x: left - 6, y: scaleTop + 9, "text-anchor": "end"}, svg, "0");
    node("text", {x: left + scaleWidth + 6, y: scaleTop + 9}, svg,
      state.show === "attribution" ? "1  share of attribution" : "1  attention weight");
    svg.setAttribute("width", Math.ceil(Math.max(right, left + scaleWidth + 140)));
    svg.setAttribute("height", Math.ceil(scaleTop + 20));
    return grid;
  }

  function drawLinks(view) {
    const svg = $("links");
    svg.replaceChildren();
    parts.lines = []; parts.linkSource = []; parts.linkTarget = [];
    const sourceWidth = Math.max(...widths(source.concat(["source"])));
    const targetWidth = Math.max(...widths(target.concat(["translation"])));
    const xSource = sourceWidth + 10, xTarget = xSource + LINK_GAP;
    const rows = Math.max(source.length, target.length, 1);
    const y = (k, n) => 30 + (k + 0.5 + (rows - n) / 2) * ROW;
    node("text", {x: xSource, y: 14, "text-anchor": "end", class: "empty"}, svg, "source");
    node("text", {x: xTarget, y: 14, class: "empty"}, svg, "translation");
    for (const [i, j] of view.links) {
      const w = view.weights[j][i];
      parts.lines.push(node("line", {x1: xSource + PAD, y1: y(i, source.length) - 4,
        x2: xTarget - PAD, y2: y(j, target.length) - 4, stroke: colour(0.35 + 0.65 * w),
        "stroke-width": 1.5 + 2 * w, "data-i": i, "data-j": j}, svg));
    }
    source.forEach((word, i) => parts.linkSource.push(node("text", {class: "word",
      "data-i": i, x: xSource, y: y(i, source.length), "text-anchor": "end"}, svg, word)));
    target.forEach((word, j) => {
      const linked = view.links.some((link) => link[1] === j);
      parts.linkTarget.push(node("text", {class: "word" + (linked ? "" : " empty"),
        "data-j": j, x: xTarget, y: y(j, target.length)}, svg, word));
    });
    svg.setAttribute("width", Math.ceil(xTarget + targetWidth + 10));
    svg.setAttribute("height", Math.ceil(30 + rows * ROW + 10));
  }

  // ------------------------------------------------ highlighting and the tooltip

  function emphasis(labels, values) {
    const top = Math.max(...values, 1e-9);
    labels.forEach((label, k) => {
      label.setAttribute("opacity", (0.25 + 0.75 * values[k] / top).toFixed(3));
      label.classList.toggle("lit", values[k] === top);
    });
  }

  function highlight(focus) {
    const weights = current().weights;
    const sourceLabels = parts.sourceLabels.concat(parts.linkSource);
    const targetLabels = parts.targetLabels.concat(parts.linkTarget);
    const clear = (labels) => labels.forEach((label) => {
      label.removeAttribute("opacity"); label.classList.remove("lit");
    });
    clear(sourceLabels); clear(targetLabels);
    if (parts.rowBox) {
      parts.rowBox.setAttribute("visibility", "hidden");
      parts.columnBox.setAttribute("visibility", "hidden");
    }
    parts.lines.forEach((line) => line.removeAttribute("opacity"));
    if (!focus || !weights.length) return;
    const hasI = focus.i !== undefined, hasJ = focus.j !== undefined;
    const i = focus.i, j = focus.j;
    if (hasJ && parts.rowBox) {
      parts.rowBox.setAttribute("y", parts.top + j * CELL - 1);
      parts.rowBox.setAttribute("visibility", "visible");
    }
    if (hasI && parts.columnBox) {
      parts.columnBox.setAttribute("x", parts.left + i * CELL - 1);
      parts.columnBox.setAttribute("visibility", "visible");
    }
    const pair = (n, k) => Array.from({length: n}, (_, m) => (m === k ? 1 : 0));
    const bySource = hasJ ? (hasI ? pair(source.length, i) : weights[j]) : null;
    const byTarget = hasI ? (hasJ ? pair(target.length, j) : weights.map((row) => row[i]))
      : null;
    if (bySource) {
      emphasis(parts.sourceLabels, bySource); emphasis(parts.linkSource, bySource);
      emphasis(parts.targetLabels, pair(target.length, j));
      emphasis(parts.linkTarget, pair(target.length, j));
    }
    if (byTarget) {
      emphasis(parts.targetLabels, byTarget); emphasis(parts.linkTarget, byTarget);
      if (!bySource) {
        emphasis(parts.sourceLabels, pair(source.length, i));
        emphasis(parts.linkSource, pair(source.length, i));
      }
    }
    parts.lines.forEach((line) => {
      const touches = (!hasI || Number(line.dataset.i) === i) &&
        (!hasJ || Number(line.dataset.j) === j);
      line.setAttribute("opacity", touches ? 1 : 0.12);
    });
  }

  function describe(focus) {
    const view = current(), weights = view.weights;
    const fixed = (w) => w.toFixed(3);
    if (focus.i !== undefined && focus.j !== undefined) {
      return "‘" + target[focus.j] + "’ ← ‘" + source[focus.i] + "’: " +
        fixed(weights[focus.j][focus.i]);
    }
    if (focus.j !== undefined && state.show === "attribution" && state.step === null) {
      const row = weights[focus.j], best = row.indexOf(Math.max(...row));
      return "‘" + target[focus.j] + "’ depended most on ‘" + source[best] + "’ (" +
        fixed(row[best]) + " of its input × gradient)";
    }
    if (focus.j !== undefined) {
      const row = weights[focus.j], best = row.indexOf(Math.max(...row));
      const eos = Math.round(100 * view.eos[focus.j]);
      return row.every((w) => w === 0)
        ? "‘" + target[focus.j] + "’ gave all its attention to the end-of-sentence token"
        : "‘" + target[focus.j] + "’ drew most on ‘" + source[best] + "’ (" + fixed(row[best]) +
          "); " + eos + "% of its raw attention went to </s>";
    }
    const column = weights.map((row) => row[focus.i]);
    const best = column.indexOf(Math.max(...column));
    return "‘" + source[focus.i] + "’: drawn on most by ‘" + target[best] + "’ (" +
      fixed(column[best]) + ")";
  }

  function showTooltip(focus, x, y) {
    const tooltip = $("tooltip");
    tooltip.textContent = describe(focus);
    if (focus.j !== undefined && focus.i === undefined) weighedBars(tooltip, focus.j);
    tooltip.style.left = (x + 14) + "px";
    tooltip.style.top = (y + 14) + "px";
    tooltip.style.display = "block";
  }

  function focusOf(element) {
    const focus = {};
    if (element.dataset.i !== undefined) focus.i = Number(element.dataset.i);
    if (element.dataset.j !== undefined) focus.j = Number(element.dataset.j);
    return focus.i === undefined && focus.j === undefined ? null : focus;
  }

  function pinned() {  // the word named in the URL, lit when the mouse is elsewhere
    highlight(state.word);
    $("tooltip").style.display = "none";
    if (!state.word) return;
    const rect = $("heatmap").getBoundingClientRect();  // under the heatmap
    showTooltip(state.word, rect.left + window.scrollX - 14, rect.bottom + window.scrollY - 10);
  }

  function listen(svg) {
    svg.addEventListener("mouseover", (event) => {
      const focus = focusOf(event.target);
      if (!focus) return;
      highlight(focus);
      showTooltip(focus, event.pageX, event.pageY);
    });
    svg.addEventListener("mousemove", (event) => {
      const tooltip = $("tooltip");
      if (tooltip.style.display === "block" && focusOf(event.target)) {
        tooltip.style.left = (event.pageX + 14) + "px";
        tooltip.style.top = (event.pageY + 14) + "px";
      }
    });
    svg.addEventListener("mouseout", (event) => {
      if (focusOf(event.target)) pinned();
    });
  }

  // ------------------------------------------------ putting it together

  function render() {
    readHash();
    const view = current();
    $("layer").value = String(state.layer);
    $("head").value = String(state.head);
    $("numbers").checked = state.numbers;
    if ($("show")) $("show").value = state.show;
    showStep();
    $("view-title").textContent = view.title;
    const grid = drawHeatmap(view);
    drawLinks(view);
    pinned();
    const box = grid && grid.getBoundingClientRect();
    window.explorerReport({rendered: view.title, grid: box && {x: box.left + window.scrollX,
      y: box.top + window.scrollY, width: box.width, height: box.height},
      tooltip: $("tooltip").style.display === "block" ? $("tooltip").textContent : null});
  }

  fillSelectors();
  fillTimeline();
  fillAttribution();
  listen($("heatmap"));
  listen($("links"));
  window.addEventListener("hashchange", render);
  render();
  // The web font loads when first used; measure the words again once it is there.
  Promise.all(Array.from(document.fonts, (face) => face.load())).then(render);
})();
