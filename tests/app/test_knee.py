"""app/lessons/kit/numbers.py: a lesson's settings from the measured room of the machine's pass-cost curve."""

import pytest

from app.lessons.kit import numbers

CPU = ((1, 2, 3, 4, 5, 8, 16, 32), (8.5, 8.5, 9.5, 9.4, 12.0, 13.5, 22.4, 40.0))  # a 2-core EPYC-like curve
GPU = ((1, 32, 64, 128, 192, 256, 512), (7.0, 7.1, 7.2, 7.4, 8.3, 10.4, 19.0))  # an H200-like curve


def test_room_is_where_the_curve_first_crosses_the_line_read_between_the_sizes_around_it():
    assert numbers.room_tokens(*CPU) == 4  # 1.25 x 8.5 = 10.625 ms: between 4 (9.4) and 5 (12.0) tokens, at 4.47
    assert numbers.room_tokens(*GPU) == 205  # 8.75 ms: between 192 (8.3) and 256 (10.4), at 205.7
    assert numbers.room_tokens((1, 2, 3), (10.0, 13.0, 11.0)) == 1  # a later dip does not widen the room
    assert numbers.room_tokens((1, 8, 16), (10.0, 11.0, 12.0)) == 16  # never crosses: the last size
    # a room near a measured size does not jump to the size below with the noise: 16 tokens at 1.24x and 1.26x
    near = [numbers.room_tokens((1, 8, 16, 32), (10.0, 11.0, r, 17.0)) for r in (12.4, 12.6)]
    assert near == [16, 15]


def test_settings_follow_the_room_on_a_small_and_a_large_machine():
    assert numbers.inside_depth(4) == 3 and numbers.inside_depth(192) == 8 and numbers.inside_depth(2) == 1
    assert numbers.inside_depth(4, batch=4) == 1  # no room for a draft at batch 4: the floor, which the page names
    assert numbers.past_batch(4, 3, (4, 8, 16, 32)) == 4  # 16 tokens = 4x the room
    assert numbers.past_batch(192, 3, (4, 8, 16, 32)) == 32  # none reaches 768 tokens: the largest offered
    assert numbers.past_batch(192, 3, (64, 256)) == 256


def test_cost_at_interpolates_and_extrapolates_as_multiples_of_one_token():
    assert numbers.cost_at(*CPU, 1) == 1.0
    assert numbers.cost_at(*CPU, 12) == pytest.approx((13.5 + (22.4 - 13.5) * 0.5) / 8.5)
    assert numbers.cost_at(*CPU, 64) == pytest.approx((40.0 + (40.0 - 22.4) / 16 * 32) / 8.5)
    words = numbers.room_words(4, *CPU)
    assert "up to 4 tokens" in words and "a 16-token pass costs 2.64×" in words


def test_a_malformed_curve_is_refused():
    with pytest.raises(ValueError):
        numbers.room_tokens((1, 2), (0.0, 1.0))
    with pytest.raises(ValueError):
        numbers.room_tokens((1, 2), (1.0,))
