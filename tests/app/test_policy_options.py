"""The depth-policy choices, their help text, the batch-table syntax, and the notice for unusable link values:
plain functions (no model, no streamlit session)."""

from __future__ import annotations

import pytest

from app.common.page_helpers import url_fallbacks
from app.playground.policy_options import POLICIES, POLICY_HELP, BatchTableError, format_batch_table, parse_batch_table
from engine.options import PolicyKind


def test_every_engine_policy_is_offered_and_described():
    assert sorted(POLICIES.values()) == sorted(p.value for p in PolicyKind)
    for fact in (
        "--speculative-disable-by-batch-size",
        "v0.10",
        "February 2026",
        "vllm-project/vllm/pull/35060",
        "num_speculative_tokens_per_batch_size",
        "draft_len_schedule",
        "+2 after",
        "measured pass cost",
    ):
        assert fact in POLICY_HELP, fact
    assert all(f"**{label}**" in POLICY_HELP for label in POLICIES)


def test_batch_table_is_read_as_the_cli_writes_it():
    assert parse_batch_table("1-4:4,5-16:2,17-1024:0") == ((1, 4, 4), (5, 16, 2), (17, 1024, 0))
    assert parse_batch_table(" 9-16 : 1 , 1:3, 2-8:2 ") == ((1, 1, 3), (2, 8, 2), (9, 16, 1))  # sorted, spaces allowed
    assert parse_batch_table("") is None and parse_batch_table("   ") is None  # empty: derive it from the pass cost
    assert format_batch_table(((1, 1, 3), (2, 8, 2))) == "1:3, 2-8:2"
    assert parse_batch_table(format_batch_table(((1, 4, 4), (5, 16, 0)))) == ((1, 4, 4), (5, 16, 0))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1-4:4,oops", "cannot read the row `oops`"),
        ("1-4:4,,5-8:2", "an empty row"),
        ("1-4", "cannot read the row `1-4`"),
        ("-3:1", "cannot read the row `-3:1`"),
        ("1-4:4,3-8:2", "overlap at batch 3"),
        ("0-4:4", "need 1 <= min_batch <= max_batch"),
        ("8-4:2", "need 1 <= min_batch <= max_batch"),
        ("1-4:99", "k must be between 0 and 16"),
        ("1:1," * 60, "longer than the 200 allowed"),
        ("<script>alert(1)</script>", "cannot read the row"),
        ("[click here](http://ev.il/a)", "cannot read the row `[click here](http://ev.il/a)`"),  # code: never a link
    ],
)
def test_a_bad_batch_table_gets_one_clear_error(text, reason):
    with pytest.raises(BatchTableError) as info:
        parse_batch_table(text)
    message = str(info.value)
    assert reason in message and message.startswith("Batch table: ") and "Fix: " in message
    assert "\n" not in message


def test_url_fallbacks_name_the_link_values_that_were_not_used():
    labels = {"policy": "Depth policy", "depth": "Speculation depth k", "fp32": "float32"}
    values = {"policy": "fixed k", "depth": 4, "temp": 0.3, "fp32": False, "table": "1-4:4"}
    raw = {"policy": "<script>`x`</script>", "depth": "99", "temp": "0.30", "fp32": "false", "table": "1-4:4", "other": "1"}
    notices = url_fallbacks(raw, values, labels)
    assert len(notices) == 2  # temp, fp32 and table say what the widgets hold; "other" is no widget of this page
    assert notices[0] == (
        "The link gave **Depth policy** the value `<script>'x'</script>`, which this page cannot use; it uses `fixed k` instead."
    )  # no backtick can close the code span
    assert "**Speculation depth k** the value `99`" in notices[1] and "`4` instead" in notices[1]
    assert url_fallbacks({"fp32": "maybe"}, {"fp32": False}, labels) == [
        "The link gave **float32** the value `maybe`, which this page cannot use; it uses `off` instead."
    ]
    assert "…" in url_fallbacks({"depth": "9" * 100}, {"depth": 4}, labels)[0]  # long values are cut short
    assert url_fallbacks({}, values, labels) == []
