"""Prompts from a file, for measuring on a task rather than on SpecLab's own prompt sets: Spec-Bench's JSONL
(`question_id`, `category`, `turns`) or plain `{"prompt": "..."}` lines, one JSON object a line.

Spec-Bench (assets/spec_bench/, its README names the source and licence) groups MT-bench's eight categories into one
task, `mt_bench`, as its own evaluation script does; every other category is a task of its own. A prompt sends its
first turn (SpecLab decodes one turn). A bad file is refused with one line (PromptFileError) naming the line at fault.
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path

SPEC_BENCH = Path(__file__).resolve().parents[2] / "assets" / "spec_bench" / "question.jsonl"


MT_BENCH = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")


TASK_ORDER = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")  # Spec-Bench's columns


TASK_NAMES = {
    "mt_bench": "MT-bench",
    "translation": "translation",
    "summarization": "summarization",
    "qa": "QA",
    "math_reasoning": "math reasoning",
    "rag": "RAG",
}


MAX_BYTES = 16 * 1024 * 1024  # a prompt file larger than this is refused before it is read


MAX_PROMPTS = 10_000


MAX_PROMPT_CHARS = 32_000  # one prompt's text; the embedded model's context is 8,192 tokens


PLAIN = "prompts"  # the task of a line without a category


class PromptFileError(ValueError):
    """A prompt file that cannot be used, in one line."""


@dataclass(frozen=True)
class Prompt:
    text: str
    task: str  # Spec-Bench's task (MT-bench's categories grouped), a line's own category, else PLAIN
    category: str  # the line's category as written, else PLAIN
    qid: str  # the line's question_id, else its line number


def task_of(category: str) -> str:
    return "mt_bench" if category in MT_BENCH else category


def _prompt(obj, where: str, number: int) -> Prompt:
    if not isinstance(obj, dict):
        raise PromptFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "prompt" in obj:
        text = obj["prompt"]
    elif "turns" in obj:
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns:
            raise PromptFileError(f"{where}: 'turns' must be a non-empty list of strings")
        text = turns[0]
    else:
        raise PromptFileError(f"{where}: needs 'prompt' or 'turns' (Spec-Bench's format)")
    if not isinstance(text, str) or not text.strip():
        raise PromptFileError(f"{where}: the prompt must be a non-empty string")
    if len(text) > MAX_PROMPT_CHARS:
        raise PromptFileError(f"{where}: the prompt has {len(text):,} characters, more than {MAX_PROMPT_CHARS:,}")
    category = obj.get("category", PLAIN)
    if not isinstance(category, str) or not category.strip():
        raise PromptFileError(f"{where}: 'category' must be a non-empty string")
    qid = obj.get("question_id", number)
    return Prompt(text, task_of(category), category, str(qid))


def _no_constant(name: str):
    """NaN and Infinity are not JSON (Python's reader takes them): refused as the reader refuses any other word."""
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


def read_prompts(path) -> list[Prompt]:
    """Every prompt of a JSONL file, in file order (blank lines skipped); PromptFileError, one line, where the file is
    missing, too large, empty, not JSONL, or a line lacks its fields."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise PromptFileError(f"cannot read the prompt file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):  # a folder, a device (/dev/zero never ends), a pipe (blocks for ever)
        raise PromptFileError(f"the prompt file {path} is not a regular file")
    size = st.st_size
    if size > MAX_BYTES:
        raise PromptFileError(f"the prompt file {path} has {size:,} bytes, more than {MAX_BYTES:,} bytes")
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a byte-order mark, as some editors write, is not text
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptFileError(f"cannot read the prompt file {path} as UTF-8 text: {exc}") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            obj = json.loads(line, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise PromptFileError(f"{where} is not JSON ({exc.msg}): a prompt file has one JSON object a line") from None
        except RecursionError:  # thousands of nested brackets: no prompt looks like that
            raise PromptFileError(f"{where} nests too deeply to be a prompt: a prompt file has one JSON object a line") from None
        out.append(_prompt(obj, where, number))
        if len(out) > MAX_PROMPTS:
            raise PromptFileError(f"the prompt file {path} has more than {MAX_PROMPTS:,} prompts")
    if not out:
        raise PromptFileError(f"the prompt file {path} holds no prompt")
    return out


def tasks(prompts: list[Prompt]) -> list[str]:
    """The tasks present, Spec-Bench's in its column order first, then the others in file order."""
    present = list(dict.fromkeys(p.task for p in prompts))
    return [t for t in TASK_ORDER if t in present] + [t for t in present if t not in TASK_ORDER]


def select(prompts: list[Prompt], task: str | None = None, per_task: int | None = None) -> list[Prompt]:
    """The prompts of one task (or all), at most `per_task` of each task, spread evenly over the task's prompts in
    file order (a stratified subset that is the same every time). `task` may also name one of MT-bench's categories
    (e.g. "writing"): its prompts alone, as a task of that name. PromptFileError, one line, for an unknown task."""
    names = tasks(prompts)
    if task is not None and task not in names:
        if any(p.category == task for p in prompts):  # one of MT-bench's categories, asked for by its own name
            prompts = [Prompt(p.text, task, p.category, p.qid) for p in prompts if p.category == task]
        else:
            raise PromptFileError(f"no prompt of task {task!r} in this file: it has {', '.join(names)}")
    if per_task is not None and per_task < 1:
        raise PromptFileError(f"prompts per category must be a whole number ≥ 1, not {per_task}")
    out = []
    for name in [task] if task else names:
        group = [p for p in prompts if p.task == name]
        n = len(group) if per_task is None else min(per_task, len(group))
        out += [group[i * len(group) // n] for i in range(n)]
    return out


def task_name(task: str) -> str:
    """A task's name in a table: Spec-Bench's column names, else the category as written."""
    return TASK_NAMES.get(task, task)
