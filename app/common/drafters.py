"""The drafters the app offers, as the engine's registry declares them (engine/drafters/__init__.py): their labels,
their help, and why a pair cannot run one. No page keeps its own table of drafter names. Plain data, no streamlit."""

from __future__ import annotations

from engine.drafters import DRAFTERS, available_drafters, by_display


def choices() -> dict[str, str]:
    """display name -> kind of every registered drafter, in the registry's order: a radio's options (bound widgets
    put the label in the link, so the labels are the drafters' stable display names)."""
    return by_display()


def label(kind: str | None) -> str:
    """A drafter's display name from its kind ("drafter" for none, the kind itself for one the registry lacks)."""
    return DRAFTERS[kind].display if kind in DRAFTERS else (kind or "drafter")


def help_text() -> str:
    """One sentence per drafter: what it drafts from."""
    return " ".join(f"{d.display}: {d.about}." for d in DRAFTERS.values())


def branches(kind: str) -> bool:
    """Can drafter `kind` draft trees?"""
    return kind in DRAFTERS and DRAFTERS[kind].branches


def confident(kind: str) -> bool:
    """Does drafter `kind` report a confidence that can stop its draft early?"""
    return kind in DRAFTERS and DRAFTERS[kind].confident


def branching_names() -> str:
    """'"draft model" or "EAGLE head"': the drafters that can draft trees, for a fix."""
    return " or ".join(f'"{d.display}"' for d in DRAFTERS.values() if d.branches)


def missing(pair, kind: str, what: str = "model pair") -> str:
    """Why `pair` cannot run drafter `kind`, and the fix: the drafters it can run (or another pair)."""
    name = DRAFTERS[kind].display if kind in DRAFTERS else kind
    others = " or ".join(f'"{DRAFTERS[k].display}"' for k in available_drafters(pair) if k != kind)
    return f"This {what} has no {name}. Fix: choose the drafter {others + ', or ' if others else ''}another pair."


def loaded_names(pair, longest: int = 60) -> str:
    """'draft model: <its name> · EAGLE head: yes': what `pair` loaded for each drafter that loads something (its
    name, or "yes" where the name is longer than `longest` characters; "none" where nothing loaded)."""
    ready = available_drafters(pair)

    def shown(kind: str) -> str:
        name = ready.get(kind)
        return "none" if name is None else name if len(name) <= longest else "yes"

    return " · ".join(f"{d.display}: {shown(kind)}" for kind, d in DRAFTERS.items() if d.loads)
