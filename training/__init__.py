"""SpecLab's offline tools, beside the runtime (the layout of EAGLE's repository: inference in the model
package, training next to it). The runtime (`engine`) never imports this package.

    python -m training.distill     distil a small draft model from the target's own greedy outputs
    python -m training.eagle       train an EAGLE head on the target's hidden states
    python -m training.agreement   teacher-forced top-1 at draft starts vs the engine's acceptance
    python -m training.prompts     the prompt set; --write refreshes assets/heldout_prompts.json

Shared helpers: prompts.py (topics x tasks, held-out split), data.py (shards, sequences, batches, logs),
features.py (the target's hidden states for EAGLE training and soft targets).
"""
