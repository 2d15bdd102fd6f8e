"""Tests for translator.data: readers, normalisation, filters, hub access."""

import json
import unicodedata

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from translator import data, hub
from translator.data import DataConfig, DataError, Pair, load_splits, normalize

TRAIN = [
    ("मैं घर जा रहा हूँ।", "I am going home."),
    ("आज बारिश हो रही है।", "It is raining today."),
    ("क्या आप चाय पिएँगे?", "Would you like some tea?"),
    ("धन्यवाद", "Thank you very much"),
]
DEV = [("कल मिलते हैं।", "See you tomorrow.")]
TEST = [("मुझे भूख लगी है।", "I am hungry.")]
SPLITS = {"train": TRAIN, "dev": DEV, "test": TEST}


def expected(rows):
    return [Pair(hindi, english) for hindi, english in rows]


def write_tsv(path, rows):
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def write_text_pair(prefix, rows):
    prefix.with_name(prefix.name + ".hi").write_text("".join(h + "\n" for h, _ in rows), "utf-8")
    prefix.with_name(prefix.name + ".en").write_text("".join(e + "\n" for _, e in rows), "utf-8")
    return str(prefix)


def rows_as_dicts(rows, nested):
    if nested:
        return [{"translation": {"en": e, "hi": h}} for h, e in rows]
    return [{"hi": h, "en": e, "id": i} for i, (h, e) in enumerate(rows)]


def write_split(directory, file_format, name, rows):
    """Write one split in `file_format`; return the path to put in the config."""
    if file_format == "text":
        return write_text_pair(directory / name, rows)
    if file_format == "tsv":
        return write_tsv(directory / f"{name}.tsv", rows)
    kind, layout = file_format.split("_")
    dicts = rows_as_dicts(rows, nested=layout == "nested")
    if kind == "jsonl":
        path = directory / f"{name}.jsonl"
        path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dicts), "utf-8")
        return str(path)
    path = directory / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(dicts), path)
    return str(path)


def files_config(tmp_path, file_format="tsv", splits=SPLITS, **overrides):
    paths = {
        f"{split}_path": write_split(tmp_path, file_format, split, rows)
        for split, rows in splits.items()
    }
    return DataConfig(source="files", **paths, **overrides)


# --- normalisation -----------------------------------------------------------------------


def test_normalize_composes_strips_invisibles_and_collapses_whitespace():
    decomposed = unicodedata.normalize("NFD", "ऩई café")  # ऩ = न + nukta, é = e + accent
    assert decomposed != unicodedata.normalize("NFC", decomposed)
    assert normalize(decomposed) == unicodedata.normalize("NFC", "ऩई café")
    assert normalize("\ufeff  नमस्ते\u200b दुनिया \t\u00a0 hello\n ") == "नमस्ते दुनिया hello"
    assert normalize("ज\u200dञ") == "ज\u200dञ"  # ZWJ chooses a glyph form: kept


def test_nukta_folding_only_for_loanword_letters():
    assert normalize("ज़रूर फ़ोन क़लम", nukta=True) == "जरूर फोन कलम"
    assert normalize("\u095b", nukta=True) == "ज"  # precomposed ज़ too
    assert normalize("पढ़ना लड़का", nukta=True) == unicodedata.normalize("NFC", "पढ़ना लड़का")
    assert "\u093c" in normalize("ज़रूर")  # off by default


# --- local files -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "file_format",
    ["text", "tsv", "jsonl_flat", "jsonl_nested", "parquet_flat", "parquet_nested"],
)
def test_every_local_format_loads_the_same_pairs(tmp_path, file_format):
    loaded = load_splits(files_config(tmp_path, file_format))
    assert loaded.splits == {name: expected(rows) for name, rows in SPLITS.items()}
    assert loaded.report["train"]["kept"] == len(TRAIN)


def test_explicit_format_overrides_the_extension(tmp_path):
    path = write_tsv(tmp_path / "pairs.txt", TRAIN)
    with pytest.raises(DataError, match="Cannot tell the format"):
        load_splits(DataConfig(source="files", train_path=path))
    loaded = load_splits(DataConfig(source="files", train_path=path, format="tsv"))
    assert loaded.splits["train"] == expected(TRAIN)
    assert loaded.splits["dev"] == [] and loaded.splits["test"] == []


def test_tsv_ignores_extra_columns_and_strips_crlf(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes("नमस्ते\tHello\tgreetings\r\n".encode())
    assert load_splits(DataConfig(source="files", train_path=str(path))).splits["train"] == [
        Pair("नमस्ते", "Hello")
    ]


def test_direction_en_hi_swaps_sides(tmp_path):
    loaded = load_splits(files_config(tmp_path, direction="en-hi"))
    assert loaded.splits["train"] == [Pair(english, hindi) for hindi, english in TRAIN]


def test_direction_both_holds_every_pair_both_ways_each_tagged(tmp_path):
    """Every split (dev and test too, so that they are scored both ways): hi→en then en→hi,
    each source led by the tag of the language to write; counts are of pairs, two a row."""
    loaded = load_splits(files_config(tmp_path, direction="both"))
    for split, rows in SPLITS.items():
        assert loaded.splits[split] == [pair for hindi, english in rows for pair in (
            Pair(f"<2en> {hindi}", english), Pair(f"<2hi> {english}", hindi))]
        assert loaded.report[split]["read"] == loaded.report[split]["kept"] == 2 * len(rows)
    assert data.split_tag("<2hi> I am hungry.") == ("hi", "I am hungry.")
    assert data.split_tag("<2hi>I am hungry.") == (None, "<2hi>I am hungry.")


def test_direction_both_filters_both_copies_of_a_row_alike(tmp_path):
    """The tag is no word: "Thank you very much" (4 words) passes max_words=4 as an en→hi
    source too, while a row with a 5-word side loses both its pairs."""
    loaded = load_splits(files_config(tmp_path, splits={"train": TRAIN}, direction="both",
                                      max_words=4))
    kept = {(data.split_tag(p.source)[1], p.target) for p in loaded.splits["train"]}
    assert kept == {("धन्यवाद", "Thank you very much"), ("Thank you very much", "धन्यवाद")}
    assert loaded.report["train"] == {"read": 8, "kept": 2, "too_long": 6}


def test_normalisation_is_applied_to_loaded_pairs(tmp_path):
    rows = [(unicodedata.normalize("NFD", "ऩई  बात\u200b"), " New \u00a0 thing ")]
    loaded = load_splits(files_config(tmp_path, splits={"train": rows}, normalize_nukta=True))
    assert loaded.splits["train"] == [Pair(unicodedata.normalize("NFC", "ऩई बात"), "New thing")]


# --- filters, de-duplication, leakage ----------------------------------------------------


def test_filters_and_dedupe_drop_what_they_say(tmp_path):
    rows = [
        *TRAIN,
        ("", "Empty Hindi side."),
        ("\u200b", "Only a zero-width space."),
        ("शब्द " * 81, "word " * 81),  # 81 words per side: too long
        ("हाँ", "yes it is so very true indeed"),  # 2 vs 8 with smoothing: ratio 4
        TRAIN[0],  # duplicate
        (TRAIN[0][0], "I'm going home."),  # same source, other target: not a duplicate
    ]
    loaded = load_splits(files_config(tmp_path, splits={"train": rows}))
    assert loaded.splits["train"] == expected([*TRAIN, (TRAIN[0][0], "I'm going home.")])
    assert loaded.report["train"] == {
        "read": len(rows),
        "kept": len(TRAIN) + 1,
        "empty": 2,
        "too_long": 1,
        "bad_ratio": 1,
        "duplicate": 1,
    }
    assert "train: kept 5 of 10" in loaded.summary()


def test_filters_can_be_switched_off(tmp_path):
    rows = [*TRAIN, ("शब्द " * 81, "word " * 81), ("हाँ", "yes it is so very true indeed")]
    rows.append(TRAIN[0])
    cfg = files_config(
        tmp_path, splits={"train": rows}, max_words=0, max_length_ratio=0, dedupe=False
    )
    assert len(load_splits(cfg).splits["train"]) == len(rows)


def test_dev_and_test_are_not_length_filtered(tmp_path):
    long_pair = ("शब्द " * 100, "word " * 100)
    loaded = load_splits(files_config(tmp_path, splits={"train": TRAIN, "dev": [long_pair]}))
    assert len(loaded.splits["dev"]) == 1


def test_leakage_is_removed_or_only_reported(tmp_path):
    dev = [*DEV, (TRAIN[1][0], "Something else."), ("कुछ और।", TRAIN[2][1])]
    splits = {"train": TRAIN, "dev": dev, "test": TEST}
    removed = load_splits(files_config(tmp_path, splits=splits))
    assert removed.splits["dev"] == expected(DEV)
    assert removed.report["dev"]["leaked"] == 2 and removed.report["dev"]["kept"] == 1

    reported = load_splits(files_config(tmp_path, splits=splits, remove_leakage=False))
    assert reported.splits["dev"] == expected(dev)
    assert reported.report["dev"]["leaked_not_removed"] == 2
    assert reported.report["test"]["kept"] == 1



def test_train_sink_receives_the_train_pairs_in_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "BATCH_ROWS", 2)
    rows = [*TRAIN, TRAIN[0], ("", "Empty."), *TRAIN[1:3]]
    dev = [*DEV, (TRAIN[1][0], "Something else.")]
    cfg = files_config(tmp_path, splits={"train": rows, "dev": dev, "test": TEST})
    listed = load_splits(cfg)
    batches = []
    streamed = load_splits(cfg, train_sink=batches.append)
    assert streamed.splits["train"] == [] and len(batches) > 1
    assert [pair for batch in batches for pair in batch] == listed.splits["train"]
    assert listed.splits["train"] == expected(TRAIN)
    assert streamed.splits["dev"] == listed.splits["dev"] == expected(DEV)
    assert streamed.report == listed.report
    assert listed.report["train"]["duplicate"] == 3 and listed.report["dev"]["leaked"] == 1


def test_data_fingerprint_follows_the_bytes_of_the_data(tmp_path):
    cfg = files_config(tmp_path, "text")
    first = data.data_fingerprint(cfg)
    assert first == data.data_fingerprint(cfg) and len(first) == 32
    english = tmp_path / "train.en"
    english.write_text(english.read_text(encoding="utf-8").replace("home", "house"), "utf-8")
    assert data.data_fingerprint(cfg) != first
    assert data.data_fingerprint(DataConfig()) == data.data_fingerprint(DataConfig(max_rows=1))
    streaming = DataConfig(source="hub", hub_id=str(tmp_path), streaming=True)
    assert data.data_fingerprint(streaming) is None

# --- bad data: one clear sentence naming the place ---------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"File not found: .*nope\.tsv"):
        load_splits(DataConfig(source="files", train_path=str(tmp_path / "nope.tsv")))


def test_text_files_with_different_line_counts(tmp_path):
    prefix = write_text_pair(tmp_path / "train", TRAIN)
    (tmp_path / "train.en").write_text("only one line\n", "utf-8")
    with pytest.raises(DataError) as error:
        load_splits(DataConfig(source="files", train_path=prefix, format="text"))
    message = str(error.value)
    assert "train.hi has 4 lines" in message and "train.en has 1" in message


def test_tsv_line_without_tab(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("नमस्ते\tHello\nनमस्ते Hello\n", "utf-8")
    with pytest.raises(DataError, match=r"train\.tsv line 2 has no tab"):
        load_splits(DataConfig(source="files", train_path=str(path)))


def test_undecodable_bytes(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes("नमस्ते\tHello\n".encode() * 2 + b"caf\xe9\tcafe\n")
    with pytest.raises(DataError, match=r"train\.tsv line 3 is not valid UTF-8"):
        load_splits(DataConfig(source="files", train_path=str(path)))


def test_missing_field_names_the_fields_that_exist(tmp_path):
    cfg = files_config(tmp_path, "jsonl_flat", splits={"train": TRAIN}, hindi_field="hindi")
    with pytest.raises(DataError) as error:
        load_splits(cfg)
    message = str(error.value)
    assert "train.jsonl line 1 has no field 'hindi'" in message
    assert "it has: hi, en, id" in message


def test_missing_nested_field(tmp_path):
    cfg = files_config(tmp_path, "parquet_nested", splits={"train": TRAIN}, english_field="eng")
    with pytest.raises(DataError, match=r"row 1 has no field 'eng' \(it has: en, hi\)"):
        load_splits(cfg)


def test_invalid_json_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"hi": "नमस्ते", "en": "Hello"}\n{"hi": \n', "utf-8")
    with pytest.raises(DataError, match=r"train\.jsonl line 2 is not valid JSON"):
        load_splits(DataConfig(source="files", train_path=str(path)))


@pytest.mark.parametrize(
    ("setting", "value"), [("source", "web"), ("format", "csv"), ("direction", "hi-fr")]
)
def test_unknown_config_values(tmp_path, setting, value):
    cfg = DataConfig(source="files", train_path=write_tsv(tmp_path / "t.tsv", TRAIN))
    setattr(cfg, setting, value)
    with pytest.raises(DataError, match=f"Unknown data.{setting} '{value}'; use one of"):
        load_splits(cfg)


def test_files_source_needs_a_train_path():
    with pytest.raises(DataError, match="needs data.train_path"):
        load_splits(DataConfig(source="files"))


# --- embedded corpus ---------------------------------------------------------------------


def test_embedded_corpus_reads_the_package_tsv_files(tmp_path, monkeypatch):
    for split, rows in SPLITS.items():
        write_tsv(tmp_path / f"{split}.tsv", [(h, e, "domain") for h, e in rows])
    monkeypatch.setattr(data, "embedded_corpus_dir", lambda: tmp_path)
    loaded = load_splits(DataConfig())
    assert loaded.splits == {name: expected(rows) for name, rows in SPLITS.items()}


def test_missing_embedded_corpus(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "embedded_corpus_dir", lambda: tmp_path)
    with pytest.raises(DataError, match="embedded corpus is missing"):
        load_splits(DataConfig())


# --- Hugging Face hub --------------------------------------------------------------------


@pytest.fixture
def hub_folder(tmp_path):
    """A local dataset in the hub schema: one Parquet file per split."""
    folder = tmp_path / "hub"
    folder.mkdir()
    names = {"train": "train", "dev": "validation", "test": "test"}
    for split, rows in SPLITS.items():
        table = pa.Table.from_pylist(rows_as_dicts(rows, nested=True))
        pq.write_table(table, folder / f"{names[split]}.parquet")
    return folder


SPLIT_NAMES = ["train", "validation", "test"]


def fake_load_dataset(folder, calls):
    def load_dataset(path, name=None, split=None, streaming=False):
        calls.append((path, name, split, streaming))
        if not (folder / f"{split}.parquet").exists():  # what datasets raises
            raise ValueError(f'Unknown split "{split}". Should be one of {SPLIT_NAMES}.')
        rows = datasets.Dataset(pq.read_table(folder / f"{split}.parquet"))
        return rows.to_iterable_dataset() if streaming else rows

    return load_dataset


@pytest.mark.parametrize("streaming", [False, True])
def test_hub_source_reads_the_hub_schema(hub_folder, monkeypatch, streaming):
    calls = []
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset(hub_folder, calls))
    cfg = DataConfig(source="hub", hub_id=str(hub_folder), streaming=streaming)
    loaded = load_splits(cfg)
    assert loaded.splits == {name: expected(rows) for name, rows in SPLITS.items()}
    assert [call[2:] for call in calls] == [
        ("train", streaming),
        ("validation", streaming),
        ("test", streaming),
    ]


def test_hub_max_rows_limits_each_split(hub_folder, monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset(hub_folder, []))
    cfg = DataConfig(source="hub", hub_id=str(hub_folder), streaming=True, max_rows=2)
    assert load_splits(cfg).splits["train"] == expected(TRAIN[:2])


def test_hub_unknown_split_lists_the_splits(hub_folder, monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset(hub_folder, []))
    cfg = DataConfig(source="hub", hub_id=str(hub_folder), hub_splits={"train": "training"})
    with pytest.raises(DataError, match=r"split 'training'.*'train', 'validation', 'test'"):
        load_splits(cfg)


def test_real_load_dataset_streams_a_local_folder(hub_folder, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = DataConfig(source="hub", hub_id=str(hub_folder), streaming=True)
    assert load_splits(cfg).splits["dev"] == expected(DEV)



@pytest.fixture
def offline_datasets_cache(tmp_path, monkeypatch):
    """Real load_dataset on local folders, offline, caching into tmp_path."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def test_real_load_dataset_reads_a_local_folder_in_batches(hub_folder, offline_datasets_cache,
                                                           monkeypatch):
    monkeypatch.setattr(hub, "BATCH_ROWS", 3)
    cfg = DataConfig(source="hub", hub_id=str(hub_folder))
    assert load_splits(cfg).splits == {name: expected(rows) for name, rows in SPLITS.items()}
    assert load_splits(DataConfig(source="hub", hub_id=str(hub_folder), max_rows=2)).splits[
        "train"] == expected(TRAIN[:2])
    with pytest.raises(DataError, match=r"row 1 has no field 'hi_IN' \(it has: en, hi\)"):
        load_splits(DataConfig(source="hub", hub_id=str(hub_folder), hindi_field="hi_IN"))


def test_hub_fingerprint_changes_with_the_dataset(hub_folder, offline_datasets_cache):
    cfg = DataConfig(source="hub", hub_id=str(hub_folder))
    first = data.data_fingerprint(cfg)
    assert first == data.data_fingerprint(cfg)
    table = pa.Table.from_pylist(rows_as_dicts(TRAIN[:2], nested=True))
    pq.write_table(table, hub_folder / "train.parquet")
    assert data.data_fingerprint(cfg) != first

def test_offline_mode_fails_fast_with_advice(monkeypatch):
    """Fast without a clock: offline, neither the hub's probe nor load_dataset (which would
    retry for about 20 seconds) is called."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "_hub_unreachable_reason", pytest.fail)  # offline: don't try
    monkeypatch.setattr(datasets, "load_dataset", pytest.fail)
    with pytest.raises(DataError) as error:
        load_splits(DataConfig(source="hub", hub_id="nobody/no-such-dataset-xyz"))
    message = str(error.value)
    assert "'nobody/no-such-dataset-xyz'" in message and "data.source=files" in message


def test_unreachable_hub_fails_fast_without_calling_load_dataset(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "_hub_unreachable_reason", lambda timeout_s: "no route to host")
    monkeypatch.setattr(datasets, "load_dataset", pytest.fail)
    with pytest.raises(DataError, match=r"from the Hugging Face hub \(no route to host\)"):
        load_splits(DataConfig(source="hub", hub_id="nobody/no-such-dataset-xyz"))


def test_connection_error_during_loading_becomes_a_data_error(hub_folder, monkeypatch):
    def load_dataset(*args, **kwargs):
        raise ConnectionError("Couldn't reach the hub")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(DataError, match="Cannot download dataset"):
        load_splits(DataConfig(source="hub", hub_id=str(hub_folder)))


@pytest.mark.parametrize("hub_id", ["/data/iitb-standin", "./iitb", "~/datasets/iitb",
                                    "data/hub/iitb"])
def test_a_hub_id_that_looks_like_a_missing_folder_says_so(hub_id):
    """Not a failed download and a DNS error: the folder is not there."""
    with pytest.raises(DataError, match=f"data.hub_id {hub_id} looks like a local folder, but "
                                        "there is nothing there"):
        load_splits(DataConfig(source="hub", hub_id=hub_id))
