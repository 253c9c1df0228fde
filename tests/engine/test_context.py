"""Long context for the decoding commands (engine/bench/context.py): the shipped document before every row, about N
tokens per row at the first decode step, shared as a prefix; `run|bench --context N` end to end on the tiny pair, and
one-line errors for a context the model or the document cannot hold."""

from __future__ import annotations

import pytest

from engine.bench import context
from engine.options import ConfigError


def test_the_shipped_document_is_real_prose_long_enough_for_4096_tokens(tokenizer):
    text = context.document()
    tokens = len(tokenizer(text, add_special_tokens=False).input_ids)
    assert tokens > 6000
    words = text.split()
    assert len(set(words)) > 1500 and text.count(". ") > 150  # sentences of a varied vocabulary, not repeated filler
    assert (context.CONTEXT_DIR / "README.md").read_text().count("CC0") == 1
    asked = context.questions(20)
    assert len(asked) == 20 and len(set(asked)) == 16 and asked[16] == asked[0]


def test_an_excerpt_ends_at_a_sentence_within_its_tokens(tokenizer):
    text = context.document()
    part = context.excerpt(tokenizer, text, 300)
    assert text.startswith(part) and part.endswith(".")
    assert 250 < len(tokenizer(part, add_special_tokens=False).input_ids) <= 300


@pytest.mark.parametrize("asked", [150, 300, 440])
def test_rows_with_context_hold_about_that_many_tokens_and_share_the_document(tiny, asked):
    from engine.model.kvcache import shared_prefix

    prompts = context.with_context(tiny, context.questions(3), asked, room=12)
    ids = [tiny.encode_prompt(p) for p in prompts]
    assert asked - 60 <= max(len(i) for i in ids) <= asked + 2  # cut at a sentence end: about `asked`, never much over
    assert shared_prefix(ids) > max(len(i) for i in ids) - 30  # all but each row's question is shared
    assert context.with_context(tiny, ["hi"], 0, room=12) == ["hi"]


@pytest.mark.parametrize(
    "asked, message",
    [
        (-1, "context must be a whole number of tokens >= 0"),
        (505, "context 505 is beyond the model's context window: 512 positions, less 12"),
        (10, "context 10 is no longer than the prompts themselves"),
    ],
)
def test_a_context_the_model_cannot_hold_is_one_sentence(tiny, asked, message):
    with pytest.raises(ConfigError, match=message):
        context.with_context(tiny, ["Why is the harbour entrance difficult at low water?"], asked, room=12)


def test_a_context_longer_than_the_document_is_refused(tiny, monkeypatch):
    monkeypatch.setattr(tiny, "max_context", 100_000)
    with pytest.raises(ConfigError, match="longer than the shipped document"):
        context.with_context(tiny, ["Why?"], 20_000, room=12)


def test_run_and_bench_take_context_end_to_end(tiny, capsys, monkeypatch):
    import engine.__main__ as cli

    monkeypatch.setattr("engine.load_pair", lambda **kwargs: tiny)
    argv = ["run", "--prompt", "Who built the lighthouse?", "--prompt", "Why?", "--context", "300", "--max-new-tokens", "4"]
    assert cli.main(argv + ["--depth", "2"]) == 0
    out = capsys.readouterr().out
    assert "--- context: the document before every prompt" in out and "--- [1] Who built the lighthouse?" in out
    shared = int(out.split("tokens per row; ")[1].split(" tokens shared")[0])
    assert shared > 200
    assert cli.main(["bench", "--batch", "2", "--depth", "2", "--repeats", "2", "--max-new-tokens", "4", "--context", "300"]) == 0
    table = capsys.readouterr().out
    assert "context 300" in table and "decode-only speedup over the interleaved rounds" in table and "2 rounds" in table
    assert "(first token: plain " in table


def test_bad_context_on_the_command_line_is_one_line_before_any_model_loads(capsys, monkeypatch):
    import engine.__main__ as cli

    def no_loading(*args, **kwargs):
        raise AssertionError("loaded a model before checking the arguments")

    monkeypatch.setattr("engine.load_pair", no_loading)
    for argv, message in (
        (["run", "--prompt", "hi", "--context", "-5"], "error: context must be a whole number of tokens >= 0"),
        (["bench", "--batch", "1", "--depth", "1", "--context", "-1"], "error: context must be"),
        (["bench", "--batch", "1", "--depth", "1", "--context", "64", "--baseline"], "error: --context goes with the batch x depth grid"),
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and "Traceback" not in err and err.count("\n") == 1


def test_a_context_past_the_window_on_the_command_line_is_one_line(tiny, capsys, monkeypatch):
    import engine.__main__ as cli

    monkeypatch.setattr("engine.load_pair", lambda **kwargs: tiny)
    assert cli.main(["run", "--prompt", "hi", "--context", "9000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: context 9000 is beyond the model's context window: 512 positions") and err.count("\n") == 1
