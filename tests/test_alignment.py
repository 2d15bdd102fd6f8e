"""Alignment: pieces merged to words, layer/head selection, hard links, AER, Pharaoh files,
attention extraction from a (tiny, untrained) model, and the align command end to end."""

import types

import pytest
import torch

from translator.alignment import (
    DEFAULT_LAYER,
    EOS_LABEL,
    AlignmentError,
    align_pairs,
    alignment_error_rate,
    attribution_matrix,
    attribution_words,
    hard_links,
    merge_to_words,
    piece_words,
    resolve_layer,
    select_attention,
    teacher_forced_attentions,
    translation_attribution,
)
from translator.cli import align_main
from translator.config import SearchConfig
from translator.links import LinksError, format_line, read_pharaoh
from translator.model import ModelConfig, Transformer
from translator.translate import Translator, translate

# Two source words in three pieces, two target words in three pieces.
SOURCE_PIECES = ["▁टि", "कट", "▁शाम"]  # टिकट (pieces 0, 1), शाम (piece 2)
TARGET_PIECES = ["▁tick", "et", "▁evening"]  # ticket (pieces 0, 1), evening (piece 2)
# rows: tick, et, evening, EOS step; columns: टि, कट, शाम, source EOS. Each row sums to 1.
PIECE_WEIGHTS = torch.tensor([
    [0.5, 0.2, 0.1, 0.2],
    [0.1, 0.5, 0.0, 0.4],
    [0.0, 0.1, 0.6, 0.3],
    [0.1, 0.1, 0.1, 0.7],
])


# ---------------------------------------------------------------- pieces → words


def test_piece_words_groups_pieces_and_decodes_bytes():
    pieces = ["▁", "रा", "जेश", "▁ने", "▁", "<0xE2>", "<0x82>", "<0xAC>", "5", "▁ok"]
    words, word_of_piece = piece_words(pieces)
    assert words == ["राजेश", "ने", "€5", "ok"]
    assert word_of_piece == [0, 0, 0, 1, 2, 2, 2, 2, 2, 3]


def test_merge_to_words_hand_example():
    merged = merge_to_words(PIECE_WEIGHTS, SOURCE_PIECES, TARGET_PIECES)
    assert merged.source_words == ["टिकट", "शाम"]
    assert merged.target_words == ["ticket", "evening"]
    # ticket = mean of rows tick, et: [0.3, 0.35, 0.05 | EOS 0.3]; columns summed over pieces:
    # टिकट 0.3 + 0.35 = 0.65, शाम 0.05; EOS dropped and the row renormalised by 0.7.
    # evening: टिकट 0.0 + 0.1, शाम 0.6, renormalised by 0.7.
    expected = torch.tensor([[0.65 / 0.7, 0.05 / 0.7], [0.1 / 0.7, 0.6 / 0.7]])
    assert torch.allclose(merged.weights, expected)
    assert torch.allclose(merged.weights.sum(1), torch.ones(2))
    assert hard_links(merged.weights) == [(0, 0), (1, 1)]  # ticket→टिकट, evening→शाम


def test_merge_to_words_can_keep_eos_apart():
    merged = merge_to_words(PIECE_WEIGHTS, SOURCE_PIECES, TARGET_PIECES, eos="keep")
    assert merged.source_words == ["टिकट", "शाम", EOS_LABEL]
    assert merged.target_words == ["ticket", "evening", EOS_LABEL]
    assert merged.eos_kept
    assert torch.allclose(merged.weights.sum(1), torch.ones(3))
    assert torch.allclose(merged.weights[0], torch.tensor([0.65, 0.05, 0.3]))
    assert torch.allclose(merged.weights[2], torch.tensor([0.2, 0.1, 0.7]))


def test_merge_to_words_shapes():
    # no EOS step (the output hit the length limit) and batch padding columns are fine
    padded = torch.cat([PIECE_WEIGHTS[:3], torch.zeros(3, 2)], dim=1)
    assert merge_to_words(padded, SOURCE_PIECES, TARGET_PIECES).weights.shape == (2, 2)
    with pytest.raises(ValueError, match="do not fit"):
        merge_to_words(PIECE_WEIGHTS[:, :3], SOURCE_PIECES, TARGET_PIECES)
    everything_on_eos = torch.tensor([[0.0, 0.0, 0.0, 1.0]] * 4)
    merged = merge_to_words(everything_on_eos, SOURCE_PIECES, TARGET_PIECES)
    assert merged.weights.sum() == 0 and hard_links(merged.weights) == []


# ---------------------------------------------------------------- choosing a view


def test_select_attention_layers_and_heads():
    attention = torch.rand(3, 4, 5, 6).softmax(-1)
    default = resolve_layer(None, 3)
    assert default == DEFAULT_LAYER % 3
    assert torch.allclose(select_attention(attention), attention[default].mean(0))
    assert torch.allclose(select_attention(attention, 0, [1, 3]),
                          (attention[0, 1] + attention[0, 3]) / 2)
    assert torch.allclose(select_attention(attention, -1).sum(-1), torch.ones(5))
    assert resolve_layer(None, 1) == 0  # a model shallower than the default index
    with pytest.raises(AlignmentError, match="layer 3"):
        select_attention(attention, 3)
    with pytest.raises(AlignmentError, match="heads"):
        select_attention(attention, 0, [4])


def test_hard_links_argmax_and_threshold():
    weights = torch.tensor([[0.7, 0.2, 0.1], [0.0, 0.0, 0.0], [0.3, 0.3, 0.4]])
    assert hard_links(weights) == [(0, 0), (2, 2)]
    assert hard_links(weights, threshold=0.3) == [(0, 0), (0, 2), (1, 2), (2, 2)]


# ---------------------------------------------------------------- AER and Pharaoh files


def test_alignment_error_rate_matches_hand_computation():
    predicted = [[(0, 0), (1, 1), (2, 1)]]
    gold = [[(0, 0), (1, 1), (2, 2), (3, 3)]]
    # |A∩G| = 2, |A| = 3, |G| = 4: AER = 1 − 4/7
    assert alignment_error_rate(predicted, gold) == pytest.approx(3 / 7)
    # summed over sentences, not averaged: + |A∩G| 1, |A| 1, |G| 1
    assert alignment_error_rate(predicted + [[(0, 0)]], gold + [[(0, 0)]]) == pytest.approx(
        1 - 2 * 3 / 9)
    assert alignment_error_rate([[(0, 1)]], [[(1, 0)]]) == 1.0
    assert alignment_error_rate(gold, gold) == 0.0
    with pytest.raises(AlignmentError, match="1 predicted"):
        alignment_error_rate(predicted, gold + gold)


def test_pharaoh_round_trip_and_direction(tmp_path):
    """Gold links for AER are read by the one Pharaoh reader, translator.links."""
    path = tmp_path / "gold.pharaoh"
    path.write_text("0-1 2-0\n\n1-1\n")
    counts = ([3, 1, 2], [3, 1, 3])
    assert read_pharaoh(path, *counts) == [[(0, 1), (2, 0)], [], [(1, 1)]]
    assert read_pharaoh(path, *counts, reverse=True) == [[(0, 2), (1, 0)], [], [(1, 1)]]
    assert format_line([(2, 0), (0, 1)]) == "0-1 2-0"
    path.write_text("0-1 2:0\n")
    with pytest.raises(LinksError, match="line 1"):
        read_pharaoh(path, [3], [3])


# ---------------------------------------------------------------- a model


SENTENCES = [("राजेश ने टिकट बुक की", "Rajesh booked a ticket"),
             ("कल शाम ट्रेन आई", "the train came yesterday evening"),
             ("मुंबई की ट्रेन", "the train to Mumbai")]


@pytest.fixture(scope="module")
def tiny(fitted_run):
    """The fitted tiny run of conftest (two layers, 64 positions), its model and tokenizer."""
    translator = Translator.from_run(fitted_run, device="cpu")
    return translator.model, translator.tokenizer, fitted_run


def heads_of(model) -> tuple[int, int]:
    return model.config.num_decoder_layers, model.config.heads


def test_teacher_forced_attention_shape(tiny):
    model, tokenizer, _ = tiny
    [(attention, source_pieces, target_pieces)] = teacher_forced_attentions(
        model, tokenizer, [SENTENCES[0]])
    assert attention.shape == (*heads_of(model), len(target_pieces) + 1,
                               len(source_pieces) + 1)
    assert torch.allclose(attention.sum(-1), torch.ones(attention.shape[:3]), atol=1e-5)
    words = merge_to_words(attention[0, 0], source_pieces, target_pieces)
    assert words.source_words == SENTENCES[0][0].split()
    assert words.target_words == SENTENCES[0][1].split()
    with pytest.raises(AlignmentError, match="empty"):
        teacher_forced_attentions(model, tokenizer, [(" ", "hello")])


def test_batched_forced_alignment_equals_one_at_a_time(tiny):
    model, tokenizer, _ = tiny
    batched = align_pairs(model, tokenizer, SENTENCES + [("", "empty")], layer=0)
    for pair, links in zip(SENTENCES, batched):
        [(attention, source_pieces, target_pieces)] = teacher_forced_attentions(
            model, tokenizer, [pair])
        alone = merge_to_words(select_attention(attention, 0), source_pieces, target_pieces)
        assert links == hard_links(alone.weights)
        assert len(links) == len(pair[1].split())  # one link per target word
    assert batched[-1] == []


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_translations_attention_has_an_eos_row_and_rows_that_are_distributions(tiny,
                                                                                 beam_size):
    model, tokenizer, _ = tiny
    result = translate(model, tokenizer, [SENTENCES[2][0]], SearchConfig(beam_size=beam_size))[0]
    attention, target_pieces = result.attention, result.target_pieces
    assert result.source_pieces == tokenizer.source_pieces(
        tokenizer.encode_source(SENTENCES[2][0]))
    # every output has its EOS row, as search.py promises; every row is a distribution
    assert attention.shape == (*heads_of(model), len(target_pieces) + 1,
                               len(result.source_pieces) + 1)
    assert torch.allclose(attention.sum(-1), torch.ones(attention.shape[:3]), atol=1e-5)


def test_a_long_inputs_attention_covers_all_its_parts(tiny):
    model, tokenizer, _ = tiny
    long_text = " ".join([SENTENCES[0][0]] * 20)  # more pieces than the 64 positions
    assert len(tokenizer.encode_source(long_text)) > model.config.max_positions
    result = translate(model, tokenizer, [long_text], SearchConfig(beam_size=2))[0]
    assert result.source_pieces == tokenizer.source_pieces(tokenizer.encode_source(long_text))
    assert result.attention.shape == (*heads_of(model), len(result.target_pieces) + 1,
                                      len(result.source_pieces) + 1)
    assert translate(model, tokenizer, ["  "])[0].attention is None  # nothing to attend to


def test_attention_that_follows_gold_links_scores_aer_zero(tiny):
    """End to end through real pieces: put each target piece's attention on the pieces of its
    gold source word, and the links come back exactly."""
    _, tokenizer, _ = tiny
    source, target = SENTENCES[0]  # राजेश ने टिकट बुक की / Rajesh booked a ticket
    gold = [(0, 0), (3, 1), (4, 2), (2, 3)]  # (source word, target word)
    source_pieces = tokenizer.source_pieces(tokenizer.encode_source(source))
    target_pieces = tokenizer.target_pieces(tokenizer.encode_target(target))
    _, source_word = piece_words(source_pieces)
    _, target_word = piece_words(target_pieces)
    weights = torch.zeros(len(target_pieces) + 1, len(source_pieces) + 1)
    weights[-1, -1] = 1
    for row, j in enumerate(target_word):
        i = dict((t, s) for s, t in gold)[j]
        columns = [c for c, word in enumerate(source_word) if word == i]
        weights[row, columns + [len(source_pieces)]] = 1 / (len(columns) + 1)
    links = hard_links(merge_to_words(weights, source_pieces, target_pieces).weights)
    assert links == sorted(gold)
    assert alignment_error_rate([links], [gold]) == 0.0


def test_align_command_prints_pharaoh_and_aer(tiny, tmp_path, capsys):
    _, _, run = tiny
    src, tgt, gold = tmp_path / "src.hi", tmp_path / "tgt.en", tmp_path / "gold.pharaoh"
    src.write_text("\n".join(s for s, _ in SENTENCES) + "\n", encoding="utf-8")
    tgt.write_text("\n".join(t for _, t in SENTENCES) + "\n", encoding="utf-8")
    gold.write_text("0-0 3-1\n0-1\n0-1 2-2\n")  # target word first, as WPT-05's en-hi file
    assert align_main(["--run", str(run), "--src", str(src), "--tgt", str(tgt), "--gold",
                       str(gold), "--gold-reversed"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 3
    predicted = [[tuple(map(int, link.split("-"))) for link in line.split()] for line in lines]
    for (source, target), links in zip(SENTENCES, predicted):
        assert all(i < len(source.split()) and j < len(target.split()) for i, j in links)
    counts = [len(s.split()) for s, _ in SENTENCES], [len(t.split()) for _, t in SENTENCES]
    expected = alignment_error_rate(predicted, read_pharaoh(gold, *counts, reverse=True))
    assert f"AER {expected:.4f}" in err


def test_align_command_bad_input_is_one_sentence(tiny, tmp_path, capsys):
    _, _, run = tiny
    src, tgt = tmp_path / "src.hi", tmp_path / "tgt.en"
    src.write_text("राजेश ने टिकट बुक की\nमुंबई\n", encoding="utf-8")
    tgt.write_text("Rajesh booked a ticket\n", encoding="utf-8")
    assert align_main(["--run", str(run), "--src", str(src), "--tgt", str(tgt)]) == 2
    assert "line-aligned" in capsys.readouterr().err
    assert align_main(["--run", str(tmp_path / "nothing"), "--src", str(src), "--tgt",
                       str(src)]) == 2
    assert "does not exist" in capsys.readouterr().err
    gold = tmp_path / "gold"
    gold.write_text("0-9\n0-0\n")
    assert align_main(["--run", str(run), "--src", str(src), "--tgt", str(src), "--gold",
                       str(gold)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "points past" in err and len(err.splitlines()) == 1


# ---------------------------------------------------------------- attribution

SPECIALS = types.SimpleNamespace(bos_id=2, eos_id=3)


@pytest.fixture(scope="module")
def double_model():
    """A tiny random model in float64, so that finite differences are exact enough."""
    torch.manual_seed(0)
    config = ModelConfig(d_model=16, heads=2, layers=2, d_ff=32, dropout=0.0,
                         source_vocab_size=30, target_vocab_size=30, pad_id=0,
                         max_positions=32)
    return Transformer(config).double().eval()


def log_prob_with_embeddings_scaled(model, source_ids, target_ids, t, pieces, factor):
    """log p(target piece t) when the token embeddings of source ``pieces`` are × ``factor``
    (the position signal untouched)."""
    source = torch.tensor([source_ids + [SPECIALS.eos_id]])
    target = torch.tensor([[SPECIALS.bos_id, *target_ids, SPECIALS.eos_id]])
    tokens = model.source_embeddings.tokens(source) * model.source_embeddings.scale

    def scale(module, inputs, output):
        changed = output.clone()
        changed[0, pieces] += (factor - 1) * tokens[0, pieces]
        return changed

    handle = model.source_embeddings.register_forward_hook(scale)
    with torch.no_grad():
        memory, mask = model.encode(source)
    handle.remove()
    with torch.no_grad():
        logits = model.decode(target[:, :-1], memory, mask).logits
    return logits.log_softmax(-1)[0, t, target[0, t + 1]].item()


SOURCE_IDS, TARGET_IDS = [5, 9, 14, 7], [11, 4, 20]


def test_input_times_gradient_equals_a_finite_difference(double_model):
    matrix = attribution_matrix(double_model, SPECIALS, SOURCE_IDS, TARGET_IDS)
    assert matrix.shape == (len(TARGET_IDS) + 1, len(SOURCE_IDS) + 1)
    epsilon = 1e-5
    for t in range(len(TARGET_IDS) + 1):
        for s in range(len(SOURCE_IDS) + 1):
            up, down = (log_prob_with_embeddings_scaled(double_model, SOURCE_IDS, TARGET_IDS,
                                                        t, [s], 1 + sign * epsilon)
                        for sign in (1, -1))
            assert matrix[t, s].item() == pytest.approx((up - down) / (2 * epsilon),
                                                        rel=1e-4, abs=1e-7)


def test_integrated_gradients_add_up_to_the_change_from_zero_embeddings(double_model):
    matrix = attribution_matrix(double_model, SPECIALS, SOURCE_IDS, TARGET_IDS, steps=100)
    every = list(range(len(SOURCE_IDS) + 1))
    for t in range(len(TARGET_IDS) + 1):
        full, zero = (log_prob_with_embeddings_scaled(double_model, SOURCE_IDS, TARGET_IDS, t,
                                                      every, factor) for factor in (1.0, 0.0))
        assert matrix[t].sum().item() == pytest.approx(full - zero, rel=0.02, abs=1e-3)


def test_a_translations_attribution_has_word_rows_that_sum_to_one(tiny):
    model, tokenizer, _ = tiny
    for beam in (1, 3):
        result = translate(model, tokenizer, [SENTENCES[0][0], SENTENCES[2][0]],
                           SearchConfig(beam_size=beam), need_attention=False)
        for t in result:
            words = translation_attribution(model, tokenizer, t)
            attention_words = piece_words(t.target_pieces)[0]
            assert words.target_words == attention_words
            assert words.source_words == t.source.split()
            assert torch.allclose(words.weights.sum(1), torch.ones(len(attention_words)),
                                  atol=1e-5)
            assert (words.weights >= 0).all()


def test_attribution_words_sum_pieces_before_taking_magnitudes():
    signed = torch.tensor([[0.3, -0.2, 0.1, 9.0],   # tick: टि +0.3, कट -0.2, शाम +0.1
                           [0.1, 0.4, -0.3, 9.0],   # et
                           [0.0, 0.0, -0.5, 9.0],   # evening
                           [9.0, 9.0, 9.0, 9.0]])   # the EOS row and column are dropped
    words = attribution_words(signed, SOURCE_PIECES, TARGET_PIECES)
    # ticket: टिकट 0.3 - 0.2 + 0.1 + 0.4 = 0.6, शाम 0.1 - 0.3 = -0.2 → 0.75, 0.25
    assert words.weights.flatten().tolist() == pytest.approx([0.75, 0.25, 0.0, 1.0])
