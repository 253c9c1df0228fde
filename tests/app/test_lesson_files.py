"""Lesson files name their experiment in front matter; the parser is a pure function (no streamlit, no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.lessons.kit import numbers
from app.lessons.kit.texts import (
    LESSON_GLOB,
    LessonError,
    lesson_number,
    load_lessons,
    parse_checks,
    parse_lesson,
    split_front_matter,
    split_sections,
)
from app.lessons.registry import EXPERIMENTS
from app.views import h200

ROOT = Path(__file__).resolve().parents[2]
KNOWN = {  # the experiments the shipped lesson files name, read from their front matter alone
    split_front_matter(path.read_text(encoding="utf-8"), path.name)[0]["experiment"] for path in (ROOT / "lessons").glob(LESSON_GLOB)
}


def test_front_matter_is_split_from_the_text():
    meta, rest = split_front_matter("---\nexperiment: memory_bound\ntitle: 'quoted'  \n---\n# Title\nBody\n")
    assert meta == {"experiment": "memory_bound", "title": "quoted"}
    assert rest == "# Title\nBody\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# Title\nno front matter\n", "has no front matter"),
        ("---\nexperiment: memory_bound\n# Title\n", "not closed"),
        ("---\nexperiment memory_bound\n---\n# Title\n", "expected 'key: value'"),
        ("---\ntitle: x\n---\n# Title\n", "does not name an experiment"),
        ("---\nexperiment: memory_bound\n---\nno title line\n", "'# Title' line"),
    ],
)
def test_malformed_lessons_are_refused_with_a_reason(text, message):
    with pytest.raises(LessonError, match=message):
        parse_lesson(text, "06-bad.md", KNOWN)


def test_lesson_title_body_and_experiment():
    lesson = parse_lesson("---\nexperiment: more_flops\n---\n# 2 · More work\n\nText **here**.\n", "02-x.md", KNOWN)
    assert lesson.title == "2 · More work" and lesson.experiment == "more_flops" and lesson.problem is None
    assert lesson.body == "\nText **here**.\n"
    assert "---" not in lesson.body and "experiment:" not in lesson.body  # the front matter is not shown


def test_unknown_experiment_is_named_clearly(tmp_path):
    (tmp_path / "01-good.md").write_text("---\nexperiment: memory_bound\n---\n# One\nText\n", encoding="utf-8")
    (tmp_path / "02-typo.md").write_text("---\nexperiment: memory_bond\n---\n# Two\nText\n", encoding="utf-8")
    (tmp_path / "03-bare.md").write_text("# Three\nNo front matter\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("not a lesson (no NN- prefix)", encoding="utf-8")
    good, typo, bare = load_lessons(tmp_path, KNOWN)
    assert good.problem is None and good.experiment == "memory_bound"
    assert typo.title == "Two" and typo.experiment == "memory_bond"
    assert "02-typo.md" in typo.problem and "'memory_bond'" in typo.problem and "does not define" in typo.problem
    assert "memory_bound" in typo.problem and "Fix:" in typo.problem  # says what would work
    assert bare.title == "03-bare" and "no front matter" in bare.problem


def test_shipped_lessons_name_known_experiments():
    lessons = load_lessons(ROOT / "lessons", KNOWN)
    assert len(lessons) == len(KNOWN)  # one file per record
    assert [lesson.problem for lesson in lessons] == [None] * len(lessons)
    assert [lesson.number for lesson in lessons] == list(range(len(lessons)))  # ?lesson=N is the file's NN prefix
    assert [lesson.experiment for lesson in lessons][:8] == [  # old links ?lesson=0..7 keep their lessons
        "one_step",
        "memory_bound",
        "more_flops",
        "past_the_ridge",
        "turn_it_off",
        "adaptive",
        "by_load",
        "width",
    ]
    assert lessons[0].title == "0 · One speculative step"
    assert lessons[1].title == "1 · One token per pass leaves the arithmetic idle"  # old links ?lesson=1..7 keep their lessons


def test_page_experiments_match_the_shipped_lessons():
    """The registry's records (app/lessons/registry.py; importing it runs no page) are exactly the experiments the
    lesson files name."""

    assert set(EXPERIMENTS) == KNOWN


def test_a_lesson_body_splits_into_lead_gpu_sources_and_details():
    body = (
        "\nLead **text**.\n\n## Why\nDetail one.\n```\n## not a heading (in a fence)\n```\n"
        "## On a GPU\nH200 text.\n## Sources\nA paper.\n## In a batch\nDetail two.\n"
    )
    sections = split_sections(body)
    assert sections.lead == "Lead **text**."
    assert sections.gpu == "H200 text." and sections.sources == "A paper."
    assert [h for h, _ in sections.details] == ["Why", "In a batch"]  # file order, GPU and sources left out
    assert "## not a heading (in a fence)" in sections.details[0][1]
    bare = split_sections("Only a lead.\n")
    assert bare.lead == "Only a lead." and bare.gpu == "" and bare.sources == "" and bare.details == ()


def test_lesson_numbers_come_from_the_file_prefix():
    assert lesson_number("00-one-step.md") == 0 and lesson_number("07-width.md") == 7 and lesson_number("notes.md") == -1


def test_shipped_lessons_have_a_short_lead_a_gpu_panel_and_sources():
    for lesson in load_lessons(ROOT / "lessons", KNOWN):
        sections = lesson.sections
        assert len(sections.lead.split()) <= 300, (lesson.source, len(sections.lead.split()))
        assert sections.gpu and sections.sources, lesson.source
        assert all(h and t for h, t in sections.details), lesson.source


CHECK = {"question": "Q?", "options": ["a", "b", "c"], "answer": 1, "explain": "Because."}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([CHECK, CHECK], "exactly 3 questions"),
        ("not a list", "exactly 3 questions"),
        ([CHECK, CHECK, CHECK | {"answer": 3}], "question 3: answer must be the index"),
        ([CHECK, CHECK, CHECK | {"answer": True}], "answer must be the index"),
        ([CHECK | {"options": ["a"]}, CHECK, CHECK], "question 1: options must be a list of 2 to 5"),
        ([CHECK, CHECK | {"options": ["a", "a"]}, CHECK], "two options are the same"),
        ([CHECK, CHECK | {"explain": ""}, CHECK], "question 2, explain must be a non-empty string"),
        ([CHECK, CHECK, CHECK | {"hint": "x"}], "exactly the fields"),
        ([CHECK, CHECK, CHECK | {"question": "x" * 601}], "at most 600 characters"),
    ],
)
def test_malformed_checks_are_refused_with_a_reason(data, message):
    import json

    with pytest.raises(LessonError, match=message):
        parse_checks(json.dumps(data), "01-x.checks.json")
    with pytest.raises(LessonError, match="not valid JSON"):
        parse_checks("[{", "01-x.checks.json")


def test_every_shipped_lesson_has_three_valid_check_questions():
    lessons = load_lessons(ROOT / "lessons", KNOWN)
    for lesson in lessons:
        assert lesson.checks_problem is None, lesson.checks_problem
        assert len(lesson.checks) == 3, lesson.source
        for check in lesson.checks:
            assert 0 <= check.answer < len(check.options) and check.explain


def test_the_check_questions_do_not_give_their_answers_away():
    """A student must know the mechanism to pick the right option, not its place or its length: the right option is
    the longest of its question in at most a third of the questions (the reasoning lives in the explanation), no
    option runs past twice another's length, and the right answers stand in every position, none in most of them."""
    checks = [c for lesson in load_lessons(ROOT / "lessons", KNOWN) for c in lesson.checks]
    longest = [c.question for c in checks if len(c.options[c.answer]) > max(len(o) for i, o in enumerate(c.options) if i != c.answer)]
    assert len(longest) <= len(checks) / 3, longest
    for c in checks:
        sizes = [len(o) for o in c.options]
        assert max(sizes) <= 2 * min(sizes), c.question
    places = [c.answer for c in checks]
    assert set(places) == set(range(4)) and max(places.count(i) for i in range(4)) <= len(checks) / 2, places


def test_a_missing_or_broken_checks_file_is_named(tmp_path):
    (tmp_path / "01-a.md").write_text("---\nexperiment: memory_bound\n---\n# One\nText\n", encoding="utf-8")
    (tmp_path / "02-b.md").write_text("---\nexperiment: more_flops\n---\n# Two\nText\n", encoding="utf-8")
    (tmp_path / "02-b.checks.json").write_text("[]", encoding="utf-8")
    one, two = load_lessons(tmp_path, KNOWN)
    assert one.problem is None and not one.checks and "01-a.checks.json is missing" in one.checks_problem
    assert "02-b.checks.json must be a list of exactly 3" in two.checks_problem


def test_lessons_describe_the_load_rules_accurately():
    """Lesson 4 names the old switch as what it was (V0 only, removed in February 2026); lesson 6 cites its sources."""
    four, six = (
        (ROOT / "lessons" / "04-turn-it-off.md").read_text(encoding="utf-8"),
        (ROOT / "lessons" / "06-speculate-by-load.md").read_text(encoding="utf-8"),
    )
    assert "disable-by-batch-size" in four and "V0" in four and "February" in four and "2026" in four
    assert "vllm-project/vllm/pull/35060" in four
    for source in ("Leviathan", "pull/35060", "num_speculative_tokens_per_batch_size", "draft_len_schedule", "docs.vllm.ai"):
        assert source in six, source


def test_lessons_state_the_corrected_facts_and_cite_sources():
    """Issue 19: the factual corrections stay made, the removed claims stay removed, and every lesson cites."""
    text = {p.name[:2]: p.read_text(encoding="utf-8") for p in sorted((ROOT / "lessons").glob("[0-9][0-9]-*.md"))}
    one, two, three, four, five, six = (text[k] for k in ("01", "02", "03", "04", "05", "06"))
    # 1: one multiply-add (2 FLOPs) per weight, ~1 FLOP/byte in bf16, 0.5 in fp32, plus KV reads; not per weight byte
    assert "2 FLOPs" in one and "1 FLOP per byte" in one and "0.5 FLOP per byte" in one and "KV cache" in one
    assert "per weight byte" not in one
    assert "overhead/latency-bound" in one and "50%" in one  # the regime rule, with its threshold
    # 2: at least as much arithmetic, equal only when every draft is accepted and the drafter is free
    assert "at least as much" in two and "every draft is accepted" in two and "drafter" in two
    assert "operations factor" in two
    # 3: the EAGLE head runs; no outcome is asserted
    assert "EAGLE head" in three and "n-gram" in three
    assert "because 80 tokens per pass is past the ridge point" not in three
    # 4: the old switch is history; today's rules are in production
    assert "disable-by-batch-size" in four and "adaptive verification" in four and "docs.vllm.ai" in four
    # 5: the gate's real behaviour, and transformers' one-token check against the joint product
    assert "mostly ones the target would have rejected" not in five and "sends nothing it expects to lose" not in five
    flat = " ".join(five.split())  # line breaks fall anywhere in Markdown
    assert "it is still proposed" in flat and "until every row has stopped" in flat and "padding" in flat
    assert "assistant_confidence_threshold" in flat and "**one** token's" in flat and "joint confidence" in flat
    for name, body in text.items():
        assert "Barrow" in body, name
        assert "always does more" not in body, name
    assert "Leviathan" in two and "Leviathan" in three and "Leviathan" in six
    seven = " ".join(text["07"].split())  # 7: width, with EAGLE-2's tree and lossless tree verification
    assert "EAGLE-2" in seven and "tree attention mask" in seven and "recursive rejection sampling" in seven
    assert "SpecInfer" in seven and "lossless" in seven


def test_app_never_says_speculation_always_does_more_arithmetic():
    for path in (ROOT / "app").rglob("*.py"):
        assert "always does more" not in path.read_text(encoding="utf-8"), path


def test_lesson_texts_quote_no_cpu_recording():
    """The page draws each recording with its machine and date and computes its conclusions from it, so the texts
    point at the chart and table instead of quoting a CPU recording's numbers, which go stale when it is re-made."""
    paths = sorted((ROOT / "lessons").glob("*.md")) + sorted((ROOT / "lessons").glob("*.checks.json"))
    for path in paths:
        flat = " ".join(path.read_text(encoding="utf-8").split())
        for stale in ("Xeon", "EPYC", "Recorded on", "shipped recording (", "in the recording", "recorded run", "≈ 35", "≈ 37"):
            assert stale not in flat, (path.name, stale)


def test_texts_quote_the_h200_room_and_knee_the_recording_gives():
    """Issue 53: one room (the 1.25× point, app/lessons/kit/numbers.py) and one knee (the 1.5× point), both read off the
    recorded H200 curve, in every text; never "a few hundred" or the probed ridge standing in for either."""

    curves, problems = h200.recorded_curves()
    curve = h200.knee_curve(curves)
    assert curve is not None, problems
    room, knee_at = numbers.room_tokens(curve.tokens, curve.ms), round(h200.knee_tokens(curve))
    paths = [*sorted((ROOT / "lessons").glob("*.md")), *sorted((ROOT / "lessons").glob("*.checks.json")), ROOT / "README.md"]
    for path in paths:
        flat = " ".join(path.read_text(encoding="utf-8").split())
        for stale in ("a few hundred", "couple of hundred", "knee near 190", "knee is near 190", "knee near ~190"):
            assert stale not in flat, (path.name, stale)
    glossary = " ".join((ROOT / "lessons" / "glossary.md").read_text(encoding="utf-8").split())
    assert f"{room} on an NVIDIA H200" in glossary and f"about {knee_at} tokens per pass" in glossary
    for name in ("01-memory-bound.md", "03-past-the-ridge.md", "07-width.md"):
        flat = " ".join((ROOT / "lessons" / name).read_text(encoding="utf-8").split())
        assert f"{room} tokens per pass" in flat and str(knee_at) in flat, name
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"a one-token pass: {room} tokens on the recorded NVIDIA H200" in readme
    guide = " ".join((ROOT / "lessons" / "README.md").read_text(encoding="utf-8").split())
    assert f"they are {room}, about {knee_at} and about" in guide


def test_the_readme_quotes_lesson_3s_shipped_recording():
    """The README's example past the room (the n-gram lookup against the EAGLE head at lesson 3's large batch) reads
    the shipped recording, with its date, as the lesson computes it: a re-recording cannot leave it stale."""
    from app.lessons import l3_past_the_ridge as L3
    from app.lessons import registry

    rec = registry.load_record(ROOT / "assets" / "lessons" / "past_the_ridge.json")
    points = L3.ridge_points(rec["measurement"], rec["settings"])
    large = max(p["batch"] for p in points)
    at = {p["drafter"].split(",")[0]: p["speedup"] for p in points if p["batch"] == large}
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"lesson 3's recording (2-core Intel Xeon with AMX, {rec['date']})" in readme and "Xeon" in rec["machine"]
    assert f"ran {at['n-gram lookup']:.2f}× plain decoding" in readme and f"ran {at['EAGLE head']:.2f}× on held-out" in readme


def test_texts_state_rules_of_thumb_with_their_conditions():
    """TPOT ≈ batch ÷ tokens/s only with a full batch; a winner only by the verdict rule, never by every run."""
    glossary = " ".join((ROOT / "lessons" / "glossary.md").read_text(encoding="utf-8").split())
    assert "*with a full batch*" in glossary and "95% range" in glossary and "at least 3%" in glossary
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]-*")):
        flat = " ".join(path.read_text(encoding="utf-8").split())
        assert "every run of one beat" not in flat and "every run of one beats" not in flat, path.name
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "slows everything down" not in readme
