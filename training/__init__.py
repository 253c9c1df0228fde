"""SpecLab's offline tools, beside the runtime (the layout of EAGLE's repository: inference in the model
package, training next to it). The runtime (`engine`) never imports this package.

    python -m training.distill     distil a small draft model from the target's own greedy outputs
    python -m training.eagle       train an EAGLE head on the target's hidden states
    python -m training.agreement   teacher-forced top-1 at draft starts vs the engine's acceptance
    python -m training.prompts     the prompt set; --write refreshes assets/heldout_prompts.json

One job per file. Shared: prompts.py (topics x tasks from assets/training/prompts.json, held-out split),
data.py (shards, sequences, batches, logs), features.py (the target's hidden states), pipeline.py (the
skeleton both trainers share: a run's folder, log, stats and stages; the training loop `fit`; the engine
evaluation). The draft: responses.py (the target's responses and soft targets), draft_model.py (the model
and its training), draft_card.py (saved folder and model card). The EAGLE head: eagle_head.py (the
module), eagle_train.py (its batches, loss and training), eagle_card.py (saved folder and model card).
distill.py and eagle.py are the command lines and their stages; other code imports each name from the file that
defines it.
"""
