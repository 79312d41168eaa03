"""The spill store: large tool results go to files in a private directory instead of into context.

Each gateway process gets its own directory (`gw-<pid>-<random>`, mode 0700) under `spill_dir`
(default `<data_dir>/spill`); files in it are mode 0600. Files older than the TTL are removed as
new ones are written and by a periodic sweep, the whole directory when the gateway stops, and
directories left by gateways that died without cleaning up when the next one starts (whether or not it
ever spills).

Paths that clients send back (`argumentsFile`, `resultFile`) are checked here: only regular files
inside the private directory or an explicitly allowed directory are accepted, after resolving
symlinks; `..` is refused outright.

Replicas sharing state (`shared`) put `spill_dir` on a volume they all mount: a replica then accepts the
files of its siblings' directories under `spill_dir` too, so a result spilled by one is read by any, and
it removes a sibling's directory only once nothing in it can be younger than the TTL (process ids mean
nothing across machines). See docs/scale-out.md for why a shared volume rather than the state store.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio

from mcp_manifold._core.arguments import json_type_name
from mcp_manifold._core.reading import ReadAnswer
from mcp_manifold._core.results import SpilledFile
from mcp_manifold._core.suggestions import quoted
from mcp_manifold._errors import AccessDenied, InvalidRequest, NotFound
from mcp_manifold._files import pid_is_alive
from mcp_manifold._runtime import result_files

logger = logging.getLogger(__name__)

_PREFIX = "gw-"
# What a file counts for against `max_bytes` at least (about what it takes on disk), so that many tiny files
# are bounded too.
MIN_FILE_BYTES = 4096
MAX_ARGUMENTS_BYTES = 64 * 1024 * 1024  # an arguments file is parsed in memory
# Objects and arrays an arguments file may hold: about what one 4 MiB request can (1.4 million `{}`).
# Each is a Python object of 64 bytes or more: 30 MB of `{}` took the gateway to 1.66 GB.
MAX_ARGUMENTS_CONTAINERS = 1_500_000
# TOON is decoded in Python, about a second per megabyte: a larger TOON file is refused, not decoded.
MAX_TOON_ARGUMENTS_BYTES = 4 * 1024 * 1024
_LONGEST_PATH = 4096  # PATH_MAX on Linux


def _shown(raw: str) -> str:
    """A path a client sent, quoted for an error: whole, unless longer than any path the system can open."""
    return quoted(raw, _LONGEST_PATH)


class SpillStore:
    """A private per-gateway directory of result files, plus the check for paths clients send."""

    def __init__(
        self,
        base: str | Path,
        *,
        ttl: float,
        max_bytes: int = 0,
        allowed_dirs: Iterable[str | Path] = (),
        clock: Callable[[], float] = time.time,
        shared: bool = False,
    ) -> None:
        self.base = Path(base).expanduser()
        self.shared = shared
        self.ttl = ttl
        self.max_bytes = max_bytes  # 0: no bound but the TTL
        self.allowed_dirs = [Path(d).expanduser() for d in allowed_dirs]
        self.clock = clock
        self._directory: Path | None = None
        self.bytes_written = 0  # since the gateway started (a metric)
        # This store's files, oldest first: (written at, size, path). Expiry and `max_bytes` read this, not the
        # directory: a scan stat'ed every file on each spill, on the event loop, so with the files an hour of
        # spills leaves (up to max_bytes / 4 KiB) each spill stalled every session for a second or more.
        self._kept: deque[tuple[float, int, str]] = deque()
        self._kept_bytes = 0  # their sizes
        self._kept_counted = 0  # what they count for against `max_bytes` (`MIN_FILE_BYTES` each at least)

    @property
    def directory(self) -> Path:
        """The private directory, created on first use (a gateway that never spills creates nothing)."""
        if self._directory is None or not self._directory.is_dir():
            self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.remove_orphans()
            self._directory = Path(_make_private_dir(self.base))
            self._forget_kept()  # a directory removed under it took its files along
        return self._directory

    # --- writing -----------------------------------------------------------------------------

    def write(self, text: str, suffix: str = ".json") -> SpilledFile:
        """Write `text` to a new 0600 file; removes expired files first, and the oldest ones when the files
        would take more than `max_bytes` (an OSError when this one alone would)."""
        self.sweep()
        data = text.encode("utf-8")
        if self.max_bytes:
            self._make_room(len(data))
        path = self.directory / f"result-{secrets.token_hex(8)}{suffix}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError:
            # A full disk: the part written would only hold its space (the disk full) until its TTL.
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise
        self.bytes_written += len(data)
        self._kept.append((self.clock(), len(data), str(path)))
        self._kept_bytes += len(data)
        self._kept_counted += max(len(data), MIN_FILE_BYTES)
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        return SpilledFile(path, len(data), lines)

    def bytes_on_disk(self) -> int:
        """The size of the spill files kept now (0 before the first spill: nothing is created to look)."""
        return self._kept_bytes

    def sweep(self) -> None:
        """Remove this gateway's files older than the TTL."""
        deadline = self.clock() - self.ttl
        while self._kept and self._kept[0][0] < deadline:
            self._remove_oldest()

    def _make_room(self, size: int) -> None:
        """Remove the oldest files until one of `size` bytes fits under `max_bytes`."""
        needed = max(size, MIN_FILE_BYTES)
        if needed > self.max_bytes:
            raise OSError(f"the result ({size} bytes) is larger than spill_max_bytes ({self.max_bytes})")
        while self._kept and self._kept_counted + needed > self.max_bytes:
            self._remove_oldest()

    def _remove_oldest(self) -> None:
        _, size, path = self._kept.popleft()
        self._kept_bytes -= size
        self._kept_counted -= max(size, MIN_FILE_BYTES)
        with contextlib.suppress(OSError):
            os.unlink(path)

    def _forget_kept(self) -> None:
        self._kept.clear()
        self._kept_bytes = self._kept_counted = 0

    def close(self) -> None:
        """Remove the private directory and everything in it (at gateway shutdown)."""
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
        self._forget_kept()

    def remove_orphans(self) -> None:
        """Directories of gateways that are no longer running (killed before they could clean up)."""
        if self.shared:
            self._remove_stale_siblings()
            return
        for entry in self.base.glob(f"{_PREFIX}*"):
            pid = entry.name[len(_PREFIX) :].partition("-")[0]
            if entry.is_dir() and not entry.is_symlink() and pid.isdigit() and not pid_is_alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)

    def _remove_stale_siblings(self) -> None:
        """On a shared volume: directories untouched (no file written or removed) for longer than the TTL and
        a minute, whose files have all expired, whichever replica wrote them."""
        deadline = self.clock() - self.ttl - 60
        for entry in self.base.glob(f"{_PREFIX}*"):
            with contextlib.suppress(OSError):
                if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < deadline:
                    shutil.rmtree(entry, ignore_errors=True)

    # --- paths clients send ------------------------------------------------------------------

    def resolve(self, raw: Any, field: str) -> Path:
        """The file a client named in `field`, if it is one it may use; else a clear error."""
        if not isinstance(raw, str) or not raw.strip():
            raise InvalidRequest(f"'{field}' must be the path of a file, such as a 'resultFile' from an earlier call")
        if "\0" in raw:
            raise InvalidRequest(f"'{field}' may not contain a NUL character: give the path the call answered with")
        try:
            given = Path(raw.strip()).expanduser()
        except RuntimeError as exc:  # `~someone/...` for a user this system does not know
            raise NotFound(f"'{field}': cannot use {_shown(raw)}: {exc}") from None
        if ".." in given.parts:
            raise AccessDenied(f"'{field}' may not contain '..': give the file's full path")
        roots = self._roots()
        if not given.is_absolute():
            given = roots[0] / given  # a bare file name means one in the spill directory
        # Where it leads is checked before whether it exists: a path outside gets the same answer either
        # way, so a client cannot probe which files the gateway's machine has.
        try:
            real = given.resolve(strict=False)  # follows the symlinks there are
        except (OSError, RuntimeError):  # symlink loops and the like
            real = None
        if real is None or not any(real.is_relative_to(root) for root in roots):
            allowed = ", ".join(str(root) for root in roots)
            raise AccessDenied(
                f"'{field}' must name a file in the spill directory or an allowed directory ({allowed}); "
                f"{_shown(raw)} is outside them (symlinks are followed before checking)"
            )
        try:
            info = real.stat()
        except OSError:  # missing, or a name the file system cannot hold (longer than 255 bytes, say)
            raise NotFound(f"'{field}': no such file {_shown(raw)} (spilled files are deleted after a while)") from None
        if not stat.S_ISREG(info.st_mode):
            raise InvalidRequest(f"'{field}': {_shown(raw)} is not a regular file")
        return real

    # --- reading result files back (the `ResultFiles` a surface gets from the host) ----------------

    async def read_arguments(self, path: Path) -> dict[str, Any]:
        # In a worker thread: the file is read and decoded (TOON in Python) while other calls go on.
        return await anyio.to_thread.run_sync(read_arguments, path)

    async def stat(self, path: Path) -> dict[str, int | str]:
        return await result_files.stat_file(path)

    async def read(self, path: Path, op: str, **options: Any) -> ReadAnswer:
        return await result_files.read_part(path, op, **options)

    def _roots(self) -> list[Path]:
        roots = [self.directory.resolve()]
        if self.shared:  # the sibling replicas' directories on the shared volume
            roots.append(self.base.resolve())
        for directory in self.allowed_dirs:
            with contextlib.suppress(OSError):
                roots.append(directory.resolve(strict=True))
        return roots


def read_arguments(path: Path, field: str = "argumentsFile") -> dict[str, Any]:
    """Tool arguments from a file: a JSON object, or a TOON document of one (a TOON-spilled result)."""
    try:
        size = path.stat().st_size
        if size > MAX_ARGUMENTS_BYTES:
            raise InvalidRequest(
                f"'{field}' is {size} bytes; at most {MAX_ARGUMENTS_BYTES} bytes can be used as arguments"
            )
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise NotFound(f"'{field}': {path.name} no longer exists (spilled files are deleted after a while)") from None
    except OSError as exc:
        raise AccessDenied(f"'{field}': cannot read {path.name}: {exc.strerror or exc}") from None
    # Counted in C before anything is parsed (brackets inside strings count too: a bound, not a census).
    if (containers := text.count("{") + text.count("[")) > MAX_ARGUMENTS_CONTAINERS:
        raise InvalidRequest(
            f"'{field}': {path.name} holds {containers} brackets; arguments from a file may hold at most "
            f"{MAX_ARGUMENTS_CONTAINERS} objects and arrays"
        )
    try:
        value = json.loads(text)
        holds = f"JSON: {json_type_name(value)}"
    except RecursionError:
        raise InvalidRequest(f"'{field}': {path.name} is nested too deeply to be used as arguments") from None
    except ValueError:
        if size > MAX_TOON_ARGUMENTS_BYTES:
            raise InvalidRequest(
                f"'{field}': {path.name} is not JSON, and at {size} bytes too large to be read as TOON "
                f"(at most {MAX_TOON_ARGUMENTS_BYTES} bytes): spill results as JSON (setting toon: false) "
                "to hand larger ones on"
            ) from None
        value = _from_toon(text)
        holds = "text that is not a JSON or TOON object"
    if not isinstance(value, dict):
        raise InvalidRequest(
            f"'{field}' must hold a JSON object: the tool's arguments by name; {path.name} holds {holds}"
        )
    return value


def _from_toon(text: str) -> Any:
    from toon_format import ToonDecodeError, decode

    try:
        return decode(text)
    except (ToonDecodeError, ValueError, RecursionError):
        return None


async def sweep_periodically(store: SpillStore) -> None:
    """Apply the TTL even while nothing new is spilled (run in the gateway's task group). What gateways
    killed earlier left goes first: this one may never spill, and their files must not outlive their TTL."""
    with contextlib.suppress(OSError):
        await anyio.to_thread.run_sync(store.remove_orphans)
    while True:
        await anyio.sleep(max(1.0, min(store.ttl, 60.0)))
        with contextlib.suppress(OSError):
            store.sweep()


def _make_private_dir(base: Path) -> str:
    # mkdir with 0700 is atomic: no moment where another user could open the directory.
    while True:
        path = base / f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return str(path)
