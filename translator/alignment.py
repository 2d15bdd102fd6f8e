"""Cross-attention → word alignments: what the decoder looked at while writing each word.

The model attends over SentencePiece pieces; a reader thinks in words. This module takes the
cross-attention of every decoder layer and head ([layers, heads, T+1, S+1]: one row per target
piece plus the EOS step, one column per source piece plus the source EOS), picks a view (one
layer, its heads averaged), merges pieces into whitespace words and turns the result into hard
links, scored with the alignment error rate (AER).

Attention comes from two places: the model's own output (``Translation.attention``, greedy
or beam: the chosen hypothesis, from `translator.translate.translate` like every translation)
and any given sentence pair by teacher forcing (`teacher_forced_attentions`, "forced
alignment", through `Transformer.forced_attention`). For a model of both directions the
target-language tag goes before the source pieces in both, as in `translate`, and is left out
of the pieces and the attention. Links are read and written by `translator.links`.

The default view is `DEFAULT_LAYER` with all heads averaged; bench/alignment_bench.py measures
every layer (and every head) against gold alignments, which is how the default is to be set
(see the note at `DEFAULT_LAYER`).

A view is a value (`View`: a layer and heads), and a sentence's attention knows what it holds
(`SentenceAttention`: every layer and head of our model, or CTranslate2's one mean of heads of
one layer): it gives a view's word matrix, its title and the views it offers. This module and
`translator.drawing`, which picks the views a picture shows, are the only ones that compute a
view; `translator.plotting` and `translator.explorer` draw the word matrices they are given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from translator.batching import make_batch
from translator.config import Config
from translator.decoders import AttentionLayout, evaluating
from translator.errors import TranslatorError
from translator.lines import read_lines
from translator.links import Link, read_pharaoh, word_counts
from translator.model import Transformer
from translator.tokenizer import Tokenizer, piece_words
from translator.translate import Translation, check_target_language, target_and_body

# Which decoder layer's heads to average by default, as a Python index (negative counts from
# the top): the penultimate layer, which the default recipe trains to align (guided
# alignment, train.alignment_layer = -2). Measured with bench/alignment_bench.py (AER on the
# 30 WPT-05 pairs, mean of 8 heads, layers 0 / 1 / 2): 0.856 / 0.831 / 0.852 for a model
# trained 10 minutes on public data without guidance (2026-11-30); 0.897 / 0.854 / 0.892
# with guidance after 450 steps on the embedded corpus, against 0.885 / 0.885 / 0.892
# without (2026-12-01). The Shift-Att reading (`shifted`) was worse for every layer of these
# models. A model with fewer layers than the index reaches uses its first layer.
DEFAULT_LAYER = -2
EOS_LABEL = "</s>"
EOS_MODES = ("drop", "keep")


class AlignmentError(TranslatorError):
    """An alignment cannot be computed from the input as given; the message says why."""


# ---------------------------------------------------------------- choosing a view


def resolve_layer(layer: int | None, num_layers: int) -> int:
    """The non-negative index of ``layer`` (None: `DEFAULT_LAYER`) in a decoder of
    ``num_layers`` layers. An explicit index out of range is an error; the default falls back
    to layer 0 on a model too shallow for it."""
    if layer is None:
        layer = DEFAULT_LAYER
        if not -num_layers <= layer < num_layers:
            return 0
    if not -num_layers <= layer < num_layers:
        raise AlignmentError(f"layer {layer} does not exist: the decoder's layers are 0 to "
                             f"{num_layers - 1}")
    return layer % num_layers


def supervised_layer(config: Config) -> int:
    """The decoder layer (non-negative index) a run's attention is best read from: the one
    guided alignment trained (train.alignment_layer), else the default view's."""
    layers = config.model.num_decoder_layers
    if config.train.alignment_weight > 0:  # the model wraps it too: -2 of 1 layer is 0
        return config.train.alignment_layer % layers
    return resolve_layer(None, layers)  # DEFAULT_LAYER


def rounded(value):
    """A tensor, a number or nested lists of them to 4 decimals with Python's round, as every
    JSON of weights holds them: 0.1235, not float32's 0.12349999696."""
    if isinstance(value, Tensor):
        value = value.double().tolist()
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return round(value, 4)


def select_attention(
    attention: Tensor, layer: int | None = None, heads: list[int] | None = None
) -> Tensor:
    """One [T, S] matrix from ``attention`` [layers, heads, T, S]: the mean of ``heads`` (None:
    all) of ``layer`` (None: `DEFAULT_LAYER`). A mean of distributions is a distribution, so
    rows still sum to 1."""
    num_layers, num_heads = attention.shape[:2]
    chosen = attention[resolve_layer(layer, num_layers)]
    if heads is not None:
        bad = [h for h in heads if not 0 <= h < num_heads]
        if bad or not heads:
            raise AlignmentError(f"heads {heads} are not a non-empty list of heads 0 to "
                                 f"{num_heads - 1}")
        chosen = chosen[heads]
    return chosen.float().mean(0)


def describe_view(attention: Tensor, layer: int | None = None,
                  heads: list[int] | None = None, full_context: bool = False) -> str:
    """A title naming the view, e.g. 'layer 2 (of 0–2), mean of heads 0–7', and ', full
    target context' for attention read from a pass without the causal mask."""
    num_layers, num_heads = attention.shape[:2]
    index = resolve_layer(layer, num_layers)
    if heads is None or sorted(heads) == list(range(num_heads)):
        which = f"mean of heads 0–{num_heads - 1}" if num_heads > 1 else "head 0"
    elif len(heads) == 1:
        which = f"head {heads[0]}"
    else:
        which = "mean of heads " + ",".join(map(str, heads))
    context = ", full target context" if full_context else ""
    return f"layer {index} (of 0–{num_layers - 1}), {which}{context}"


# ---------------------------------------------------------------- pieces → words

@dataclass
class WordAlignment:
    """A word-level attention matrix: ``weights[j, i]`` is how much target word j drew on
    source word i. With eos="keep" the last source word and (if the output ended with EOS)
    the last target word are `EOS_LABEL`."""

    source_words: list[str]
    target_words: list[str]
    weights: Tensor  # [len(target_words), len(source_words)], each row sums to 1 (or is 0)
    eos_kept: bool = False

    def to_dict(self) -> dict:
        return {"source_words": self.source_words, "target_words": self.target_words,
                "weights": rounded(self.weights), "eos": "keep" if self.eos_kept else "drop"}


def _grouping(word_of_piece: list[int], num_words: int) -> Tensor:
    """[pieces, words] one-hot: which word each piece belongs to."""
    grouping = torch.zeros(len(word_of_piece), num_words)
    grouping[torch.arange(len(word_of_piece)), torch.tensor(word_of_piece, dtype=torch.long)] = 1
    return grouping


def merge_to_words(
    weights: Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str], eos: str = "drop"
) -> WordAlignment:
    """Turn a piece-level matrix ``weights`` [T+1, S+1] (rows: target pieces then the EOS
    step; columns: source pieces then the source EOS) into a word-level `WordAlignment`.

    A target word's row is the mean of its pieces' rows (each a distribution, so the mean is
    one); a source word's column is the sum of its pieces' columns (attention spread over a
    word's pieces is attention to that word). The source EOS soaks up much attention in every
    Transformer, and the EOS step aligns to nothing a reader sees, so by default (eos="drop")
    both are removed and every row is renormalised to sum to 1 over the real words; a row that
    gave everything to EOS stays 0. eos="keep" keeps them as a last row and column labelled
    `EOS_LABEL`, to show how much weight went there. Columns beyond S+1 (batch padding) are
    ignored; a [T, ...] matrix (output cut at the length limit, no EOS step) is accepted.
    """
    if eos not in EOS_MODES:
        raise ValueError(f"eos must be one of {EOS_MODES}, not {eos!r}")
    num_source, num_target = len(source_pieces), len(target_pieces)
    if weights.dim() != 2 or weights.size(0) not in (num_target, num_target + 1) or (
            weights.size(1) < num_source + 1):
        raise ValueError(f"weights of shape {tuple(weights.shape)} do not fit {num_target} "
                         f"target and {num_source} source pieces (expected "
                         f"[{num_target + 1}, {num_source + 1}])")
    weights = weights[:, : num_source + 1].float().cpu()
    source_words, source_of_piece = piece_words(source_pieces)
    target_words, target_of_piece = piece_words(target_pieces)
    rows = _grouping(target_of_piece, len(target_words)).t()  # [target words, T]
    rows = rows / rows.sum(1, keepdim=True).clamp_min(1)
    merged = torch.cat([rows @ weights[:num_target], weights[num_target:]])  # EOS row, if any
    columns = _grouping(source_of_piece, len(source_words))  # [S, source words]
    merged = torch.cat([merged[:, :num_source] @ columns, merged[:, num_source:]], dim=1)
    if eos == "keep":
        eos_row = [EOS_LABEL] if weights.size(0) == num_target + 1 else []
        return WordAlignment(source_words + [EOS_LABEL], target_words + eos_row, merged, True)
    merged = merged[: len(target_words), : len(source_words)]
    merged = merged / merged.sum(1, keepdim=True).clamp_min(1e-9)
    return WordAlignment(source_words, target_words, merged)


def shifted(weights: Tensor) -> Tensor:
    """Shift-Att (Chen et al. 2020): the rows of a teacher-forced [T+1, S+1] matrix taken one
    step later, where each target piece is the decoder's *input* rather than its output;
    row t becomes the step that read piece t (the EOS row, which reads no piece, is dropped
    and the last piece's row is the step that predicts EOS)."""
    return weights[1:]


def word_alignment(
    attention: Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str],
    layer: int | None = None, heads: list[int] | None = None, eos: str = "drop",
    shift: bool = False,
) -> WordAlignment:
    """`select_attention` then `merge_to_words`: the word-level view of one layer/heads
    (``shift``: read as Shift-Att, for forced alignment of a given pair)."""
    weights = select_attention(attention, layer, heads)
    return merge_to_words(shifted(weights) if shift else weights, source_pieces,
                          target_pieces, eos)


def every_head_to_words(attention: Tensor, source_pieces: Sequence[str],
                        target_pieces: Sequence[str]) -> WordAlignment:
    """Every layer's and head's word-level matrix, EOS row and column kept: weights
    [layers, heads, T+1, S+1] (the training timeline stores these)."""
    merged = [[merge_to_words(head, source_pieces, target_pieces, eos="keep") for head in layer]
              for layer in attention]
    first = merged[0][0]
    return WordAlignment(first.source_words[:-1], first.target_words[:-1],
                         torch.stack([torch.stack([m.weights for m in layer])
                                      for layer in merged]), eos_kept=True)


# ---------------------------------------------------------------- a sentence's views


@dataclass
class View:
    """Which part of a sentence's attention a reader looks at: a decoder layer of the model
    (None: `DEFAULT_LAYER`; negative counts from the top) and the heads averaged (None: all)."""

    layer: int | None = None
    heads: list[int] | None = None


@dataclass
class SentenceAttention:
    """One sentence's cross-attention ([layers held, heads held, T+1, S+1]) with its pieces
    and what it holds (`AttentionLayout`): every layer and head of our model, or CTranslate2's
    one mean of heads of one layer, which names itself in its titles."""

    weights: Tensor
    source_pieces: Sequence[str]
    target_pieces: Sequence[str]
    layout: AttentionLayout = field(default=None)  # None: every layer and head of the tensor

    def __post_init__(self) -> None:
        if self.weights.dim() != 4:
            raise AlignmentError(f"attention of shape {tuple(self.weights.shape)} is not "
                                 "[layers, heads, target steps, source positions]; pass a "
                                 "Translation's attention")
        if self.layout is None:
            self.layout = AttentionLayout.every(*self.weights.shape[:2])

    @classmethod
    def of(cls, translation: Translation) -> SentenceAttention:
        """A translation's attention (which must have been asked for)."""
        return cls(translation.attention, translation.source_pieces, translation.target_pieces,
                   translation.layout)

    @classmethod
    def every(cls, weights: Tensor, source_pieces: Sequence[str],
              target_pieces: Sequence[str], full_context: bool = False) -> SentenceAttention:
        """Every layer and head of our model (``full_context``: read without the causal
        mask)."""
        return cls(weights, source_pieces, target_pieces,
                   AttentionLayout.every(*weights.shape[:2], full_context))

    @property
    def num_layers(self) -> int:
        """Layers held (1 for CTranslate2's)."""
        return self.weights.size(0)

    @property
    def num_heads(self) -> int:
        """Heads held (1 for CTranslate2's mean of heads)."""
        return self.weights.size(1)

    @property
    def every_view(self) -> bool:
        """Whether every layer and head of the model is here (not one engine's mean)."""
        return self.layout.engine is None

    def index(self, view: View) -> int:
        """The position of ``view``'s layer among those held; a layer not held is refused."""
        if self.every_view:
            return resolve_layer(view.layer, self.num_layers)
        if view.layer is None:
            return 0
        layer = resolve_layer(view.layer, self.layout.num_layers)
        if layer not in self.layout.layers:
            raise AlignmentError(f"{self.layout.engine} returned the attention of layer "
                                 f"{self.layout.layers[0]} only, not of layer {layer}; use the "
                                 "PyTorch backend")
        return self.layout.layers.index(layer)

    def matrix(self, view: View) -> Tensor:
        """``view``'s piece-level matrix [T+1, S+1] (`select_attention`)."""
        return select_attention(self.weights, self.index(view), view.heads)

    def words(self, view: View | None = None, eos: str = "drop") -> WordAlignment:
        """``view``'s word-level matrix (`merge_to_words`; None: the default view)."""
        return self.merged(self.matrix(view or View()), eos)

    def merged(self, matrix: Tensor, eos: str = "drop") -> WordAlignment:
        """A piece-level matrix of this sentence [T+1, S+1] merged to words."""
        return merge_to_words(matrix, self.source_pieces, self.target_pieces, eos)

    def head_matrix(self, index: int, head: int) -> Tensor:
        """One head's piece-level matrix, by the positions of its layer and head here."""
        return self.weights[index, head]

    def title(self, view: View | None = None) -> str:
        """What ``view`` shows, e.g. 'layer 2 (of 0–2), mean of heads 0–7' (`describe_view`);
        an engine's one matrix names its layer and the engine."""
        view = view or View()
        if not self.every_view:
            layout = self.layout
            return (f"layer {layout.layers[0]} (of 0–{layout.num_layers - 1}), mean of heads "
                    f"0–{layout.num_heads - 1} ({layout.engine})")
        return describe_view(self.weights, view.layer, view.heads, self.layout.full_context)

    def layer_of(self, view: View) -> int:
        """The model's decoder layer ``view`` shows (non-negative)."""
        return self.layout.layers[self.index(view)]

    def layer_views(self, heads: list[int] | None = None) -> list[View]:
        """One view per layer held, ``heads`` averaged (None: all)."""
        return [View(layer, heads) for layer in self.layout.layers]

    def head_views(self, view: View) -> list[View]:
        """Each head held of ``view``'s layer, on its own."""
        return [View(self.layer_of(view), [head]) for head in range(self.num_heads)]


# ---------------------------------------------------------------- getting the attention


def _encode(encode, text: str, side: str, model: Transformer, reserved: int = 0) -> list[int]:
    """The ids of ``text``, which must fit the model with its EOS (and ``reserved`` more)."""
    ids = encode(text)
    if not ids:
        raise AlignmentError(f"the {side} sentence is empty; give it at least one word")
    limit = model.config.max_positions - 1 - reserved
    if len(ids) > limit:
        raise AlignmentError(f"the {side} sentence has {len(ids)} pieces, more than the model's "
                             f"{limit}; split it into shorter sentences")
    return ids


def _tagged_source(tokenizer: Tokenizer, text: str, model: Transformer,
                   target_language: str | None) -> list[int]:
    """The source ids the model reads: for a model of both directions, the tag of the target
    language (`translate.target_and_body`) and then the text's ids."""
    language, body, _ = target_and_body(text, tokenizer, target_language)
    tag = tokenizer.tag_ids(language)
    ids = _encode(tokenizer.encode_source, body, "source", model, len(tag))
    return tag + ids


def fits(model: Transformer, tokenizer: Tokenizer, source: str, target: str,
         target_language: str | None = None) -> bool:
    """Whether the pair can be force-decoded by ``model``: both sides fit its positions."""
    try:
        _tagged_source(tokenizer, source, model, target_language)
        _encode(tokenizer.encode_target, target, "target", model)
    except AlignmentError:
        return False
    return True


@torch.no_grad()
def teacher_forced_attentions(
    model: Transformer, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]],
    device: str | torch.device = "cpu", batch_size: int = 32,
    target_language: str | None = None, full_context: bool = False,
) -> list[tuple[Tensor, list[str], list[str]]]:
    """Forced alignment: feed each target to the decoder as if the model had written it and
    return, per (source, target) pair, the cross-attention [layers, heads, T+1, S+1] with the
    source and target pieces. Row t is the step that predicts target piece t (the last row
    predicts EOS). Pairs go in batches; with ``full_context`` from a decoder pass without the
    causal mask (the view a run trained with ``train.alignment_full_context`` was taught to
    align). A model of both directions is told ``target_language`` (None: each source's
    script decides)."""
    check_target_language(target_language, tokenizer, None)
    results = []
    tag = int(bool(tokenizer.tags))  # a model of both directions reads a tag first
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        sources = [_tagged_source(tokenizer, s, model, target_language) for s, _ in chunk]
        targets = [_encode(tokenizer.encode_target, t, "target", model) for _, t in chunk]
        batch = make_batch(sources, targets, tokenizer.pad_id, tokenizer.bos_id,
                           tokenizer.eos_id).to(device)
        with evaluating(model):
            memory, source_mask = model.encode(batch.source)
            attention = model.forced_attention(batch.target_input, memory, source_mask,
                                               full_context)
        attention = attention.float().cpu()  # [B, layers, heads, T+1, S+1]
        for row, (source_ids, target_ids) in enumerate(zip(sources, targets)):
            matrix = attention[row, :, :, : len(target_ids) + 1, tag : len(source_ids) + 1]
            results.append((matrix, tokenizer.source_pieces(source_ids[tag:]),
                            tokenizer.shown_target_pieces(target_ids)))
    return results


# ---------------------------------------------------------------- attribution

ATTRIBUTION_TITLE = "input × gradient: what each word's log-probability depended on"


def attribution_matrix(model: Transformer, tokenizer: Tokenizer, source_ids: list[int],
                       target_ids: list[int], steps: int = 1) -> Tensor:
    """How much each source piece's embedding contributed to the log-probability of each
    target piece, signed, [T+1, S+1] (rows: ``target_ids`` then the EOS; columns: the source
    pieces then the source EOS): the gradient of log p(y_t) with respect to the piece's token
    embedding (× √d_model, as the model adds it to the position signal), times that embedding,
    summed over its dimensions. ``steps`` > 1: integrated gradients (Sundararajan et al.
    2017) from a zero embedding, the gradient averaged at the midpoints of ``steps`` intervals;
    ``steps`` = 1 is plain input × gradient (the rows then sum to the first-order change)."""
    device = next(model.parameters()).device
    rows = len(target_ids) + 1  # one copy of the sentence per target row and point: one pass
    source = torch.tensor([source_ids + [tokenizer.eos_id]] * (rows * steps), device=device)
    target = torch.tensor([[tokenizer.bos_id, *target_ids, tokenizer.eos_id]] * (rows * steps),
                          device=device)
    embeddings = model.source_embeddings
    tokens = (embeddings.tokens(source) * embeddings.scale).detach()
    # the scaled inputs, one copy each: α = 1 (input × gradient), or the midpoints of
    # integrated gradients' ``steps`` intervals between 0 and 1
    alphas = torch.ones(1, device=device, dtype=tokens.dtype) if steps == 1 else (
        torch.arange(steps, device=device, dtype=tokens.dtype) + 0.5) / steps
    alphas = alphas.repeat(rows)[:, None, None]
    scaled: list[Tensor] = []

    def scale_tokens(module, inputs, output):  # output: tokens + positions (dropout off)
        scaled.append(output - (1 - alphas) * tokens)
        return scaled[-1]

    with evaluating(model), torch.enable_grad():
        handle = embeddings.register_forward_hook(scale_tokens)
        try:  # only the encoder's call: a shared embedding table also embeds the target
            memory, source_mask = model.encode(source)
        finally:
            handle.remove()
        logits = model.decode(target[:, :-1], memory, source_mask).logits
        # copy r differentiates target row r // steps: copies are independent, so the
        # gradient of the sum is each copy's own
        row_of = torch.arange(rows * steps, device=device) // steps
        chosen = logits[torch.arange(rows * steps, device=device), row_of].log_softmax(-1)
        chosen = chosen.gather(1, target[:, 1:].gather(1, row_of[:, None]))
        (gradient,) = torch.autograd.grad(chosen.sum(), scaled[0])
    gradient = gradient.view(rows, steps, *gradient.shape[1:]).mean(1)
    return (gradient * tokens[0]).sum(-1).detach().float().cpu()


def attribution_words(matrix: Tensor, source_pieces: Sequence[str],
                      target_pieces: Sequence[str]) -> WordAlignment:
    """A signed piece-level `attribution_matrix` [T+1, S+1] as words, read like attention:
    a target word's row is the sum of its pieces' rows (the gradient of its log-probability,
    the sum of theirs), a source word's column the sum of its pieces' (contributions add),
    then magnitudes, the EOS row and column dropped, and each row normalised to sum to 1."""
    source_words, source_of_piece = piece_words(source_pieces)
    target_words, target_of_piece = piece_words(target_pieces)
    num_target, num_source = len(target_pieces), len(source_pieces)
    rows = _grouping(target_of_piece, len(target_words)).t()  # [target words, T]
    columns = _grouping(source_of_piece, len(source_words))  # [S, source words]
    merged = (rows @ matrix[:num_target, :num_source].float() @ columns).abs()
    merged = merged / merged.sum(1, keepdim=True).clamp_min(1e-12)
    return WordAlignment(source_words, target_words, merged)


def translation_attribution(model: Transformer, tokenizer: Tokenizer,
                            translation: Translation, steps: int = 1) -> WordAlignment:
    """The word-level attribution (`attribution_words`) of a translation by ``model``: its
    source as the model read it (a tag first for a model of both directions, left out of the
    result), its output as written (a forced prefix included). An input split into parts is
    too long for one pass and refused."""
    if not translation.source_pieces or not translation.target_pieces:
        raise AlignmentError("an empty input or output has no attribution")
    source_ids = _tagged_source(tokenizer, translation.source, model,
                                translation.target_language)
    tag = len(source_ids) - len(translation.source_pieces)
    if tokenizer.source_pieces(source_ids[tag:]) != list(translation.source_pieces):
        raise AlignmentError("the translation's source pieces are not those of its text; "
                             "an input split into parts has no attribution")
    matrix = attribution_matrix(model, tokenizer, source_ids, translation.tokens, steps)
    return attribution_words(matrix[:, tag:], translation.source_pieces,
                             translation.target_pieces)


# ---------------------------------------------------------------- hard links and AER


def hard_links(weights: Tensor, threshold: float | None = None) -> list[Link]:
    """Hard (source word, target word) links from a word-level matrix [target, source]: the
    brightest source word of each target word, or, with ``threshold``, every cell at least
    that bright. Rows that are all 0 get no link. Sorted by source, then target word."""
    links = []
    for j, row in enumerate(weights):
        if float(row.sum()) <= 0:
            continue
        if threshold is None:
            links.append((int(row.argmax()), j))
        else:
            links.extend((int(i), j) for i in torch.nonzero(row >= threshold).flatten())
    return sorted(links)


def alignment_error_rate(
    predicted: Sequence[Iterable[Link]], gold: Sequence[Iterable[Link]]
) -> float:
    """AER = 1 − 2|A∩G| / (|A| + |G|) over a corpus, ``predicted`` and ``gold`` holding one
    collection of links per sentence (all gold links counted as sure, so this equals 1 − F1).
    Counts are summed over sentences before dividing, as in the WPT evaluations."""
    if len(predicted) != len(gold):
        raise AlignmentError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones; "
                             "give one line per sentence pair in both")
    agreed = total = 0
    for links, gold_links in zip(predicted, gold):
        links, gold_links = set(links), set(gold_links)
        agreed += len(links & gold_links)
        total += len(links) + len(gold_links)
    return 1.0 - 2.0 * agreed / total if total else 0.0


def align_pairs(
    model: Transformer, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]],
    layer: int | None = None, heads: list[int] | None = None, threshold: float | None = None,
    device: str | torch.device = "cpu", shift: bool = False,
    target_language: str | None = None, full_context: bool = False,
) -> list[list[Link]]:
    """Forced alignment of (source, target) sentence pairs: hard word links per pair from the
    chosen layer/heads (`hard_links`; ``shift``: the Shift-Att reading). A pair with an empty
    side gets no links. A model of both directions is told ``target_language`` (None: each
    source's script decides)."""
    usable = [i for i, (source, target) in enumerate(pairs) if source.split() and target.split()]
    attentions = teacher_forced_attentions(model, tokenizer, [pairs[i] for i in usable], device,
                                           target_language=target_language,
                                           full_context=full_context)
    links: list[list[Link]] = [[] for _ in pairs]
    for i, (attention, source_pieces, target_pieces) in zip(usable, attentions):
        weights = word_alignment(attention, source_pieces, target_pieces, layer, heads,
                                 shift=shift).weights
        links[i] = hard_links(weights, threshold)
    return links


def check_links(links: Sequence[Sequence[Link]], pairs: Sequence[tuple[str, str]],
                where: str) -> None:
    """Raise if a link points past the words of its sentence pair (a gold file for other
    sentences, or in the other direction)."""
    for number, (sentence_links, (source, target)) in enumerate(zip(links, pairs), start=1):
        sizes = (len(source.split()), len(target.split()))
        for i, j in sentence_links:
            if i >= sizes[0] or j >= sizes[1]:
                raise AlignmentError(
                    f"{where} line {number}: link {i}-{j} points past the {sizes[0]} source and "
                    f"{sizes[1]} target words; is the file for these sentences, and in this "
                    "direction (first index: the source word)?")


def read_alignment_files(src: Path, tgt: Path, gold: Path | None = None,
                         gold_reversed: bool = False
                         ) -> tuple[list[tuple[str, str]], list[list[Link]] | None]:
    """The sentence pairs of line-aligned ``src`` and ``tgt`` files and, given ``gold``, its
    Pharaoh links (``gold_reversed``: its first index is the target word), checked against
    the pairs' words."""
    sources, targets = read_lines(src), read_lines(tgt)
    if len(sources) != len(targets):
        raise AlignmentError(f"{src} has {len(sources)} lines but {tgt} has {len(targets)}; "
                             "the files must be line-aligned")
    links = None
    if gold is not None:
        links = read_pharaoh(gold, word_counts(sources), word_counts(targets),
                             reverse=gold_reversed, sides=("source", "target"))
    return list(zip(sources, targets)), links


def aer_summary(links: Sequence[Sequence[Link]], gold: Sequence[Sequence[Link]]) -> str:
    """One line: the AER of ``links`` against ``gold`` and what it counted."""
    aer = alignment_error_rate(links, gold)
    return (f"AER {aer:.4f} ({len(links)} sentence pairs, {sum(map(len, links))} links, "
            f"{sum(map(len, gold))} gold links)")


def parse_heads(text: str | None) -> list[int] | None:
    """Head numbers from ``--heads 0,3,5`` (None: all heads)."""
    if text is None:
        return None
    try:
        return [int(h) for h in text.split(",")]
    except ValueError:
        raise AlignmentError(f"--heads {text!r} must be head numbers separated by commas, "
                             "e.g. 0,3,5") from None
