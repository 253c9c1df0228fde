"""Bad input: one clear error for every wrong option, prompt, model folder or CLI argument."""

from __future__ import annotations

import pytest
from conftest import tiny_pair

from engine import ConfigError, DecodeConfig, ModelLoadError, generate, load_pair


# --- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"depth": -1}, "depth must be between 0 and 16"),
        ({"depth": 17}, "depth must be between 0 and 16"),
        ({"temperature": -0.5}, "temperature must be >= 0"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"mode": "fast"}, "mode must be one of"),
        ({"drafter": "oracle"}, "drafter must be one of"),
        ({"confidence_threshold": -0.1}, "confidence_threshold must be between 0 and 1"),
        ({"confidence_threshold": 1.5}, "confidence_threshold must be between 0 and 1"),
        ({"confidence_threshold": "high"}, "confidence_threshold must be between 0 and 1"),
        ({"confidence_threshold": float("nan")}, "confidence_threshold must be between 0 and 1"),
        ({"seed": 2**70}, r"seed must be between 0 and 2\*\*63 - 1"),
        ({"seed": -1}, r"seed must be between 0 and 2\*\*63 - 1"),
        ({"temperature": float("inf")}, "temperature must be >= 0"),
        ({"temperature": float("nan")}, "temperature must be >= 0"),
        ({"temperature": 1e309}, "temperature must be >= 0"),
        ({"temperature": True}, "temperature must be >= 0"),
        ({"top_p": float("nan")}, r"top_p must be in \(0, 1\]"),
    ],
)
def test_bad_config(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        DecodeConfig(**kwargs)


@pytest.mark.parametrize(
    "prompts, cfg, message",
    [
        ([], {}, "prompts is empty"),
        (["ok", "   "], {}, "prompt 2 is empty"),
        ("just a string", {}, "list of strings"),
        (["hello"], {"max_new_tokens": 100000}, "beyond the context window"),
        (["word " * 600], {}, "context window is 512"),
    ],
)
def test_bad_prompts(tiny, prompts, cfg, message):
    with pytest.raises(ConfigError, match=message):
        generate(tiny, prompts, DecodeConfig(**cfg))


def test_model_drafter_without_draft(tokenizer):
    pair = tiny_pair(tokenizer, with_draft=False)
    with pytest.raises(ConfigError, match="needs a draft model"):
        generate(pair, ["hi there"], DecodeConfig(drafter="model"))
    assert generate(pair, ["hi there"], DecodeConfig(drafter="ngram", max_new_tokens=4)).summary["new_tokens"] == 4


def test_unknown_hub_id_offline():
    with pytest.raises(ModelLoadError, match="Hugging Face Hub"):
        load_pair(target="no-such-org/no-such-model")


def test_draft_with_other_vocabulary_is_refused(tmp_path, tokenizer):
    from conftest import tiny_llama

    other = tiny_llama(1000)
    other.save_pretrained(tmp_path / "other")
    with pytest.raises(ModelLoadError, match="vocabulary of 1000 tokens"):
        load_pair(draft=str(tmp_path / "other"), dtype="float32")


def test_missing_draft_folder_is_an_error_when_asked_for(tmp_path):
    with pytest.raises(ModelLoadError, match="neither an existing folder"):
        load_pair(draft=str(tmp_path / "nope"), dtype="float32")


def test_cli_bad_input_is_one_line(capsys):
    from engine.__main__ import main

    assert main(["run", "--prompt", "hi", "--depth", "40"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: depth must be between 0 and 16") and "Traceback" not in err
    assert main(["bench", "--batch", "1", "--depth", "2", "--sequential", "0"]) == 2
    assert capsys.readouterr().err.startswith("error: --sequential and --baseline-prompts must be >= 1")
    assert main(["run", "--prompt", "hi", "--confidence", "2"]) == 2
    assert capsys.readouterr().err.startswith("error: confidence_threshold must be between 0 and 1")
    assert main(["bench", "--batch", "1", "--depth", "2", "--confidence", "0,-1"]) == 2
    assert capsys.readouterr().err.startswith("error: confidence thresholds must be between 0 and 1; got [-1.0]")


@pytest.mark.parametrize(
    "prompt, message",
    [
        (5, "prompt 1 must be a string .* got int"),
        (b"hello", "prompt 1 must be a string .* got bytes"),
        (None, "prompt 1 must be a string .* got NoneType"),
        ("abc \ud800 def", "prompt 1 is not valid Unicode text"),
    ],
)
def test_prompts_that_are_not_text_are_named_as_such(tiny, prompt, message):
    with pytest.raises(ConfigError, match=message):
        generate(tiny, [prompt], DecodeConfig(max_new_tokens=2))


def test_largest_seed_works(tiny):
    trace = generate(tiny, ["hi there"], DecodeConfig(seed=2**63 - 1, temperature=0.7, max_new_tokens=3))
    assert len(trace.output_ids[0]) == 3


def test_cli_refuses_a_bad_device_or_json_path_before_decoding(tmp_path, capsys, monkeypatch):
    """One error line, exit 2, and no model loaded or decoded first (the run would be lost)."""
    import engine.__main__ as cli

    def no_loading(*args, **kwargs):
        raise AssertionError("loaded a model before checking the arguments")

    monkeypatch.setattr("engine.load_pair", no_loading)
    for argv, message in (
        (["run", "--prompt", "hi", "--device", "bogus"], "error: unknown device 'bogus'"),
        (["run", "--prompt", "hi", "--device", "xla"], "error: device 'xla' is not supported"),
        (["run", "--prompt", "hi", "--json", str(tmp_path)], "error: --json " + str(tmp_path) + ": is a folder"),
        (["run", "--prompt", "hi", "--json", str(tmp_path / "nope" / "t.json")], "does not exist"),
        (["bench", "--batch", "1", "--depth", "1", "--json", str(tmp_path)], "is a folder"),
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere


def test_cli_prints_the_summary_when_the_trace_cannot_be_written(tiny, tmp_path, capsys, monkeypatch):
    import engine.__main__ as cli
    from engine.trace.file import Trace

    monkeypatch.setattr("engine.load_pair", lambda **kwargs: tiny)

    def disk_full(self, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Trace, "to_json", disk_full)
    assert cli.main(["run", "--prompt", "hi", "--mode", "autoregressive", "--max-new-tokens", "2", "--json", str(tmp_path / "t.json")]) == 2
    out = capsys.readouterr()
    assert "--- summary" in out.out and "tokens_per_s" in out.out
    assert out.err == f"error: could not write the trace to {tmp_path / 't.json'}: No space left on device\n"
