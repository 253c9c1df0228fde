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


def test_cli_refuses_hostile_input_in_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch):
    """A device or a pipe as --json is refused, never replaced by a file; so are a folder no file can be made in, an
    empty name, zero repeats, a batch or pass past the bounds, a prompt file that is not a regular file or nests
    without end, grid options with a prompt file, an empty prompt: one line each, exit 2, nothing loaded."""
    import os

    import engine.__main__ as cli

    monkeypatch.setattr("engine.load_pair", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded a model first")))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    run = ["run", "--prompt", "hi", "--max-new-tokens", "2"]
    for argv, message in (
        ([*run, "--json", os.devnull], "is not a regular file"),
        ([*run, "--json", str(fifo)], "is not a regular file"),
        ([*run, "--json", "/proc/speclab-trace.json"], "cannot write a file in /proc"),
        ([*run, "--json", ""], "--json: give a file name"),
        (["run", "--prompt", "  "], "every prompt needs some text"),
        (["bench", "--repeats", "0"], "--repeats and --max-new-tokens must be >= 1"),
        (["bench", "--batch", "99999999"], "batch sizes must be 1..1024"),
        (["passes", "--batch", "1024", "--tokens", "128"], "at most 65,536 tokens per pass"),
        (["passes", "--depth", "99"], "between 1 and 16"),
        (["passes", "--model", "draft", "--drafter", "eagle"], "use it with --model target"),
        (["bench", "--prompts-file", os.devnull], "is not a regular file"),
        (["bench", "--prompts-file", str(fifo)], "is not a regular file"),
        (["bench", "--prompts-file", str(deep)], "nests too deeply"),
        (["bench", "--prompts-file", "spec-bench", "--baseline"], "--baseline goes with the batch x depth grid"),
        (["bench", "--prompts-file", "spec-bench", "--prompts", "heldout", "--sequential", "2"], "--prompts, --sequential go with"),
    ):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    assert stat_is_char_device(os.devnull) and fifo.is_fifo()  # neither replaced by a file


def stat_is_char_device(path) -> bool:
    import os
    import stat

    return stat.S_ISCHR(os.stat(path).st_mode)


def test_cli_writes_a_trace_through_a_link_and_readable_as_any_file(tiny, tmp_path, capsys, monkeypatch):
    import os

    import engine.__main__ as cli

    monkeypatch.setattr("engine.load_pair", lambda **kwargs: tiny)
    target, link = tmp_path / "trace.json", tmp_path / "latest.json"
    link.symlink_to(target)
    assert cli.main(["run", "--prompt", "hi", "--mode", "autoregressive", "--max-new-tokens", "2", "--json", str(link)]) == 0
    assert link.is_symlink() and target.is_file() and '"speclab.trace/' in target.read_text()
    assert (os.stat(target).st_mode & 0o777) == 0o644


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--prompt", "hi", "--depth", "abc"], "argument --depth: invalid int value: 'abc'"),
        (["run", "--depth", "2"], "the following arguments are required: --prompt"),
        (["bench", "--batch", "1.5"], "argument --batch: expected comma-separated integers"),
        (["nope"], "argument command: invalid choice: 'nope'"),
    ],
)
def test_a_malformed_command_line_is_one_line_without_the_usage_block(argv, message, capsys):
    import engine.__main__ as cli

    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1 and "usage:" not in err
    assert "--help)" in err


def test_help_states_each_options_default():
    from engine.cli.parser import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices
    text = " ".join(sub["run"].format_help().split())
    for shown in ("--depth DEPTH draft tokens per step, 0..16 (default: 4)", "(default: 64)", "(default: speculative)", "(default: 0)"):
        assert shown in text, shown
    assert "(default: 1,4,16)" in " ".join(sub["bench"].format_help().split())
    assert "--repeats REPEATS (default: 5)" in " ".join(sub["passes"].format_help().split())


def test_passes_refuses_a_cache_past_the_models_window_in_one_line(tiny, capsys, monkeypatch):
    import engine.__main__ as cli

    monkeypatch.setattr("engine.load_pair", lambda **kwargs: tiny)
    assert cli.main(["passes", "--context", str(tiny.max_context), "--tokens", "1", "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --context {tiny.max_context} + --tokens 1 exceeds the model's {tiny.max_context}-token window\n"


def test_a_model_folder_that_does_not_load_is_named_in_one_line(tmp_path):
    (tmp_path / "config.json").write_text("{\n  not json\n}")
    with pytest.raises(ModelLoadError) as err:
        load_pair(target=str(tmp_path))
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_options_a_command_line_does_not_use_are_named_not_ignored(tiny, capsys, monkeypatch):
    import engine.__main__ as cli

    monkeypatch.setattr("engine.load_pair", lambda **kwargs: tiny)
    argv = ["run", "--prompt", "hi", "--mode", "autoregressive", "--depth", "2", "--max-new-tokens", "2", "--batch-table", "1-4:2"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "note: --batch-table is read by --policy batch_table only" in err
    assert "note: --depth drafts nothing with --mode autoregressive" in err
    assert cli.main(["bench", "--tree-nodes", "9999", "--tree-topk", "2"]) == 2
    assert "--tree-nodes must be between 0 (the chain) and 64" in capsys.readouterr().err
