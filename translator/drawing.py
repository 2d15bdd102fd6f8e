"""Pictures of a run and of its translations: the showcase sentences' heatmaps and explorer
pages and the learning curves (`translator.training.train` draws them at the end of a run, so
that the Python API and the command line write the same run folder; `plot-run` redraws
them), and the heatmaps, grids and explorer pages `translate --plot/--html` asks for.

This is the one place that picks views (`translator.alignment.View`): the default view of a
heatmap, a layer's heads and every layer for the grids; `translator.alignment.SentenceAttention`
computes their word matrices and titles, and `translator.plotting` and `translator.explorer`
draw them.

    draw_showcase(RunDir("runs/latest"))   # heatmaps/showcase-N.{png,svg,json,html}, ...
    draw_timeline(read_timeline(...), ...)  # heatmaps/timeline-N.gif: attention over training
    draw_curves(RunDir("runs/latest"))     # curves.png
    draw_translations(translations, {"plot": Path("rajesh.png")}, translator)
"""

from __future__ import annotations

from pathlib import Path

from translator import corpus, explorer, plotting
from translator.alignment import (
    ATTRIBUTION_TITLE,
    AlignmentError,
    SentenceAttention,
    View,
    WordAlignment,
    resolve_layer,
    translation_attribution,
)
from translator.decoders import AttentionLayout
from translator.direction import Direction
from translator.errors import TranslatorError
from translator.reporting import say
from translator.run_dir import RunDir
from translator.timeline import TimelineSentence, read_timeline
from translator.translate import Translation, Translator


def showcase_sources(direction: str) -> list[tuple[str, str]]:
    """The showcase sentences (`translator.corpus.SHOWCASE`) as (source, reference) for a model
    that translates ``direction``: the Hindi side is the source for hi-en (and both); for en-hi
    the English side is, so the seeds' own English sentences ("The mechanic fixed the scooter
    ...", "UPI payment failed ...") are what an English→Hindi model is shown."""
    hindi_first = Direction(direction).showcase() == "hi-en"
    return [(hindi, english) if hindi_first else (english, hindi)
            for hindi, english in corpus.SHOWCASE]


def translate_showcase(translator: Translator, beam_size: int | None = None
                       ) -> list[tuple[str, str, Translation]]:
    """(source, reference, translation with its attention) of each showcase sentence in the
    translator's showcase direction (`Direction.showcase`), each translated on its own, with
    the run's search (``beam_size`` None) or that beam size."""
    language = "en" if Direction(translator.direction).both else None  # hi→en, by name
    beam = {} if beam_size is None else {"beam_size": beam_size}
    return [(source, reference,
             translator.translate([source], need_attention=True, target_language=language,
                                  **beam)[0])
            for source, reference in showcase_sources(translator.direction)]


def draw_showcase_heatmaps(translator: Translator, out_dir: str | Path,
                           showcase: list[tuple[str, str, Translation]] | None = None
                           ) -> list[Path]:
    """Draw each showcase sentence's set (`plotting.draw_attention`) into ``out_dir`` as
    showcase-1.*, showcase-2.*, ...: the sentences of `translate_showcase`, or ``showcase``,
    its result, when the caller already has it. Returns the files written."""
    if showcase is None:
        showcase = translate_showcase(translator)
    paths = []
    for number, (source, reference, result) in enumerate(showcase, start=1):
        paths += draw_attention(
            SentenceAttention.of(result), out_dir, f"showcase-{number}", source=source,
            translation=result.text, reference=reference,
            direction=Direction(translator.direction).showcase().name,
            beam_size=translator.search.beam_size)
    return paths


def draw_showcase(run_dir: RunDir, beam_size: int | None = None, device: str = "auto",
                  checkpoint: str = "best") -> list[Path]:
    """The showcase sentences as the run's ``checkpoint`` translates them (its search, or
    ``beam_size``): heatmaps/showcase-N.png, .svg, -heads.png, -layers.png, .json
    (`translator.plotting`) and showcase-N.html, the attention explorer
    (`translator.explorer`), from one translation."""
    translator = Translator.from_run(run_dir, checkpoint, device)
    if beam_size is not None:
        translator.set_search(beam_size=beam_size, n_best=1)
    translator.set_search(alternatives=PAGE_ALTERNATIVES)  # for the pages' hover; same output
    showcase = translate_showcase(translator)
    paths = draw_showcase_heatmaps(translator, run_dir.heatmaps_dir, showcase)
    beam = translator.search.beam_size
    followed = read_timeline(run_dir.timeline_file)  # the slider's steps, if the run kept them
    for number, (source, reference, result) in enumerate(showcase, start=1):
        paths.append(explorer.write_page(
            run_dir.heatmaps_dir / f"showcase-{number}.html", explorer.with_timeline(
                explorer.with_insight(explorer.sentence_data(
                    SentenceAttention.of(result), source, result.text,
                    title=f"showcase sentence {number} · "
                    f"{Direction(translator.direction).showcase().arrow} · beam {beam}",
                    reference=reference), result, attribution_of(translator, result)),
                followed)))
    paths += draw_timeline(followed, run_dir.heatmaps_dir)
    say(f"showcase heatmaps: {len(paths)} files in {run_dir.heatmaps_dir} (open "
        f"showcase-1.html in a browser to explore them)")
    return paths


def draw_timeline(followed: list[TimelineSentence], out_dir: Path) -> list[Path]:
    """Each sentence followed through training (`translator.timeline`) as an animated image,
    out_dir/timeline-N.gif: the default view (`View()`: the default layer, mean of heads) of
    its reference, force-decoded at each validation."""
    paths = []
    for number, sentence in enumerate(followed, start=1):
        layers = sentence.weights[0].size(0)
        layer = resolve_layer(View().layer, layers)
        frames = [(f"step {step}: layer {layer} (of 0–{layers - 1}), mean of heads",
                   sentence.words(index, layer)) for index, step in enumerate(sentence.steps)]
        paths.append(plotting.plot_animation(
            frames, out_dir / f"timeline-{number}.gif",
            "attention learning to align: the reference, force-decoded at each validation"))
    return paths


def plot_run(run: str | Path | None, beam_size: int | None = None, device: str = "auto",
             checkpoint: str = "best", curves_only: bool = False) -> list[Path]:
    """`python -m translator plot-run`: redraw a run's curves and, unless ``curves_only`` or
    the run has no checkpoint yet, its showcase pictures (`draw_showcase`)."""
    run_dir = RunDir.find(run)
    paths = [draw_curves(run_dir, run_dir.read_config().train.early_stopping_metric)]
    if curves_only:
        return paths
    if not run_dir.checkpoints():
        say(f"{run_dir} has no checkpoint yet: the showcase heatmaps are not drawn")
        return paths
    return paths + draw_showcase(run_dir, beam_size, device, checkpoint)


def draw_curves(run_dir: RunDir, best_by: str = "chrf") -> Path:
    """RUN/curves.png from RUN/metrics.jsonl, the best checkpoint (by ``best_by``) marked."""
    path = plotting.plot_learning_curves(run_dir.metrics_file, run_dir.curves_file, best_by)
    say(f"learning curves: {path}")
    return path


# ---------------------------------------------------------------- one sentence's pictures


def plot_heads(sentence: SentenceAttention, view: View | None, path: str | Path,
               eos: str = "drop", title: str | None = None) -> Path:
    """Every head of ``view``'s layer (None: the default view's), each merged to words."""
    index = sentence.index(view or View())
    panels = [(f"head {h}", sentence.merged(sentence.head_matrix(index, h), eos))
              for h in range(sentence.num_heads)]
    title = title or (f"cross-attention of each head, layer {sentence.layer_of(view or View())}"
                      f" (of 0–{sentence.layout.num_layers - 1})")
    return plotting.plot_grid(panels, path, title, columns=min(4, sentence.num_heads))


def plot_layers(sentence: SentenceAttention, path: str | Path, eos: str = "drop",
                title: str | None = None) -> Path:
    """Every decoder layer held, its heads averaged, each merged to words; the default view's
    layer marked."""
    default = sentence.layer_of(View())
    panels = [(f"layer {view.layer}" + (" (default)" if view.layer == default else ""),
               sentence.words(view, eos)) for view in sentence.layer_views()]
    title = title or f"cross-attention of each layer, mean of its {sentence.num_heads} heads"
    return plotting.plot_grid(panels, path, title, columns=min(3, sentence.num_layers))


def all_heads_as_words(sentence: SentenceAttention) -> list[list[list[list[float]]]]:
    """[layers][heads] word-level matrices (EOS dropped, 4 decimals), for the JSON, notebooks
    and other tools."""
    return [[rounded_words(sentence, index, head) for head in range(sentence.num_heads)]
            for index in range(sentence.num_layers)]


def rounded_words(sentence: SentenceAttention, index: int, head: int) -> list[list[float]]:
    return sentence.merged(sentence.head_matrix(index, head)).to_dict()["weights"]


def draw_attention(sentence: SentenceAttention, out_dir: str | Path, name: str,
                   view: View | None = None, **extra) -> list[Path]:
    """The full set for one sentence: NAME.png and NAME.svg (``view``, None: the default),
    NAME-heads.png, NAME-layers.png and NAME.json (the view plus every layer and head, as
    words, and ``extra`` keys)."""
    view = view or View()
    out_dir = Path(out_dir)
    alignment = sentence.words(view)
    title = sentence.title(view)
    paths = [plotting.plot_heatmap(alignment, out_dir / f"{name}{suffix}", title=title)
             for suffix in plotting.FORMATS]
    paths.append(plot_heads(sentence, view, out_dir / f"{name}-heads.png"))
    paths.append(plot_layers(sentence, out_dir / f"{name}-layers.png"))
    paths.append(plotting.save_alignment_json(
        alignment, out_dir / f"{name}.json", view=title, layer=sentence.layer_of(view),
        heads=view.heads or list(range(sentence.num_heads)),
        **extra, all_heads=all_heads_as_words(sentence)))
    return paths


# ---------------------------------------------------------------- a translation's pictures

# the pictures `translate` draws: (option, what it is, the suffixes it may end in)
PICTURES = {
    "plot": ("heatmap of the cross-attention, merged to words", plotting.FORMATS),
    "plot_heads": ("a grid of every head of one layer", plotting.FORMATS),
    "plot_layers": ("a grid of every layer, heads averaged", plotting.FORMATS),
    "html": ("the attention explorer", explorer.SUFFIXES),
}


def picture_paths(path: Path, count: int, kind: str = "plot") -> list[Path]:
    """FILE.png for one translation; FILE-1.png, FILE-2.png, ... for several; a suffix that
    does not fit ``kind`` (a `PICTURES` key) is refused."""
    suffixes = PICTURES[kind][1]
    if path.suffix.lower() not in suffixes:
        what = "image format" if suffixes == plotting.FORMATS else "format"
        raise TranslatorError(f"cannot tell the {what} of {path}; end it in "
                              f"{' or '.join(suffixes)}")
    if count == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{n}{path.suffix}") for n in range(1, count + 1)]


def check_picture_path(path: Path, kind: str) -> None:
    """Refuse, before any translating, a picture path of the wrong suffix or in a folder that
    is not there."""
    picture_paths(path, 1, kind)
    if not path.parent.is_dir():
        raise TranslatorError(f"cannot write {path}: the folder {path.parent} does not exist; "
                              "create it first or choose another path")


def check_views(pictures: dict[str, Path], layer: int | None,
                layout: AttentionLayout) -> None:
    """Refuse, before any translating, pictures that the attention a decoder returns cannot
    give: another layer, or every layer's or head's, from CTranslate2's one mean of heads; a
    layer the model does not have."""
    if layout.engine is not None:
        wanted = [kind for kind in ("plot_heads", "plot_layers") if kind in pictures]
        if wanted or layer is not None:
            flag = f"--{wanted[0].replace('_', '-')}" if wanted else "--layer"
            raise TranslatorError(f"{flag} needs every layer's and head's attention, which "
                                  f"only the PyTorch backend has; {layout.engine} returns the "
                                  "alignment layer's mean of heads, for --plot and --html")
    elif pictures:
        resolve_layer(layer, layout.num_layers)


PAGE_ALTERNATIVES = 5  # the pieces an explorer page lists for each output word


def attribution_of(translator: Translator, translation: Translation) -> WordAlignment | None:
    """The translation's input × gradient attribution (`translation_attribution`), None where
    there is none to give: a CTranslate2 export (no gradients), an empty or split input."""
    if translator.model is None:
        return None
    try:
        return translation_attribution(translator.model, translator.tokenizer, translation)
    except AlignmentError:
        return None


def plot_attribution(translator: Translator, translation: Translation, path: Path) -> Path:
    """``translate --plot FILE --attribution``: the input × gradient heatmap, or one sentence
    saying why there is none."""
    words = attribution_of(translator, translation)
    if words is None:
        raise TranslatorError("--attribution needs the PyTorch backend and an input short "
                              "enough to be translated in one part")
    return plotting.plot_heatmap(words, path, title=ATTRIBUTION_TITLE,
                                 scale="share of attribution")


def draw_translations(translations: list[Translation], pictures: dict[str, Path],
                      translator: Translator, layer: int | None = None,
                      attribution: bool = False) -> list[Path]:
    """The ``pictures`` asked for (`PICTURES` key → path) of every translation that has
    attention, numbered when there are several, in ``layer``'s view (None: the default), and
    for ``plot`` with ``attribution`` the input × gradient attribution instead; every page
    gets the attribution view too. Returns the files written."""
    drawn = [t for t in translations if t.attention is not None]
    view = View(layer)
    written = []
    for kind, path in pictures.items():
        for t, out in zip(drawn, picture_paths(path, len(drawn), kind)):
            sentence = SentenceAttention.of(t)
            if kind == "html":
                direction = Direction(translator.direction).of_translation(t.target_language)
                data = explorer.sentence_data(
                    sentence, t.source, t.text, view=view,
                    title=f"cross-attention explorer · {direction.arrow} "
                    f"· beam {translator.search.beam_size}")
                explorer.write_page(out, explorer.with_insight(data, t, attribution_of(
                    translator, t)))
            elif kind == "plot" and attribution:
                plot_attribution(translator, t, out)
            elif kind == "plot":
                plotting.plot_heatmap(sentence.words(view), out, title=sentence.title(view))
            elif kind == "plot_heads":
                plot_heads(sentence, view, out)
            else:
                plot_layers(sentence, out)
            written.append(out)
    return written
