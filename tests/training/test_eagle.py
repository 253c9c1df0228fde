"""The EAGLE head (training/eagle.py and engine/drafters/eagle.py) and its drafter: the training unroll sees exactly what drafting sees,
speculation with it is lossless (float32 greedy == plain decoding, ragged batches included), its cache
stays in step with the target's, bad head folders are refused clearly, the pipeline runs end to end."""

from __future__ import annotations

import functools
import json
import shutil
import time
import warnings
from dataclasses import replace

import pytest
import torch
from conftest import tiny_pair

from engine import ConfigError, DecodeConfig, ModelLoadError, generate, generate_steps, load_pair
from engine.model.eagle_head import EagleLoadError, EagleRunner, load_head
from engine.model.pair import SHIPPED_EAGLE, Loaded, ModelPair
from training import data, eagle, eagle_card, eagle_head, eagle_train, features

PROMPTS = ["Tell me about the sea.", "Why is the sky blue? Explain briefly please.", "Count: one two three"]
# Greedy alpha of the shipped head at depth 4 on FIXED_PROMPTS, float32, 48 tokens: measured 0.440 when it was
# shipped (run 14, 8192-token head; 0.414 for run 10, 0.429 for run 9, 0.421 for run 8, 0.393 for run 5, 0.397 for
# run 4, 0.340 for run 2; held-out alpha in its card: 0.661, bfloat16, 390 prompts).
# An untrained head scores ~0; the floor is half.
SHIPPED_ALPHA_FLOOR = 0.2
FIXED_PROMPTS = [
    "Explain how a rainbow forms in simple terms.",
    "Write a short story about a robot who learns to paint.",
    "List three tips for staying focused while studying.",
]


def with_head(pair: ModelPair, folder) -> ModelPair:
    config, state, vocab = load_head(folder, pair.target)
    runner = EagleRunner(config, state, vocab, pair.target)
    return replace(pair, loaded=pair.loaded | {"eagle": Loaded(runner, "tiny eagle")})


@pytest.fixture(scope="module")
def tiny_eagle(tokenizer, tmp_path_factory):
    pair = tiny_pair(tokenizer)
    folder = tmp_path_factory.mktemp("eagle")
    head = eagle_head.EagleHead.from_target(pair.target, seed=0)
    vocab = list(range(0, len(tokenizer), 3))  # a reduced head: every third token
    eagle_card.save_head(head, folder, vocab, {"note": "test"}, dtype=torch.float32)
    return with_head(pair, folder), folder


@pytest.fixture(scope="module")
def tiny_fused(tokenizer, tmp_path_factory):
    """A head fusing the tiny target's layer 0 output with its final feature; fuse perturbed off the pass-through."""
    pair = tiny_pair(tokenizer)
    folder = tmp_path_factory.mktemp("eagle-fused")
    head = eagle_head.EagleHead.from_target(pair.target, seed=0, fuse_layers=(0,))
    with torch.no_grad():
        head.fuse.weight.add_(torch.randn(head.fuse.weight.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    eagle_card.save_head(head, folder, list(range(0, len(tokenizer), 3)), {"note": "test"}, dtype=torch.float32)
    return with_head(pair, folder), folder


def test_training_unroll_equals_step_by_step_drafting(tokenizer):
    """Depth s of `unrolled` at entry p == feeding the head's own outputs as entries p-s+1..p after true ones."""
    pair = tiny_pair(tokenizer)
    head = eagle_head.EagleHead.from_target(pair.target, seed=1).eval()
    torch.manual_seed(0)
    t, h = 20, pair.target.config.hidden_size
    embeds, feats = torch.randn(1, t, h), torch.randn(1, t, h)
    pos = torch.arange(t)[None]
    with torch.no_grad():
        outs = head.unrolled(embeds, feats, pos, 3)
        m = 9  # last true entry
        f = feats[:, : m + 3].clone()
        f[:, m + 1] = outs[0][:, m]
        step1 = head.unrolled(embeds[:, : m + 3], f, pos[:, : m + 3], 1)[0]
        f[:, m + 2] = step1[:, m + 1]
        step2 = head.unrolled(embeds[:, : m + 3], f, pos[:, : m + 3], 1)[0]
    assert torch.allclose(step1[:, m + 1], outs[1][:, m + 1], atol=1e-5)
    assert torch.allclose(step2[:, m + 2], outs[2][:, m + 2], atol=1e-5)
    assert not torch.allclose(outs[1][:, m + 1], outs[0][:, m + 1], atol=1e-3)  # depth changes what it sees


def test_engine_runner_matches_the_training_forward(tiny_eagle):
    """EagleRunner (lean layer over a RaggedCache) computes the same g as EagleHead at depth 0."""
    from engine.model.kvcache import RaggedCache

    pair, folder = tiny_eagle
    config, state, _ = load_head(folder, pair.target)
    head = eagle_head.EagleHead(config)
    head.load_state_dict(state)
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (1, 12))
    feats = torch.randn(1, 12, config["hidden_size"])
    want = head.unrolled(pair.target.get_input_embeddings().weight[ids].detach(), feats, torch.arange(12)[None], 1)[0]
    cache = RaggedCache(None, torch.device("cpu"), pair.loaded["eagle"].costs, runner=pair.weights("eagle"))
    got = cache.prefill([ids[0, :8].tolist()], 0, features=feats[:, :8])
    got = torch.cat([got, cache.forward(ids[:, 8:], features=feats[:, 8:])], dim=1)  # prefill, then 4 more
    assert torch.allclose(got, want.detach(), atol=1e-4)


@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
@pytest.mark.parametrize("depth", [1, 3])
def test_eagle_greedy_speculative_equals_plain(tiny_eagle, prompts, depth):
    pair, _ = tiny_eagle
    ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24))
    spec = generate(pair, prompts, DecodeConfig(depth=depth, drafter="eagle", max_new_tokens=24))
    assert spec.output_ids == ar.output_ids
    assert spec.meta["draft_name"] == "tiny eagle" and spec.meta["draft_params"] == pair.weights("eagle").params
    assert spec.summary["flops"] > ar.summary["flops"]  # the head's work and the rejected drafts cost FLOPs


@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
def test_eagle_confidence_gated_equals_plain(tiny_eagle, prompts):
    pair, _ = tiny_eagle
    ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24))
    spec = generate(pair, prompts, DecodeConfig(depth=6, drafter="eagle", confidence_threshold=0.002, max_new_tokens=24))
    assert spec.output_ids == ar.output_ids
    widths = [st.depth for st in spec.steps if st.kind == "decode"]
    assert min(widths) < 6  # the gate cut drafts short (an untrained head is unsure)


@pytest.mark.parametrize("prompts", [PROMPTS[:1], PROMPTS], ids=["batch1", "ragged3"])
def test_fused_head_greedy_speculative_equals_plain(tiny_fused, prompts):
    pair, _ = tiny_fused
    ar = generate(pair, prompts, DecodeConfig(mode="autoregressive", max_new_tokens=24))
    spec = generate(pair, prompts, DecodeConfig(depth=3, drafter="eagle", max_new_tokens=24))
    assert spec.output_ids == ar.output_ids


def test_fused_features_are_the_same_in_extraction_engine_and_runner(tiny_fused):
    """extract_features (hooks on transformers' layers) == the lean verify pass's collected layers, and the
    runner fuses them exactly as the training forward does."""
    from engine.model.kvcache import RaggedCache

    pair, folder = tiny_fused
    h = pair.target.config.hidden_size
    ids = [5, 17, 300, 42, 9, 1000, 77, 8]
    blob = features.extract_features(
        pair.target, [{"prompt_ids": ids[:4], "output_ids": ids[4:]}], 64, log=lambda s: None, fuse_layers=(0,)
    )
    assert blob["features"].shape == (len(ids), 2 * h)
    cache = RaggedCache(pair.target, torch.device("cpu"), pair.target_costs)
    _, hidden = cache.prefill([ids], 0, logits_to_keep=1, return_hidden=(0,))
    assert torch.allclose(hidden[0], blob["features"].float(), atol=1e-4)
    _, final_only = RaggedCache(pair.target, torch.device("cpu"), pair.target_costs).prefill([ids], 0, logits_to_keep=1, return_hidden=True)
    assert torch.allclose(hidden[..., h:], final_only, atol=1e-6)  # the final feature is the last H columns
    config, state, _ = load_head(folder, pair.target)
    head = eagle_head.EagleHead(config)
    head.load_state_dict(state)
    t = torch.tensor([ids[1:]])
    want = head.unrolled(pair.target.get_input_embeddings().weight[t].detach(), hidden[:, :-1], torch.arange(7)[None], 1)[0]
    got = RaggedCache(None, torch.device("cpu"), pair.loaded["eagle"].costs, runner=pair.weights("eagle")).prefill(
        [ids[1:]], 0, features=hidden[:, :-1]
    )
    assert torch.allclose(got, want.detach(), atol=1e-4)


def test_fused_head_starts_as_the_unfused_head_it_continues(tiny_eagle):
    pair, folder = tiny_eagle
    config, state, _ = load_head(folder, pair.target)
    plain = eagle_head.EagleHead(config)
    plain.load_state_dict(state)
    fused = eagle_head.EagleHead.from_target(pair.target, fuse_layers=(0,))
    fused.load_state_dict(state, strict=False)  # everything but fuse, which starts as a pass-through
    h = config["hidden_size"]
    torch.manual_seed(0)
    embeds, low, final = torch.randn(1, 9, h), torch.randn(1, 9, h), torch.randn(1, 9, h)
    pos = torch.arange(9)[None]
    with torch.no_grad():
        a = plain.unrolled(embeds, final, pos, 2)
        b = fused.unrolled(embeds, torch.cat([low, final], -1), pos, 2)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a, b))


@pytest.mark.parametrize("threshold", [0.0, 0.002])
def test_eagle_cache_and_pending_features_follow_the_target(tiny_eagle, threshold):
    """Entries in the head's cache + features waiting to be fed == tokens in the target's cache, every row."""
    pair, _ = tiny_eagle
    cfg = DecodeConfig(depth=3, drafter="eagle", policy="heuristic", max_new_tokens=20, confidence_threshold=threshold)
    stream = generate_steps(pair, PROMPTS, cfg)
    checked = 0
    for _ in stream:
        if not stream.active:
            continue
        drafter, target = stream.drafter, stream.target_cache
        assert torch.equal(drafter.entries(), target.lengths)
        assert torch.equal(target.lengths + 1, torch.tensor([len(s.tokens) for s in stream.active]))
        checked += 1
    assert checked > 3


def _plain_first(choose, ctx) -> int:
    return 0 if ctx.step <= 4 else choose(ctx)


def test_eagle_reads_the_prompts_at_prefill_and_plain_steps_only_when_it_drafts(tiny_eagle):
    """The head's cache takes the prompts with the target's prefill (prompt processing, as the draft model's does),
    and while the policy chooses plain steps their features wait in `later`, read at the next draft; the head's
    entries always count every target token, and the run's tokens equal plain decoding's (float32). Dropping rows
    before the first draft keeps the others' prompts."""
    pair, _ = tiny_eagle
    cfg = DecodeConfig(depth=3, drafter="eagle", policy="heuristic", max_new_tokens=12)
    plain = generate(pair, PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=12))
    stream = generate_steps(pair, PROMPTS, cfg)
    seen = []
    for step in stream:
        drafter = stream.drafter
        if step.kind == "prefill":  # four plain steps first, then the policy's own choice
            stream.decoder.policy.depth = functools.partial(_plain_first, stream.decoder.policy.depth)
            read = drafter.cache.lengths + drafter.dropped  # every prompt token but the last, whose feature waits
            assert torch.equal(read, stream.target_cache.lengths - 1) and int(read.min()) > 0
        if stream.active:
            assert torch.equal(drafter.entries(), stream.target_cache.lengths)
            seen.append((step.depth, len(drafter.later)))
    assert seen[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]
    assert seen[5][0] > 0 and seen[5][1] == 0  # the draft read the plain steps' features
    assert stream.trace.output_ids == plain.output_ids
    stream = generate_steps(pair, PROMPTS, cfg)
    next(iter(stream))
    drafter = stream.drafter
    held = drafter.entries()
    assert int(drafter.cache.lengths.min()) > 0  # read at prefill
    with torch.inference_mode():  # as the decode loop selects rows
        drafter.select(torch.tensor([2, 0]))
    assert torch.equal(drafter.entries(), held[[2, 0]])


def test_eagle_sampling_drafts_from_its_vocabulary_with_a_full_q(tiny_eagle):
    pair, folder = tiny_eagle
    vocab = set(json.loads((folder / "draft_vocab.json").read_text())["ids"])
    stream = generate_steps(pair, PROMPTS[:2], DecodeConfig(depth=3, drafter="eagle", temperature=1.0, max_new_tokens=12))
    drafted = []
    for step in stream:
        for s in step.seqs:
            drafted += [t.id for t in s.drafted]
            assert all(0 < t.draft_prob <= 1 for t in s.drafted)
    assert drafted and set(drafted) <= vocab
    again = generate(pair, PROMPTS[:2], DecodeConfig(depth=3, drafter="eagle", temperature=1.0, max_new_tokens=12))
    assert again.output_ids == stream.trace.output_ids  # seeded


def test_eagle_drafter_without_a_head_is_a_config_error(tiny):
    with pytest.raises(ConfigError, match="drafter='eagle' needs an EAGLE head"):
        generate(tiny, ["Hello"], DecodeConfig(drafter="eagle", max_new_tokens=4))


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("missing", "config.json is missing"),
        ("corrupt", "cannot be read"),
        ("format", "config format"),
        ("hidden", "hidden_size"),
        ("vocab", "must list token ids"),
    ],
)
def test_bad_head_folders_are_refused(tiny_eagle, tmp_path, breakage, message):
    pair, folder = tiny_eagle
    bad = tmp_path / "head"
    bad.mkdir()
    for f in folder.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    config = json.loads((bad / "config.json").read_text())
    if breakage == "missing":
        (bad / "config.json").unlink()
    elif breakage == "corrupt":
        (bad / "model.safetensors").write_bytes(b"not safetensors")
    elif breakage == "format":
        (bad / "config.json").write_text(json.dumps({**config, "format": "other"}))
    elif breakage == "hidden":
        (bad / "config.json").write_text(json.dumps({**config, "hidden_size": 999}))
    else:
        (bad / "draft_vocab.json").write_text(json.dumps({"ids": [-1, 5]}))
    with pytest.raises(EagleLoadError, match=message):
        load_head(bad, pair.target)


def test_explicit_bad_head_raises_and_broken_default_warns(tmp_path, monkeypatch):
    from engine.model import pair as models

    with pytest.raises(ModelLoadError, match="is missing"):
        load_pair(draft=None, eagle=str(tmp_path / "nowhere"))
    broken = tmp_path / "eagle"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    monkeypatch.setattr(models, "SHIPPED_EAGLE", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pair = load_pair(draft=None)
    assert "eagle" not in pair.loaded and any("EAGLE head could not be used" in str(w.message) for w in caught)
    assert any("drafter='eagle' is unavailable" in n for n in pair.warnings)


def test_feature_noise_only_perturbs_training(tiny_eagle, tokenizer):
    """EAGLE-1's augmentation: the training forward sees noisy target features, evaluation sees them exact."""
    _, folder = tiny_eagle
    pair = tiny_pair(tokenizer)
    config, state, _ = load_head(folder, pair.target)
    head = eagle_head.EagleHead(config)
    head.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    with torch.no_grad():  # a head whose output depends on its input feature beyond the pass-through
        head.o_proj.weight.normal_(0, 0.05)
        head.down_proj.weight.normal_(0, 0.05)
    g = torch.Generator().manual_seed(0)
    embeds, feats = torch.randn(2, 5, config["hidden_size"], generator=g), torch.randn(2, 5, config["hidden_size"], generator=g)
    positions = torch.arange(5)[None].expand(2, 5)
    head.eval()
    exact = head.unrolled(embeds, feats, positions, 2)
    assert torch.equal(head.unrolled(embeds, feats, positions, 2, noise=0.2)[1], exact[1])
    head.train()
    noisy = head.unrolled(embeds, feats, positions, 2, noise=0.2)
    assert torch.equal(head.unrolled(embeds, feats, positions, 2)[0], exact[0])
    change = (noisy[0] - exact[0]).abs().max()
    assert 0 < change < 10 * 0.2 * float(feats.pow(2).mean(-1).sqrt().max())


@pytest.mark.parametrize("value", ["-0.1", "2", "lots"])
def test_bad_feature_noise_is_a_clear_error(value, capsys):
    with pytest.raises(SystemExit):
        eagle.parse_args(["--feature-noise", value])
    assert "--feature-noise" in capsys.readouterr().err


def test_help_documents_the_options(capsys):
    with pytest.raises(SystemExit):
        eagle.parse_args(["--help"])
    text = capsys.readouterr().out
    for flag in ("--work-dir", "--out", "--epochs", "--depths", "--batch-tokens", "--seed", "--stage"):
        assert flag in text


def test_missing_distillation_data_is_one_clear_error(tmp_path, capsys):
    assert eagle.main(["--work-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 2
    assert "run `python -m training.distill" in capsys.readouterr().out


def test_pipeline_end_to_end_on_a_tiny_target(tmp_path):
    """distillation responses -> target features -> training -> saved head -> engine evaluation."""
    from test_distill import _tiny_target

    from training import distill

    target, work, out = _tiny_target(tmp_path), tmp_path / "work", tmp_path / "eagle"
    argv = [
        "--work-dir",
        str(work),
        "--out",
        str(out),
        "--target",
        str(target),
        "--max-prompts",
        "6",
        "--heldout-prompts",
        "2",
        "--gen-batch",
        "4",
        "--max-new-tokens",
        "8",
        "--gen-dtype",
        "float32",
        "--stage",
        "generate",
        "--threads",
        "1",
    ]
    assert distill.main(argv) == 0
    argv = [
        "--work-dir",
        str(work),
        "--out",
        str(out),
        "--target",
        str(target),
        "--epochs",
        "2",
        "--batch-tokens",
        "128",
        "--eval-prompts",
        "2",
        "--eval-max-new-tokens",
        "6",
        "--eval-batch",
        "2",
        "--threads",
        "1",
    ]
    assert eagle.main(argv) == 0
    for name in ("config.json", "model.safetensors", "draft_vocab.json"):
        assert (out / name).exists(), name
    stats = json.loads((work / "eagle" / "stats.json").read_text())
    assert stats["train"]["steps"] >= 2 and 0.0 <= stats["engine_eval"]["alpha"] <= 1.0
    # the data grows (more prompts): generation finishes the last, short shard, and the features stage
    # extracts only the new rows
    from safetensors.torch import load_file

    feats = eagle.features_file(work / "eagle", "train", ())
    first = load_file(str(feats))
    gen_argv = [
        "--work-dir",
        str(work),
        "--target",
        str(target),
        "--heldout-prompts",
        "2",
        "--gen-batch",
        "4",
        "--max-new-tokens",
        "8",
        "--gen-dtype",
        "float32",
        "--stage",
        "generate",
        "--threads",
        "1",
    ]
    assert distill.main(gen_argv + ["--max-prompts", "8"]) == 0
    rows = data.read_shards(work / "shards")
    assert len(rows) == 8 and len(list((work / "shards").glob("shard-*.jsonl"))) == 2
    assert eagle.main(["--work-dir", str(work), "--target", str(target), "--stage", "features", "--threads", "1"]) == 0
    assert "6 rows already extracted, adding 2" in (work / "eagle" / "eagle.log").read_text()
    grown = load_file(str(feats))
    n = len(first["features"])
    assert torch.equal(grown["features"][:n], first["features"]) and len(grown["starts"]) == 8
    assert features.covers_prefix(grown, rows, 256) and not features.covers_prefix(grown, rows[1:] + rows[:1], 256)
    fresh = features.extract_features(load_pair(target=str(target), draft=None, eagle=None).target, rows[6:], 256, log=lambda s: None)
    assert torch.equal(grown["features"][n:], fresh["features"])
    assert grown["offsets"].tolist() == first["offsets"].tolist() + (fresh["offsets"][1:] + n).tolist()
    assert eagle.main(argv + ["--epochs", "1", "--feature-noise", "0.1"]) == 0  # trains on the grown data
    assert json.loads((out / "config.json").read_text())["feature_noise"] == 0.1
    # features another target computed (here: the same weights under another path) are rebuilt, not extended
    other = tmp_path / "other-target"
    shutil.copytree(target, other)
    log_before = (work / "eagle" / "eagle.log").read_text()
    assert eagle.main(["--work-dir", str(work), "--target", str(other), "--stage", "features", "--threads", "1"]) == 0
    assert "already extracted" not in (work / "eagle" / "eagle.log").read_text()[len(log_before) :]
    pair = load_pair(target=str(target), draft=None, eagle=str(out), dtype="float32")
    assert "eagle" in pair.loaded and pair.weights("eagle").params == json.loads((out / "config.json").read_text())["params"]
    plain = generate(pair, ["Hello there"], DecodeConfig(mode="autoregressive", max_new_tokens=6))
    spec = generate(pair, ["Hello there"], DecodeConfig(depth=2, drafter="eagle", max_new_tokens=6))
    assert spec.output_ids == plain.output_ids
    # EAGLE-3 fusion: fused features of layer 0 + final, a fused head continuing from the unfused one
    fused = tmp_path / "eagle-fused"
    argv += ["--fuse-layers", "0", "--init", str(out), "--out", str(fused)]
    assert eagle.main(argv) == 0
    assert eagle.features_file(work / "eagle", "train", (0,)).exists()
    pair = load_pair(target=str(target), draft=None, eagle=str(fused), dtype="float32")
    assert pair.weights("eagle").feature_layers == (0,) and pair.weights("eagle").fuse_weight is not None
    spec = generate(pair, ["Hello there"], DecodeConfig(depth=2, drafter="eagle", max_new_tokens=6))
    assert spec.output_ids == plain.output_ids
    assert eagle.main(argv[:-6] + ["--fuse-layers", "7", "--stage", "features"]) == 2  # the tiny target has 2 layers
    # --keep-init-vocab: continuing on new data keeps the vocabulary the earlier head ranked on more data
    (fused / "draft_vocab.json").write_text(json.dumps({"format": "speclab.draft_vocab/1", "ids": [5, 7, 11]}))
    kept = tmp_path / "eagle-kept"
    k_argv = argv[:-4] + ["--init", str(fused), "--out", str(kept), "--stage", "train", "--keep-init-vocab"]
    assert eagle.main(k_argv) == 0
    assert json.loads((kept / "draft_vocab.json").read_text())["ids"] == [5, 7, 11]
    assert json.loads((kept / "config.json").read_text())["head_vocab"] == 3
    assert load_pair(target=str(target), draft=None, eagle=str(kept), dtype="float32").weights("eagle") is not None
    assert eagle.main(argv[:-6] + ["--stage", "train", "--keep-init-vocab"]) == 2
    assert "--keep-init-vocab needs --init" in (work / "eagle" / "eagle.log").read_text().splitlines()[-1]
    # --add-vocab: the kept vocabulary plus the run's most frequent tokens it lacks
    widened = tmp_path / "eagle-widened"
    assert eagle.main(k_argv[:-4] + [str(widened), "--stage", "train", "--keep-init-vocab", "--add-vocab", "2"]) == 0
    ids = json.loads((widened / "draft_vocab.json").read_text())["ids"]
    ranked = [t for t in eagle_card.frequent_ranked(rows) if t not in (5, 7, 11)]
    assert len(ids) > 3 and ids == sorted([5, 7, 11] + ranked[:2])
    assert json.loads((widened / "config.json").read_text())["head_vocab"] == len(ids)
    assert eagle.main(k_argv[:-3] + ["--stage", "train", "--add-vocab", "2"]) == 2
    assert "needs --keep-init-vocab" in (work / "eagle" / "eagle.log").read_text().splitlines()[-1]


def test_shipped_head_loads_by_default_and_is_accepted():
    if not (SHIPPED_EAGLE / "config.json").exists():
        pytest.skip("no shipped head in assets/eagle")
    total = sum(p.stat().st_size for p in SHIPPED_EAGLE.iterdir() if p.is_file())
    assert total <= 40 * 1024 * 1024
    pair = load_pair(draft=None, dtype="float32")  # the embedded default picks assets/eagle
    assert "eagle" in pair.loaded and "EAGLE head" in pair.loaded["eagle"].name
    cfg = DecodeConfig(depth=4, drafter="eagle", max_new_tokens=48)
    trace = generate(pair, FIXED_PROMPTS, cfg)
    assert trace.summary["alpha"] >= SHIPPED_ALPHA_FLOOR, trace.summary["per_position_acceptance"]
    plain = generate(pair, FIXED_PROMPTS, DecodeConfig(mode="autoregressive", max_new_tokens=48))
    assert trace.output_ids == plain.output_ids  # float32 greedy: speculation changes nothing
    assert trace.summary["target_forwards"] < plain.summary["target_forwards"]


def test_argmax_hard_labels_are_the_targets_own_greedy_tokens(tiny_eagle, tokenizer):
    """--hard-labels argmax (for sampled responses): the hard CE aims at the target's argmax at each position
    (its head over the true next feature), whatever token the row holds there."""
    _, folder = tiny_eagle
    pair = tiny_pair(tokenizer)
    config, state, _ = load_head(folder, pair.target)
    head = eagle_head.EagleHead(config)
    head.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    h, n_vocab = config["hidden_size"], len(tokenizer)
    g = torch.Generator().manual_seed(0)
    vocab = torch.arange(0, n_vocab, 2)  # a training vocabulary of every second token
    out_head = pair.target.get_output_embeddings().weight.detach()[vocab].float()
    to_local = torch.full((n_vocab,), -1, dtype=torch.long)
    to_local[vocab] = torch.arange(len(vocab))
    rows, cols = torch.tensor([0, 0, 1, 1]), torch.tensor([0, 2, 1, 3])
    batch = {
        "embeds": torch.randn(2, 4, h, generator=g),
        "features": torch.randn(2, 4, h, generator=g),
        "positions": torch.arange(4)[None].expand(2, 4),
        "rows": rows,
        "cols": cols,
        "labels": vocab[torch.randint(len(vocab), (4,), generator=g)],
        "next_features": torch.randn(4, h, generator=g),
    }
    greedy = vocab[(batch["next_features"] @ out_head.T).argmax(-1)]
    assert not torch.equal(greedy, batch["labels"])  # the rows' tokens are not the greedy ones
    by_argmax = eagle_train.batch_loss(head, batch, out_head, to_local, 2, hard_labels="argmax")
    by_data = eagle_train.batch_loss(head, batch, out_head, to_local, 2)
    as_if_greedy = eagle_train.batch_loss(head, {**batch, "labels": greedy}, out_head, to_local, 2)
    assert torch.allclose(by_argmax[0], as_if_greedy[0]) and by_argmax[1:] == as_if_greedy[1:]
    assert not torch.allclose(by_argmax[0], by_data[0])


def test_max_minutes_fits_the_cosine_schedule_into_the_time(tiny_eagle, tokenizer, monkeypatch):
    """After 20 steps, training shortens its schedule to end (decayed) within --max-minutes at the pace so far
    (a fake clock: every perf_counter call is 0.5 s later), instead of being cut off mid-schedule."""
    _, folder = tiny_eagle
    pair = tiny_pair(tokenizer)
    rows = [{"prompt_ids": [1, 2, 3], "output_ids": [5 + (i * 7 + j) % 40 for j in range(12)]} for i in range(40)]
    blob = features.extract_features(pair.target, rows, 64, log=lambda s: None)
    data = eagle_train.FeatureData(blob)
    config, state, _ = load_head(folder, pair.target)
    head = eagle_head.EagleHead(config)
    head.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    embed = pair.target.get_input_embeddings().weight.detach().float()
    vocab = torch.arange(len(tokenizer))
    clock = iter(range(10**6))
    monkeypatch.setattr(time, "perf_counter", lambda: 0.5 * next(clock))  # the clock fit() reads
    lines = []
    result = eagle_train.train(
        head,
        data,
        data,
        embed,
        embed[vocab],
        vocab,
        epochs=100,
        lr=1e-3,
        batch_tokens=64,
        depths=2,
        seed=0,
        autocast=False,
        max_minutes=0.5,
        log=lines.append,
    )
    shrink = [s for s in lines if "schedule shrinks" in s]
    assert len(shrink) == 1
    fitted = int(shrink[0].split(" to ")[1].split()[0])
    assert 20 < fitted < len(data.batches(64, __import__("random").Random(0))) * 100
    assert result["steps"] == fitted  # it ran the fitted schedule to its end


def test_bad_device_is_one_clear_error(tmp_path, capsys):
    assert eagle.main(["--work-dir", str(tmp_path), "--device", "warp-drive"]) == 2
    assert "error: --device warp-drive" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        eagle.parse_args(["--hard-labels", "sometimes"])
    assert eagle.parse_args(["--hard-labels", "argmax", "--device", "auto"]).hard_labels == "argmax"


def test_gpu_script_runs_every_stage_on_the_cpu(tmp_path, tokenizer):
    """scripts/investigate/gpu_eagle.py (made for a lent GPU) on the CPU with the embedded target and a few prompts:
    greedy and sampled generation, features, training from the shipped head, the saved head loads; then a
    second run that starts from the first run's tokens and head."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("gpu_eagle", Path(__file__).parents[2] / "scripts" / "investigate" / "gpu_eagle.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    held = tmp_path / "heldout"
    held.mkdir()
    ids = tokenizer("The sea is large and blue, and it covers most of the planet.")["input_ids"]
    (held / "shard-00000.jsonl").write_text(json.dumps({"prompt_ids": ids[:4], "output_ids": ids[4:]}) + "\n")
    out = tmp_path / "run"
    common = [
        "--device",
        "cpu",
        "--max-prompts",
        "4",
        "--gen-batch",
        "2",
        "--max-new-tokens",
        "6",
        "--heldout-dir",
        str(held),
        "--budget-s",
        "600",
        "--batch-tokens",
        "64",
        "--epochs",
        "1",
    ]
    assert script.main(common + ["--out", str(out), "--sample-passes", "1"]) == 0
    log = (out / "gpu_eagle.log").read_text()
    assert "pass 0 (temperature 0.0): 4 rows" in log and "pass 1 (temperature 0.8): 4 rows" in log
    saved = json.loads((out / "head" / "config.json").read_text())
    assert [p["rows"] for p in saved["gpu_run"]["passes"]] == [4, 4] and saved["hard_labels"] == "argmax"
    assert saved["head_vocab"] == len(json.loads((SHIPPED_EAGLE / "draft_vocab.json").read_text())["ids"])
    pair = load_pair(draft=None, eagle=str(out / "head"), dtype="float32")
    assert "eagle" in pair.loaded
    again = tmp_path / "again"
    argv = common + [
        "--out",
        str(again),
        "--sample-passes",
        "1",
        "--first-seed",
        "5",
        "--prompt-start",
        "2",
        "--tokens",
        f"{out / 'tokens-pass0.npz'},{out / 'tokens-pass1.npz'}",
        "--init",
        str(out / "head"),
        "--head-vocab",
        "5",
    ]
    assert script.main(argv) == 0
    log = (again / "gpu_eagle.log").read_text()
    assert "tokens-pass0.npz: 4 rows" in log and "pass 5 (temperature 0.8): 4 rows" in log and "pass 0 (" not in log
    assert (again / "tokens-pass5.npz").exists() and not (again / "tokens-pass0.npz").exists()
    import numpy as np

    greedy = np.load(out / "tokens-pass0.npz")["output_ids"].tolist()  # --head-vocab ranks the greedy pass only
    ranked = sorted(set(greedy), key=lambda t: (-greedy.count(t), t))[:5]
    assert json.loads((again / "head" / "draft_vocab.json").read_text())["ids"] == sorted(ranked)
    bad = common + ["--out", str(tmp_path / "bad"), "--tokens", str(held / "shard-00000.jsonl")]
    assert script.main(bad) == 2
    assert "expected a tokens-pass<N>.npz" in (tmp_path / "bad" / "gpu_eagle.log").read_text()
    no_heldout = common + ["--heldout-dir", str(tmp_path / "nothing"), "--out", str(tmp_path / "nh")]
    assert script.main(no_heldout) == 2
    assert "error: no held-out responses" in (tmp_path / "nh" / "gpu_eagle.log").read_text()
    assert not list((tmp_path / "nh").glob("tokens-*"))  # refused before generating anything
