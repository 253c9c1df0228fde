"""Record the sample trace pairs that the Replay page ships (assets/traces/).

Each pair is a real run on this machine: 2 curated prompts, 48 new tokens, plain AR and speculative
depth 4, decoded with the embedded model pair. The hardware peaks measured here go into every
trace's meta["probe"], so Replay draws utilisation against the recording machine's own peaks, and
assets/traces/index.json labels each pair with its device and date. Rerun to refresh:

    .venv/bin/python scripts/record/record_sample_traces.py
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from app.common.warm import warm
from engine import DecodeConfig, generate, load_pair
from engine.hardware import probe

ROOT = Path(__file__).resolve().parents[2]

OUT = ROOT / "assets" / "traces"
PROMPTS = {p["id"]: p for p in json.loads((ROOT / "assets" / "prompts.json").read_text(encoding="utf-8"))["prompts"]}
MAX_NEW_TOKENS = 48
DEPTH = 4


def record(pair, peaks: dict, name: str, title: str, prompt_ids: list[str], drafter: str, date: str) -> dict:
    """Decode AR then speculative (never overlapping), each warmed once first, save both traces, return the index
    entry. Unwarmed, the first lane's prompt pass paid the process's cold start (359 ms against the other lane's 220),
    and the Replay page's own check found the whole run faster than decoding alone: lanes not on one clock."""
    prompts = [PROMPTS[i]["text"] for i in prompt_ids]
    files = {}
    configs = {
        m: DecodeConfig(mode=m, depth=DEPTH, drafter=drafter, max_new_tokens=MAX_NEW_TOKENS, seed=0)
        for m in ("autoregressive", "speculative")
    }
    for cfg in configs.values():
        warm(pair, prompts, cfg)  # untimed (app/common/warm.py, as the Playground and the Lessons warm), both lanes alike
    for mode, cfg in configs.items():
        trace = generate(pair, prompts, cfg)
        trace.meta["probe"] = peaks
        trace.meta["recorded_at"] = date
        path = OUT / f"{name}-{'ar' if mode == 'autoregressive' else 'spec'}.json"
        trace.to_json(path)
        files[mode] = path.name
        print(f"{path.name}: {trace.summary['new_tokens']} tokens in {trace.summary['wall_s']:.2f} s", flush=True)
    return {
        "id": name,
        "title": title,
        "prompts": prompt_ids,
        "drafter": drafter,
        "depth": DEPTH,
        "max_new_tokens": MAX_NEW_TOKENS,
        "device": peaks["device_name"],
        "dtype": peaks["dtype"],
        "date": date,
        "ar": files["autoregressive"],
        "spec": files["speculative"],
    }


def main() -> None:
    pair = load_pair()
    peaks = probe(pair.device, pair.dtype, quick=True).to_dict()
    date = dt.date.today().isoformat()
    pairs = [
        record(
            pair, peaks, "ngram-copy", "n-gram drafter on copy and extract prompts", ["copy-photosynthesis", "extract-dates"], "ngram", date
        )
    ]
    if "draft" in pair.loaded and "distilled" in pair.loaded["draft"].name.lower():
        pairs.append(
            record(pair, peaks, "model-open", "distilled draft model on open prompts", ["explain-gravity", "capital-cities"], "model", date)
        )
    index = {
        "about": "Real recorded runs of the embedded pair (scripts/record/record_sample_traces.py), "
        "labelled with the machine and date they were recorded on. Replay plays them back; it never reruns a model.",
        "pairs": pairs,
    }
    (OUT / "index.json").write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT / 'index.json'} ({len(pairs)} pairs)")


if __name__ == "__main__":
    main()
