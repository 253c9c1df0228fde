"""The command line's output files: a --json path checked before a run, and results written atomically after it."""

from __future__ import annotations

import contextlib
import json
import os


def check_json_path(path: str | None) -> None:
    """--json must name a file in an existing, writable folder: checked before the run, not after it."""
    if not path:
        return
    from engine import ConfigError

    if os.path.isdir(path):
        raise ConfigError(f"--json {path}: is a folder; give a file name, e.g. {os.path.join(path, 'trace.json')}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"--json {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ConfigError(f"--json {path}: not writable")


def write_json(path: str, data) -> None:
    from engine import ConfigError

    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError as exc:  # the table is already printed
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ConfigError(f"could not write the results to {path}: {exc.strerror or exc}") from None
    print(f"results written to {path}")
