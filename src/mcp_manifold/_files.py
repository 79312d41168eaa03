"""Small file and process facts every layer with I/O shares: whole-file writes, and whether a pid lives.

Kept apart from the core (which does no I/O) and below config and the runtime, which both write files.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import suppress
from pathlib import Path

# The gateway's files hold every tool definition, approval, listing and call record: its owner's only.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


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


def private_dir(path: Path) -> Path:
    """`path` made if missing (with its parents), the last one mode 0700."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    return path


def private_file(path: Path) -> Path:
    """`path` created empty with mode 0600 if it does not exist, in a private directory.

    For SQLite databases: SQLite gives the `-wal`, `-shm` and `-journal` files it makes the mode of the
    database file, so a database created here keeps all of them private, whatever the umask (no
    process-wide umask change, which would race with other threads creating files).
    """
    private_dir(path.parent)
    # An existing one is left as it is (tightened at start when it is in the data dir).
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    return path


def open_private(path: Path, flags: int) -> int:
    """`os.open` of `path` with mode 0600 should it be created."""
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE)


def tighten(root: Path) -> tuple[list[Path], list[tuple[Path, OSError]]]:
    """Take group and other permissions off `root` and everything under it (symlinks inside are
    neither followed nor changed; `root` itself may be one, as a moved data dir often is). Returns what
    had them and was tightened, and what could not be (and why)."""
    tightened: list[Path] = []
    failed: list[tuple[Path, OSError]] = []
    if not root.is_dir():
        return tightened, failed
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        for path in [*([base] if base == root else []), *(base / name for name in [*dirs, *files])]:
            try:
                mode = path.stat().st_mode if path == root else path.lstat().st_mode
                if stat.S_ISLNK(mode) or not stat.S_IMODE(mode) & 0o077:
                    continue
                path.chmod(stat.S_IMODE(mode) & 0o700 | (PRIVATE_DIR if stat.S_ISDIR(mode) else PRIVATE_FILE))
                tightened.append(path)
            except OSError as exc:  # gone meanwhile, or another user's file
                failed.append((path, exc))
    return tightened, failed


PID_MAX = 2**31 - 1  # the largest pid_t; `os.kill` raises OverflowError past it


def pid_is_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (someone else's counts as alive). A pid no process
    can have (0 or less: a process group to `os.kill`; past `PID_MAX`) is not alive."""
    if not 0 < pid <= PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
