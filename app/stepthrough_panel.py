"""Drawing one speculative step stage by stage (app/views/stepthrough.py's stages), each beside the engine's own
code for it (app/engine_source.py). Shared by the Lessons page (a recorded step, one stage per click) and Replay
(any step of the replayed run). Stage text is trace text: shown with st.text and st.dataframe, never Markdown.
"""

from __future__ import annotations

import streamlit as st

from app.engine_source import DRAFTER_SOURCES, STAGE_SOURCES, TREE_STAGE_SOURCES, SourceError, numbered_block, source_of
from app.views import stepthrough
from app.views import tree as tree_view


def draw_stages(trace, index: int, seq_pos: int = 0, upto: int | None = None) -> None:
    """Stages 1..upto+1 (all five when None) of step `index`, row `seq_pos`, each beside its engine code."""
    stages = stepthrough.stages(trace, index, seq_pos)
    tree = trace.steps[index].seqs[seq_pos].tree
    sources_by_stage = TREE_STAGE_SOURCES if tree is not None else STAGE_SOURCES
    for n, stage in enumerate(stages[: (len(stages) if upto is None else upto + 1)]):
        left, right = st.columns([1, 1])
        with left:
            st.markdown(f"**{stage.title}**")
            for line in stage.lines:
                st.text(line)
            if stage.table:
                st.dataframe(stage.table, hide_index=True)
            if tree is not None and n == 2:  # the tree drawn with its accepted path once acceptance is shown
                item = next(t for t in tree_view.tree_steps([trace.steps[index]]) if t.seq == trace.steps[index].seqs[seq_pos].seq)
                st.html(tree_view.tree_html(item, greedy=trace.config.get("temperature", 0) == 0))
        with right:
            sources = list(sources_by_stage[n])
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
