"""The command line's parser: every subcommand, its options and their help (engine/__main__.py runs them).

Choices come from where they are declared: the run options' enums from engine/options.py, the drafters from their
registry (engine/drafters/__init__.py, read when the parser is built), the serving benchmark's options from
engine/serving/cli.py.
"""

from __future__ import annotations

import argparse

from engine.options import BackendKind, GraphMode, Mode, PolicyKind

BACKEND_NAMES = tuple(kind.value for kind in BackendKind if kind is not BackendKind.AUTO)  # the config's, as the backend's
MODES, GRAPH_MODES, POLICIES = ([e.value for e in kinds] for kinds in (Mode, GraphMode, PolicyKind))
FAST_ALIASES = {"off": "torch", "eager": "fused", "native": "native"}  # --fast's old values


def list_of(convert, what: str):
    """An argparse type: comma-separated values, each read by `convert` (int: integers, float: numbers)."""

    def parse(text: str) -> list:
        try:
            values = [convert(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}s, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {what}")
        return values

    return parse


int_list, float_list = list_of(int, "integer"), list_of(float, "number")


def batch_table_rows(text: str) -> tuple[tuple[int, int, int], ...]:
    """--batch-table '1-4:4,5-16:2,17-1024:0' -> ((1, 4, 4), (5, 16, 2), (17, 1024, 0)); 'N:k' is N-N:k."""
    rows = []
    for part in text.split(","):
        try:
            span, k = part.strip().split(":")
            low, _, high = span.partition("-")
            rows.append((int(low), int(high or low), int(k)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected MIN-MAX:K rows separated by commas (e.g. 1-4:4,5-16:2,17-1024:0); got {part.strip()!r}"
            ) from None
    return tuple(rows)


POLICY_HELP = (
    "fixed: always --depth; off_above_batch: the classic rule (after vLLM V0's disable_by_batch_size, which "
    "switched off at N requests; here off above N), no speculation above --disable-by-batch-size; heuristic: "
    "transformers' +2/-1 schedule; batch_table: k per batch range (vLLM num_speculative_tokens_per_batch_size; "
    "--batch-table, else derived from this "
    "machine's measured pass cost); goodput: k maximising expected tokens/s from the measured pass cost and "
    "the run's acceptance (never above --depth; with --tree-nodes it also chooses plain, a chain or the tree cut to n nodes)"
)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="model dtype (auto: bf16 where native)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: best available)")
    p.add_argument("--target", default=None, help="target hub id or folder (default: embedded SmolLM2-135M-Instruct)")
    p.add_argument("--draft", default="default", help="draft hub id, folder, truncated:N or none (default: shipped draft)")
    p.add_argument("--eagle", default="default", help="EAGLE head folder or none (default: the shipped head, embedded target only)")
    p.add_argument(
        "--cuda-graphs",
        default="off",
        choices=GRAPH_MODES,
        help="deprecated alias of --backend (static, padded: cuda_graphs_static, cuda_graphs_padded; auto: cuda_graphs on CUDA). "
        "off (default): no CUDA graphs, the --backend's own passes (on a CPU the native or fused pass over static KV buffers)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=["auto", *BACKEND_NAMES],
        help="how passes are computed (engine/model/backend.py): auto (default: $SPECLAB_BACKEND, else native on the CPU, fused there "
        "without the kernels, torch elsewhere), transformers, torch, fused, native, cuda_graphs (CUDA), cuda_graphs_static/_padded",
    )
    p.add_argument("--fast", dest="backend", type=_fast_alias, help=argparse.SUPPRESS)  # --backend's old alias


def _fast_alias(value: str) -> str:
    """--fast's old value -> the backend it named."""
    if value not in FAST_ALIASES:
        raise argparse.ArgumentTypeError(f"--fast is now --backend; its old values were {', '.join(FAST_ALIASES)}, got {value!r}")
    return FAST_ALIASES[value]


def _default_of(action) -> str | None:
    """An option's default as --help shows it, None where it has none worth saying (None, False, suppressed)."""
    default = action.default
    if not action.option_strings or default is None or default is False or default is argparse.SUPPRESS:
        return None
    shown = ",".join(str(v) for v in default) if isinstance(default, (list, tuple)) else str(default)
    return shown.replace("%", "%%")


class WithDefaults(argparse.HelpFormatter):
    """--help states each option's default where it has one and its help does not say it already."""

    def _get_help_string(self, action) -> str:
        text, shown = action.help or "", _default_of(action)
        return text if shown is None or "default" in text else f"{text} (default: {shown})"


class OneLine(argparse.ArgumentParser):
    """A parser whose errors are one line (no usage block before them: `--help` shows it), exit status 2, and whose
    --help states the defaults (`WithDefaults`); its subcommands' parsers are of the same kind."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", WithDefaults)
        super().__init__(*args, **kwargs)

    def _add_action(self, action):
        shown = _default_of(action)
        if action.help is None and shown is not None:  # an option without help still shows its default
            action.help = f"(default: {shown})"
        return super()._add_action(action)

    def error(self, message: str):
        self.exit(2, f"error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLine(prog="python -m engine", description="SpecLab decoding engine")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLine)
    _run_parser(sub)
    _bench_parser(sub)
    _other_parsers(sub)
    from engine.serving import cli as serving_cli

    serving_cli.add_parser(sub)
    return parser


def _drafter_option(p: argparse.ArgumentParser) -> None:
    """--drafter: the registry's drafters (engine/drafters/__init__.py), read when the parser is built."""
    from engine.drafters import DRAFTERS, cli_help

    p.add_argument("--drafter", default="model", choices=list(DRAFTERS), help=cli_help())


def _context_option(p: argparse.ArgumentParser, rows: str) -> None:
    """--context N: a shared document before every row (engine/bench/context.py)."""
    p.add_argument(
        "--context",
        type=int,
        default=0,
        help=f"long context: {rows} preceded by the shipped document (assets/context/), so the KV cache holds about N "
        "tokens per row at the first decode step; the rows share it as a prefix, prefilled once (0 = no document)",
    )


def _run_parser(sub) -> None:
    run = sub.add_parser("run", help="decode prompts once and print the text and summary")
    run.add_argument("--prompt", action="append", required=True, help="a user message; repeat for a batch")
    run.add_argument("--mode", default=Mode.SPECULATIVE.value, choices=MODES, help="plain decoding, or draft and verify")
    run.add_argument("--depth", type=int, default=4, help="draft tokens per step, 0..16")
    _drafter_option(run)
    run.add_argument("--policy", default="fixed", choices=POLICIES, help=POLICY_HELP)
    run.add_argument(
        "--batch-table",
        type=batch_table_rows,
        default=None,
        help="batch_table policy: MIN-MAX:K rows, e.g. 1-4:4,5-16:2,17-1024:0 (K = 0: no speculation)",
    )
    run.add_argument("--disable-by-batch-size", type=int, default=8, help="off_above_batch: speculate only while batch <= N")
    run.add_argument(
        "--confidence",
        type=float,
        default=0.0,
        help="model drafters stop a row's draft once the product of their probabilities falls below this "
        "(0..1; 0 = always draft --depth tokens)",
    )
    run.add_argument(
        "--tree-nodes",
        type=int,
        default=0,
        help="tree drafting (eagle, model): verify this many draft-tree nodes per row (0 = a chain of --depth; "
        "with --policy goodput, the most a step verifies)",
    )
    run.add_argument("--tree-topk", type=int, default=0, help="tree drafting: children expanded per node")
    run.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    run.add_argument(
        "--top-p", type=float, default=1.0, help="nucleus sampling: keep the smallest set of tokens holding this much probability (1 = all)"
    )
    run.add_argument("--max-new-tokens", type=int, default=64, help="new tokens per prompt, at most")
    run.add_argument("--seed", type=int, default=0, help="sampling seed (with --temperature > 0)")
    run.add_argument("--json", default=None, help="write the full trace here (JSON: speclab.trace/1, /2 where it drew trees)")
    _context_option(run, "every --prompt")
    _common(run)


def _bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help="AR vs speculative tokens/s over a batch x depth grid (medians)")
    bench.add_argument("--batch", type=int_list, default=[1, 4, 16], help="comma-separated batch sizes")
    bench.add_argument("--depth", type=int_list, default=[0, 2, 4, 8], help="comma-separated depths")
    _drafter_option(bench)
    bench.add_argument(
        "--policy",
        type=list_of(str, "policy name"),
        default=["fixed"],
        help="comma-separated policies, each measured at every batch and depth (" + ", ".join(POLICIES) + ")",
    )
    bench.add_argument("--batch-table", type=batch_table_rows, default=None, help="batch_table policy: MIN-MAX:K rows")
    bench.add_argument(
        "--confidence",
        type=float_list,
        default=[0.0],
        help="comma-separated confidence thresholds (0..1), each run at every depth (0 = off)",
    )
    bench.add_argument(
        "--tree-nodes",
        type=int_list,
        default=[0],
        help="comma-separated tree sizes (tree drafting; 0 = the chain), each with every --tree-topk",
    )
    bench.add_argument("--tree-topk", type=int_list, default=[0], help="comma-separated children per tree node")
    bench.add_argument("--disable-by-batch-size", type=int, default=8)
    bench.add_argument(
        "--prompts",
        default="chat",
        choices=["chat", "extractive", "heldout"],
        help="built-in prompt set (heldout: topics the distilled draft never saw)",
    )
    bench.add_argument(
        "--prompts-file",
        default=None,
        help="JSONL prompts (Spec-Bench's question.jsonl format, or {\"prompt\": ...} lines; 'spec-bench': the shipped "
        "Spec-Bench): measure per category instead of the grid (decode-only speedup with its 95%% range, tau, acceptance)",
    )
    bench.add_argument("--category", default=None, help="with --prompts-file: only this category (Spec-Bench: mt_bench, qa, rag, ...)")
    bench.add_argument(
        "--per-category", type=int, default=None, help="with --prompts-file: at most this many prompts per category, spread evenly"
    )
    bench.add_argument("--baseline-prompts", type=int, default=4, help="prompts in the --baseline comparison")
    bench.add_argument(
        "--sequential", type=int, default=1, help="at batch 1, decode this many prompts one after another per cell (less noisy alpha)"
    )
    bench.add_argument("--max-new-tokens", type=int, default=64)
    bench.add_argument("--repeats", type=int, default=3, help="runs per cell; the median is reported")
    bench.add_argument("--baseline", action="store_true", help="also time transformers generate() at batch 1")
    bench.add_argument("--json", default=None, help="write the results here")
    _context_option(bench, "the rows, which are then the document's questions (not --prompts),")
    _common(bench)


def _other_parsers(sub) -> None:
    passes = sub.add_parser("passes", help="time ONE target forward vs tokens per pass: the roofline curve, measured")
    passes.add_argument("--batch", type=int_list, default=[1], help="comma-separated batch sizes")
    passes.add_argument("--tokens", type=int_list, default=[1, 2, 4, 8, 16, 32, 64], help="new tokens per row")
    passes.add_argument(
        "--context",
        type=int_list,
        default=[150],
        help="KV cache length per row; comma-separated for several (each (batch, context) timed in interleaved --rounds, "
        "with its room and knee)",
    )
    passes.add_argument("--repeats", type=int, default=5)
    passes.add_argument("--model", default="target", choices=["target", "draft"])
    passes.add_argument(
        "--compare-backends",
        type=list_of(str, "backend"),
        default=None,
        help="comma-separated backends (e.g. torch,fused,native) timed against each other, interleaved over --rounds",
    )
    passes.add_argument(
        "--rounds", type=int, default=3, help="--compare-backends, several --context: interleaved rounds (median, min-max over them)"
    )
    passes.add_argument("--json", default=None)
    from engine.drafters import DRAFTERS

    passes.add_argument(
        "--drafter",
        default=None,
        choices=list(DRAFTERS),
        help="also print goodput's (batch, context) -> k table for this drafter (vLLM RFC #48627's entries): the k its "
        "prior chooses and the k the measured passes price best, with the drafter's card as acceptance",
    )
    passes.add_argument("--depth", type=int, default=3, help="with --drafter: the deepest chain the k table considers (1..16)")
    _common(passes)

    probe = sub.add_parser("probe", help="measure this machine's peak memory bandwidth and matmul FLOP/s")
    probe.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"], help="the dtype of the matmul timed")
    probe.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps (default: best available)")

    predict = sub.add_parser("predict", help="the roofline predictor for a named GPU (a model, not a measurement)")
    predict.add_argument("--gpu", default="H200", help="T4, L4, A10G, A100-40GB, A100-80GB, H100-SXM, H200, B200, RTX4090")
    predict.add_argument("--model", default="8B", help="135M, 1.7B, 7B, 8B, 27B, 70B")
    predict.add_argument("--context", type=int, default=1024, help="KV cache length per row")
    predict.add_argument("--alpha", type=float, default=0.7, help="per-token acceptance")
    predict.add_argument("--c", type=float, default=0.05, help="draft step cost / target step cost")
    predict.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    predict.add_argument("--floor", default="graph", choices=["graph", "eager", "none"])
