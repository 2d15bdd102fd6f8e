"""Pictures of a run and of its translations: the showcase sentences' heatmaps and explorer
pages and the learning curves (`translator.training.train` draws them at the end of a run, so
that the Python API and the command line write the same run folder; `plot-run` redraws
them), and the heatmaps, grids and explorer pages `translate --plot/--html` asks for.

    draw_showcase(RunDir("runs/latest"))   # heatmaps/showcase-N.{png,svg,json,html}, ...
    draw_curves(RunDir("runs/latest"))     # curves.png
    draw_translations(translations, {"plot": Path("rajesh.png")}, translator)
"""

from __future__ import annotations

from pathlib import Path

from translator import corpus, explorer, plotting
from translator.alignment import describe_view, merge_to_words, select_attention
from translator.direction import Direction
from translator.errors import TranslatorError
from translator.reporting import say
from translator.run_dir import RunDir
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
        paths += plotting.draw_attention(
            result.attention, result.source_pieces, result.target_pieces, out_dir,
            f"showcase-{number}", source=source, translation=result.text,
            reference=reference, direction=Direction(translator.direction).showcase().name,
            beam_size=translator.search.beam_size,
            full_context=translator.config.train.alignment_full_context)
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
    showcase = translate_showcase(translator)
    paths = draw_showcase_heatmaps(translator, run_dir.heatmaps_dir, showcase)
    beam = translator.search.beam_size
    for number, (source, reference, result) in enumerate(showcase, start=1):
        paths.append(explorer.write_explorer(
            run_dir.heatmaps_dir / f"showcase-{number}.html", result.attention,
            result.source_pieces, result.target_pieces, source, result.text,
            title=f"showcase sentence {number} · "
            f"{Direction(translator.direction).showcase().arrow} · "
            f"beam {beam}", reference=reference,
            full_context=translator.config.train.alignment_full_context))
    say(f"showcase heatmaps: {len(paths)} files in {run_dir.heatmaps_dir} (open "
        f"showcase-1.html in a browser to explore them)")
    return paths


def draw_curves(run_dir: RunDir, best_by: str = "chrf") -> Path:
    """RUN/curves.png from RUN/metrics.jsonl, the best checkpoint (by ``best_by``) marked."""
    path = plotting.plot_learning_curves(run_dir.metrics_file, run_dir.curves_file, best_by)
    say(f"learning curves: {path}")
    return path


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


def draw_translations(translations: list[Translation], pictures: dict[str, Path],
                      translator: Translator, layer: int | None = None) -> list[Path]:
    """The ``pictures`` asked for (`PICTURES` key → path) of every translation that has
    attention, numbered when there are several; returns the files written."""
    drawn = [t for t in translations if t.attention is not None]
    full_context = translator.config.train.alignment_full_context
    written = []
    for kind, path in pictures.items():
        for t, out in zip(drawn, picture_paths(path, len(drawn), kind)):
            if kind == "html":
                direction = Direction(translator.direction).of_translation(t.target_language)
                explorer.write_explorer(out, t.attention, t.source_pieces, t.target_pieces,
                                        t.source, t.text, layer=layer,
                                        full_context=full_context,
                                        title=f"cross-attention explorer · {direction.arrow} "
                                        f"· beam {translator.search.beam_size}")
            elif kind == "plot":
                words = merge_to_words(select_attention(t.attention, layer), t.source_pieces,
                                       t.target_pieces)
                plotting.plot_heatmap(words, out, title=describe_view(
                    t.attention, layer, full_context=full_context))
            elif kind == "plot_heads":
                plotting.plot_heads(t.attention, t.source_pieces, t.target_pieces, layer, out)
            else:
                plotting.plot_layers(t.attention, t.source_pieces, t.target_pieces, out)
            written.append(out)
    return written
