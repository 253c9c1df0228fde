"""The file formats the runtime defines (engine/formats.py) and the training tools write agree."""

from __future__ import annotations

import pytest
from conftest import tiny_llama

from engine.formats import head_config, head_weight_shapes, read_draft_vocab, write_draft_vocab
from training.eagle_head import EagleHead


@pytest.mark.parametrize("fuse_layers", [(), (0,), (0, 1)])
def test_runtime_head_shapes_match_the_training_module(fuse_layers):
    """The loader checks saved weights against head_weight_shapes() without building the training module;
    that only works while the two agree (buffers included, the non-persistent rotary table excluded)."""
    target = tiny_llama(vocab_size=300, layers=2)
    config = head_config(target.config, fuse_layers)
    module = {k: tuple(v.shape) for k, v in EagleHead(config).state_dict().items()}
    assert module == head_weight_shapes(config)


def test_draft_vocab_round_trip_and_refusals(tmp_path):
    assert write_draft_vocab(tmp_path, [5, 3, 3, 9], note="test") == 3
    assert read_draft_vocab(tmp_path / "draft_vocab.json", 10) == [3, 5, 9]
    with pytest.raises(ValueError, match="token ids in 0..8"):
        read_draft_vocab(tmp_path / "draft_vocab.json", 9)
    (tmp_path / "draft_vocab.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        read_draft_vocab(tmp_path / "draft_vocab.json", 10)
