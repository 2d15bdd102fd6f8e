"""Reading text a line at a time: the one line reader of the package (corpus splits, link
files, local data files, the commands' --file/--src/--ref and standard input).

Only '\\n' ends a line (a '\\r' before it is dropped): str.splitlines, and text-mode
reading, would also split at U+2028, U+0085 or a lone '\\r' and misalign parallel files and
their links. Text that is not UTF-8 is one sentence naming the line and the byte.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from translator.errors import TranslatorError

ICONV_HINT = "convert it to UTF-8 first, e.g. with iconv -f latin1 -t utf-8"


def _decode(raw: bytes, where: str, number: int, error: type[TranslatorError]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as failure:
        raise error(f"{where} line {number} is not valid UTF-8 (the byte "
                    f"0x{raw[failure.start]:02x}); {ICONV_HINT}") from None


def decode_lines(data: bytes, where: str, error: type[TranslatorError] = TranslatorError
                 ) -> list[str]:
    """The lines of UTF-8 ``data`` (``where`` names it in an error, raised as ``error``)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final line ending
    return [_decode(line, where, number, error).removesuffix("\r")
            for number, line in enumerate(lines, start=1)]


def read_lines(path: str | Path, error: type[TranslatorError] = TranslatorError) -> list[str]:
    """The lines of the UTF-8 text file at ``path``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as failure:
        raise error(f"cannot read {path}: {failure.strerror}") from None
    return decode_lines(data, str(path), error)


def iter_lines(path: str | Path, error: type[TranslatorError] = TranslatorError
               ) -> Iterator[tuple[int, str]]:
    """(line number, line) of the UTF-8 text file at ``path``, one at a time (for files too
    large to hold)."""
    path = Path(path)
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            yield number, _decode(raw.removesuffix(b"\n"), str(path), number,
                                  error).removesuffix("\r")


def read_texts(texts: list[str], file: str | Path | None = None) -> list[str]:
    """The sentences to translate: ``texts`` (each checked to be UTF-8), else ``file``'s
    lines, else standard input's (read as bytes, so that text that is not UTF-8 is caught)."""
    if texts and file:
        raise TranslatorError("give texts on the command line or --file, not both")
    if texts:
        for number, text in enumerate(texts, start=1):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # bytes that were not UTF-8, kept as surrogates
                raise TranslatorError(f"text {number} on the command line is not UTF-8 text; "
                                      f"{ICONV_HINT}") from None
        return texts
    if file:
        return read_lines(file)
    if sys.stdin.isatty():
        print("reading sentences from standard input, one a line (Ctrl-D to end)",
              file=sys.stderr)
    if hasattr(sys.stdin, "buffer"):
        return decode_lines(sys.stdin.buffer.read(), "standard input")
    return sys.stdin.read().splitlines()
