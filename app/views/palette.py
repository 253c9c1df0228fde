"""Colours that carry meaning in more than one view, chosen for colour-blind readers (issue 30).

The speedup heatmaps diverge from orange (speculation slower than plain decoding) through near-white (1×) to
blue (faster): ColorBrewer's PuOr ends, which deuteranopes, protanopes and tritanopes all tell apart, unlike
red against green. Each cell also prints its number, so the colour is never the only signal.
"""

SLOWER = "#b35806"  # orange: below 1× (4.9:1 on white)
EVEN = "#f7f7f7"  # 1×
FASTER = "#2166ac"  # blue: above 1× (5.9:1 on white)


def speedup_scale(one_at: float = 0.5) -> list[list]:
    """A plotly colorscale: SLOWER at 0, EVEN at `one_at` (where 1× falls in [zmin, zmax]), FASTER at 1."""
    return [[0, SLOWER], [one_at, EVEN], [1, FASTER]]
