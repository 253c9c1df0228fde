"""The long-context stage of scripts/record/gpu_record.py (issue 54): pass curves at a few KV lengths per row.

On a GPU the bytes of a decode pass grow with batch x context (every row streams its own KV cache) while a verify
pass of k + 1 tokens per row reads that cache once, so the room for speculation should grow with context. This stage
times one row and a few rows, a plain step (1 new token per row) and a chain of 3's verify pass (4 per row), at each
--contexts value the model's window and a KV cap allow, for the embedded target (real weights) and for every
random-weight shape. Imported by gpu_record.py, never run alone.
"""

from __future__ import annotations

KV_TOKENS = 262_144  # the most KV tokens (batch x context) a long-context cell asks of one GPU: 8 rows of 32k


CONTEXT_TOKENS = (1, 4)  # a plain step and a chain of 3's verify pass, per row


def context_curves(rec, pair, name: str, weights: str, curve) -> None:
    """One row and a few rows, 1 and 4 new tokens each, at each of --contexts that the model's window and KV_TOKENS
    allow: how the verify pass's cost over a plain step moves with the KV cache (a context of 0 is timed as 1).
    rec: gpu_record.py's Recorder; curve: its pass-curve function."""
    for context in rec.args.contexts:
        ctx = max(1, context)
        batches = [b for b in rec.args.context_batch if b * ctx <= KV_TOKENS]
        if ctx + max(CONTEXT_TOKENS) > pair.max_context or not batches:
            rec.doc["notes"].append(f"{name}: context {context} left out (window {pair.max_context}, KV cap {KV_TOKENS} tokens)")
            continue
        rows, used = curve(pair, batches, list(CONTEXT_TOKENS), ctx, rec.graph_backend, repeats=3, dry_run=rec.args.dry_run)
        entry = {"model": name, "weights": weights, "backend": rec.graph_backend, "graphs_used": used, "role": "context"}
        rec.doc["pass_curves"].append(entry | {"context": rows[0]["context"], "rows": rows})
        print(f"   {name}, context {rows[0]['context']}: " + ", ".join(f"B{r['batch']}x{r['new_tokens']} {r['ms']:.2f} ms" for r in rows))
    rec.save()
