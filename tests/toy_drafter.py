"""A throwaway drafter for the registry's tests (tests/engine/test_drafter_registry.py, tests/app/test_drafter_choices.py):
registered in-process by a test and removed again."""

from __future__ import annotations


class ToyDrafter:
    """A throwaway drafter: it never proposes anything, so every step is a plain one."""

    kind = "toy"
    display = "toy drafter"
    about = "proposes nothing (a test's throwaway)"
    loads = None
    branches = False
    confident = False
    target_features = False

    @classmethod
    def available(cls, pair) -> bool:
        return True

    @classmethod
    def label(cls, pair, cfg=None) -> str:
        return "toy"

    @classmethod
    def params(cls, pair) -> int:
        return 0

    @classmethod
    def build(cls, pair, cfg, pad_id: int, backend=None):
        return cls()

    def prefill(self, prompts, hidden, shared=0) -> None:
        pass

    def propose(self, sequences, depth, cfg, generator):
        return None

    def commit(self, verified) -> None:
        pass

    def select(self, rows) -> None:
        pass

    def take_counts(self) -> tuple[float, float]:
        return 0.0, 0.0

    def token_flops(self, context: int) -> float:
        return 0.0
