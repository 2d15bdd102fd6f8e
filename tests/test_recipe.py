"""The low-resource recipe's options: schedules, word dropout, checkpoint averaging, attention
and activation dropout, and guided alignment (its loss, its targets, its links)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from translator import guided
from translator.alignment import hard_links, word_alignment
from translator.batching import alignment_targets, make_batch
from translator.build import EncodedSplit, build_run
from translator.config import DataConfig, ModelConfig, TrainConfig, load_config
from translator.corpus import read_split
from translator.data import Pair, normalize
from translator.encoded import EncodedCorpus
from translator.guided import load_train_links, pair_piece_links, pair_word_links
from translator.links import AlignerMissingError, LinksError
from translator.model import Transformer
from translator.recipe import (
    Budget,
    alignment_loss,
    average_weights,
    batch_loss,
    drop_words,
    learning_rate_schedule,
    token_loss,
)
from translator.run_dir import RunDir

ROOT = Path(__file__).resolve().parents[1]
PAD, UNK, BOS, EOS = 0, 1, 2, 3


# ---------------------------------------------------------------- schedules


def test_linear_schedule_warms_up_holds_and_reaches_zero_at_the_last_step():
    cfg = TrainConfig(schedule="linear", max_steps=100, warmup_steps=10, decay_start=0.5)
    factor = learning_rate_schedule(cfg, Budget(cfg))
    assert factor(5) == pytest.approx(0.5)
    assert factor(10) == factor(30) == factor(50) == 1.0
    assert factor(75) == pytest.approx(0.5)
    assert factor(99) > 0
    assert factor(100) == 0.0


def test_linear_schedule_follows_the_time_limit_when_it_comes_first():
    cfg = TrainConfig(schedule="linear", max_steps=10_000, warmup_steps=10, max_minutes=1.0)
    budget = Budget(cfg)
    factor = learning_rate_schedule(cfg, budget)
    budget.seconds = 30.0
    assert factor(20) == pytest.approx(0.5, abs=1e-3)
    budget.seconds = 60.0
    assert factor(21) == 0.0 and budget.out_of_time


def test_inverse_sqrt_schedule_is_unchanged():
    cfg = TrainConfig(max_steps=100, warmup_steps=4)
    factor = learning_rate_schedule(cfg, Budget(cfg))
    assert factor(2) == pytest.approx(0.5)
    assert factor(16) == pytest.approx(0.5)


def test_unknown_schedule_is_rejected():
    with pytest.raises(ValueError, match="schedule"):
        TrainConfig(schedule="cosine")


# ---------------------------------------------------------------- word dropout


def test_word_dropout_replaces_the_asked_share_of_real_pieces_only():
    torch.manual_seed(0)
    source = torch.randint(4, 100, (200, 50))
    source[:, -5:] = PAD
    source[:, -6] = EOS
    dropped = drop_words(source, 0.25, UNK, EOS)
    real = source > EOS
    share = ((dropped == UNK) & real).sum().item() / real.sum().item()
    assert share == pytest.approx(0.25, abs=0.02)
    assert torch.equal(dropped[~real], source[~real])  # padding and EOS untouched
    assert torch.equal(dropped[dropped != UNK], source[dropped != UNK])
    assert torch.equal(drop_words(source, 0.0, UNK, EOS), source)


# ---------------------------------------------------------------- checkpoint averaging


def test_averaged_weights_are_the_mean_of_their_inputs():
    states = [{"w": torch.full((2, 3), float(i)), "b": torch.tensor([i * 2.0])}
              for i in (1, 2, 6)]
    averaged = average_weights(states)
    assert torch.equal(averaged["w"], torch.full((2, 3), 3.0))
    assert torch.equal(averaged["b"], torch.tensor([6.0]))


# ---------------------------------------------------------------- dropout rates


def test_attention_and_activation_dropout_default_to_dropout_and_can_differ():
    config = ModelConfig(dropout=0.3, attention_dropout=0.0, activation_dropout=0.1,
                         source_vocab_size=20, target_vocab_size=20)
    model = Transformer(config)
    layer = model.decoder_layers[0]
    assert layer.cross_attention.dropout == 0.0 and layer.self_attention.dropout == 0.0
    assert layer.feed_forward.net[2].p == 0.1
    assert layer.feed_forward_residual.dropout.p == 0.3
    plain = Transformer(ModelConfig(dropout=0.2, source_vocab_size=20, target_vocab_size=20))
    assert plain.encoder_layers[0].self_attention.dropout == 0.2
    with pytest.raises(ValueError, match="attention_dropout"):
        ModelConfig(attention_dropout=1.5)


# ---------------------------------------------------------------- guided alignment


def test_alignment_targets_from_piece_links_by_hand():
    # target piece 0 is linked to source pieces 0 and 1, target piece 2 to source piece 3;
    # target piece 1 has no link, and the second pair has none at all
    targets = alignment_targets([[(0, 0), (1, 0), (3, 2)], None], target_len=4, source_len=5)
    expected = torch.zeros(2, 4, 5)
    expected[0, 0, 0] = expected[0, 0, 1] = 0.5
    expected[0, 2, 3] = 1.0
    assert torch.equal(targets, expected)


def test_alignment_loss_is_zero_at_the_link_distribution_and_positive_elsewhere():
    targets = alignment_targets([[(0, 0), (1, 0), (2, 1)]], target_len=3, source_len=3)
    exact = targets.clone()
    exact[0, 2] = torch.tensor([0.2, 0.3, 0.5])  # a row without links may be anything
    attention = exact[:, None].expand(1, 8, 3, 3)  # every head the same
    assert alignment_loss(attention, targets).item() == pytest.approx(0.0, abs=1e-6)
    blurred = torch.full((1, 8, 3, 3), 1 / 3)
    assert alignment_loss(blurred, targets).item() > 0.1
    one_head = torch.full((1, 8, 3, 3), 1 / 3)
    one_head[:, 5] = exact
    assert alignment_loss(one_head, targets, head=5).item() == pytest.approx(0.0, abs=1e-6)
    assert alignment_loss(one_head, targets, head=-1).item() > 0.0


def two_layer_model() -> Transformer:
    """A random 2+2-layer model, small enough for hand-made batches."""
    torch.manual_seed(0)
    return Transformer(ModelConfig(d_model=16, heads=2, layers=2, d_ff=32, dropout=0.0,
                                   source_vocab_size=30, target_vocab_size=30)).eval()


def test_forward_returns_the_asked_layers_cross_attention():
    model = two_layer_model()
    source = torch.randint(4, 30, (2, 5))
    target = torch.randint(4, 30, (2, 4))
    logits, attention = model(source, target, attention_layer=-2)
    memory, mask = model.encode(source)
    full = model.decode(target, memory, mask, need_weights=True)
    assert torch.allclose(logits, full.logits, atol=1e-6)
    assert torch.allclose(attention, full.cross_attention[0], atol=1e-6)
    assert torch.allclose(model(source, target), logits, atol=1e-6)


def test_full_context_alignment_sees_the_whole_target_and_leaves_the_logits_alone():
    model = two_layer_model()
    source = torch.randint(4, 30, (2, 5))
    target = torch.randint(4, 30, (2, 4))
    logits, attention = model(source, target, attention_layer=-2, full_context_alignment=True)
    memory, mask = model.encode(source)
    unmasked = model.decode(target, memory, mask, need_weights=True, full_context=True)
    assert torch.allclose(attention, unmasked.cross_attention[0], atol=1e-6)  # one view
    assert torch.allclose(logits, model(source, target), atol=1e-6)  # prediction stays causal
    # the first row changes when only the last target piece does: it sees the future ...
    changed = target.clone()
    changed[:, -1] = (changed[:, -1] + 1 - 4) % 26 + 4
    _, attention_changed = model(source, changed, attention_layer=-2,
                                 full_context_alignment=True)
    assert not torch.allclose(attention[:, :, 0], attention_changed[:, :, 0], atol=1e-4)
    # ... which the causal pass, the control, does not
    _, causal = model(source, target, attention_layer=-2)
    _, causal_changed = model(source, changed, attention_layer=-2)
    assert torch.allclose(causal[:, :, 0], causal_changed[:, :, 0], atol=1e-6)


@pytest.mark.parametrize("full_context", [False, True])
def test_the_guided_loss_supervises_the_pass_the_config_names(full_context):
    model = two_layer_model()
    batch = make_batch([[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14]], PAD, BOS, EOS)
    batch.alignment = alignment_targets([[(0, 0), (1, 1)], [(1, 0), (0, 2)]], 4, 4)
    cfg = TrainConfig(alignment_weight=0.5, alignment_full_context=full_context,
                      label_smoothing=0.0)
    tokenizer = SimpleNamespace(pad_id=PAD, unk_id=UNK, eos_id=EOS)
    loss = batch_loss(model, batch, tokenizer, cfg, torch.device("cpu"), "fp32")
    memory, mask = model.encode(batch.source)
    logits = model.decode(batch.target_input, memory, mask).logits  # always causal
    attention = model.decode(batch.target_input, memory, mask, need_weights=True,
                             full_context=full_context).cross_attention[0]
    expected = (token_loss(logits, batch.target_output, PAD, 0.0)
                + 0.5 * alignment_loss(attention, batch.alignment))
    assert torch.allclose(loss, expected / batch.num_target_tokens, atol=1e-6)


def test_embedded_corpus_links_cover_every_train_pair():
    links = load_train_links(DataConfig())
    assert len(links) > 6000
    hindi, english = next(iter(links))
    assert all(i < len(hindi.split()) and j < len(english.split()) for i, j in links[(hindi,
                                                                                     english)])


def test_links_from_a_users_pharaoh_file(tmp_path):
    (tmp_path / "train.tsv").write_text("राजेश  घर गया\tRajesh went home\nनमस्ते\tHello\n",
                                        encoding="utf-8")
    (tmp_path / "train.align").write_text("0-0 1-2 2-1\n0-0\n", encoding="utf-8")
    cfg = DataConfig(source="files", train_path=str(tmp_path / "train.tsv"),
                     train_alignment_path=str(tmp_path / "train.align"))
    links = load_train_links(cfg)
    assert links[(normalize("राजेश  घर गया"), "Rajesh went home")] == [(0, 0), (1, 2), (2, 1)]
    assert links[("नमस्ते", "Hello")] == [(0, 0)]
    (tmp_path / "train.align").write_text("0-0 1-7\n0-0\n", encoding="utf-8")
    with pytest.raises(LinksError, match="line 1"):
        load_train_links(cfg)


def test_without_eflomal_a_users_data_trains_unguided_and_says_so(tmp_path, monkeypatch,
                                                                  capsys):
    """The README's own-data path with the default recipe (guided alignment on) and no
    eflomal: the run goes on without guided alignment, says what that costs and how to get it
    back, and its config says alignment_weight 0, as it trains."""
    def missing(*args, **kwargs):
        raise AlignerMissingError("the eflomal word aligner is not installed; install it with "
                                  "pip install -e '.[align]' (or give a Pharaoh file of links "
                                  "instead)")

    monkeypatch.setattr(guided, "run_eflomal", missing)
    rows = read_split("train")[:400]
    (tmp_path / "train.tsv").write_text("".join(f"{h}\t{e}\n" for h, e, _ in rows),
                                        encoding="utf-8")
    with pytest.raises(AlignerMissingError):
        guided.eflomal_links([(h, e) for h, e, _ in rows])
    config = load_config(ROOT / "configs" / "smoke.yaml", [
        "data.source=files", f"data.train_path={tmp_path / 'train.tsv'}",
        "train.alignment_weight=0.5", f"train.output_dir={tmp_path / 'runs'}"])
    run = build_run(config, RunDir.new(tmp_path / "runs"))
    assert run.config.train.alignment_weight == 0.0 and run.train_data.piece_links is None
    err = capsys.readouterr().err
    assert "guided alignment is off for this run: the eflomal word aligner is not installed" in err
    assert "pip install -e '.[align]'" in err


def fake_eflomal(calls):
    """run_eflomal's stand-in: word i of each side linked to word i, the rows remembered."""
    def align(hindi, english, *args, **kwargs):
        calls.append(list(zip(hindi, english)))
        return [[(i, i) for i in range(min(len(h.split()), len(e.split())))]
                for h, e in zip(hindi, english)]
    return align


def test_own_data_is_aligned_once_over_its_clean_pairs_and_the_links_are_cached(
        tmp_path, monkeypatch):
    """eflomal runs on the clean, de-duplicated pairs (not the raw rows), once: a second run
    (and a resume) reads the piece links back from the cache as arrays; a damaged entry is
    rebuilt."""
    calls = []
    monkeypatch.setattr(guided, "run_eflomal", fake_eflomal(calls))
    rows = read_split("train")[:300]
    lines = "".join(f"{h}\t{e}\n" for h, e, _ in rows)
    (tmp_path / "train.tsv").write_text(lines + lines[: lines.index("\n") + 1],  # a duplicate
                                        encoding="utf-8")
    overrides = ["data.source=files", f"data.train_path={tmp_path / 'train.tsv'}",
                 "train.alignment_weight=0.5", f"train.output_dir={tmp_path / 'runs'}"]
    config = load_config(ROOT / "configs" / "smoke.yaml", overrides)
    first = build_run(config, RunDir.new(tmp_path / "runs"))
    assert len(calls) == 1 and len(calls[0]) == len(first.train_data.pairs) < 301
    assert calls[0][0] == (first.train_data.pairs[0].source, first.train_data.pairs[0].target)
    links = first.train_data.piece_links
    assert links.linked == len(first.train_data.pairs)
    batch = first.train_data.batch([0, 1], first.tokenizer, torch.device("cpu"))
    assert batch.alignment is not None and batch.alignment.sum() > 0

    second = build_run(config, RunDir.new(tmp_path / "runs"))
    assert len(calls) == 1  # from the cache
    assert [second.train_data.piece_links[i] for i in range(20)] == \
        [links[i] for i in range(20)]
    entry = next((tmp_path / "runs" / "cache").glob("links-*"))
    np.save(entry / "link_offsets.npy", np.zeros(3, dtype=np.int64))  # damaged
    with pytest.warns(UserWarning, match="damaged"):
        build_run(config, RunDir.new(tmp_path / "runs"))
    assert len(calls) == 2
    # other data: other ids, other links (the old entry stays for the old data)
    (tmp_path / "train.tsv").write_text(lines, encoding="utf-8")
    build_run(config, RunDir.new(tmp_path / "runs"))
    assert len(calls) == 3 and len(list((tmp_path / "runs" / "cache").glob("links-*"))) == 2


def test_both_directions_align_each_hindi_english_pair_once(monkeypatch):
    calls = []
    monkeypatch.setattr(guided, "run_eflomal", fake_eflomal(calls))
    pairs = [Pair("<2en> राम घर गया", "Ram went home"), Pair("<2hi> Ram went home", "राम घर गया"),
             Pair("<2en> नमस्ते", "Hello")]
    config = load_config(None, ["data.source=files", "data.train_path=x.tsv",
                                "data.direction=both"])
    links = pair_word_links(config, pairs)
    assert calls == [[("राम घर गया", "Ram went home"), ("नमस्ते", "Hello")]]
    assert links == [[(0, 0), (1, 1), (2, 2)], [(0, 0), (1, 1), (2, 2)], [(0, 0)]]


def test_shift_reading_takes_each_words_row_one_step_later():
    from_pieces = ["▁a", "▁b"], ["▁x", "▁y"]
    attention = torch.zeros(1, 1, 3, 3)  # [layers, heads, T+1, S+1]
    attention[0, 0, 0] = torch.tensor([0.9, 0.1, 0.0])  # predicts x, looks at a
    attention[0, 0, 1] = torch.tensor([0.1, 0.9, 0.0])  # reads x (predicts y), looks at b
    attention[0, 0, 2] = torch.tensor([0.8, 0.2, 0.0])  # reads y (predicts EOS), looks at a
    plain = word_alignment(attention, *from_pieces, layer=0)
    shift = word_alignment(attention, *from_pieces, layer=0, shift=True)
    assert hard_links(plain.weights) == [(0, 0), (1, 1)]
    assert hard_links(shift.weights) == [(0, 1), (1, 0)]  # x → b, y → a


# pieces by hand: a tag, Hindi राम घर गया (गया in two pieces), English Ram went home (went in two)
PIECES = {10: "<2en>", 11: "<2hi>", 20: "▁राम", 21: "▁घर", 22: "▁ग", 23: "या", 30: "▁Ram",
          31: "▁we", 32: "nt", 33: "▁home"}
HINDI_IDS, ENGLISH_IDS = [20, 21, 22, 23], [30, 31, 32, 33]


class HandPieces:
    """The two methods of a Tokenizer that `pair_piece_links` reads."""

    def source_pieces(self, ids):
        return [PIECES[i] for i in ids]

    target_pieces = source_pieces


def hand_split(pairs, sources, targets) -> EncodedSplit:
    def side(rows):
        offsets = np.cumsum([0] + [len(row) for row in rows]).astype(np.int64)
        return np.array([i for row in rows for i in row], dtype=np.uint16), offsets

    return EncodedSplit(pairs, EncodedCorpus(*side(sources), *side(targets)))


def test_guided_alignment_of_both_directions_counts_the_tag_and_swaps_the_links():
    """A tagged source's word pieces stand one piece further on (the tag is piece 0, linked to
    nothing), and the en→hi copy of a pair aligns by its swapped Hindi-first links."""
    hindi, english = "राम घर गया", "Ram went home"
    links = {(hindi, english): [(0, 0), (1, 2), (2, 1)]}  # राम-Ram, घर-home, गया-went
    split = hand_split([Pair(f"<2en> {hindi}", english), Pair(f"<2hi> {english}", hindi)],
                       [[10, *HINDI_IDS], [11, *ENGLISH_IDS]], [ENGLISH_IDS, HINDI_IDS])
    word_links = [links[(hindi, english)]] * 2  # both copies: the Hindi-first links
    hi_en, en_hi = pair_piece_links(split.ids, HandPieces(), word_links, "both")
    # राम(1)-▁Ram(0), घर(2)-▁home(3), ▁ग(3) and या(4) - ▁we(1) and nt(2)
    assert hi_en == [(1, 0), (2, 3), (3, 1), (3, 2), (4, 1), (4, 2)]
    # ▁Ram(1)-राम(0), ▁we(2) and nt(3) - ▁ग(2) and या(3), ▁home(4)-घर(1)
    assert en_hi == [(1, 0), (2, 2), (2, 3), (3, 2), (3, 3), (4, 1)]
    untagged = hand_split([Pair(hindi, english)], [HINDI_IDS], [ENGLISH_IDS])
    assert [(s + 1, t) for s, t in pair_piece_links(untagged.ids, HandPieces(), word_links[:1],
                                                    "hi-en")[0]] == hi_en
    # the targets of the hi→en copy: [target pieces + EOS, tag + source pieces + EOS]
    targets = alignment_targets([hi_en], target_len=5, source_len=6)[0]
    expected = torch.zeros(5, 6)
    expected[0, 1] = 1.0  # ▁Ram → राम
    expected[1, 3] = expected[1, 4] = expected[2, 3] = expected[2, 4] = 0.5  # ▁we, nt → गया
    expected[3, 2] = 1.0  # ▁home → घर
    assert torch.equal(targets, expected) and targets[:, 0].sum() == 0  # nothing on the tag


def test_a_full_context_run_draws_the_full_context_pass_and_says_so(tiny_run, tmp_path):
    from translator.alignment import describe_view
    from translator.translate import Translator
    translator = Translator.from_run(tiny_run, device="cpu")
    text = "राजेश ने टिकट बुक की"
    searched = translator.translate([text], beam_size=1)[0]
    translator.config.train.alignment_full_context = True
    unmasked = translator.translate([text], beam_size=1)[0]
    assert unmasked.tokens == searched.tokens  # the search is the same ...
    source = translator.tokenizer.encode_source(text)
    memory, mask = translator.model.encode(torch.tensor([source + [EOS]]))
    target = torch.tensor([[BOS, *unmasked.tokens]])
    expected = translator.model.decode(target, memory, mask, need_weights=True,
                                       full_context=True).cross_attention
    # ... its attention is the unmasked pass over the output, every layer
    assert torch.allclose(unmasked.attention, torch.stack(expected, 1)[0], atol=1e-5)
    assert not torch.allclose(unmasked.attention, searched.attention, atol=1e-4)
    assert describe_view(unmasked.attention, full_context=True).endswith(
        ", full target context")


def test_precision_probe_times_both_and_leaves_the_run_as_it_was(tmp_path, monkeypatch):
    """precision auto on a CPU with native bf16: the probe times fp32 and bf16 on training
    batches, takes one, says why, keeps it in the config, and leaves weights, gradients, the
    next batch and the random streams exactly as a run without the probe has them."""
    import translator.build as build
    import translator.device as device
    from translator.dropout import dropout_state

    monkeypatch.setattr(device, "native_bf16_flags", lambda: ["avx512_bf16"])
    monkeypatch.setattr(build, "native_bf16_flags", lambda: ["avx512_bf16"])
    runs, streams = [], []
    for precision in ("probe", "fp32"):
        config = load_config(ROOT / "configs" / "smoke.yaml", [
            f"train.precision={precision}", f"train.output_dir={tmp_path / precision}",
            "model.dropout=0.1", "train.word_dropout=0.1"])  # the probe draws from both streams
        runs.append(build_run(config, RunDir.new(tmp_path / precision)))
        streams.append((torch.get_rng_state(), dropout_state()["state"]))
    probed, forced = runs
    assert probed.precision in ("fp32", "bf16")
    assert probed.config.train.precision == probed.precision
    assert "bf16 timed" in probed.precision_reason and "avx512_bf16" in probed.precision_reason
    assert forced.precision_reason == "set by train.precision"
    assert probed.budget.seconds > 0 and forced.budget.seconds == 0
    for name, weight in probed.model.state_dict().items():
        assert torch.equal(weight, forced.model.state_dict()[name]), name
    assert all(p.grad is None for p in probed.model.parameters())
    assert probed.sampler.state_dict() == forced.sampler.state_dict()
    assert next(iter(probed.sampler)) == next(iter(forced.sampler))
    assert torch.equal(streams[0][0], streams[1][0]) and streams[0][1] == streams[1][1]
