"""`python -m engine serve-bench`: plain against speculative serving on a real server, by URL (engine/serving/sweep.py)."""

from __future__ import annotations

import datetime as dt
import json
import platform
from pathlib import Path

from engine.serving import client, metrics, sweep

FORMAT = "speclab.serve_bench/1"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve-bench",
        help="a real serving engine (llama-server, vLLM, SGLang) by URL: speedup against concurrency, acceptance per position",
    )
    p.add_argument("--url", required=True, help="the speculative server, e.g. http://127.0.0.1:8080 (OpenAI-compatible)")
    p.add_argument("--url-plain", default=None, help="the same model served without speculation (for the speedup)")
    p.add_argument("--concurrency", default="1,2,4,8", help="requests in flight, comma list (1 to 64)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--prompts", type=int, default=8, help="held-out prompts sent at each concurrency and round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (plain and speculative take turns)")
    p.add_argument("--max-seconds", type=float, default=1800.0, help="stop the sweep after this long")
    p.add_argument("--label", default="", help="what the servers are (version, flags), stored with the run")
    p.add_argument("--json", default=None, help="write the run here")


def run(args) -> int:
    from engine.bench.prompts import batch_prompts

    try:
        conc = [int(x) for x in str(args.concurrency).split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--concurrency {args.concurrency!r}: a comma list of numbers, e.g. 1,2,4,8") from None
    if not 1 <= args.prompts <= 64 or not 1 <= args.rounds <= 10:
        raise ValueError("--prompts takes 1 to 64 and --rounds 1 to 10")
    sweep.check_plan(conc, args.prompts, args.rounds, 2 if args.url_plain else 1, args.max_new_tokens)
    spec = sweep.Server(args.url)
    plain = sweep.Server(args.url_plain) if args.url_plain else None
    print(f"speculative: {spec.base} ({metrics.ENGINES.get(spec.engine, 'no speculation metrics found')}), model {spec.model}")
    if plain:
        print(f"plain:       {plain.base} ({metrics.ENGINES.get(plain.engine, 'no metrics found')}), model {plain.model}")
    prompts = batch_prompts("heldout", args.prompts)
    result = sweep.sweep(plain, spec, prompts, conc, args.rounds, args.max_new_tokens, args.max_seconds)
    result |= {
        "format": FORMAT,
        "label": args.label[:300],
        "machine": platform.processor() or platform.machine(),
        "date": dt.date.today().isoformat(),
        "rounds": args.rounds,
    }
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    return 0


def table(result: dict) -> str:
    lines = ["concurrency  plain tok/s  spec tok/s  speedup (rounds)        TTFT ms plain/spec  TPOT ms plain/spec  α      per position"]
    for r in result["rows"]:
        p, s, sp, acc = r.get("plain") or {}, r["spec"], r.get("speedup"), r.get("acceptance") or {}
        speed = f"{sp['median']:.2f}× ({sp['lo']:.2f}–{sp['hi']:.2f})" if sp else "-"
        pos = " ".join(f"{x:.2f}" for x in acc.get("per_pos_rate", []))
        alpha = f"{acc['alpha']:.2f}" if acc.get("alpha") is not None else "-"
        lines.append(
            f"{r['concurrency']:>11}  {_f(p.get('tokens_per_s')):>11}  {_f(s['tokens_per_s']):>10}  {speed:<22}  "
            f"{_f(p.get('ttft_ms'))}/{_f(s['ttft_ms']):<12}  {_f(p.get('tpot_ms'))}/{_f(s['tpot_ms']):<12}  {alpha:<5}  {pos}"
        )
    return "\n".join(lines)


def _f(x) -> str:
    return "-" if x is None else f"{x:.1f}"


ERRORS = (client.ServerError, metrics.MetricsError, TimeoutError)
