"""The data dir is its owner's only: directory 0700, every file in it 0600 (issue 21).

It holds every tool definition and approval (`pins.sqlite`), the search index, cached listings,
spilled results and the audit log. Each writer creates its files private (`_files.private_dir`,
`private_file`, `atomic_write`); an older version's looser data dir is tightened when a gateway
starts, with one log line saying so.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp_manifold._errors import ManifoldError
from mcp_manifold._files import private_dir, tighten

logger = logging.getLogger(__name__)


@contextmanager
def folder_of(setting: str, path: Path) -> Iterator[None]:
    """An OS error making or opening the folder a setting names, as one line naming that setting.

    A data dir under a file, on a read-only disk or owned by another user is a user's setting to fix,
    not a crash: every command would otherwise end in a traceback of the standard library's mkdir.
    """
    try:
        yield
    except OSError as exc:
        variable = f"MANIFOLD_{setting.upper()}"
        raise ManifoldError(
            f"{setting} {str(path)!r} cannot be used: {exc.strerror or exc}; "
            f"set {setting} (or {variable}) to a folder you can write"
        ) from None


def secure_data_dir(data_dir: Path) -> None:
    """Make `data_dir` (0700) if it is missing; take group and other permissions off what is in it."""
    with folder_of("data_dir", data_dir):
        private_dir(data_dir)
        if not os.access(data_dir, os.W_OK | os.X_OK):  # one made by another user: sqlite would fail later
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(data_dir))
    tightened, failed = tighten(data_dir)
    if tightened:
        shown = ", ".join(str(path.relative_to(data_dir)) for path in tightened[:5])
        more = f" and {len(tightened) - 5} more" if len(tightened) > 5 else ""
        logger.warning(
            "made the data dir %s private: %d entries were open to other users (%s%s); directories are now "
            "0700, files 0600",
            data_dir,
            len(tightened),
            shown,
            more,
        )
    for path, exc in failed[:5]:
        logger.warning("could not make %s private: %s", path, exc)
