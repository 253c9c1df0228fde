"""The command line's output files: a --json path checked before a run, and results written atomically after it."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile


def check_json_path(path: str | None) -> str | None:
    """--json must name a regular file (new, or one to replace) in an existing folder this process can write a file
    in: checked before the run, not after it. Returns the path with links resolved (a link is written through, never
    replaced); a device, a pipe or a folder is refused, never replaced by a file."""
    if path is None:
        return None
    from engine import ConfigError

    if not path.strip():
        raise ConfigError("--json: give a file name")
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise ConfigError(f"--json {path}: is a folder; give a file name, e.g. {os.path.join(path, 'trace.json')}")
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        raise ConfigError(f"--json {path}: exists and is not a regular file (a device or a pipe); give a file name")
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise ConfigError(f"--json {path}: the folder {folder} does not exist")
    try:  # what the write will do: a new file in the folder (os.access says yes to root, even in /proc)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".speclab-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"--json {path}: cannot write a file in {folder} ({exc.strerror or exc})") from None
    if os.path.exists(real) and not os.access(real, os.W_OK):
        raise ConfigError(f"--json {path}: not writable")
    return real


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
