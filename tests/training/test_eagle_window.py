"""The EAGLE head reads a window of a long prompt's entries (engine/drafters/eagle.py `windowed`): the first sinks and
the latest, each row's kept entries still right-aligned as the target's prefill padded them."""

from __future__ import annotations

from dataclasses import replace

import torch
from conftest import tiny_pair

import engine.drafters.eagle as eagle_drafter
from engine import DecodeConfig, generate, generate_steps
from engine.model.eagle_head import EagleRunner, load_head
from engine.model.pair import Loaded
from training import eagle_card, eagle_head

LONG = ["Tell me about the sea, the ships on it, the harbour and the lighthouse on the point.", "Count: one two three"]


def test_windowed_keeps_the_sinks_and_the_latest_entries_of_each_long_row():
    tokens = [list(range(100, 110)), [7, 8, 9]]  # 10 entries and 3: the short row is left-padded by 7 columns
    features = torch.arange(2 * 10, dtype=torch.float32).reshape(2, 10, 1)
    kept, cut, dropped, shared = eagle_drafter.windowed(tokens, features, window=6, sinks=2)
    assert kept == [[100, 101, 106, 107, 108, 109], [7, 8, 9]]
    assert cut.shape == (2, 6, 1) and dropped.tolist() == [4, 0] and shared == 0
    assert cut[0, :, 0].tolist() == [0, 1, 6, 7, 8, 9]  # row 0's columns 0, 1 and 6..9
    assert cut[1, 3:, 0].tolist() == [17, 18, 19]  # row 1's three entries stay its last columns


def test_windowed_leaves_prompts_that_fit_as_they_are():
    tokens, features = [[1, 2, 3], [4, 5]], torch.zeros(2, 3, 4)
    kept, cut, dropped, shared = eagle_drafter.windowed(tokens, features, 1, window=3, sinks=1)
    assert kept is tokens and cut is features and dropped.tolist() == [0, 0] and shared == 1


def test_rows_that_share_a_long_prefix_are_cut_inside_it_and_still_share():
    """A document of 10 entries shared by both rows, then 2 and 1 entries of their own: a window of 7 keeps the 2
    sinks, the document's latest 3 and each row's own part, so the cut rows share their first 5 entries."""
    doc = list(range(10))
    tokens = [doc + [50, 51], doc + [60]]
    features = torch.arange(2 * 12, dtype=torch.float32).reshape(2, 12, 1)  # row 1 left-padded by one column
    kept, cut, dropped, shared = eagle_drafter.windowed(tokens, features, 10, window=7, sinks=2)
    assert kept == [[0, 1, 7, 8, 9, 50, 51], [0, 1, 7, 8, 9, 60]] and shared == 5
    assert dropped.tolist() == [5, 5]
    assert cut[0, :, 0].tolist() == [0, 1, 7, 8, 9, 10, 11]
    assert cut[1, 1:, 0].tolist() == [13, 14, 20, 21, 22, 23]  # row 1's entries i sit at column i + 1


def test_a_windowed_head_still_follows_the_target_and_decodes_what_plain_decoding_does(tokenizer, monkeypatch, tmp_path):
    """With a window shorter than the prompts: the head's entries plus what it left out still count every target
    token, its own cache holds at most the window plus what decoding added, and the output equals plain decoding's."""
    pair = tiny_pair(tokenizer)
    head = eagle_head.EagleHead.from_target(pair.target, seed=0)
    eagle_card.save_head(head, tmp_path, list(range(0, len(tokenizer), 3)), {"note": "test"}, dtype=torch.float32)
    config, state, vocab = load_head(tmp_path, pair.target)
    pair = replace(pair, loaded=pair.loaded | {"eagle": Loaded(EagleRunner(config, state, vocab, pair.target), "tiny eagle")})
    monkeypatch.setattr(eagle_drafter, "WINDOW", 8)
    monkeypatch.setattr(eagle_drafter, "SINKS", 2)
    plain = generate(pair, LONG, DecodeConfig(mode="autoregressive", max_new_tokens=12))
    stream = generate_steps(pair, LONG, DecodeConfig(depth=3, drafter="eagle", max_new_tokens=12))
    drafted = 0
    for _ in stream:
        drafter = stream.drafter
        if stream.active:
            assert torch.equal(drafter.entries(), stream.target_cache.lengths)
            assert int(drafter.dropped.max()) > 0
            assert int(drafter.cache.lengths.max()) <= 8 + 12 + 4  # the window, the new tokens, a draft
            drafted += 1
    assert drafted > 2
    assert stream.trace.output_ids == plain.output_ids
