"""Tests for translator.encoded: the array-backed corpus and the prepared-data cache."""

import numpy as np
import pytest
import torch

from translator import cache, encoded, pair_table
from translator.batching import TokenBatchSampler, make_batch
from translator.cache import CacheWarning
from translator.config import load_config
from translator.data import embedded_corpus_dir, load_splits
from translator.encoded import EncodedCorpus, prepare_data
from translator.pair_table import PairTable
from translator.tokenizer import Tokenizer

PAIRS = 240  # of the embedded train split: enough for a tokenizer, quick to train


@pytest.fixture
def corpus_files(tmp_path):
    """A small train/dev split as TSV files (real Hindi and English, from the embedded
    corpus)."""
    lines = (embedded_corpus_dir() / "train.tsv").read_text(encoding="utf-8").splitlines()
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("\n".join(lines[:PAIRS]) + "\n", encoding="utf-8")
    dev.write_text("\n".join(lines[PAIRS:PAIRS + 20]) + "\n", encoding="utf-8")
    return train, dev


def make_config(tmp_path, corpus_files, *overrides):
    train, dev = corpus_files
    return load_config(None, [
        "data.source=files", f"data.train_path={train}", f"data.dev_path={dev}",
        f"data.cache_dir={tmp_path / 'cache'}", "tokenizer.vocab_size=600", *overrides])


def run_dir_tokenizer(tmp_path, name):
    return tmp_path / name / "tokenizer"


def arrays(corpus: EncodedCorpus) -> list[list[int]]:
    return [*corpus.source_ids, *corpus.target_ids]


def sources(prepared):
    return {name: stage.source for name, stage in prepared.stages.items()}


# ---------------------------------------------------------------- the array-backed corpus


@pytest.mark.parametrize("max_tokens", [1024, 8])
def test_array_corpus_gives_the_batches_of_the_list_corpus(tmp_path, corpus_files,
                                                           max_tokens):
    config = make_config(tmp_path, corpus_files)
    pairs = load_splits(config.data).splits["train"]
    tokenizer = Tokenizer.train(config.tokenizer, [p.source for p in pairs],
                                [p.target for p in pairs], tmp_path / "tokenizer")
    # The list-backed corpus, as training built it before: one list of ints per sentence.
    source_lists = [tokenizer.encode_source(p.source)[: max_tokens - 1] for p in pairs]
    target_lists = [tokenizer.encode_target(p.target)[: max_tokens - 1] for p in pairs]
    list_lengths = [(len(s) + 1, len(t) + 1) for s, t in zip(source_lists, target_lists)]
    # The array-backed one, encoded in several batches.
    batches = [pairs[i:i + 50] for i in range(0, len(pairs), 50)]
    corpus = EncodedCorpus.encode(batches, tokenizer, max_tokens)

    assert len(corpus) == len(pairs)
    assert list(corpus.source_ids) == source_lists and list(corpus.target_ids) == target_lists
    assert corpus.source_ids[7] == source_lists[7] and corpus.target_ids[-1] == target_lists[-1]
    assert corpus.lengths().tolist() == [list(pair) for pair in list_lengths]
    assert corpus._source[0].dtype == np.uint16  # 2 bytes a token, not a Python int
    list_sampler = TokenBatchSampler(list_lengths, 300, seed=3)
    array_sampler = TokenBatchSampler(corpus.lengths(), 300, seed=3)
    for epoch in range(2):
        assert array_sampler.epoch_batches(epoch) == list_sampler.epoch_batches(epoch)
    ids = (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    for indices in list_sampler.epoch_batches(0):
        expected = make_batch([source_lists[i] for i in indices],
                              [target_lists[i] for i in indices], *ids)
        found = corpus.batch(indices, *ids)
        for name in ("source", "target_input", "target_output"):
            assert torch.equal(getattr(found, name), getattr(expected, name)), name
            assert getattr(found, name).dtype == torch.long
        assert found.num_target_tokens == expected.num_target_tokens


def test_saved_corpus_loads_memory_mapped_and_checks_its_ids(tmp_path, corpus_files):
    config = make_config(tmp_path, corpus_files)
    pairs = load_splits(config.data).splits["train"]
    tokenizer = Tokenizer.train(config.tokenizer, [p.source for p in pairs],
                                [p.target for p in pairs], tmp_path / "tokenizer")
    corpus = EncodedCorpus.encode([pairs], tokenizer, 1024)
    corpus.save(tmp_path / "ids")
    loaded = EncodedCorpus.load(tmp_path / "ids", tokenizer.source_vocab_size)
    assert isinstance(loaded._source[0], np.memmap)
    assert arrays(loaded) == arrays(corpus)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        EncodedCorpus.load(tmp_path / "ids", vocab_size=10)


def test_pair_table_reads_back_what_was_written(tmp_path, monkeypatch, corpus_files):
    monkeypatch.setattr(pair_table, "BATCH_ROWS", 32)  # several record batches
    config = make_config(tmp_path, corpus_files)
    pairs = load_splits(config.data).splits["train"]
    writer = pair_table.PairWriter(tmp_path / "pairs.arrow")
    writer.write(pairs[:100])
    writer.write(pairs[100:])
    writer.close()
    table = PairTable(path=tmp_path / "pairs.arrow")
    assert len(table) == len(pairs) and list(table) == pairs
    assert table[33] == pairs[33] and table[-1] == pairs[-1]
    sample = table.sample(50, shuffle=True, seed=0)
    assert len(sample) == 50 and len(set(sample)) == 50 and set(sample) <= set(pairs)
    assert sample == table.sample(50, shuffle=True, seed=0)
    assert table.sample(50, shuffle=False, seed=0) == pairs[:50]


# ---------------------------------------------------------------- the cache


def test_second_run_reuses_the_cache_and_reads_no_text(tmp_path, corpus_files, monkeypatch):
    config = make_config(tmp_path, corpus_files)
    first = prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    assert sources(first) == {"data": "built", "tokenizer": "built", "encoding": "built"}

    monkeypatch.setattr(encoded, "load_splits", pytest.fail)  # no data is read again
    monkeypatch.setattr(Tokenizer, "train", pytest.fail)  # no SentencePiece is trained
    second = prepare_data(config, run_dir_tokenizer(tmp_path, "run2"))
    assert sources(second) == {"data": "cache", "tokenizer": "cache", "encoding": "cache"}
    assert second.tokenizer.fingerprint() == first.tokenizer.fingerprint()
    assert (run_dir_tokenizer(tmp_path, "run2") / "joint.model").is_file()
    assert arrays(second.train) == arrays(first.train)
    assert arrays(second.dev) == arrays(first.dev)
    assert second.dev_pairs == first.dev_pairs and second.report == first.report
    assert list(second.train_pairs) == list(first.train_pairs)

    resumed = prepare_data(config, run_dir_tokenizer(tmp_path, "run1"), resume=True)
    assert sources(resumed) == {"data": "cache", "tokenizer": "run folder", "encoding": "cache"}


def test_changed_data_rebuilds_everything(tmp_path, corpus_files):
    config = make_config(tmp_path, corpus_files)
    first = prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    train, _ = corpus_files
    lines = train.read_text(encoding="utf-8").splitlines()
    train.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # one pair fewer

    second = prepare_data(config, run_dir_tokenizer(tmp_path, "run2"))
    assert sources(second) == {"data": "built", "tokenizer": "built", "encoding": "built"}
    assert len(second.train) == len(first.train) - 1


def test_changed_filters_rebuild_the_data(tmp_path, corpus_files):
    prepare_data(make_config(tmp_path, corpus_files), run_dir_tokenizer(tmp_path, "run1"))
    changed = make_config(tmp_path, corpus_files, "data.max_words=8")
    second = prepare_data(changed, run_dir_tokenizer(tmp_path, "run2"))
    assert sources(second)["data"] == "built"
    assert second.report["train"]["too_long"] > 0


def test_changed_tokenizer_rebuilds_tokenizer_and_ids_but_not_the_data(tmp_path, corpus_files):
    first = prepare_data(make_config(tmp_path, corpus_files), run_dir_tokenizer(tmp_path, "r1"))
    changed = make_config(tmp_path, corpus_files, "tokenizer.vocab_size=700")
    second = prepare_data(changed, run_dir_tokenizer(tmp_path, "run2"))
    assert sources(second) == {"data": "cache", "tokenizer": "built", "encoding": "built"}
    assert second.tokenizer.fingerprint() != first.tokenizer.fingerprint()
    assert second.tokenizer.source_vocab_size == 700

    # A resumed run keeps its own tokenizer, and its encoding is found again.
    resumed = prepare_data(changed, run_dir_tokenizer(tmp_path, "r1"), resume=True)
    assert sources(resumed) == {"data": "cache", "tokenizer": "run folder", "encoding": "cache"}
    assert arrays(resumed.train) == arrays(first.train)



def test_changed_code_makes_new_entries(tmp_path, corpus_files, monkeypatch):
    """Another version of the data or tokenizer code (normalisation, filters, training) does
    not reuse what the old one made."""
    config = make_config(tmp_path, corpus_files)
    prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    monkeypatch.setattr(encoded, "TOKENIZER_CODE", "another tokenizer.py")
    second = prepare_data(config, run_dir_tokenizer(tmp_path, "run2"))
    assert sources(second) == {"data": "cache", "tokenizer": "built", "encoding": "built"}
    monkeypatch.setattr(encoded, "DATA_CODE", "another data.py")
    third = prepare_data(config, run_dir_tokenizer(tmp_path, "run3"))
    assert set(sources(third).values()) == {"built"}

def entry(tmp_path, kind):
    (found,) = (tmp_path / "cache").glob(f"{kind}-*")
    return found


def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [
    "flip a byte of the source ids", "truncate the target offsets", "delete meta.json",
    "garble meta.json", "flip a byte of the tokenizer model", "edit the clean dev split",
    "flip a byte of the clean train split", "delete the tokenizer model",
])
def test_damaged_cache_is_rebuilt_with_a_warning(tmp_path, corpus_files, damage):
    config = make_config(tmp_path, corpus_files)
    first = prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    first_ids = arrays(first.train)  # read now: first.train maps the files damaged below
    path = {
        "flip a byte of the source ids": entry(tmp_path, "encoded") / "source_ids.npy",
        "truncate the target offsets": entry(tmp_path, "encoded") / "target_offsets.npy",
        "delete meta.json": entry(tmp_path, "encoded") / "meta.json",
        "garble meta.json": entry(tmp_path, "data") / "meta.json",
        "flip a byte of the tokenizer model": entry(tmp_path, "tokenizer") / "joint.model",
        "edit the clean dev split": entry(tmp_path, "data") / "dev.jsonl",
        "flip a byte of the clean train split": entry(tmp_path, "data") / "train.arrow",
        "delete the tokenizer model": entry(tmp_path, "tokenizer") / "joint.model",
    }[damage]
    if damage.startswith("flip"):
        flip_a_byte(path)
    elif damage.startswith("truncate"):
        path.write_bytes(path.read_bytes()[:-8])
    elif damage.startswith("garble"):
        path.write_text("{not json", encoding="utf-8")
    elif damage.startswith("edit"):
        path.write_text(path.read_text(encoding="utf-8").replace("।", "."), encoding="utf-8")
    else:
        path.unlink()
    if "train split" in damage:  # read only when something must be made from it
        for folder in [entry(tmp_path, "encoded"), entry(tmp_path, "tokenizer")]:
            for file in folder.iterdir():
                file.unlink()
            folder.rmdir()

    with pytest.warns(CacheWarning, match="damaged"):
        second = prepare_data(config, run_dir_tokenizer(tmp_path, "run2"))
    assert "built" in sources(second).values()
    assert second.dev_pairs == first.dev_pairs
    assert len(second.train) == len(first.train)
    if "tokenizer" not in damage:
        assert second.tokenizer.fingerprint() == first.tokenizer.fingerprint()
        assert arrays(second.train) == first_ids
    # ... and the rebuilt cache is whole again.
    third = prepare_data(config, run_dir_tokenizer(tmp_path, "run3"))
    assert set(sources(third).values()) == {"cache"}


def test_ids_that_do_not_fit_the_tokenizer_are_not_trusted(tmp_path, corpus_files):
    """An entry whose hashes match but whose arrays are wrong (ids past the vocabulary, as
    a bug or a hand edit could leave) is rebuilt too."""
    config = make_config(tmp_path, corpus_files)
    first_ids = arrays(prepare_data(config, run_dir_tokenizer(tmp_path, "run1")).train)
    folder = entry(tmp_path, "encoded")
    ids = np.load(folder / "source_ids.npy")
    ids[0] = 65000
    np.save(folder / "source_ids.npy", ids)
    meta = cache.Entry(tmp_path / "cache", "encoded", folder.name.split("-", 1)[1], "ids")
    files = {p.name: [p.stat().st_size, cache.file_digest(p)] for p in folder.iterdir()
             if p.name != "meta.json"}
    (folder / "meta.json").write_text(encoded.json.dumps({"key": meta.key, "files": files}))
    with pytest.warns(CacheWarning, match="outside the vocabulary"):
        second = prepare_data(config, run_dir_tokenizer(tmp_path, "run2"))
    assert arrays(second.train) == first_ids


def test_without_a_cache_nothing_is_written_and_the_result_is_the_same(tmp_path, corpus_files):
    cached = prepare_data(make_config(tmp_path, corpus_files), run_dir_tokenizer(tmp_path, "a"))
    uncached_config = make_config(tmp_path, corpus_files, "data.cache=false",
                                  f"data.cache_dir={tmp_path / 'unused'}")
    uncached = prepare_data(uncached_config, run_dir_tokenizer(tmp_path, "b"))
    assert set(sources(uncached).values()) == {"built"}
    assert not (tmp_path / "unused").exists()
    assert uncached.tokenizer.fingerprint() == cached.tokenizer.fingerprint()
    assert arrays(uncached.train) == arrays(cached.train)
    assert list(uncached.train_pairs) == list(cached.train_pairs)


def test_the_default_cache_lives_in_the_runs_folder(tmp_path, corpus_files):
    config = make_config(tmp_path, corpus_files, "data.cache_dir=null",
                         f"train.output_dir={tmp_path / 'runs'}")
    prepared = prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    assert prepared.cache_dir == tmp_path / "runs" / "cache"
    assert len(list((tmp_path / "runs" / "cache").glob("encoded-*"))) == 1


def test_tokenizer_trains_on_a_sample_of_the_configured_size(tmp_path, corpus_files,
                                                             monkeypatch):
    seen = {}

    def train(cfg, source_texts, target_texts, out_dir, tags=()):
        seen["sources"], seen["targets"] = list(source_texts), list(target_texts)
        return real_train(cfg, seen["sources"], seen["targets"], out_dir, tags)

    real_train = Tokenizer.train
    monkeypatch.setattr(Tokenizer, "train", train)
    config = make_config(tmp_path, corpus_files, "tokenizer.input_sentence_size=200")
    prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    assert len(seen["sources"]) == len(seen["targets"]) == 100  # joint: 200 sentences in all
    assert len(set(seen["sources"])) == 100


# ---------------------------------------------------------------- cache housekeeping


def test_the_cache_command_lists_and_clears_entries_by_last_use(tmp_path, corpus_files,
                                                               capsys):
    import os
    import time

    from translator.cli import main
    config = make_config(tmp_path, corpus_files)
    prepare_data(config, run_dir_tokenizer(tmp_path, "run1"))
    root = tmp_path / "cache"
    entries = cache.cache_entries(root)
    assert sorted(entry.kind for entry in entries) == ["data", "encoded", "tokenizer"]
    assert all(entry.size > 0 for entry in entries)
    (root / ".data-0123.99.tmp").mkdir()  # what a stopped build leaves
    (root / "notes.txt").write_text("not an entry")
    # the data entry was last used 10 days ago; a second run then reads it (and so renews it)
    data = next(entry for entry in entries if entry.kind == "data")
    old = time.time() - 10 * 86400
    for entry in entries:
        os.utime(entry.path / cache.META, (old, old))
    assert main(["cache", "list", "--dir", str(root)]) == 0
    listed = capsys.readouterr().out
    assert "4 entries" in listed and "unfinished" in listed and "10.0 days ago" in listed
    prepare_data(make_config(tmp_path, corpus_files, "tokenizer.vocab_size=500"),
                 run_dir_tokenizer(tmp_path, "run2"))  # reuses the data entry only
    assert main(["cache", "clear", "--older-than", "5", "--dir", str(root)]) == 0
    assert "removed 2 entries" in capsys.readouterr().out  # the old tokenizer and ids
    kinds = sorted(entry.kind for entry in cache.cache_entries(root))
    assert kinds == ["data", "encoded", "tokenizer", "unfinished"] and data.path.is_dir()
    assert main(["cache", "clear", "--dir", str(root)]) == 0
    assert cache.cache_entries(root) == [] and (root / "notes.txt").is_file()
    assert main(["cache", "list", "--older-than", "1", "--dir", str(root)]) == 2
    assert "--older-than" in capsys.readouterr().err
