"""Command line: python -m engine run | bench | passes | probe | predict | serve-bench   (docs/design.md §4).

    python -m engine run   --prompt TEXT [--prompt TEXT ...] --mode {autoregressive,speculative} [--depth K]
                           [--drafter NAME] [--confidence C] [--temperature T] [--top-p P] [--max-new-tokens N] [--seed S]
                           [--dtype {auto,float32,bfloat16}] [--cuda-graphs {auto,off,static,padded}] [--context N] [--json PATH]
    python -m engine bench --batch 1,4,16 --depth 0,2,4,8 [--confidence 0,0.3] [--drafter ...] [--dtype ...] [--context N]
                           [--json PATH]   # --context N: the shipped document before every row, ~N tokens of cache each
    python -m engine passes [--batch 1] [--tokens 1,2,4,...] [--context 150]   # one forward's time vs tokens per pass
                            [--compare-backends torch,fused,native [--rounds 3]]   # backends' passes against each other
    python -m engine probe
    python -m engine predict --gpu H200 --model 8B [--context 1024] [--alpha 0.7] [--c 0.05] [--dtype bfloat16]
                             [--floor graph|eager|none]   # the roofline predictor's table: a model, not a measurement
Errors in the input are printed as one line and exit with status 2; no traceback, no usage block (engine/cli/parser.py,
`OneLine`); --help states every option's default. The parser and the commands live in
engine/cli/ (--drafter's choices: the drafter registry, engine/drafters/__init__.py).
"""

from __future__ import annotations

import sys

from engine.cli import decode, measure
from engine.cli.files import check_json_path
from engine.cli.parser import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve-bench":  # no model here: a server elsewhere does the decoding
        from engine.serving import cli as serving_cli

        try:
            return serving_cli.run(args)
        except (ValueError, *serving_cli.ERRORS) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command == "predict":
        from engine.roofline.predictor import prediction_table

        try:
            print(prediction_table(args.gpu, args.model, args.context, args.alpha, args.c, args.dtype, args.floor))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    from engine import ConfigError, ModelLoadError, TraceError

    try:
        if hasattr(args, "json"):  # before any decoding: a bad path must not lose a run
            args.json = check_json_path(args.json)
        if getattr(args, "device", None):
            from engine.hardware import pick_device

            pick_device(args.device)
        command = {"probe": measure.probe, "passes": measure.passes, "run": decode.run, "bench": decode.bench}.get(args.command)
        if command is None:
            return 1
        command(args)
        return 0
    except (ConfigError, ModelLoadError, TraceError, ValueError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line, whatever the message held
        return 2


if __name__ == "__main__":
    sys.exit(main())
