"""Drawing one speculative step stage by stage (app/views/stepthrough.py's stages), each beside the engine's own
code for it (app/common/engine_source.py). Shared by the Lessons page (lesson 0: one stage at a time with its drawn
picture, app/views/step_pictures.py; lesson 7: a draft-tree step) and Replay (any step of the replayed run).
Stage text is trace text: shown with st.text and st.dataframe, never Markdown; pictures escape every token.
"""

from __future__ import annotations

import streamlit as st

from app.common.engine_source import DRAFTER_SOURCES, STAGE_SOURCES, TREE_STAGE_SOURCES, SourceError, numbered_block, source_of
from app.views import step_pictures, stepthrough
from app.views import tree as tree_view


def draw_stages(trace, index: int, seq_pos: int = 0, upto: int | None = None, only: int | None = None, pictures: bool = False) -> None:
    """Stages 1..upto+1 (all five when None; just stage `only` + 1 when given) of step `index`, row `seq_pos`, each
    beside its engine code; with `pictures`, a chain step's stages each open with their drawn picture."""
    stages = stepthrough.stages(trace, index, seq_pos)
    drawn = step_pictures.stage_pictures(trace, index, seq_pos) if pictures else []
    shown = [only] if only is not None else range(len(stages) if upto is None else upto + 1)
    for n in shown:
        left, right = st.columns([1, 1])
        with left:
            _stage_text(trace, index, seq_pos, n, stages[n], drawn[n] if drawn else None)
        with right:
            _stage_code(trace, index, seq_pos, n)


def _stage_text(trace, index: int, seq_pos: int, n: int, stage, picture: str | None) -> None:
    st.markdown(f"**{stage.title}**")
    if picture:
        st.html(picture)
    for line in stage.lines:
        st.text(line)
    if stage.table:
        st.dataframe(stage.table, hide_index=True)
    row = trace.steps[index].seqs[seq_pos]
    if row.tree is not None and n == 2:  # the tree drawn with its accepted path once acceptance is shown
        item = next(t for t in tree_view.tree_steps([trace.steps[index]]) if t.seq == row.seq)
        st.html(tree_view.tree_html(item, greedy=trace.config.get("temperature", 0) == 0))


def _stage_code(trace, index: int, seq_pos: int, n: int) -> None:
    tree = trace.steps[index].seqs[seq_pos].tree
    sources = list((TREE_STAGE_SOURCES if tree is not None else STAGE_SOURCES)[n])
    if n == 0 and tree is None and trace.config.get("drafter") in DRAFTER_SOURCES:
        sources.append((*DRAFTER_SOURCES[trace.config["drafter"]], None))
    for relpath, qualname, block in sources:
        try:
            code = source_of(relpath, qualname)
            code = numbered_block(code, block) if block else code
        except SourceError as exc:
            st.warning(f"The engine's source for this stage was not found ({exc}).")
            continue
        st.caption(f"engine/{relpath} · {qualname}" + (f" · step {block}" if block else ""))
        st.code(code, language="python")
