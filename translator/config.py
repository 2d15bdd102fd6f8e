"""Typed configuration: one dataclass per section of a config file, commented YAML files, and
dotted command-line overrides.

Every key of every section is declared here, with its default and a comment (the sections'
checks that need the code that uses them, such as which data sources exist, stay beside that
code). `load_config` reads YAML, applies ``section.key=value`` overrides and rejects unknown
keys and wrong types by name. Nothing here imports the rest of the package, so loading a config
loads no model, trainer or plotting.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from translator.errors import TranslatorError


class ConfigError(TranslatorError):
    """A config file or override that cannot be used as written."""


# ---------------------------------------------------------------- the sections


@dataclass
class DataConfig:
    """data: where the sentence pairs come from and how they are cleaned (translator/data.py)."""

    source: str = "embedded"  # "embedded" (corpus shipped in the package) | "hub" | "files"
    direction: str = "hi-en"  # "hi-en" | "en-hi": which language is the source; "both": one
    # model for both ways, each source tagged <2en> or <2hi> for the language to write
    # Hugging Face hub
    hub_id: str = "cfilt/iitb-english-hindi"  # dataset id on the hub, or a local dataset folder
    hub_config: str | None = None  # dataset configuration name, if the dataset has several
    hub_splits: dict[str, str] = field(  # our split name -> the dataset's split name
        default_factory=lambda: {"train": "train", "dev": "validation", "test": "test"}
    )
    hub_field: str = "translation"  # field holding the nested {"hi": .., "en": ..}; "" = flat
    streaming: bool = False  # read rows as they download instead of caching the whole split
    max_rows: int | None = None  # rows read per split (with streaming: the first N of a huge one)
    # language field names in hub, JSONL and Parquet rows
    hindi_field: str = "hi"
    english_field: str = "en"
    # local files; for format "text" a path is a prefix naming PREFIX.hi and PREFIX.en
    train_path: str | None = None
    dev_path: str | None = None  # optional: no dev split when None
    test_path: str | None = None  # optional: no test split when None
    format: str = "auto"  # "auto" (by extension) | "text" | "tsv" | "jsonl" | "parquet"
    # word links for guided alignment (train.alignment_weight > 0): a Pharaoh file with one
    # line per raw train row, "i-j" = Hindi word i, English word j (0-based). None: the
    # embedded corpus ships its own; other sources run eflomal (pip install -e '.[align]')
    train_alignment_path: str | None = None
    # normalisation and filters
    normalize_nukta: bool = False  # fold loanword nukta letters (ज़ -> ज) on the Hindi side
    max_words: int = 80  # train pairs with more words on either side are dropped; 0 = no limit
    max_length_ratio: float = 3.0  # max (words+1) ratio between sides for train pairs; 0 = off
    dedupe: bool = True  # drop repeated identical train pairs
    remove_leakage: bool = True  # drop dev/test pairs whose source or target occurs in train
    # the prepared-data cache (translator/encoded.py): the clean splits, the tokenizer and the
    # encoded train split, each kept under a key of the data and settings it was made from, so
    # that a second run or a resume on the same data starts training at once
    cache: bool = True  # False: prepare everything again, in memory, for every run
    cache_dir: str | None = None  # the cache folder; None: <train.output_dir>/cache


@dataclass
class TokenizerConfig:
    """tokenizer: the SentencePiece model(s) trained on the train split (tokenizer.py)."""

    vocab_size: int = 4000  # upper limit: a small corpus may yield fewer pieces
    model_type: str = "unigram"  # "unigram" | "bpe"
    joint: bool = True  # one vocabulary shared by both languages; False: one model per side
    # with joint: false, the target side's own vocabulary size (vocab_size is then the
    # source's); None: vocab_size for both
    target_vocab_size: int | None = None
    character_coverage: float = 1.0  # share of characters given their own piece (rest: bytes)
    # SentencePiece trains on a sample of the train split: this many sentences (both sides of
    # a joint model together; 0: all), picked at random, or the first ones if shuffle is off
    input_sentence_size: int = 1_000_000
    shuffle_input_sentence: bool = True
    # a target's first word is encoded in the case it has mid-sentence when that takes fewer
    # pieces ("Food" -> "food": 4 pieces -> 1), and output gets its capital back: a small
    # vocabulary otherwise spells a capitalised first word letter by letter (off by default:
    # configs/default.yaml has what it cost)
    truecase: bool = False

    def __post_init__(self) -> None:
        if 0 < self.input_sentence_size <= 100:  # SentencePiece's own limit
            raise ValueError("input_sentence_size must be 0 (all sentences) or above 100")
        if self.target_vocab_size is not None and self.joint:
            raise ValueError("target_vocab_size needs joint: false (a joint vocabulary has one "
                             "size, vocab_size)")


@dataclass
class ModelConfig:
    """model: the Transformer's shape (model.py); the vocabulary sizes come from the tokenizer."""

    d_model: int = 256  # width of every token vector
    heads: int = 8  # attention heads per layer; d_k = d_model / heads
    layers: int = 3  # encoder layers (and decoder layers unless decoder_layers is set)
    decoder_layers: int | None = None  # decoder depth; None means the same as `layers`
    d_ff: int = 1024  # inner width of the position-wise feed-forward network
    dropout: float = 0.1  # on embeddings and sub-layer outputs (and the two below if None)
    attention_dropout: float | None = None  # on attention weights; None: same as dropout
    activation_dropout: float | None = None  # after the FFN's ReLU; None: same as dropout
    norm: str = "pre"  # "pre": LayerNorm before each sub-layer (stable); "post": the paper's
    share_embeddings: bool = True  # one embedding for source and target (joint vocabulary)
    max_positions: int = 1024  # longest sequence the positional table covers
    source_vocab_size: int = 0  # set from the tokenizer by training, not by hand
    target_vocab_size: int = 0  # set from the tokenizer by training, not by hand
    pad_id: int = 0  # padding token id, masked everywhere

    def __post_init__(self) -> None:
        if self.norm not in ("pre", "post"):
            raise ValueError(f"model.norm must be 'pre' or 'post', not {self.norm!r}")
        for name in ("d_model", "heads", "layers", "decoder_layers", "d_ff", "max_positions"):
            size = getattr(self, name)
            if size is not None and size < 1:
                raise ValueError(f"model.{name} must be at least 1, not {size}")
        if self.d_model % self.heads != 0:
            raise ValueError(f"model.d_model ({self.d_model}) must be divisible by model.heads")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            rate = getattr(self, name)
            if rate is not None and not 0.0 <= rate < 1.0:
                raise ValueError(f"model.{name} must be at least 0 and below 1, not {rate}")

    @property
    def attention_dropout_rate(self) -> float:
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def activation_dropout_rate(self) -> float:
        return self.dropout if self.activation_dropout is None else self.activation_dropout

    @property
    def num_decoder_layers(self) -> int:
        return self.layers if self.decoder_layers is None else self.decoder_layers


@dataclass
class TrainConfig:
    """train: the run folder, devices, optimiser, schedule, validation and stopping
    (training.py)."""

    output_dir: str = "runs"  # run folders are created under this folder
    run_name: str | None = None  # the run folder's name; None: the date and time
    overwrite: bool = False  # allow reusing an existing run folder (it is never done silently)
    seed: int = 1  # seeds parameters, dropout and batch order
    device: str = "auto"  # "auto" (CUDA if present, then Apple's MPS, else CPU), "cpu",
    # "cuda", "cuda:1", "mps"
    precision: str = "auto"  # auto (GPUs: bf16, else fp16; a CPU with native bf16 times fp32 and
    # bf16 at the start and keeps the faster; other CPUs fp32), probe (the same), fp32, bf16, fp16
    compile: bool = False  # torch.compile the model (slower start, faster steps on GPUs)
    threads: int = 0  # CPU threads for torch; 0 keeps torch's default
    max_steps: int = 3000  # optimiser steps
    max_minutes: float = 0.0  # stop (and save) after this many minutes; 0: no time limit
    batch_tokens: int = 4096  # padded source+target tokens per batch (per process)
    accumulate: int = 1  # batches whose gradients are summed into one optimiser step
    learning_rate: float = 1e-3  # peak learning rate, reached at the end of warm-up
    warmup_steps: int = 400  # linear warm-up to the peak learning rate
    # after warm-up: "inverse_sqrt" decays ∝ 1/√step (Vaswani et al.); "linear" holds the
    # peak until decay_start, then falls linearly to zero at the end of the budget (Li et al.
    # 2020, "Budgeted Training"): the last step, or the time limit when max_minutes is set
    schedule: str = "inverse_sqrt"
    decay_start: float = 0.0  # linear: the share of the budget spent at the peak
    adam_betas: list[float] | None = None  # None: (0.9, 0.98), the paper's
    weight_decay: float = 0.0  # AdamW's decoupled weight decay
    label_smoothing: float = 0.1  # ε_ls of the paper
    clip_norm: float = 1.0  # clip the gradient norm to this; 0 turns clipping off
    word_dropout: float = 0.0  # share of source pieces replaced by <unk> in training batches
    average_last: int = 0  # ≥ 2: average the weights of the last N validations at the end
    # competence-based curriculum (Platanios et al. 2019): the first curriculum_steps steps
    # draw only from the easiest c(t) of the pairs, c(t) = √(t(1 − c0²)/T + c0²), c0 = 0.01;
    # "rarity" ranks pairs by their source's summed −log unigram probability, "length" by its
    # pieces; "none" (or curriculum_steps 0) samples every pair from the first step
    curriculum: str = "none"
    curriculum_steps: int = 0
    # guided alignment (Garg et al. 2019): λ · cross-entropy between one decoder layer's
    # cross-attention and the word-alignment links of the pair (0 turns it off)
    alignment_weight: float = 0.0
    alignment_layer: int = -2  # the supervised decoder layer (Python index)
    alignment_head: int = -1  # the supervised head of that layer; -1: the mean of its heads
    # supervise (and read alignments from) a second decoder pass without the causal mask, in
    # which every target piece sees the whole target (Garg et al.'s full target context)
    alignment_full_context: bool = False
    log_every: int = 50  # steps between metric lines in metrics.jsonl
    eval_every: int = 500  # steps between validations (dev loss, BLEU, chrF)
    eval_sentences: int = 400  # dev sentences translated for BLEU/chrF (0: all); per direction
    # for data.direction=both, whose hi→en scores keep the plain names (dev_chrf, ...)
    eval_samples: int = 3  # sample translations written to the log at each validation
    early_stopping_metric: str = "chrf"  # "chrf", "bleu" or "loss" (dev), picks best.pt
    patience: int = 0  # validations without improvement before stopping; 0: never stop early
    keep_best: int = 1  # keep this many best checkpoints (best.pt plus step-N.pt files)
    heatmaps: bool = True  # draw the showcase sentences' heatmaps into heatmaps/ at the end
    # at each validation, force-decode the showcase sentences on their references, keep their
    # attention in timeline.pt and log alignment AERs (translator/timeline.py); false: off; a
    # list of [source, reference] pairs is followed too, after the showcase
    timeline: bool | list[list[str]] = True
    # TensorBoard: loss, learning rate, tokens/s, dev scores and the showcase heatmaps at each
    # validation, into RUN/tensorboard (pip install -e '.[tensorboard]')
    tensorboard: bool = False
    # fine-tuning (train.py --init-from RUN): the parent run whose weights, tokenizer and model
    # settings this run starts from, with a fresh optimiser, schedule and step count
    init_from: str | None = None
    init_checkpoint: str = "best"  # the parent's checkpoint: best, last, step-N
    init_sha256: str | None = None  # the parent checkpoint's sha256, recorded by training

    def __post_init__(self) -> None:
        if self.precision not in ("auto", "probe", "fp32", "bf16", "fp16"):
            raise ValueError("precision must be auto, probe, fp32, bf16 or fp16, not "
                             f"{self.precision!r}")
        if self.early_stopping_metric not in ("chrf", "bleu", "loss"):
            raise ValueError("early_stopping_metric must be chrf, bleu or loss")
        if self.max_steps < 1 or self.batch_tokens < 1 or self.accumulate < 1:
            raise ValueError("max_steps, batch_tokens and accumulate must be at least 1")
        for name in ("log_every", "eval_every", "keep_best"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.schedule not in ("inverse_sqrt", "linear"):
            raise ValueError(f"schedule must be inverse_sqrt or linear, not {self.schedule!r}")
        if not 0.0 <= self.decay_start < 1.0 or not 0.0 <= self.word_dropout < 1.0:
            raise ValueError("decay_start and word_dropout must be at least 0 and below 1")
        if self.curriculum not in ("none", "rarity", "length"):
            raise ValueError(f"curriculum must be none, rarity or length, not "
                             f"{self.curriculum!r}")
        if isinstance(self.timeline, list) and any(
                len(pair) != 2 or not all(text.strip() for text in pair) for pair in self.timeline):
            raise ValueError("timeline must be true, false or a list of [source, reference] "
                             "pairs of non-empty sentences")
        for name in ("alignment_weight", "average_last", "curriculum_steps"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, not {getattr(self, name)}")


def option(help: str, flag: str | None = None, least: float = 0, least_text: str | None = None,
           metavar: str | None = "N") -> dict[str, Any]:
    """A search key's field metadata: its help text, the command-line flag that sets it (None:
    none), the least value it takes and how that value is named in an error."""
    return {"help": help, "flag": flag, "least": least,
            "least_text": str(least) if least_text is None else least_text, "metavar": metavar}


@dataclass
class SearchConfig:
    """search: how the run's model writes translations (translator/search.py): the test score,
    the heatmaps, translate and evaluate use it as it is; validation uses it with beam size 1
    (greedy). A resumed run, or a command (--beam, --length-penalty, ...), may change any key.
    Each field carries its help text and flag (the commands' search flags are built from
    them) and its least value, checked in one place (`search_problem`)."""

    beam_size: int = field(default=4, metadata=option(
        "hypotheses kept at each step; 1 is greedy search", "--beam", least=1))
    n_best: int = field(default=1, metadata=option(
        "translations returned per sentence, best first, at most the beam size", "--n-best",
        least=1))
    length_penalty: float = field(default=1.0, metadata=option(
        "beam search's GNMT length penalty α; higher favours longer translations (0: the "
        "plain sum)", "--length-penalty", least_text="0 (no penalty)", metavar="ALPHA"))
    # a short source's own α (GNMT's α offsets a beam's bias toward short outputs, which a
    # one- or two-word input does not have: "Thank you thanky" outranks "Thank you" at 2.2)
    short_source: int = field(default=0, metadata=option(
        "sources of at most N pieces (a tag counts) are ranked with --short-length-penalty; "
        "0: off", "--short-source", least_text="0 (off)"))
    short_length_penalty: float = field(default=0.6, metadata=option(
        "beam search's α for the sources --short-source names", "--short-length-penalty",
        least_text="0 (no penalty)", metavar="ALPHA"))
    # what no search writes twice: n-grams of n pieces (0: any), and a word right after itself
    no_repeat_ngram: int = field(default=0, metadata=option(
        "never write the same N pieces twice; 0: off", "--no-repeat-ngram",
        least_text="0 (off)"))
    no_doubled_words: bool = field(default=False, metadata=option(
        "never write a word right after itself (\"failed failed\"); --allow-doubled-words "
        "lets it, for one command", "--allow-doubled-words"))
    # the longest output, in pieces with its EOS: ratio × the source's pieces + extra (within
    # the model's max_positions)
    max_length_ratio: float = field(default=1.5, metadata=option(
        "the longest output: this × the source's pieces (+ max_length_extra)"))
    max_length_extra: int = field(default=10, metadata=option(
        "the longest output: max_length_ratio × the source's pieces + this"))
    # what the model weighed: each output token's log-probability and its step's N most
    # probable tokens (translator/search.py's TokenRecords); 0 records nothing (it costs)
    alternatives: int = field(default=0, metadata=option(
        "record each output token's log-probability and the N most probable tokens of its "
        "step (translate --json prints them); 0: off", "--alternatives", least_text="0 (off)"))

    def __post_init__(self) -> None:
        for key in SEARCH_KEYS:
            problem = search_problem(key, getattr(self, key))
            if problem:
                raise ValueError(f"{key} {problem}")
        if self.n_best > self.beam_size:
            raise ValueError(f"beam size {self.beam_size} and n-best {self.n_best} don't fit: "
                             "n-best must be at most the beam size")


    def alpha(self, source_pieces: int) -> float:
        """The length penalty α a source of ``source_pieces`` pieces is ranked with."""
        return (self.short_length_penalty if source_pieces <= self.short_source
                else self.length_penalty)


SEARCH_KEYS = {f.name: f.metadata for f in dataclasses.fields(SearchConfig)}


def search_problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for the search key ``key`` on its own ("must be 0 (off) or
    more, not -1"), or None."""
    metadata = SEARCH_KEYS[key]
    if isinstance(value, bool) or value >= metadata["least"]:
        return None
    return f"must be {metadata['least_text']} or more, not {value}"


# ---------------------------------------------------------------- the whole config


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)


# train keys of configs written before the search section, and their search names
LEGACY_SEARCH_KEYS = {"test_beam_size": "beam_size", "no_repeat_ngram": "no_repeat_ngram",
                      "no_doubled_words": "no_doubled_words", "length_penalty": "length_penalty"}


def move_legacy_search_keys(values: dict[str, Any], where: str, wins: bool = False) -> None:
    """Move the search keys a config written before the search section holds under train:
    into search:, in place, with a one-line notice. A key the file also sets in search:
    keeps that value; with ``wins`` (keys an override put under train:) the moved key wins."""
    train = values.get("train")
    if not isinstance(train, dict):
        return
    moved = [key for key in LEGACY_SEARCH_KEYS if key in train]
    if not moved:
        return
    search = values.setdefault("search", {})
    if not isinstance(search, dict):
        return  # _build names the malformed section
    for key in moved:
        if wins:
            search[LEGACY_SEARCH_KEYS[key]] = train.pop(key)
        else:
            search.setdefault(LEGACY_SEARCH_KEYS[key], train.pop(key))
    names = ", ".join(f"train.{key} → search.{LEGACY_SEARCH_KEYS[key]}" for key in moved)
    sys.stderr.write(f"notice: {where} has search keys under train:, read as {names}\n")


def renamed_override(override: str, values: dict[str, Any]) -> str:
    """An override of a search key under its old train: name (train.test_beam_size=1) as the
    override of its search: key (search.beam_size=1), with a notice of what it is read as and
    the value it replaces; any other override as it is. Renamed before it is applied, it wins
    over the config file and counts where it stands among the overrides, as any override."""
    dotted, equals, raw = override.partition("=")
    section, _, key = dotted.strip().partition(".")
    if not equals or section != "train" or key not in LEGACY_SEARCH_KEYS:
        return override
    new_key = LEGACY_SEARCH_KEYS[key]
    search = values.get("search")
    replaced = (f", replacing search.{new_key}: {search[new_key]}"
                if isinstance(search, dict) and new_key in search else "")
    sys.stderr.write(f"notice: the override train.{key}={raw} is read as search.{new_key}={raw}"
                     f" (search keys moved from train: to search:){replaced}\n")
    return f"search.{new_key}={raw}"


def _type_name(expected: Any) -> str:
    return getattr(expected, "__name__", str(expected)).replace("typing.", "")


def _check_value(key: str, value: Any, expected: Any) -> Any:
    """Return ``value`` if it fits the annotated type ``expected`` (ints widen to float)."""
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(expected):
            try:
                return _check_value(key, value, option)
            except ConfigError:
                continue
        raise ConfigError(f"{key} must be {_type_name(expected)}, not {value!r}")
    if expected is type(None):
        if value is None:
            return None
    elif origin is dict:
        key_type, value_type = typing.get_args(expected)
        if isinstance(value, dict):
            return {_check_value(f"{key}.{k}", k, key_type): _check_value(f"{key}.{k}", v,
                    value_type) for k, v in value.items()}
    elif origin is list:
        (item_type,) = typing.get_args(expected)
        if isinstance(value, list):
            return [_check_value(f"{key}[{i}]", v, item_type) for i, v in enumerate(value)]
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 5e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, expected):
        return value
    raise ConfigError(f"{key} must be {_type_name(expected)}, not {value!r}")


def _build(cls: type, values: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in values:
        if key not in known:
            raise ConfigError(
                f"unknown config key '{prefix}{key}'; known keys in this section: "
                f"{', '.join(sorted(known))}"
            )
    kwargs = {}
    for key, value in values.items():
        expected = hints[key]
        if dataclasses.is_dataclass(expected):
            if not isinstance(value, dict):
                raise ConfigError(f"{prefix}{key} must be a section of keys, not {value!r}")
            kwargs[key] = _build(expected, value, f"{prefix}{key}.")
        else:
            kwargs[key] = _check_value(f"{prefix}{key}", value, expected)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as error:  # __post_init__ checks of a section
        raise ConfigError(f"{prefix.rstrip('.')}: {error}") from None


def apply_override(values: dict[str, Any], override: str) -> None:
    """Apply one ``section.key=value`` override; the value is read as YAML (200, 1e-3,
    true, null, [a, b] all mean what they say)."""
    if "=" not in override:
        raise ConfigError(f"override {override!r} must look like section.key=value")
    dotted, raw = override.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    parts = dotted.strip().split(".")
    node = values
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {override!r}: {part} is not a section")
    node[parts[-1]] = value


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML file (or start from the defaults), apply overrides, type-check."""
    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist; pass --config with a YAML "
                              "file such as configs/default.yaml")
        try:
            values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise ConfigError(f"config file {path} is not valid YAML{where}; fix it or "
                              "start from configs/default.yaml") from None
        if not isinstance(values, dict):
            raise ConfigError(f"config file {path} must hold sections of keys (data:, "
                              "model:, train:, ...)")
    move_legacy_search_keys(values, str(path) if path is not None else "the config")
    for override in overrides or []:
        apply_override(values, renamed_override(override, values))
    move_legacy_search_keys(values, "an override", wins=True)  # a whole train= section
    return _build(Config, values, "")


def build_config(values: dict[str, Any], overrides: list[str] | None = None) -> Config:
    """A config from sections of keys (as `config_to_dict` gives them), overrides applied."""
    values = {section: dict(keys) if isinstance(keys, dict) else keys
              for section, keys in values.items()}
    for override in overrides or []:
        apply_override(values, renamed_override(override, values))
    return _build(Config, values, "")


def config_to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


def save_config(config: Config, path: Path) -> None:
    path.write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
