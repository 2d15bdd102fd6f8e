"""Raw rows, as every reader meets them: the local files' readers (translator.data) and the
Hugging Face hub's (translator.hub) yield (hindi, english) texts, BATCH_ROWS rows at a time,
and name a problem with the data in a DataError.
"""

from __future__ import annotations

from translator.config import DataConfig
from translator.errors import TranslatorError

BATCH_ROWS = 10_000  # rows read, normalised and filtered together


class DataError(TranslatorError):
    """The data, or the data section of the config, cannot be used; the message says why."""


RawBatch = tuple[list[str], list[str]]  # the raw (hindi, english) texts of consecutive rows


def missing_field(where: str, name: str, available) -> DataError:
    """The error for a row (or a batch of rows) without the language field ``name``."""
    return DataError(
        f"{where} has no field '{name}' (it has: {', '.join(map(str, available))}); set "
        "data.hindi_field, data.english_field or data.hub_field to match the data."
    )


def row_languages(row: object, cfg: DataConfig, where: str) -> tuple[str, str]:
    """(hindi, english) from a flat row or one nested under cfg.hub_field."""
    if not isinstance(row, dict):
        raise DataError(f"{where} is a {type(row).__name__}, not an object with named fields.")
    fields = row
    if cfg.hub_field and cfg.hub_field in row:
        fields = row[cfg.hub_field]
        if not isinstance(fields, dict):
            raise DataError(f"{where}: field '{cfg.hub_field}' does not hold named fields.")
    texts = []
    for name in (cfg.hindi_field, cfg.english_field):
        if name not in fields:
            raise missing_field(where, name, fields)
        value = fields[name]
        if value is not None and not isinstance(value, str):
            raise DataError(f"{where}: field '{name}' holds {type(value).__name__}, not text.")
        texts.append(value or "")
    return texts[0], texts[1]

