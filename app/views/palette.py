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


# Text on a chart (issue 53, item 7). Streamlit's plotly theme draws tick labels, axis titles, legends and subplot
# titles in a light grey (#808495, 3.7:1 on white); a chart that names its text colour keeps it under any theme.
INK = "#31333f"  # Streamlit's own body text colour: 12.6:1 on white, 10.6:1 on plotly's #e5ecf6


MODEBAR_PX = 24  # plotly's hover toolbar stands ~30 px tall at a chart's top right: a title starts this much lower


def under_toolbar(fig):
    """A figure's own title moved under plotly's hover toolbar: pinned to the top with MODEBAR_PX more padding, the top
    margin grown as much. Once per figure: a title already padded that far (app/views/bars.py `frame`) is left."""
    title = fig.layout.title
    if not title.text or (title.pad.t or 0) >= 18 + MODEBAR_PX:
        return fig
    top = 100 if fig.layout.margin.t is None else fig.layout.margin.t  # plotly's default top margin
    fig.update_layout(
        margin={"t": top + MODEBAR_PX}, title={"yref": "container", "y": 1.0, "yanchor": "top", "pad": {"t": 18 + MODEBAR_PX}}
    )
    return fig


def ink(fig):
    """Every text of a plotly figure that has no colour of its own drawn in INK (a label in a series' hue keeps it),
    and its title under plotly's hover toolbar (under_toolbar)."""
    dark = {"color": INK}
    fig.update_layout(font=dark, title_font=dark, legend_font=dark)
    fig.update_xaxes(tickfont=dark, title_font=dark)
    fig.update_yaxes(tickfont=dark, title_font=dark)
    for note in fig.layout.annotations:
        if note.font.color is None:
            note.font.color = INK
    return under_toolbar(fig)
