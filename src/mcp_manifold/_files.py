"""Small file and process facts every layer with I/O shares: whole-file writes, and whether a pid lives.

Kept apart from the core (which does no I/O) and below config and the runtime, which both write files.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: readers never see half a file, a crash leaves the old one.

    The file is private to its owner (mode 0600): what the gateway writes names commands, ports and
    listings. The directory must exist.
    """
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def pid_is_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (someone else's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
