"""A lesson's words: its files (lessons/NN-name.md and NN-name.checks.json: read, split into sections and checked,
every refusal one line, `LessonError`), and what it hands out beyond the page: the teacher's class plan (a segment
per lesson file, every expectation computed from the shipped recordings, so a re-recording cannot leave it
contradicting the page) and its worksheet (app/views/worksheet.py). No streamlit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path

from app.common import measurement as ms
from app.lessons import registry
from app.lessons.kit.experiment import Experiment, claim_rows, findings
from app.views.worksheet import counted

LESSON_GLOB = "[0-9][0-9]-*.md"


_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class LessonError(ValueError):
    """A lesson file that cannot be shown: no or malformed front matter, no title."""


@dataclass(frozen=True)
class Sections:
    """A lesson body cut at its `## ` headings (lessons/README.md)."""

    lead: str  # title to the first "## " line
    gpu: str = ""  # the "## On a GPU" section's text
    sources: str = ""  # the "## Sources" section's text
    details: tuple[tuple[str, str], ...] = ()  # (heading, text) of every other "## " section, in file order


GPU_HEADING, SOURCES_HEADING = "On a GPU", "Sources"


def split_sections(body: str) -> Sections:
    """Cut a lesson body at its `## ` lines (not inside ``` fences): the lead, the GPU text, the sources, the rest."""
    parts: list[tuple[str | None, list[str]]] = [(None, [])]
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            parts.append((line[3:].strip(), []))
        else:
            parts[-1][1].append(line)
    texts = [(heading, "\n".join(lines).strip()) for heading, lines in parts]
    named = {heading: text for heading, text in texts[1:]}
    details = tuple((h, t) for h, t in texts[1:] if h not in (GPU_HEADING, SOURCES_HEADING))
    return Sections(texts[0][1], named.get(GPU_HEADING, ""), named.get(SOURCES_HEADING, ""), details)


def lesson_number(source: str) -> int:
    """The NN prefix of a lesson file name ("03-x.md" -> 3); -1 when it has none."""
    return int(source[:2]) if source[:2].isdigit() else -1


@dataclass(frozen=True)
class Lesson:
    source: str  # file name, for messages
    title: str  # the first "# " heading, without the "#"
    body: str  # the Markdown after the title (front matter and title removed)
    experiment: str  # the experiment's name from the front matter
    problem: str | None = None  # why the page cannot run this lesson's experiment (None: it can)
    checks: tuple[Check, ...] = ()  # the three check questions (empty if the checks file has a problem)
    checks_problem: str | None = None  # why the checks file could not be used
    meta: tuple[tuple[str, str], ...] = ()  # the front matter (key, value) pairs: the class segment's lines too

    @property
    def number(self) -> int:
        """The file's NN prefix: `?lesson=N` and the lessons' own links name it."""
        return lesson_number(self.source)

    def field(self, key: str) -> str:
        """One front-matter value ("" where absent): `minutes`, `ask`, `mistake`, `look_for`, `then` give the
        lesson's segment of the teacher's plan (lessons/README.md)."""
        return dict(self.meta).get(key, "")

    @property
    def sections(self) -> Sections:
        return split_sections(self.body)


@dataclass(frozen=True)
class Check:
    question: str
    options: tuple[str, ...]
    answer: int  # index into options
    explain: str  # feedback shown after an answer


CHECKS_PER_LESSON = 3


MAX_CHECK_TEXT = 600


def _text(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_CHECK_TEXT:
        raise LessonError(f"{where} must be a non-empty string of at most {MAX_CHECK_TEXT} characters")
    return value.strip()


def parse_checks(text: str, source: str = "checks") -> tuple[Check, ...]:
    """Exactly three questions, each with 2-5 distinct options, a valid answer index and feedback."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LessonError(f"{source} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, list) or len(data) != CHECKS_PER_LESSON:
        raise LessonError(f"{source} must be a list of exactly {CHECKS_PER_LESSON} questions")
    checks = []
    for i, item in enumerate(data, start=1):
        where = f"{source}, question {i}"
        if not isinstance(item, dict) or set(item) != {"question", "options", "answer", "explain"}:
            raise LessonError(f"{where} must have exactly the fields question, options, answer, explain")
        options = item["options"]
        if not isinstance(options, list) or not 2 <= len(options) <= 5:
            raise LessonError(f"{where}: options must be a list of 2 to 5 strings")
        options = tuple(_text(o, f"{where}, option {j + 1}") for j, o in enumerate(options))
        if len(set(options)) != len(options):
            raise LessonError(f"{where}: two options are the same")
        answer = item["answer"]
        if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(options):
            raise LessonError(f"{where}: answer must be the index (0-{len(options) - 1}) of the right option")
        checks.append(Check(_text(item["question"], f"{where}, question"), options, answer, _text(item["explain"], f"{where}, explain")))
    return tuple(checks)


def checks_path(lesson_path: Path) -> Path:
    return lesson_path.with_name(lesson_path.stem + ".checks.json")


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
    return Lesson(source=source, title=first[2:].strip(), body=body, experiment=experiment, problem=problem, meta=tuple(meta.items()))


def load_lessons(folder: Path, experiments: Collection[str] | None = None) -> list[Lesson]:
    """Every lessons/NN-*.md in file-name order. A file that cannot be parsed still becomes a Lesson
    (titled by its file name) whose `problem` says what is wrong, so the page can show it."""
    lessons = []
    for path in sorted(folder.glob(LESSON_GLOB)):
        try:
            lesson = parse_lesson(path.read_text(encoding="utf-8"), path.name, experiments)
        except (OSError, UnicodeDecodeError, LessonError) as exc:
            lessons.append(Lesson(source=path.name, title=path.stem, body="", experiment="", problem=str(exc)))
            continue
        checks_file = checks_path(path)
        try:
            lesson = replace(lesson, checks=parse_checks(checks_file.read_text(encoding="utf-8"), checks_file.name))
        except FileNotFoundError:
            lesson = replace(lesson, checks_problem=f"{checks_file.name} is missing: this lesson has no check questions")
        except (OSError, UnicodeDecodeError, LessonError) as exc:
            lesson = replace(lesson, checks_problem=str(exc))
        lessons.append(lesson)
    return lessons


# --- what a lesson hands out --------------------------------------------------------------------------------------
PLACEHOLDER = re.compile(r"\{expect:([a-z0-9_]+)\}")


H200 = "h200"


def _number(value: float | None, unit: str, whole: bool = False) -> str:
    if value is None:
        return "nothing (the run drafted nothing)"
    return counted(value, unit, whole)


FROM_CURVE = re.compile(r" ?\(0: from the curve\)")  # a knob's "0 = chosen from the pass curve", said in a question


def _question(experiment: Experiment, settings: dict, chosen: dict | None = None) -> str:
    """The students' question with the values the run used: a setting left at 0 ("from the curve") reads the value
    the recording chose (its measurement's `chosen`), so the plan never asks about "batch 0"."""
    used = {**settings, **{k: v for k, v in (chosen or {}).items() if settings.get(k, 0) == 0}}
    try:
        text = experiment.predict.question.format(**used)
    except (KeyError, IndexError, ValueError):
        return experiment.predict.question
    return FROM_CURVE.sub("", text) if chosen else text


def recording_expectation(name: str, record: dict, experiment: Experiment) -> str:
    """What a lesson's shipped recording shows: the students' question and its measured answer, the models beside
    it, what the recording shows (the lesson's notes) and every claim by the rule, labelled with the machine and date."""
    m, s = record["measurement"], record["settings"]
    pred = experiment.predict
    value = pred.measured(m, s)
    label = f"({record['machine']}, {record['dtype']}, {record['date']})"
    said = f"The recording {label} answers “{_question(experiment, s, m.get('chosen'))}” with {_number(value, pred.unit, pred.whole)}"
    models = [f"{label} gives {_number(v, pred.unit)}" for label, v in pred.models(m, s) if v is not None]
    if models:
        said += " (" + "; ".join(models) + ")"
    said += "."
    if ms.disturbed(record):
        said += " It was recorded beside other work, so its timings are noisy: re-record it on a quiet machine."
    lines = [line for line in experiment.notes(m, s) if line] or findings(experiment, m, s)[:1]  # the room alone: no notes
    if lines:
        said += " What it shows: " + " ".join(lines)
    shown = claim_rows(experiment.claims, m)  # every claim, the lead first as the record lists them
    if shown:
        said += (
            " Its claims by the rule: "
            + "; ".join(f"{r['claim']} ({r['where']}: {r['measured (95% range)']}): {r['shown?']}" for r in shown)
            + "."
        )
    return said


def expectation(name: str, recordings: Path, experiments: dict, h200: Callable[[], str]) -> str:
    """The sentence that replaces `{expect:name}`; a missing or malformed recording is named, in one line."""
    if name == H200:
        return h200()
    if name not in experiments:
        return f"(the plan names an experiment SpecLab does not have: {name})"
    walk = experiments[name].walkthrough
    if walk is not None:  # lesson 0: its recording is a step-through trace, read by its walkthrough
        record, problem, _ = walk.recorded()
        if record is None:
            return f"(no readable recording for this lesson: {problem})"
        return recording_expectation(name, record, experiments[name])
    try:
        record = registry.load_record(recordings / f"{name}.json")
    except ms.MeasurementError as exc:
        return f"(no readable recording for this lesson: {str(exc).splitlines()[0]})"
    return recording_expectation(name, record, experiments[name])


def render(text: str, recordings: Path, experiments: dict, h200: Callable[[], str]) -> str:
    """The plan with every placeholder replaced by what the shipped recordings show."""
    return PLACEHOLDER.sub(lambda found: expectation(found[1], recordings, experiments, h200), text)


def _h200() -> str:
    from app.views import h200  # plotly, loaded only where the plan is drawn

    curves, problems = h200.recorded_curves()
    return h200.knee_sentence(curves) if curves else "(no readable H200 recording: " + "; ".join(problems)[:200] + ")"


SEGMENT_KEYS = ("minutes", "ask", "mistake")  # a lesson's front matter lines that make its row of the plan


def segment(minutes: str, title: str, ask: str, mistake: str) -> str:
    """One segment of the plan as a list item that wraps at any width (a four-column table scrolled sideways on a
    laptop): its time and title, what to ask, the mistake to listen for."""
    return f"- **{minutes} min · {title}.** *Ask:* {ask} *Listen for:* {mistake}"


def segments(lessons) -> str:
    """The plan's segments, one per lesson, from each lesson file's front matter (a new lesson brings its own)."""
    return "\n".join(
        segment(lesson.field("minutes") or "?", lesson.title, lesson.field("ask"), lesson.field("mistake")) for lesson in lessons
    )


def expectations(lessons) -> str:
    """The plan's "what to expect" items: per lesson with a recording, what to look for, then its `{expect:name}`."""
    items = []
    for lesson in lessons:
        if lesson.field("look_for"):
            then = f" {lesson.field('then')}" if lesson.field("then") else ""
            items.append(f"- **Lesson {lesson.number}** ({lesson.field('look_for')}). {{expect:{lesson.experiment}}}{then}")
    return "\n".join(items)


def plan_text(text: str, recordings: Path, lessons=()) -> str:
    """The shipped plan as the Lessons page shows it: a segment per lesson (`lessons`: the lesson files, each bringing
    its row and what to look for) and every lesson's expectation from its recording and its verdict."""
    text = text.replace("{segments}", segments(lessons)).replace("{expectations}", expectations(lessons))
    return render(text, recordings, registry.EXPERIMENTS, _h200)
