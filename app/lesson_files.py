"""Lesson texts: lessons/NN-name.md, each opening with front matter that names its experiment.

    ---
    experiment: memory_bound
    ---
    # 1 · One token per pass leaves the arithmetic idle
    ...Markdown...

The front matter is a few `key: value` lines between two `---` lines (a small subset of YAML: no
nesting, no lists; quotes around a value are dropped). The Lessons page looks the experiment up by
name, so lessons can be reordered, added or removed without touching the page's code. Plain
functions, no streamlit: tests/app/test_lesson_files.py checks them on temporary files.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

LESSON_GLOB = "[0-9][0-9]-*.md"
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class LessonError(ValueError):
    """A lesson file that cannot be shown: no or malformed front matter, no title."""


@dataclass(frozen=True)
class Lesson:
    source: str  # file name, for messages
    title: str  # the first "# " heading, without the "#"
    body: str  # the Markdown after the title (front matter and title removed)
    experiment: str  # the experiment's name from the front matter
    problem: str | None = None  # why the page cannot run this lesson's experiment (None: it can)


def split_front_matter(text: str, source: str = "lesson") -> tuple[dict[str, str], str]:
    """Split '---\\nkey: value\\n---\\nrest' into ({key: value}, rest). LessonError if it is missing or malformed."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise LessonError(f"{source} has no front matter: it must start with a '---' line, then 'experiment: <name>'")
    meta: dict[str, str] = {}
    for i, line in enumerate(lines[1:], start=1):
        stripped = line.strip()
        if stripped == "---":
            return meta, "".join(lines[i + 1 :])
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not _KEY.match(key):
            raise LessonError(f"{source}, front matter line {i + 1}: expected 'key: value', got {stripped!r}")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        meta[key] = value
    raise LessonError(f"{source}: the front matter is not closed by a '---' line")


def parse_lesson(text: str, source: str = "lesson", experiments: Collection[str] | None = None) -> Lesson:
    """Parse one lesson file's text. With `experiments` (the names the page knows), a lesson naming
    another experiment gets a `problem`; a file without front matter or title raises LessonError."""
    meta, rest = split_front_matter(text, source)
    experiment = meta.get("experiment", "")
    if not experiment:
        raise LessonError(f"{source}: the front matter does not name an experiment ('experiment: <name>')")
    rest = rest.lstrip("\n")
    first, _, body = rest.partition("\n")
    if not first.startswith("# "):
        raise LessonError(f"{source}: the text must start with a '# Title' line after the front matter")
    problem = None
    if experiments is not None and experiment not in experiments:
        problem = (
            f"{source} names the experiment '{experiment}', which the Lessons page does not define. "
            f"Fix: use one of {', '.join(sorted(experiments))} in its front matter."
        )
    return Lesson(source=source, title=first[2:].strip(), body=body, experiment=experiment, problem=problem)


def load_lessons(folder: Path, experiments: Collection[str] | None = None) -> list[Lesson]:
    """Every lessons/NN-*.md in file-name order. A file that cannot be parsed still becomes a Lesson
    (titled by its file name) whose `problem` says what is wrong, so the page can show it."""
    lessons = []
    for path in sorted(folder.glob(LESSON_GLOB)):
        try:
            lessons.append(parse_lesson(path.read_text(encoding="utf-8"), path.name, experiments))
        except (OSError, UnicodeDecodeError, LessonError) as exc:
            lessons.append(Lesson(source=path.name, title=path.stem, body="", experiment="", problem=str(exc)))
    return lessons
