"""The Hugging Face hub as a data source (data.source=hub): a dataset's splits read row by row
(streaming) or one Arrow batch at a time, their fingerprint for the prepared-data cache, and
the checks that make an unreachable hub or an uncached offline dataset fail within seconds,
in one sentence that says what to use instead (`datasets` alone retries for about 20 seconds
and ends in a long traceback).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from translator.config import DataConfig
from translator.rows import BATCH_ROWS, DataError, RawBatch, missing_field, row_languages

HUB_TIMEOUT_S = 3.0  # how long to wait for the hub before suggesting local data


def read_hub_rows(cfg: DataConfig, hub_split: str) -> Iterator[tuple[str, str]]:
    """Rows one by one (streaming datasets; `read_hub_batches` reads the others)."""
    import datasets

    where = f"dataset '{cfg.hub_id}' split '{hub_split}'"
    with _hub_errors(cfg, where):
        rows = datasets.load_dataset(
            cfg.hub_id, cfg.hub_config, split=hub_split, streaming=cfg.streaming
        )
        for number, row in enumerate(itertools.islice(rows, cfg.max_rows), start=1):
            yield row_languages(row, cfg, f"{where} row {number}")


def read_hub_batches(cfg: DataConfig, hub_split: str) -> Iterator[RawBatch]:
    """The (hindi, english) columns of a downloaded (not streaming) dataset split, one Arrow
    batch at a time: no Python dict per row, so 1.66M rows take seconds, not minutes."""
    import datasets

    where = f"dataset '{cfg.hub_id}' split '{hub_split}'"
    with _hub_errors(cfg, where):
        rows = datasets.load_dataset(cfg.hub_id, cfg.hub_config, split=hub_split)
        wanted = len(rows) if cfg.max_rows is None else min(cfg.max_rows, len(rows))
        done = 0
        for table in rows.with_format("arrow").iter(batch_size=BATCH_ROWS):
            if done >= wanted:
                break
            table = table.slice(0, wanted - done)
            yield _arrow_languages(table, cfg, f"{where} row {done + 1}")
            done += table.num_rows


def _arrow_languages(table: Any, cfg: DataConfig, where: str) -> RawBatch:
    """`row_languages` for a whole Arrow table of rows: the Hindi and English columns, nested
    under cfg.hub_field or flat; a missing text is ''."""
    import pyarrow as pa

    columns = dict(zip(table.column_names, table.columns))
    if cfg.hub_field and cfg.hub_field in columns:
        nested = columns[cfg.hub_field].combine_chunks()
        if not pa.types.is_struct(nested.type):
            raise DataError(f"{where}: field '{cfg.hub_field}' does not hold named fields.")
        columns = {nested.type.field(i).name: child for i, child in enumerate(nested.flatten())}
    texts = []
    for name in (cfg.hindi_field, cfg.english_field):
        if name not in columns:
            raise missing_field(where, name, columns)
        column = columns[name]
        kind = column.type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_null(kind)):
            raise DataError(f"{where}: field '{name}' holds {kind}, not text.")
        texts.append([text or "" for text in column.to_pylist()])
    return texts[0], texts[1]


def hub_fingerprint(cfg: DataConfig) -> str | None:
    """What `datasets` knows of the configured splits' contents (each split's fingerprint,
    made from its files or the hub revision), without reading their rows; None for streaming
    datasets, whose contents cannot be known without reading them."""
    import datasets

    if cfg.streaming:
        return None
    check_hub_reachable(cfg.hub_id)
    found = []
    for hub_split in cfg.hub_splits.values():
        where = f"dataset '{cfg.hub_id}' split '{hub_split}'"
        with _hub_errors(cfg, where):
            rows = datasets.load_dataset(cfg.hub_id, cfg.hub_config, split=hub_split)
        found.append(f"{hub_split}:{rows._fingerprint}:{len(rows)}")
    return ";".join(found)


@contextlib.contextmanager
def _hub_errors(cfg: DataConfig, where: str) -> Iterator[None]:
    """Turn the errors of `datasets` into a DataError that says what to change."""
    try:
        yield
    except ValueError as error:  # unknown split or configuration; the message lists them
        first_line = str(error).strip().splitlines()[0]
        raise DataError(
            f"Cannot load {where} ({first_line}); set data.hub_splits and data.hub_config to "
            "names the dataset has."
        ) from None
    except FileNotFoundError:  # includes datasets.exceptions.DatasetNotFoundError
        raise DataError(
            f"Dataset '{cfg.hub_id}' was found neither on the hub nor as a local folder; "
            "check data.hub_id."
        ) from None
    except (ConnectionError, TimeoutError) as error:
        raise DataError(_unreachable_message(cfg.hub_id, type(error).__name__)) from None


def _unreachable_message(hub_id: str, reason: str) -> str:
    return (
        f"Cannot download dataset '{hub_id}' from the Hugging Face hub ({reason}); use local "
        "files (data.source=files data.train_path=...) or the embedded corpus "
        "(data.source=embedded) instead."
    )


def _looks_like_a_path(hub_id: str) -> bool:
    """A hub id is owner/name; a path starts with / . or ~, or has more than one /."""
    return hub_id.startswith(("/", ".", "~")) or hub_id.count("/") > 1


def check_hub_reachable(hub_id: str) -> None:
    """Fail within seconds when the hub is out of reach.

    Without this, load_dataset retries for about 20 seconds and ends in a long traceback.
    """
    if _looks_like_a_path(hub_id) and not Path(hub_id).expanduser().exists():
        raise DataError(f"data.hub_id {hub_id} looks like a local folder, but there is nothing "
                        "there; give the folder of a saved dataset, or a hub id such as "
                        "cfilt/iitb-english-hindi")
    if Path(hub_id).expanduser().exists():
        return  # a local dataset folder needs no network
    cached = _hub_dataset_cached(hub_id)
    if _offline_mode():
        if cached:
            return  # datasets reads the cached copy without the network
        raise DataError(_unreachable_message(hub_id, "HF_HUB_OFFLINE is set and it is not cached"))
    problem = _hub_unreachable_reason(HUB_TIMEOUT_S)
    if problem is None:
        return
    if cached:
        raise DataError(
            f"The hub cannot be reached ({problem}) to check dataset '{hub_id}'; set "
            "HF_HUB_OFFLINE=1 to use the cached copy."
        )
    raise DataError(_unreachable_message(hub_id, problem))


def _offline_mode() -> bool:
    import datasets.config

    flags = (os.environ.get(name, "") for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    env_offline = any(flag.strip().upper() in {"1", "ON", "YES", "TRUE"} for flag in flags)
    return env_offline or bool(datasets.config.HF_HUB_OFFLINE)


def _hub_dataset_cached(hub_id: str) -> bool:
    """Whether the hub download cache or the datasets cache holds this dataset."""
    import datasets.config
    from datasets.naming import camelcase_to_snakecase
    from huggingface_hub import constants

    downloaded = Path(constants.HF_HUB_CACHE) / ("datasets--" + hub_id.replace("/", "--"))
    *namespace, name = hub_id.split("/")
    prepared_name = "___".join([*namespace, camelcase_to_snakecase(name)])
    prepared = Path(datasets.config.HF_DATASETS_CACHE).expanduser() / prepared_name
    return downloaded.is_dir() or prepared.is_dir()


def _hub_unreachable_reason(timeout_s: float) -> str | None:
    """Why the hub endpoint gave no HTTP answer within `timeout_s`, or None if it answered.

    A real HTTPS request rather than a TCP connect: sandboxes and proxies may accept any
    connection and fail only later. urllib honours HTTPS_PROXY like the hub client does.
    """
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    outcome = {"problem": f"no answer from {endpoint} within {timeout_s:g} s"}

    def attempt() -> None:
        try:
            urllib.request.urlopen(
                urllib.request.Request(endpoint, method="HEAD"), timeout=timeout_s
            )
            outcome["problem"] = None
        except urllib.error.HTTPError:  # any HTTP status means the hub is reachable
            outcome["problem"] = None
        except (OSError, ValueError) as error:
            outcome["problem"] = f"{endpoint}: {getattr(error, 'reason', error)}"

    # A thread, because urllib's timeout does not cover a hanging DNS lookup.
    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return outcome["problem"]
