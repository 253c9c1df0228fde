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
