"""SentencePiece subword tokenizers for the source and target languages.

One shared model (joint) or one per language. Byte fallback is always on, so any character,
even one never seen in training, encodes to byte pieces and decodes back exactly; the unknown
id is never produced. Special ids are fixed: pad=0, unk=1, bos=2, eos=3. A tokenizer for
data.direction=both also knows the target-language tags (`direction.TAGS`) as pieces of their own:
a source text "<2en> ..." encodes to the tag's id followed by the ids of the rest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields
from functools import cached_property
from pathlib import Path

import sentencepiece as spm

from translator.config import TokenizerConfig
from translator.data import normalize
from translator.direction import TAGS, split_tag
from translator.errors import TranslatorError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
CONFIG_FILE = "tokenizer.json"
MODEL_TYPES = ("unigram", "bpe")


class TokenizerError(TranslatorError):
    """A tokenizer cannot be trained or loaded; the message says why."""


def _model_files(joint: bool) -> dict[str, str]:
    """Side -> model file name."""
    if joint:
        return {"source": "joint.model", "target": "joint.model"}
    return {"source": "source.model", "target": "target.model"}


def _train_model(cfg: TokenizerConfig, texts: Iterable[str], tags: Sequence[str] = ()
                 ) -> spm.SentencePieceProcessor:
    model = io.BytesIO()
    # only when there are tags: without them the model (and its fingerprint) is byte for byte
    # what it was before tags existed
    extra = {"user_defined_symbols": list(tags)} if tags else {}
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=(normalize(text) for text in texts),
            model_writer=model,
            vocab_size=cfg.vocab_size,
            model_type=cfg.model_type,
            character_coverage=cfg.character_coverage,
            byte_fallback=True,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            # Text is already normalised (NFC); SentencePiece's default NFKC would rewrite
            # characters and break decode(encode(x)) == x.
            normalization_rule_name="identity",
            hard_vocab_limit=False,  # a small corpus gets fewer pieces instead of an error
            input_sentence_size=cfg.input_sentence_size,  # a sample of the texts given
            shuffle_input_sentence=cfg.shuffle_input_sentence,
            minloglevel=2,  # errors only: no page of progress logging
            **extra,
        )
    except RuntimeError as error:
        raise TokenizerError(_training_error_message(cfg, str(error))) from None
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def _training_error_message(cfg: TokenizerConfig, error: str) -> str:
    needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", error)
    if needed:
        return (
            f"tokenizer.vocab_size {cfg.vocab_size} is too small for this corpus: its characters "
            f"and the 256 byte pieces need at least {needed.group(1)}; raise it."
        )
    if "sentences_.empty()" in error:
        return "Cannot train a tokenizer on no text; check that the train split has pairs."
    return f"SentencePiece training failed: {error.strip().splitlines()[-1]}"


def _load_model(path: Path) -> spm.SentencePieceProcessor:
    if not path.is_file():
        raise TokenizerError(f"Tokenizer model {path} is missing; train the tokenizer again.")
    try:
        model = spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError):
        raise TokenizerError(
            f"{path} is not a valid SentencePiece model; train the tokenizer again."
        ) from None
    special_ids = (model.pad_id(), model.unk_id(), model.bos_id(), model.eos_id())
    if special_ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise TokenizerError(
            f"{path} has special ids pad/unk/bos/eos = {special_ids}, not 0/1/2/3; train it "
            "with this project's tokenizer."
        )
    return model


class Tokenizer:
    """Encodes source text and decodes target ids (and the reverse, for inspection).

    Encoding normalises text with `data.normalize` (NFC, invisible characters, whitespace), so
    decode(encode(x)) == normalize(x). Nukta folding, a data option, is not applied here.
    """

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(
        self,
        cfg: TokenizerConfig,
        source_model: spm.SentencePieceProcessor,
        target_model: spm.SentencePieceProcessor,
    ) -> None:
        self.cfg = cfg
        self.source_model = source_model
        self.target_model = target_model
        # target language -> the id of its tag, for a tokenizer trained with tags (else empty)
        self.tags = {language: source_model.piece_to_id(tag) for language, tag in TAGS.items()
                     if source_model.piece_to_id(tag) != UNK_ID}

    @classmethod
    def train(
        cls,
        cfg: TokenizerConfig,
        source_texts: Iterable[str],
        target_texts: Iterable[str],
        out_dir: str | Path,
        tags: Sequence[str] = (),
    ) -> Tokenizer:
        """Train on the texts (train split only!) and save the result in `out_dir`. ``tags``
        (`direction.TAGS` for data.direction=both) become source pieces of their own."""
        if cfg.model_type not in MODEL_TYPES:
            raise TokenizerError(
                f"Unknown tokenizer.model_type '{cfg.model_type}'; use unigram or bpe."
            )
        if cfg.joint:
            model = _train_model(cfg, itertools.chain(source_texts, target_texts), tags)
            tokenizer = cls(cfg, model, model)
        else:  # only sources carry tags; the target may have a vocabulary size of its own
            target_cfg = dataclasses.replace(cfg, vocab_size=cfg.target_vocab_size
                                             or cfg.vocab_size)
            tokenizer = cls(cfg, _train_model(cfg, source_texts, tags),
                            _train_model(target_cfg, target_texts))
        tokenizer.save(out_dir)
        return tokenizer

    def save(self, directory: str | Path) -> None:
        """Write the model file(s) and tokenizer.json into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = _model_files(self.cfg.joint)
        for side, model in (("source", self.source_model), ("target", self.target_model)):
            (directory / files[side]).write_bytes(model.serialized_model_proto())
        (directory / CONFIG_FILE).write_text(json.dumps(asdict(self.cfg), indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> Tokenizer:
        """Load a tokenizer saved by `save` (or `train`)."""
        directory = Path(directory)
        config_path = directory / CONFIG_FILE
        if not config_path.is_file():
            raise TokenizerError(
                f"{directory} holds no tokenizer ({CONFIG_FILE} is missing); train one first."
            )
        try:
            settings = json.loads(config_path.read_text())
            settings.setdefault("truecase", False)  # a tokenizer saved before it existed
            known = {f.name for f in fields(TokenizerConfig)}
            cfg = TokenizerConfig(**{k: v for k, v in settings.items() if k in known})
        except (json.JSONDecodeError, AttributeError, TypeError, UnicodeDecodeError):
            raise TokenizerError(f"{config_path} is not a valid tokenizer config.") from None
        files = _model_files(cfg.joint)
        source_model = _load_model(directory / files["source"])
        target_model = source_model if cfg.joint else _load_model(directory / files["target"])
        return cls(cfg, source_model, target_model)

    @property
    def joint(self) -> bool:
        return self.cfg.joint

    @property
    def source_vocab_size(self) -> int:
        return self.source_model.get_piece_size()

    @property
    def target_vocab_size(self) -> int:
        return self.target_model.get_piece_size()

    def tag_ids(self, language: str | None) -> list[int]:
        """The ids a source starts with to ask a model of both directions for ``language``:
        its tag's, or none for None."""
        return [self.tags[language]] if language is not None else []

    def fingerprint(self) -> str:
        """A short hash of the SentencePiece model(s): a checkpoint stores it so that loading
        it beside another tokenizer is caught instead of producing nonsense."""
        digest = hashlib.sha256(self.source_model.serialized_model_proto())
        if not self.joint:
            digest.update(self.target_model.serialized_model_proto())
        if self.cfg.truecase:  # the same pieces encode targets differently
            digest.update(b"truecase")
        return digest.hexdigest()[:16]

    def encode_source(self, text: str) -> list[int]:
        """Ids of the source text, without bos/eos (a leading tag: its own id, first)."""
        return self.encode_sources([_checked(normalize(text))])[0]

    def encode_sources(self, texts: list[str]) -> list[list[int]]:
        """Ids of normalised source texts, without bos/eos, in one call of SentencePiece. A
        text led by a tag this tokenizer knows ("<2en> ...") gets the tag's id and then the
        ids of the rest (SentencePiece alone would put a "▁" piece before the tag)."""
        if not self.tags:
            return self.source_model.encode(texts)
        split = [split_tag(text) for text in texts]
        ids = self.source_model.encode([rest for _, rest in split])
        return [[self.tags[language], *row] if language in self.tags else row
                for (language, _), row in zip(split, ids)]

    def encode_target(self, text: str) -> list[int]:
        """Ids of the target text, without bos/eos."""
        return self.encode_targets([_checked(normalize(text))])[0]

    def encode_targets(self, texts: list[str]) -> list[list[int]]:
        """Ids of normalised target texts, without bos/eos, in one call of SentencePiece; with
        tokenizer.truecase, a first word in its mid-sentence case (`truecased`)."""
        if self.cfg.truecase:
            texts = truecased(texts, self.target_model)
        return self.target_model.encode(texts)

    def decode_source(self, ids: list[int]) -> str:
        """Text of the ids up to the first eos, ignoring pad and bos."""
        return self.source_model.decode(_content_ids(ids))

    def decode_target(self, ids: list[int]) -> str:
        """Text of the ids up to the first eos, ignoring pad and bos (so raw model output
        can be passed as is); with tokenizer.truecase, its first letter a capital."""
        text = self.target_model.decode(_content_ids(ids))
        return capitalized(text) if self.cfg.truecase else text

    def source_pieces(self, ids: list[int]) -> list[str]:
        """The subword piece of each id; "▁" starts a word, "<0xE0>" is a byte piece."""
        return [self.source_model.id_to_piece(i) for i in ids]

    def target_pieces(self, ids: list[int]) -> list[str]:
        """The subword piece of each id; "▁" starts a word, "<0xE0>" is a byte piece."""
        return [self.target_model.id_to_piece(i) for i in ids]

    def shown_target_pieces(self, ids: list[int]) -> list[str]:
        """`target_pieces` as a reader sees them (a heatmap's labels): with tokenizer.truecase,
        the first one's first letter a capital, as `decode_target` writes it."""
        pieces = self.target_pieces(ids)
        first = self.capital_piece(pieces)
        if first is not None:
            pieces[first] = capitalized(pieces[first])
        return pieces

    def capital_piece(self, pieces: Sequence[str]) -> int | None:
        """Which of a target's ``pieces`` `shown_target_pieces` capitalises: with
        tokenizer.truecase, the first that holds a character ("▁" may stand alone)."""
        if not self.cfg.truecase:
            return None
        return next((i for i, piece in enumerate(pieces) if piece != "▁"), None)

    @cached_property
    def target_vocabulary(self) -> list[str]:
        """Every target piece, by id: read once (3 ms for 4,000 pieces), as every translation
        needs it for its repetition bans."""
        return self.target_pieces(list(range(self.target_vocab_size)))


def truecased(texts: list[str], model: spm.SentencePieceProcessor) -> list[str]:
    """``texts`` with each first word's capital made small where the word then takes fewer
    pieces of ``model`` ("Food." -> "food.": "▁F o o d ." -> "▁food ."); names ("Delhi", whose
    small form is spelled out) and acronyms ("UPI") keep theirs. A sentence-initial capital
    is a matter of position, and a small vocabulary has pieces for the mid-sentence form."""
    firsts = [text.split(" ", 1)[0] for text in texts]
    candidates = [i for i, word in enumerate(firsts) if word[:1].isupper()]
    words = [firsts[i] for i in candidates]
    small = [word[0].lower() + word[1:] for word in words]
    counts = model.encode(words + small)
    result = list(texts)
    for k, i in enumerate(candidates):
        if len(counts[len(words) + k]) < len(counts[k]):
            result[i] = small[k] + texts[i][len(words[k]):]
    return result


def capitalized(text: str) -> str:
    """``text`` with a capital first letter, as `truecased` took it away ("▁yes" -> "▁Yes")."""
    start = 1 if text.startswith("▁") else 0
    return text[:start] + text[start:start + 1].upper() + text[start + 1:]


def _checked(text: str) -> str:
    """``text``, if it is Unicode text SentencePiece can take: not a lone surrogate, which is
    what Python makes of bytes that are not UTF-8 (a Latin-1 file read as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise TokenizerError(
            f"the text holds U+{ord(text[error.start]):04X} at character {error.start + 1}, a "
            "lone surrogate that stands for a byte that is not UTF-8; give the text as UTF-8 "
            "(convert it with iconv -f latin1 -t utf-8, for example)"
        ) from None
    return text


def _content_ids(ids: list[int]) -> list[int]:
    content = []
    for i in map(int, ids):  # int(): also accepts a tensor row
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            content.append(i)
    return content


# ---------------------------------------------------------------- pieces → words

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def piece_words(pieces: Sequence[str]) -> tuple[list[str], list[int]]:
    """The whitespace words the pieces spell, and for each piece the index of its word.

    A piece starting with "▁" starts a word (so does the first piece); byte pieces
    ("<0xE2>") are turned back into the bytes they stand for."""
    words: list[bytearray] = []
    word_of_piece = []
    for i, piece in enumerate(pieces):
        if piece.startswith("▁") or i == 0:
            words.append(bytearray())
        byte = _BYTE_PIECE.fullmatch(piece)
        words[-1] += bytes([int(byte.group(1), 16)]) if byte else piece.encode("utf-8")
        word_of_piece.append(len(words) - 1)
    texts = [w.decode("utf-8", errors="replace") for w in words]
    # A word that is only "▁" (a model babbling word starts) keeps it, to stay visible.
    return [t.replace("▁", "") or t for t in texts], word_of_piece
