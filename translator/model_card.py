"""MODEL_CARD.md: what a trained model is, what it was trained on, how it scored and where it
fails, in the Hugging Face model-card convention (intended use, training data, metrics with
their signatures, limitations). Written from the run folder alone, so that a run's card (at
the end of training) and an export's card (`export-ct2`, `export-hf`, the latter with the
hub's YAML header, also as README.md) say the same things.

    write_model_card(RunDir("runs/latest"))          # runs/latest/MODEL_CARD.md
    write_export_card(Path("exported"), hub=True)    # exported/MODEL_CARD.md and README.md
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from translator import corpus
from translator.checkpoint import load_checkpoint
from translator.config import Config
from translator.data import embedded_corpus_dir
from translator.direction import Direction
from translator.exports import read_export_record
from translator.run_dir import RunDir, file_sha256
from translator.translate import Translator

MODEL_CARD = "MODEL_CARD.md"  # the card's name in a run folder and an export folder
HUB_README = "README.md"  # the name the Hugging Face hub shows a model folder's card under

# Where the limitations come from: what the embedded corpus covers and how this project's
# models were seen to fail (README, docs/alignment.md, held_out.py's checks)
FAILURE_MODES = [
    "Out-of-domain text: the model knows only the vocabulary and constructions of its training "
    "data; names, numbers and words it has not seen are often copied, dropped or replaced by "
    "a frequent word.",
    "Dropped or repeated facts: a small model may leave out a time, a person or a place, or "
    "say a word twice (the showcase family's fact checks in held_out.json measure this).",
    "Long sentences: quality falls with length; sources beyond the model's max_positions "
    "pieces are cut.",
    "Romanised Hindi (Hinglish typed in Latin letters) and code-mixed text are not what the "
    "Hindi side was trained on.",
    "The attention heatmaps are a view of the model, not an explanation: a bright cell is "
    "not proof of which word caused which.",
]


def _dig(record: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        record = record.get(key) if isinstance(record, dict) else None
    return record


def data_licence(config: Config) -> tuple[str, str]:
    """(licence as the card's text says it, the hub's YAML ``license`` value)."""
    if config.data.source == "embedded":
        datacard = (embedded_corpus_dir() / "DATACARD.md").read_text(encoding="utf-8")
        found = re.search(r"\*\*Licen[cs]e\.\*\*\s*([^,.\n]+)", datacard)
        if found:
            return f"{found.group(1).strip()} (translator/corpus/DATACARD.md)", \
                found.group(1).strip().lower()
    where = {"hub": f"see the dataset card of {config.data.hub_id} on the Hugging Face hub",
             "files": "not known to this tool: local files; check where they came from"}
    return f"unknown ({where.get(config.data.source, config.data.source)})", "other"


def data_source(config: Config) -> str:
    data = config.data
    if data.source == "embedded":
        return "the embedded Hindi–English corpus (translator/corpus, DATACARD.md)"
    if data.source == "hub":
        return f"the Hugging Face dataset {data.hub_id}" + (
            f" ({data.hub_config})" if data.hub_config else "")
    paths = [f"{split} {path}" for split, path in (
        ("train", data.train_path), ("dev", data.dev_path), ("test", data.test_path)) if path]
    return f"local files: {', '.join(paths)}"


def _metrics(run_dir: RunDir) -> list[dict[str, Any]]:
    if not run_dir.metrics_file.is_file():
        return []
    return [json.loads(line) for line in run_dir.metrics_file.read_text(
        encoding="utf-8").splitlines() if line.strip()]


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _minutes(seconds: float | None) -> str:
    return "not recorded" if seconds is None else f"{seconds / 60:.1f} minutes"


def _family(export: dict[str, Any]) -> str:
    """"marian" or "pegasus": the transformers family of an export-hf folder."""
    architecture = str(export.get("architecture", "MarianMTModel"))
    return architecture.removesuffix("ForConditionalGeneration").removesuffix("MTModel").lower()


def _yaml_header(config: Config, licence: str, export: dict[str, Any]) -> list[str]:
    """The hub's metadata block: languages, licence, task, library, metrics."""
    direction = Direction(config.data.direction)
    languages = ["hi", "en"] if direction.name != "en-hi" else ["en", "hi"]
    return ["---", "language:", *[f"- {language}" for language in languages],
            f"license: {licence}", "library_name: transformers", "pipeline_tag: translation",
            "tags:", "- translation", f"- {_family(export)}",
            "metrics:", "- bleu", "- chrf", "---", ""]


def _model_lines(config: Config, parameters: int) -> list[str]:
    model, tok = config.model, config.tokenizer
    if tok.joint:
        vocabulary = f"one joint vocabulary of {model.source_vocab_size:,} pieces"
    else:
        vocabulary = (f"source {model.source_vocab_size:,} pieces, target "
                      f"{model.target_vocab_size:,} pieces")
    return [
        "## Model", "",
        f"- Direction: {Direction(config.data.direction).arrow}",
        f"- Architecture: Transformer encoder–decoder, {model.norm}-norm, d_model "
        f"{model.d_model}, {model.heads} heads, {model.layers} encoder and "
        f"{model.num_decoder_layers} decoder layers, d_ff {model.d_ff}, up to "
        f"{model.max_positions} positions",
        f"- Parameters: {parameters:,}",
        f"- Vocabularies: SentencePiece {tok.model_type} with byte fallback, {vocabulary}",
        ""]


def _training_lines(run_dir: RunDir, config: Config, state: dict[str, Any],
                    last: dict[str, Any] | None, checkpoint: Path) -> list[str]:
    facts = (last or state).get("facts") or {}
    train = config.train
    licence, _ = data_licence(config)
    pairs = ", ".join(f"{split} {facts[f'{split}_pairs']:,}" for split in ("train", "dev", "test")
                      if f"{split}_pairs" in facts) or "not recorded"
    lines = [
        "## Training", "",
        f"- Data: {data_source(config)}; direction {config.data.direction}",
        f"- Sentence pairs (after cleaning): {pairs}",
        f"- Data licence: {licence}",
        f"- Steps: {(last or state).get('step', 'not recorded')} (this checkpoint: step "
        f"{state.get('step', 'not recorded')}), in {_minutes((last or state).get('seconds'))}",
        f"- Device and precision: {facts.get('device', 'not recorded')}, {train.precision}, "
        f"{facts.get('processes', 1)} process(es)",
        f"- Recipe: peak learning rate {train.learning_rate:g}, {train.warmup_steps} warm-up "
        f"steps, {train.schedule} schedule, {train.batch_tokens} tokens a batch, label "
        f"smoothing {train.label_smoothing:g}, seed {train.seed}",
        f"- Checkpoint: {checkpoint.name}, sha256 {file_sha256(checkpoint)}",
    ]
    if train.init_from:
        lines.append(f"- Fine-tuned from: {train.init_from} (checkpoint sha256 "
                     f"{train.init_sha256}), whose tokenizer and model settings it keeps")
    return lines + [f"- Run folder: {run_dir.path.name}", ""]


def _score_lines(run_dir: RunDir, direction: Direction) -> list[str]:
    lines = ["## Scores", ""]
    tests = _read_json(run_dir.test_scores_file)
    if tests:
        first = "hi → en" if direction.both else direction.arrow
        for section, arrow in ((tests, first), (tests.get("en-hi"), "en → hi")):
            if section:
                lines += [f"- Test split ({arrow}, {section['sentences']} sentences, beam "
                          f"{tests.get('beam_size', '?')}): BLEU {section['bleu']:.2f}, chrF "
                          f"{section['chrf']:.2f}",
                          f"  - `{section['bleu_signature']}`",
                          f"  - `{section['chrf_signature']}`"]
    else:
        lines.append("- Test split: not scored (the run has no test split or did not finish)")
    validations = [r for r in _metrics(run_dir) if r.get("kind") == "validation"]
    if validations:
        best = max(validations, key=lambda r: r.get("dev_chrf", 0.0))
        lines.append(f"- Best dev chrF (greedy, {best.get('dev_sentences', '?')} sentences): "
                     f"{best['dev_chrf']:.2f} at step {best['step']}")
    parent = next((r for r in _metrics(run_dir) if r.get("kind") == "parent"), None)
    if parent:
        lines.append(f"- The parent model on this dev set before fine-tuning: chrF "
                     f"{parent['dev_chrf']:.2f}, loss {parent['dev_loss']:.3f}")
    held = _read_json(run_dir.held_out_file)
    if held:
        summary = held["summary"]
        lines.append(f"- Held-out checks (held_out.json): showcase family "
                     f"{summary['family_whole']} of {summary['family_sentences']} whole, "
                     f"{summary['family_facts_kept']:.0%} of facts kept; first tries "
                     f"{summary['first_tries_right']} of {summary['first_tries']} right")
    return lines + [""]


def _showcase_lines(translator: Translator) -> list[str]:
    """The seeds' showcase sentences (kept out of every split) as the model translates them."""
    direction = Direction(translator.direction)
    hindi_first = direction.showcase().name == "hi-en"
    language = "en" if direction.both else None
    lines = ["## Showcase translations", "",
             "The seeds' showcase sentences, kept out of every training set, with the run's "
             f"search (beam {translator.config.search.beam_size}):", ""]
    for hindi, english in corpus.SHOWCASE:
        source, reference = (hindi, english) if hindi_first else (english, hindi)
        output = translator.translate([source], target_language=language)[0].text or \
            "(an empty translation)"
        lines += [f"- Source: {source}", f"  - Reference: {reference}",
                  f"  - This model: {output}"]
    return lines + [""]


def _use_lines(config: Config) -> list[str]:
    return [
        "## Intended use", "",
        "Learning and teaching how attention-based translation works (the heatmaps and the "
        "attention explorer show where each output word looks), and as a small baseline for "
        f"{Direction(config.data.direction).arrow} experiments. Not for translations that "
        "someone relies on without checking: medical, legal, financial or safety text.", "",
        "## Limitations and known failure modes", "",
        *[f"- {mode}" for mode in FAILURE_MODES],
        "- Its scores hold for text like its dev and test splits; they say little about other "
        "domains.", ""]


def model_card(run_dir: RunDir, checkpoint: str = "best", export: dict[str, Any] | None = None,
               hub: bool = False) -> str:
    """The card of ``run_dir``'s ``checkpoint``; for an export, ``export`` is its record
    (export.json) and ``hub`` adds the Hugging Face YAML header."""
    config = run_dir.read_config()
    path = run_dir.find_checkpoint(checkpoint)
    state = load_checkpoint(path)
    last_path = run_dir.checkpoint("last")
    last = load_checkpoint(last_path) if last_path.is_file() and last_path != path else None
    translator = Translator.from_run(run_dir, checkpoint, device="cpu")
    lines = _yaml_header(config, data_licence(config)[1], export or {}) if hub else []
    lines += [f"# {run_dir.path.name}: a {Direction(config.data.direction).arrow} "
              "Transformer", "",
              f"Written by `translator` on {time.strftime('%Y-%m-%d')} from the run folder's "
              "config.yaml, checkpoints, metrics.jsonl, test_scores.json and held_out.json.", ""]
    if export:
        settings = ", ".join(f"{k} {v}" for k, v in export.items() if k not in ("run",))
        lines += ["## This export", "", f"- {settings}"]
        if translator.tokenizer.cfg.truecase:
            lines.append("- The model writes a sentence's first letter small where the word is "
                         "small mid-sentence (tokenizer.truecase): `translator` gives it its "
                         "capital back; other readers of this export capitalise it themselves.")
        lines.append("")
    lines += _model_lines(translator.config, translator.model.num_parameters())
    lines += _training_lines(run_dir, config, state, last, path)
    lines += _score_lines(run_dir, Direction(config.data.direction))
    lines += _showcase_lines(translator)
    lines += _use_lines(config)
    return "\n".join(lines)


def write_model_card(run_dir: RunDir, checkpoint: str = "best") -> Path:
    """RUN/MODEL_CARD.md, written (again) from the run folder."""
    path = run_dir.model_card_file
    path.write_text(model_card(run_dir, checkpoint), encoding="utf-8")
    return path


def write_export_card(folder: Path, hub: bool = False) -> Path:
    """FOLDER/MODEL_CARD.md for an export folder, from the run and checkpoint its export.json
    names; ``hub``: with the Hugging Face YAML header, also as README.md (what the hub shows)."""
    record = read_export_record(folder)
    card = model_card(RunDir(record["run"]), record["checkpoint"], record, hub)
    for name in (MODEL_CARD, HUB_README) if hub else (MODEL_CARD,):
        (folder / name).write_text(card, encoding="utf-8")
    return folder / MODEL_CARD
