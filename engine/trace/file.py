"""`Trace`: one run (its config, the sequences, the steps and `summary`, field names fixed by docs/design.md §4)
and its JSON file. Written atomically as "speclab.trace/1" ("/2" when any step holds a draft tree, so chain
traces stay readable by older SpecLabs); read back only through the strict reader (engine/trace/loader.py).
The record types and the summary live in engine/trace/records.py."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

from engine.trace.loader import MAX_FILE_BYTES, _too_big, parse_json, trace_parts
from engine.trace.records import SCHEMA, SCHEMA_TREE, Step, TraceError, _step_dict


@dataclass
class Trace:
    config: dict
    sequences: list[dict]  # {prompt, prompt_tokens, output_ids, text}
    steps: list[Step]
    summary: dict
    meta: dict  # device, dtype, model names, drafter name, hardware peaks, versions

    @property
    def output_ids(self) -> list[list[int]]:
        return [s["output_ids"] for s in self.sequences]

    @property
    def texts(self) -> list[str]:
        return [s["text"] for s in self.sequences]

    # --- JSON -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        steps = [_step_dict(s) for s in self.steps]
        has_tree = any(q.get("tree") is not None for s in steps for q in s["seqs"])
        for step in steps:
            for seq in step["seqs"]:
                if seq.get("tree") is None:
                    seq.pop("tree", None)
        return {
            "schema": SCHEMA_TREE if has_tree else SCHEMA,
            "config": self.config,
            "meta": self.meta,
            "sequences": self.sequences,
            "steps": steps,
            "summary": self.summary,
        }

    def to_json(self, path: str | os.PathLike) -> None:
        """Write atomically: a temp file in the same folder, then rename, so nothing is half-written."""
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".trace-", suffix=".json", dir=folder)
        try:
            os.chmod(tmp, 0o644)  # as any file the user writes (mkstemp's is 0600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_dict(), f, allow_nan=False, default=_json_default)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    @classmethod
    def from_dict(cls, data) -> Trace:
        """Validate a parsed trace (engine/trace/loader.py) and build it; TraceError names the bad field."""
        return cls(**trace_parts(data))

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> Trace:
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raise TraceError(_too_big(size))
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            raise TraceError(f"trace file not found: {path}") from None
        except OSError as exc:
            raise TraceError(f"trace file could not be read: {path} ({exc.strerror or exc})") from None
        return cls.from_dict(parse_json(raw, name=os.fspath(path)))

    @classmethod
    def from_json_bytes(cls, raw: bytes) -> Trace:
        return cls.from_dict(parse_json(raw))


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__} in a trace")
