
"use strict";
// The model in one page (translator/page.py): the run's tokenizer, Transformer and greedy
// search in plain JavaScript, the same steps as translator/{data,tokenizer,model,search,
// translate}.py, and the attention explorer (explorer.js, run again for each sentence).
(function () {
  const $ = (id) => document.getElementById(id);
  const M = JSON.parse($("page-model").textContent);
  const EXPLORER_JS = JSON.parse($("page-explorer-js").textContent);
  const C = M.model, IDS = M.ids, SEARCH = M.search;
  const D = C.d_model, HEADS = C.heads, DK = D / HEADS;
  const NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6;
  const FLT_MIN = 1.1754943508222875e-38;
  const f32 = Math.fround;
  const PAGE_ATTENTION_CELLS = 2 ** 22;

  // ------------------------------------------------ text: translator.data.normalize

  // Python's str.split() whitespace (str.isspace), which differs from JavaScript's \s
  const SPACES = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
  function normalize(text) {
    text = text.replace(/[\u200b\ufeff]/g, "").normalize("NFC");
    return text.split(SPACES).filter((word) => word.length).join(" ");
  }

  // ------------------------------------------------ SentencePiece (unigram, byte fallback)

  function makeVocabulary(v) {
    const index = new Map(), byteIds = new Array(256);
    let longest = 1, min = Infinity, max = FLT_MIN;  // SentencePiece starts max at FLT_MIN
    v.pieces.forEach((piece, id) => {
      const type = v.types[id];
      if (type === NORMAL || type === USER_DEFINED || type === UNUSED) {
        if (!index.has(piece)) index.set(piece, id);
        longest = Math.max(longest, Array.from(piece).length);
      }
      if (type === NORMAL) { min = Math.min(min, v.scores[id]); max = Math.max(max, v.scores[id]); }
      if (type === BYTE) byteIds[parseInt(piece.slice(3, 5), 16)] = id;
    });
    const wordStarts = v.pieces.map((piece) => piece.startsWith("▁"));
    return {pieces: v.pieces, scores: v.scores, types: v.types, index, byteIds, longest,
      unkScore: f32(min - 10), maxScore: max, wordStarts};
  }
  const SOURCE = makeVocabulary(M.source);
  const TARGET = M.target ? makeVocabulary(M.target) : SOURCE;
  const encoder = new TextEncoder();
  const utf8Length = (text) => encoder.encode(text).length;

  // SentencePiece's optimised Viterbi (unigram_model.cc, EncodeOptimized): the best path's
  // score in float32 as there, a user-defined piece scored length × max score − 0.1, an
  // unknown character min score − 10 (then written as its UTF-8 bytes).
  function viterbi(vocab, text) {
    const chars = Array.from("▁" + text.replace(/ /g, "▁"));
    const n = chars.length;
    const score = new Float64Array(n + 1), start = new Int32Array(n + 1).fill(-1);
    const id = new Int32Array(n + 1).fill(-1);
    for (let at = 0; at < n; at++) {
      const till = score[at];
      let piece = "", single = false;
      for (let length = 1; length <= vocab.longest && at + length <= n; length++) {
        piece += chars[at + length - 1];
        const found = vocab.index.get(piece);
        if (found === undefined || vocab.types[found] === UNUSED) continue;
        const candidate = vocab.types[found] === USER_DEFINED
          ? f32(utf8Length(piece) * vocab.maxScore) - 0.1 + till
          : f32(vocab.scores[found] + till);
        const end = at + length;
        if (start[end] === -1 || candidate > score[end]) {
          score[end] = f32(candidate); start[end] = at; id[end] = found;
        }
        if (length === 1) single = true;
      }
      if (!single) {
        const candidate = f32(vocab.unkScore + till);
        if (start[at + 1] === -1 || candidate > score[at + 1]) {
          score[at + 1] = candidate; start[at + 1] = at; id[at + 1] = IDS.unk;
        }
      }
    }
    const found = [];
    for (let end = n; end > 0; end = start[end]) {
      found.push([chars.slice(start[end], end).join(""), id[end]]);
    }
    const ids = [];
    for (const [surface, pieceId] of found.reverse()) {
      if (pieceId !== IDS.unk) { ids.push(pieceId); continue; }
      for (const byte of encoder.encode(surface)) ids.push(vocab.byteIds[byte]);
    }
    return ids;
  }

  const TAG_OF = Object.fromEntries(Object.entries(M.tags).map(([language, id]) =>
    [language, SOURCE.pieces[id]]));

  function splitTag(text) {  // translator.direction.split_tag
    for (const [language, tag] of Object.entries(TAG_OF)) {
      if (text.startsWith(tag + " ")) return [language, text.slice(tag.length + 1)];
    }
    return [null, text];
  }

  // Tokenizer.encode_source: the ids of a text (a leading tag: its id first), no BOS/EOS
  function encodeSource(text) {
    text = normalize(text);
    if (!text) return [];
    const [language, rest] = M.tags && Object.keys(M.tags).length ? splitTag(text) : [null, text];
    const ids = rest ? viterbi(SOURCE, rest) : [];
    return language !== null ? [M.tags[language], ...ids] : ids;
  }

  // One character of UTF-8 at ``at``: [text, bytes used], or null when the bytes there are
  // no valid character (SentencePiece's IsValidDecodeUTF8: no overlong forms, surrogates or
  // code points past U+10FFFF)
  function utf8Char(bytes, at) {
    const lead = bytes[at];
    if (lead < 0x80) return [String.fromCodePoint(lead), 1];
    const size = lead >= 0xf0 && lead < 0xf8 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
    if (!size || at + size > bytes.length || (size === 3 && lead >= 0xf0)) return null;
    let code = lead & (0xff >> (size + 1));
    for (let k = 1; k < size; k++) {
      if ((bytes[at + k] & 0xc0) !== 0x80) return null;
      code = (code << 6) | (bytes[at + k] & 0x3f);
    }
    const least = [0, 0, 0x80, 0x800, 0x10000][size];
    if (code < least || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return null;
    return [String.fromCodePoint(code), size];
  }

  // SentencePiece's byte pieces to text: each byte that starts no valid character becomes
  // U+FFFD on its own (TextDecoder would take a broken sequence's bytes together)
  function bytesText(bytes) {
    let text = "";
    for (let at = 0; at < bytes.length;) {
      const found = utf8Char(bytes, at);
      text += found ? found[0] : "\ufffd";
      at += found ? found[1] : 1;
    }
    return text;
  }

  // SentencePiece's decode: control pieces vanish, byte pieces become bytes, "▁" a space,
  // the first piece's leading "▁" dropped, unknown " ⁇ "
  function decodeTarget(ids) {
    const bytes = [];
    let text = "";
    const flush = () => {
      if (bytes.length) text += bytesText(bytes);
      bytes.length = 0;
    };
    for (const id of ids) {
      if (id === IDS.eos) break;
      const type = TARGET.types[id], piece = TARGET.pieces[id];
      if (type === CONTROL) continue;
      if (type === BYTE) { bytes.push(parseInt(piece.slice(3, 5), 16)); continue; }
      flush();
      let surface = type === UNKNOWN ? " ⁇ " : piece;
      if (!text && type !== UNKNOWN && surface.startsWith("▁")) surface = surface.slice(1);
      text += surface.replace(/▁/g, " ");
    }
    flush();
    return M.truecase ? capitalized(text) : text;
  }

  // tokenizer.capitalized: a truecased target's first letter back to a capital ("▁yes" →
  // "▁Yes"), in the text and in the first piece that holds a character (shown_target_pieces)
  function capitalized(text) {
    const start = text.startsWith("▁") ? 1 : 0;
    return text.slice(0, start) + text.slice(start, start + 1).toUpperCase() +
      text.slice(start + 1);
  }

  function shownTargetPieces(pieces) {
    if (!M.truecase) return pieces;
    const first = pieces.findIndex((piece) => piece !== "▁");
    return first < 0 ? pieces : pieces.map((piece, i) => i === first ? capitalized(piece) : piece);
  }

  // ------------------------------------------------ the weights

  function halfTable() {  // float16 bits → float32, every one of the 65,536
    const table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) {
      const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
      table[h] = exponent === 0 ? sign * fraction * 2 ** -24
        : exponent === 31 ? (fraction ? NaN : sign * Infinity)
          : sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
    }
    return table;
  }

  function loadWeights() {
    const text = $("page-weights").textContent.trim();
    const binary = atob(text), bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const buffer = bytes.buffer, half = halfTable(), weights = {};
    for (const [name, entry] of Object.entries(M.layout)) {
      const size = entry.shape.reduce((a, b) => a * b, 1);
      let values;
      if (entry.kind === "f32") {
        values = new Float32Array(buffer.slice(entry.offset, entry.offset + 4 * size));
      } else if (entry.kind === "f16") {
        const raw = new Uint16Array(buffer.slice(entry.offset, entry.offset + 2 * size));
        values = new Float32Array(size);
        for (let i = 0; i < size; i++) values[i] = half[raw[i]];
      } else {
        const raw = new Int8Array(buffer, entry.offset, size);
        const scales = new Float32Array(buffer.slice(entry.scales, entry.scales + 4 * entry.shape[0]));
        const columns = size / entry.shape[0];
        values = new Float32Array(size);
        for (let r = 0; r < entry.shape[0]; r++) {
          for (let c = 0; c < columns; c++) values[r * columns + c] = raw[r * columns + c] * scales[r];
        }
      }
      weights[name] = values;
    }
    return weights;
  }

  // ------------------------------------------------ the Transformer (translator/model.py)

  let W = null;  // name → Float32Array, once loaded
  const sourceEmbedding = () => W["source_embeddings.tokens.weight"];
  const targetEmbedding = () => W["target_embeddings.tokens.weight"] || sourceEmbedding();

  function linear(x, rows, inputs, weight, bias, outputs) {  // x·Wᵀ + b, W [outputs, inputs]
    const out = new Float32Array(rows * outputs);
    for (let r = 0; r < rows; r++) {
      const xo = r * inputs, oo = r * outputs;
      for (let o = 0; o < outputs; o++) {
        let sum = bias ? bias[o] : 0;
        const wo = o * inputs;
        for (let i = 0; i < inputs; i++) sum += x[xo + i] * weight[wo + i];
        out[oo + o] = sum;
      }
    }
    return out;
  }

  function layerNorm(x, rows, weight, bias) {  // nn.LayerNorm(d_model), eps 1e-5
    const out = new Float32Array(x.length);
    for (let r = 0; r < rows; r++) {
      let mean = 0, variance = 0;
      for (let i = 0; i < D; i++) mean += x[r * D + i];
      mean /= D;
      for (let i = 0; i < D; i++) variance += (x[r * D + i] - mean) ** 2;
      const scale = 1 / Math.sqrt(variance / D + 1e-5);
      for (let i = 0; i < D; i++) {
        out[r * D + i] = (x[r * D + i] - mean) * scale * weight[i] + bias[i];
      }
    }
    return out;
  }

  function add(a, b) {
    const out = new Float32Array(a.length);
    for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
    return out;
  }

  // Residual: pre-norm x + f(LN(x)), post-norm LN(x + f(x))
  function residual(x, rows, norm, sublayer) {
    if (C.norm === "pre") return add(x, sublayer(layerNorm(x, rows, W[norm + ".weight"], W[norm + ".bias"])));
    return layerNorm(add(x, sublayer(x)), rows, W[norm + ".weight"], W[norm + ".bias"]);
  }

  const project = (x, rows, name) => linear(x, rows, D, W[name + ".weight"], W[name + ".bias"], D);

  // The seed's four steps per head: score Q·Kᵀ, scale ÷√d_k, mask (query r sees keys
  // < visible(r)), softmax, weighted sum of V. ``record`` collects the weights [head][r][key].
  function attend(q, rows, k, v, keys, visible, record) {
    const context = new Float32Array(rows * D), scale = Math.sqrt(DK);
    const scores = new Float64Array(keys);
    for (let h = 0; h < HEADS; h++) {
      for (let r = 0; r < rows; r++) {
        const seen = visible(r), qo = r * D + h * DK;
        let top = -Infinity;
        for (let j = 0; j < seen; j++) {
          let sum = 0;
          for (let c = 0; c < DK; c++) sum += q[qo + c] * k[j * D + h * DK + c];
          scores[j] = f32(sum) / scale;
          top = Math.max(top, scores[j]);
        }
        let total = 0;
        for (let j = 0; j < seen; j++) { scores[j] = Math.exp(scores[j] - top); total += scores[j]; }
        const weights = new Float32Array(keys);
        for (let j = 0; j < seen; j++) weights[j] = scores[j] / total;
        for (let c = 0; c < DK; c++) {
          let sum = 0;
          for (let j = 0; j < seen; j++) sum += weights[j] * v[j * D + h * DK + c];
          context[qo + c] = sum;
        }
        if (record) record[h][r] = weights;
      }
    }
    return context;
  }

  function feedForward(x, rows, prefix) {
    const hidden = linear(x, rows, D, W[prefix + ".net.0.weight"], W[prefix + ".net.0.bias"], C.d_ff);
    for (let i = 0; i < hidden.length; i++) if (hidden[i] < 0) hidden[i] = 0;
    return linear(hidden, rows, C.d_ff, W[prefix + ".net.3.weight"], W[prefix + ".net.3.bias"], D);
  }

  let POSITIONS = null;  // sinusoidal_positions(max_positions, d_model), as float32
  function positions() {
    if (POSITIONS) return POSITIONS;
    POSITIONS = new Float32Array(C.max_positions * D);
    for (let p = 0; p < C.max_positions; p++) {
      for (let i = 0; i < D; i += 2) {
        const angle = f32(p / f32(Math.pow(10000, f32(i / D))));
        POSITIONS[p * D + i] = Math.sin(angle);
        if (i + 1 < D) POSITIONS[p * D + i + 1] = Math.cos(angle);
      }
    }
    return POSITIONS;
  }

  function embed(table, ids, offset) {  // token × √d_model + position
    const x = new Float32Array(ids.length * D), scale = f32(Math.sqrt(D)), pos = positions();
    ids.forEach((id, r) => {
      for (let i = 0; i < D; i++) {
        x[r * D + i] = f32(table[id * D + i] * scale) + pos[(offset + r) * D + i];
      }
    });
    return x;
  }

  function encode(ids) {  // source ids (with EOS) → memory [S, d]
    const n = ids.length, all = () => n;
    let x = embed(sourceEmbedding(), ids, 0);
    for (let l = 0; l < C.layers; l++) {
      const p = "encoder_layers." + l;
      x = residual(x, n, p + ".attention_residual.norm", (h) => project(attend(
        project(h, n, p + ".self_attention.w_q"), n, project(h, n, p + ".self_attention.w_k"),
        project(h, n, p + ".self_attention.w_v"), n, all), n, p + ".self_attention.w_o"));
      x = residual(x, n, p + ".feed_forward_residual.norm", (h) => feedForward(h, n, p + ".feed_forward"));
    }
    return C.norm === "pre" ? layerNorm(x, n, W["encoder_norm.weight"], W["encoder_norm.bias"]) : x;
  }

  // Decoder layers over ``rows`` new target positions. ``state.self`` holds each layer's keys
  // and values so far (the cache; ``causal``: row r also sees the r before it); ``record``
  // [layer][head][row] receives the cross-attention weights.
  function decoderLayers(x, rows, state, causal, record) {
    for (let l = 0; l < C.decoder_layers; l++) {
      const p = "decoder_layers." + l, cache = state.self[l], cross = state.cross[l];
      x = residual(x, rows, p + ".self_attention_residual.norm", (h) => {
        const k = project(h, rows, p + ".self_attention.w_k"), v = project(h, rows, p + ".self_attention.w_v");
        cache.k.set(k, cache.length * D); cache.v.set(v, cache.length * D);
        const past = cache.length, total = past + rows;
        cache.length = total;
        const visible = causal ? (r) => past + r + 1 : () => total;
        return project(attend(project(h, rows, p + ".self_attention.w_q"), rows, cache.k, cache.v,
          total, visible), rows, p + ".self_attention.w_o");
      });
      x = residual(x, rows, p + ".cross_attention_residual.norm", (h) => project(attend(
        project(h, rows, p + ".cross_attention.w_q"), rows, cross.k, cross.v, cross.length,
        () => cross.length, record ? record[l] : null), rows, p + ".cross_attention.w_o"));
      x = residual(x, rows, p + ".feed_forward_residual.norm", (h) => feedForward(h, rows, p + ".feed_forward"));
    }
    return C.norm === "pre" ? layerNorm(x, rows, W["decoder_norm.weight"], W["decoder_norm.bias"]) : x;
  }

  function newState(memory, sourceLength, capacity) {
    const state = {self: [], cross: []};
    for (let l = 0; l < C.decoder_layers; l++) {
      const p = "decoder_layers." + l + ".cross_attention";
      state.self.push({k: new Float32Array(capacity * D), v: new Float32Array(capacity * D), length: 0});
      state.cross.push({k: project(memory, sourceLength, p + ".w_k"),
        v: project(memory, sourceLength, p + ".w_v"), length: sourceLength});
    }
    return state;
  }

  function emptyRecord(rows) {
    return Array.from({length: C.decoder_layers}, () =>
      Array.from({length: HEADS}, () => new Array(rows)));
  }

  // ------------------------------------------------ greedy search (translator/search.py)

  function banned(logits, generated) {  // PAD, BOS, repeated n-grams, a doubled word
    logits[IDS.pad] = -Infinity; logits[IDS.bos] = -Infinity;
    const tokens = generated.slice(1), n = SEARCH.no_repeat_ngram;
    if (n > 0 && tokens.length >= n) {
      const prefix = tokens.slice(tokens.length - n + 1);
      for (let s = 0; s + n <= tokens.length; s++) {
        let same = true;
        for (let c = 0; c < n - 1 && same; c++) same = tokens[s + c] === prefix[c];
        if (same) logits[tokens[s + n - 1]] = -Infinity;
      }
    }
    const newest = generated[generated.length - 1];
    if (SEARCH.no_doubled_words && generated.length >= 2 && TARGET.wordStarts[newest]) {
      logits[newest] = -Infinity;
    }
  }

  function logSumExp(values) {
    let top = -Infinity, total = 0;
    for (const v of values) top = Math.max(top, v);
    for (const v of values) total += Math.exp(v - top);
    return top + Math.log(total);
  }

  // One part's source ids (without EOS) → {tokens, score, attention [layers][heads][T+1][S+1]}
  function greedy(sourceIds) {
    const source = [...sourceIds, IDS.eos], S = source.length;
    const limit = Math.min(C.max_positions, Math.max(1,
      Math.trunc(f32(S * f32(SEARCH.max_length_ratio))) + SEARCH.max_length_extra));
    const memory = encode(source);
    const state = newState(memory, S, limit);
    const embedding = targetEmbedding(), bias = W["output_bias"];
    const vocabulary = bias.length, generated = [IDS.bos], record = emptyRecord(limit);
    let score = 0;
    for (let step = 0; step < limit; step++) {
      const stepRecord = emptyRecord(1);
      const x = decoderLayers(embed(embedding, [generated[step]], step), 1, state, true, stepRecord);
      const logits = Array.from(linear(x, 1, D, embedding, bias, vocabulary));
      const normaliser = logSumExp(logits);
      if (step === limit - 1) logits.forEach((_, i) => { if (i !== IDS.eos) logits[i] = -Infinity; });
      banned(logits, generated);
      let best = 0;
      for (let i = 1; i < vocabulary; i++) if (logits[i] > logits[best]) best = i;
      score += logits[best] - normaliser;
      stepRecord.forEach((heads, l) => heads.forEach((rows, h) => { record[l][h][step] = rows[0]; }));
      generated.push(best);
      if (best === IDS.eos) break;
    }
    const tokens = generated.slice(1, -1), rows = tokens.length + 1;
    let attention = record.map((heads) => heads.map((steps) => steps.slice(0, rows)));
    if (M.full_context) attention = fullContext(memory, S, tokens);
    return {tokens, score, attention};
  }

  // The attention of a pass over the finished translation without the causal mask
  // (train.alignment_full_context; Transformer.forced_attention)
  function fullContext(memory, S, tokens) {
    const input = [IDS.bos, ...tokens], rows = input.length;
    const state = newState(memory, S, rows), record = emptyRecord(rows);
    decoderLayers(embed(targetEmbedding(), input, 0), rows, state, false, record);
    return record;
  }

  // ------------------------------------------------ the Translator's text handling

  const SENTENCE_END = /(?<=[।॥.!?])\s+/u;

  function windows(ids, limit) {  // translate.py _windows: cut before a word start
    const found = [];
    while (ids.length > limit) {
      let cut = limit;
      for (let i = limit; i >= 1; i--) {
        if (SOURCE.pieces[ids[i]].startsWith("▁")) { cut = i; break; }
      }
      found.push(ids.slice(0, cut));
      ids = ids.slice(cut);
    }
    found.push(ids);
    return found;
  }

  function splitSource(text, limit) {  // translate.py split_source
    const parts = [[]];
    for (const sentence of normalize(text).split(SENTENCE_END)) {
      for (const window of windows(encodeSource(sentence), limit)) {
        if (parts[parts.length - 1].length && parts[parts.length - 1].length + window.length > limit) {
          parts.push([]);
        }
        parts[parts.length - 1].push(...window);
      }
    }
    return parts.filter((part) => part.length);
  }

  function languageFromScript(text) {  // translate.py language_from_script
    const share = devanagariShare(text);
    return share !== null && share >= 0.5 ? "en" : "hi";
  }

  function devanagariShare(text) {  // translate.py devanagari_share (str.isalpha: \p{L})
    const letters = Array.from(text).filter((c) => /\p{L}/u.test(c));
    if (!letters.length) return null;
    return letters.filter((c) => /[\u0900-\u097f]/.test(c)).length / letters.length;
  }

  function scriptWarning(text, asked) {  // translate.py script_warning
    const share = devanagariShare(text);
    if (share === null) return null;
    const names = {hi: "Hindi", en: "English"};
    if (M.direction === "both") {
      if (!asked) return null;
      const from = asked === "en" ? "Hindi" : "English";
      const told = names[asked] + " was asked for, which this model translates from " + from +
        "; it was translated anyway, expect a poor result";
      if (asked === "en" && share < 0.5) return "the input is not in Devanagari, but " + told;
      if (asked === "hi" && share >= 0.5) return "the input is in Devanagari, but " + told;
      return null;
    }
    if (M.direction === "hi-en" && share < 0.5) {
      return "the input is not in Devanagari, but this model translates Hindi to English; " +
        "it was translated anyway, expect a poor result";
    }
    if (M.direction === "en-hi" && share >= 0.5) {
      return "the input is in Devanagari, but this model translates English to Hindi; it " +
        "was translated anyway, expect a poor result";
    }
    return null;
  }

  function targetAndBody(text, asked) {  // translate.py target_and_body
    if (!Object.keys(M.tags).length) return [null, text, false];
    const [tagLanguage, body] = splitTag(normalize(text));
    const language = asked || tagLanguage;
    return language ? [language, body, true] : [languageFromScript(body), body, false];
  }

  // One text → what Translator.translate([text], beam_size=1)[0] holds
  function translate(text, asked) {
    const started = performance.now();
    const [language, body, told] = targetAndBody(text, asked || null);
    const tag = language !== null ? [M.tags[language]] : [];
    const ids = encodeSource(body);
    const limit = C.max_positions - 1 - (Object.keys(M.tags).length ? 1 : 0);
    const warnings = [];
    let parts = [];
    if (ids.length) {
      const warning = scriptWarning(body, told ? language : null);
      if (warning) warnings.push(warning);
      parts = ids.length <= limit ? [ids] : splitSource(body, limit);
    }
    if (parts.length > 1) {
      warnings.push("the input has " + ids.length + " pieces, more than the model's limit of " +
        limit + "; it was split into " + parts.length + " parts, translated one by one");
    }
    const results = parts.map((part) => {
      const found = greedy([...tag, ...part]), skip = tag.length;
      return {text: decodeTarget(found.tokens), tokens: found.tokens, score: found.score,
        sourcePieces: part.map((id) => SOURCE.pieces[id]),
        targetPieces: shownTargetPieces(found.tokens.map((id) => TARGET.pieces[id])),
        attention: found.attention.map((heads) => heads.map((rows) =>
          rows.map((row) => Array.from(row.slice(skip, skip + part.length + 1)))))};
    });
    const merged = mergeParts(text, results, warnings);
    merged.language = language;
    merged.ms = performance.now() - started;
    return merged;
  }

  // translate.py merge_parts: texts joined, attention laid out block by block
  function mergeParts(source, parts, warnings) {
    if (!parts.length) {
      return {source, text: "", tokens: [], score: 0, sourcePieces: [], targetPieces: [],
        attention: null, warnings};
    }
    if (parts.length === 1) return Object.assign(parts[0], {source, warnings});
    const rows = parts.reduce((n, p) => n + p.targetPieces.length, 0) + 1;
    const columns = parts.reduce((n, p) => n + p.sourcePieces.length, 0) + 1;
    let attention = null;
    // a lower limit than the Translator's 2^26 cells: JavaScript arrays of numbers take
    // several times the memory of a float32 tensor, and the explorer draws far fewer
    if (C.decoder_layers * HEADS * rows * columns > PAGE_ATTENTION_CELLS) {
      warnings.push("the input is too long to keep its attention (" + rows + " x " + columns +
        " pieces); it was translated without it");
    } else {
      attention = emptyRecord(rows).map((heads) => heads.map((matrix) => {
        for (let r = 0; r < rows; r++) matrix[r] = new Array(columns).fill(0);
        return matrix;
      }));
      let row = 0, column = 0;
      parts.forEach((part, index) => {
        const t = part.targetPieces.length, s = part.sourcePieces.length;
        const kept = index === parts.length - 1 ? t + 1 : t;
        attention.forEach((heads, l) => heads.forEach((matrix, h) => {
          for (let r = 0; r < kept; r++) {
            const from = part.attention[l][h][r];
            for (let c = 0; c < s; c++) matrix[row + r][column + c] = from[c];
            matrix[row + r][columns - 1] = from[s];
          }
        }));
        row += t; column += s;
      });
    }
    return {source, text: parts.map((p) => p.text).filter((t) => t).join(" "),
      tokens: parts.flatMap((p) => p.tokens), score: parts.reduce((n, p) => n + p.score, 0),
      sourcePieces: parts.flatMap((p) => p.sourcePieces),
      targetPieces: parts.flatMap((p) => p.targetPieces), attention, warnings};
  }

  // ------------------------------------------------ the explorer's data (explorer/__init__.py)

  function pieceWords(pieces) {  // tokenizer.piece_words
    const words = [], wordOf = [];
    pieces.forEach((piece, i) => {
      if (piece.startsWith("▁") || i === 0) words.push([]);
      const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
      words[words.length - 1].push(...(byte ? [parseInt(byte[1], 16)] : encoder.encode(piece)));
      wordOf.push(words.length - 1);
    });
    const texts = words.map((bytes) => new TextDecoder().decode(new Uint8Array(bytes)));
    return [texts.map((t) => t.replace(/▁/g, "") || t), wordOf];
  }

  // alignment.merge_to_words: target rows averaged over a word's pieces, source columns
  // summed; "drop" removes the EOS row and column and renormalises, "keep" keeps them
  function mergeToWords(matrix, source, target, eos) {
    const S = source.pieces.length, T = target.pieces.length;
    const sw = source.words.length, tw = target.words.length;
    const counts = new Array(tw).fill(0);
    target.of.forEach((w) => { counts[w]++; });
    const merged = [];
    for (let w = 0; w < tw; w++) merged.push(new Array(sw + 1).fill(0));
    const addRow = (into, row, factor) => {
      for (let c = 0; c < S; c++) into[source.of[c]] += row[c] * factor;
      into[sw] += row[S] * factor;
    };
    for (let t = 0; t < T; t++) addRow(merged[target.of[t]], matrix[t], 1 / counts[target.of[t]]);
    if (eos === "keep") {
      if (matrix.length === T + 1) { const last = new Array(sw + 1).fill(0); addRow(last, matrix[T], 1); merged.push(last); }
      return merged;
    }
    return merged.map((row) => {
      const kept = row.slice(0, sw), total = Math.max(kept.reduce((a, b) => a + b, 0), 1e-9);
      return kept.map((x) => x / total);
    });
  }

  const round4 = (x) => Number(x.toFixed(4));

  function hardLinks(weights) {  // alignment.hard_links: each row's brightest source word
    const links = [];
    weights.forEach((row, j) => {
      if (row.reduce((a, b) => a + b, 0) <= 0) return;
      let best = 0;
      row.forEach((w, i) => { if (w > row[best]) best = i; });
      links.push([best, j]);
    });
    return links.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  }

  function meanOfHeads(heads) {
    return heads[0].map((row, r) => row.map((_, c) =>
      heads.reduce((sum, matrix) => sum + matrix[r][c], 0) / heads.length));
  }

  function viewTitle(layer, head) {  // alignment.describe_view
    const layers = C.decoder_layers;
    const which = head === null ? (HEADS > 1 ? "mean of heads 0–" + (HEADS - 1) : "head 0")
      : "head " + head;
    return "layer " + layer + " (of 0–" + (layers - 1) + "), " + which +
      (M.full_context ? ", full target context" : "");
  }

  function explorerData(result) {  // explorer.sentence_data, the default view
    const [sourceWords, sourceOf] = pieceWords(result.sourcePieces);
    const [targetWords, targetOf] = pieceWords(result.targetPieces);
    const source = {pieces: result.sourcePieces, words: sourceWords, of: sourceOf};
    const target = {pieces: result.targetPieces, words: targetWords, of: targetOf};
    const data = {title: M.name, source: result.source, translation: result.text,
      reference: null, source_words: sourceWords, target_words: targetWords,
      layers: C.decoder_layers, heads: HEADS, mean_heads: Array.from({length: HEADS}, (_, h) => h),
      default_layer: M.default_layer, eos: "drop"};
    for (const key of ["weights", "links", "eos_share", "titles"]) data[key] = {mean: [], heads: []};
    result.attention.forEach((heads, layer) => {
      const matrices = [meanOfHeads(heads), ...heads];
      const views = matrices.map((matrix) => {
        const words = mergeToWords(matrix, source, target, "drop");
        const kept = mergeToWords(matrix, source, target, "keep");
        return [words.map((row) => row.map(round4)), hardLinks(words),
          kept.slice(0, targetWords.length).map((row) => round4(row[row.length - 1]))];
      });
      ["weights", "links", "eos_share"].forEach((key, k) => {
        data[key].mean.push(views[0][k]);
        data[key].heads.push(views.slice(1).map((view) => view[k]));
      });
      data.titles.mean.push(viewTitle(layer, null));
      data.titles.heads.push(heads.map((_, h) => viewTitle(layer, h)));
    });
    return data;
  }

  // ------------------------------------------------ the page

  let hashListener = null;

  // explorer.js reads #explorer-data once and draws into the elements of the template; it
  // runs again (allowed by its hash) for each sentence shown, the previous run's hashchange
  // listener removed first so that only the newest sentence is drawn.
  function showExplorer(result) {
    const box = $("explorer");
    box.replaceChildren($("explorer-template").content.cloneNode(true));
    $("shown-source").textContent = result.source;
    $("shown-translation").textContent = result.text;
    const note = $("explorer-note");
    const cells = result.sourcePieces.length * result.targetPieces.length;
    if (!result.attention || !result.targetPieces.length || cells > 40000) {
      note.hidden = false;
      note.textContent = !result.targetPieces.length
        ? "The translation is empty: no attention to show." : "This input is too long to draw its attention (" +
          result.targetPieces.length + " × " + result.sourcePieces.length + " pieces); translate a shorter part.";
      box.querySelectorAll(".controls, .panels").forEach((element) => { element.hidden = true; });
      return;
    }
    if (hashListener) window.removeEventListener("hashchange", hashListener);
    $("explorer-data").textContent = JSON.stringify(explorerData(result));
    const add = window.addEventListener;
    window.addEventListener = function (type, listener, options) {
      if (type === "hashchange") hashListener = listener;
      return add.call(window, type, listener, options);
    };
    try {
      const script = document.createElement("script");
      script.textContent = EXPLORER_JS;
      document.body.appendChild(script);
      script.remove();
    } finally {
      window.addEventListener = add;
    }
  }

  function listResults(results) {
    const list = $("results");
    list.replaceChildren();
    results.forEach((result, k) => {
      const item = document.createElement("li");
      const text = document.createElement("span");
      text.textContent = result.text || "(empty)";
      const time = document.createElement("span");
      time.className = "time";
      time.textContent = "  " + result.ms.toFixed(0) + " ms";
      item.append(text, time);
      for (const warning of result.warnings) {
        const line = document.createElement("div");
        line.className = "warning";
        line.textContent = warning;
        item.append(line);
      }
      item.addEventListener("click", () => {
        list.querySelectorAll("li").forEach((li) => li.classList.remove("shown"));
        item.classList.add("shown");
        showExplorer(result);
      });
      list.append(item);
      if (k === 0) { item.classList.add("shown"); showExplorer(result); }
    });
  }

  function translateBox() {
    const lines = $("text").value.split("\n").filter((line) => normalize(line));
    const language = $("language").value || null;
    const started = performance.now();
    const results = lines.map((line) => translate(line, language));
    const ms = performance.now() - started;
    listResults(results);
    if (!results.length) $("explorer").replaceChildren();
    $("status").textContent = lines.length
      ? lines.length + (lines.length === 1 ? " line" : " lines") + " translated in " + ms.toFixed(0) + " ms"
      : "Nothing to translate: type a sentence in the box.";
    window.explorerReport({translated: results.length, ms});
    return results;
  }

  function describeRun() {
    const parts = [M.arrow];
    if (M.scores.chrf !== undefined) {
      parts.push("test chrF " + M.scores.chrf + ", BLEU " + M.scores.bleu +
        (M.scores.beam_size ? " (beam " + M.scores.beam_size + ")" : ""));
    }
    parts.push((M.parameters / 1e6).toFixed(1) + "M parameters, " + M.weights + " weights");
    parts.push("greedy search in your browser, offline");
    $("about").textContent = parts.join(" · ");
  }

  function start() {
    describeRun();
    $("text").value = M.showcase.join("\n");
    $("language-choice").hidden = !Object.keys(M.tags).length;
    setTimeout(() => {  // let the page paint "loading" first
      const loading = performance.now();
      W = loadWeights();
      window.explorerReport({loaded_ms: performance.now() - loading});
      $("translate").disabled = false;
      $("translate").addEventListener("click", translateBox);
      translateBox();
    }, 0);
  }

  // for tests and benchmarks (tests/test_page.py, bench/page_bench.py)
  window.pageModel = {
    normalize, encodeSource, decodeTarget, translateBox,
    translate: (text, language) => translate(text, language),
    ready: () => W !== null,
  };
  start();
})();
