"""What searches refuse to repeat (translator.search.RepetitionBans): the bans by hand, no
banned repetition in any greedy or beam output of a random model that repeats without them,
and the run's config keys reaching translate.py, where flags change them; the same for beam
search's length penalty."""

import json

import pytest
import torch

from translator.cli import translate_main
from translator.config import ConfigError, SearchConfig, load_config
from translator.search import (
    DoubledWords,
    RepetitionBans,
    ban_doubled_words,
    ban_repeated_ngrams,
    beam_search,
    greedy_search,
)
from translator.translate import Translator

PAD, BOS, EOS, VOCAB = 0, 2, 3, 12
INF = float("-inf")

pytestmark = pytest.mark.usefixtures("one_thread")


def banned(log_probs: torch.Tensor) -> list[list[int]]:
    return [row.isinf().nonzero().flatten().tolist() for row in log_probs]


def test_a_repeated_ngram_bans_only_the_token_that_would_repeat_it():
    generated = torch.tensor([[BOS, 5, 6, 7, 5, 6]])
    log_probs = torch.zeros(1, VOCAB)
    assert banned(ban_repeated_ngrams(log_probs, generated, 3)) == [[7]]  # 5 6 7 again
    assert banned(ban_repeated_ngrams(log_probs, generated, 2)) == [[7]]  # 6 7 again
    assert banned(ban_repeated_ngrams(log_probs, generated, 1)) == [[5, 6, 7]]
    assert banned(ban_repeated_ngrams(log_probs, generated, 4)) == [[]]  # 7 5 6 ? is new
    assert banned(ban_repeated_ngrams(log_probs, generated, 0)) == [[]]
    assert banned(ban_repeated_ngrams(log_probs, generated[:, :3], 3)) == [[]]  # too short


def test_every_ngram_that_starts_like_the_newest_pieces_bans_its_end():
    # 5 was followed by 6, then by 7: after a third 5, both are banned, whatever the order
    generated = torch.tensor([[BOS, 5, 6, 5, 7, 5], [BOS, 5, 7, 5, 6, 5]])
    assert banned(ban_repeated_ngrams(torch.zeros(2, VOCAB), generated, 2)) == [[6, 7]] * 2


# a toy target vocabulary: 4–11 as pieces, "▁" beginning a word
PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁red", "▁Red", "▁re", "d", "▁W", "at", "er", "▁water"]


def test_a_word_may_not_follow_itself_whatever_its_case_or_pieces():
    words = DoubledWords(PIECES)
    generated = torch.tensor([[BOS, 4, 9], [BOS, 4, 6], [BOS, 8, 9], [BOS, 8, 9], [BOS, 6, 7]])
    generated[3, 2] = 10  # "▁W er" is no word the vocabulary can double
    log_probs = torch.zeros(5, VOCAB)
    assert banned(ban_doubled_words(log_probs, generated, words)) == [
        [],      # "red at": "at" is no word of its own here
        [6, 7],  # "red re": "d" would make "red red", "▁re" "re re"
        [],      # "Wat": nothing before it
        [],      # "Wer"
        [4, 5],  # "red" (as "▁re d"): "▁red" and "▁Red" would double it
    ]
    water = torch.tensor([[BOS, 8, 9, 10, 8, 9]])  # "Water Wat": "er" would double it
    assert banned(ban_doubled_words(torch.zeros(1, VOCAB), water, words)) == [[10]]
    assert banned(ban_doubled_words(log_probs, generated, None)) == [[]] * 5
    assert banned(ban_doubled_words(log_probs, generated[:, :1], words)) == [[]] * 5


def repetitive_model():
    """A random model whose output prefers a few tokens, so that unbanned outputs repeat."""
    from translator.model import ModelConfig, Transformer
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, heads=4, layers=1, d_ff=64, dropout=0.0,
                         source_vocab_size=VOCAB, target_vocab_size=VOCAB, pad_id=PAD,
                         max_positions=64)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output_bias[[4, 5, 6]] += 3.0
        model.output_bias[EOS] -= 2.0  # long outputs
    return model


def ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def outputs(model, source, bans):
    found = [h.tokens for h in greedy_search(model, source, BOS, EOS, bans=bans)]
    found += [h.tokens for nbest in beam_search(model, source, BOS, EOS, 4, 4, bans=bans)
              for h in nbest]
    return found


@pytest.mark.parametrize("n", [2, 3])
def test_no_output_of_either_search_holds_a_banned_repetition(n):
    model = repetitive_model()
    generator = torch.Generator().manual_seed(1)
    source = torch.cat([torch.randint(4, VOCAB, (6, 9), generator=generator),
                        torch.full((6, 1), EOS)], dim=1)
    doubled = [t for t in outputs(model, source, None) if doubles_a_word(t)]
    repeated = [t for t in outputs(model, source, None)
                if len(set(ngrams(t, n))) < len(ngrams(t, n))]
    assert doubled and repeated  # without bans this model repeats: the check below can fail
    for tokens in outputs(model, source, RepetitionBans(n, DoubledWords(PIECES))):
        assert len(set(ngrams(tokens, n))) == len(ngrams(tokens, n)), tokens
        assert not doubles_a_word(tokens), tokens
        assert tokens  # the bans never leave a row without a token to write


def doubles_a_word(tokens: list[int]) -> bool:
    """Whether ``tokens`` (ids of PIECES, up to EOS) say a word twice in a row, case aside."""
    text = "".join(PIECES[t] for t in tokens if t != EOS)
    words = text.replace("▁", " ").lower().split()
    return any(a == b for a, b in zip(words, words[1:]))


def test_the_runs_search_keys_become_its_translators_bans(tiny_run):
    translator = Translator.from_run(tiny_run, device="cpu")
    tokenizer = translator.tokenizer
    pieces = tokenizer.target_pieces(list(range(tokenizer.target_vocab_size)))
    assert RepetitionBans.of(translator.search, pieces) is None  # the tiny run bans nothing
    bans = RepetitionBans.of(SearchConfig(no_repeat_ngram=3, no_doubled_words=True), pieces)
    assert bans.no_repeat_ngram == 3
    assert bans.doubled_words.begins_word == [p.startswith("▁") for p in pieces]
    assert any(bans.doubled_words.begins_word) and not all(bans.doubled_words.begins_word)
    translator.set_search(no_repeat_ngram=2)
    bans = RepetitionBans.of(translator.search, pieces)
    assert bans.no_repeat_ngram == 2 and bans.doubled_words is None


def test_translate_flags_change_the_bans_and_a_negative_n_is_one_sentence(tiny_run, capsys):
    assert translate_main(["--run", str(tiny_run), "--no-repeat-ngram", "-1", "कल"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: --no-repeat-ngram must be 0 (off) or more, not -1\n"

    def pieces(*flags: str) -> list[str]:
        assert translate_main(["--run", str(tiny_run), "--beam", "1", "--json", *flags,
                               "कल शाम को राजेश ने टिकट बुक की"]) == 0
        return json.loads(capsys.readouterr().out)["tokens"]

    unbanned = pieces("--no-repeat-ngram", "0", "--allow-doubled-words")
    assert len(set(unbanned)) < len(unbanned)  # the untrained model repeats itself
    once = pieces("--no-repeat-ngram", "1")  # n = 1: no piece twice
    assert once and len(set(once)) == len(once)


def test_a_larger_length_penalty_never_picks_a_shorter_translation():
    model = repetitive_model()
    generator = torch.Generator().manual_seed(2)
    source = torch.cat([torch.randint(4, VOCAB, (8, 7), generator=generator),
                        torch.full((8, 1), EOS)], dim=1)
    with torch.no_grad():
        model.output_bias[EOS] += 4.0  # outputs of many lengths, so the ranking matters
    lengths = {alpha: [len(nbest[0].tokens) for nbest in beam_search(
        model, source, BOS, EOS, 4, length_penalty=alpha, need_attention=False)]
        for alpha in (0.0, 1.0, 3.0)}
    assert lengths[0.0] != lengths[3.0]  # the penalty changes some choice here ...
    for shorter, longer in ((0.0, 1.0), (1.0, 3.0)):  # ... and only ever to a longer one
        assert all(a <= b for a, b in zip(lengths[shorter], lengths[longer]))


def test_the_runs_length_penalty_reaches_the_search_and_a_flag_changes_it(tiny_run, capsys,
                                                                         monkeypatch):
    import translator.decoders as translate_module
    seen = []
    search = translate_module.search_in_batches
    monkeypatch.setattr(translate_module, "search_in_batches",
                        lambda *args: seen.append(args[5].length_penalty) or search(*args))
    translator = Translator.from_run(tiny_run, device="cpu")
    translator.translate(["कल"], beam_size=2)
    translator.set_search(length_penalty=2.5)
    translator.translate(["कल"], beam_size=2)
    assert seen == [1.0, 2.5]
    assert translate_main(["--run", str(tiny_run), "--length-penalty", "-1", "कल"]) == 2
    assert capsys.readouterr().err == ("error: --length-penalty must be 0 (no penalty) or "
                                       "more, not -1.0\n")
    assert translate_main(["--run", str(tiny_run), "--length-penalty", "0.6", "कल"]) == 0
    assert seen[-1] == 0.6


def test_the_short_sources_alpha_flags_reach_the_search(tiny_run, capsys, monkeypatch):
    import translator.decoders as translate_module
    seen = []
    search = translate_module.search_in_batches
    monkeypatch.setattr(translate_module, "search_in_batches", lambda *args: seen.append(
        (args[5].short_source, args[5].short_length_penalty)) or search(*args))
    assert translate_main(["--run", str(tiny_run), "--short-source", "3",
                           "--short-length-penalty", "0.2", "कल"]) == 0
    assert seen == [(3, 0.2)]
    assert translate_main(["--run", str(tiny_run), "--short-source", "-1", "कल"]) == 2
    assert capsys.readouterr().err == "error: --short-source must be 0 (off) or more, not -1\n"


def test_a_negative_search_key_in_a_config_is_named_in_one_sentence(capsys):
    for key, least, shown in (("no_repeat_ngram", "0 (off)", "-1"),
                              ("length_penalty", "0 (no penalty)", "-1.0")):
        expected = f"search: {key} must be {least} or more, not {shown}"  # as its flag says
        with pytest.raises(ConfigError) as raised:
            load_config(None, [f"search.{key}=-1"])
        assert str(raised.value) == expected
        # the key's old place, under train:, is read into search: with a notice
        with pytest.raises(ConfigError) as raised:
            load_config(None, [f"train.{key}=-1"])
        assert str(raised.value) == expected
        assert f"train.{key}=-1 is read as search.{key}=-1" in capsys.readouterr().err
