"""Each backend's last listing on disk, so a restarted gateway can answer `tools/list` at once.

A desktop client lists tools as soon as it launches the gateway; starting ten servers first takes
seconds. With a cached listing the first answer comes from here and the servers start behind it
(the gateway re-lists them and sends `list_changed` if anything differs).

An entry is keyed by the server's name and config fingerprint, so a changed command, URL or env
never reuses an old listing. A file that cannot be read or validated counts as absent. The latest
`KEPT_PER_SERVER` configs of one server name keep theirs (a few configs sharing a data dir each warm-start);
older ones are dropped, and a server a config reload removes takes its listings with it: each config a
server ever had (an env or header edited, then reloaded), and each server ever removed, kept its file for
good, one more per such reload.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from mcp_manifold._config import ServerConfig
from mcp_manifold._core.listing import Listing
from mcp_manifold._files import atomic_write

logger = logging.getLogger(__name__)

_FORMAT = 1
KEPT_PER_SERVER = 4  # listings kept of one server name (its latest configs)


_FIELDS: dict[str, type[types.MCPModel]] = {
    "tools": types.Tool,
    "resources": types.Resource,
    "templates": types.ResourceTemplate,
    "prompts": types.Prompt,
}


class ListingCache:
    """One JSON file per (server, config) under `directory`, readable only by its owner."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # Told each listing saved (file name, JSON text), and the names of those dropped: replicas sharing
        # state pass them on.
        self.on_save: Callable[[str, str], None] | None = None
        self.on_drop: Callable[[list[str]], None] | None = None

    def put(self, name: str, text: str) -> None:
        """Keep a listing another replica saved under its file `name`, unless this one has it already."""
        path = self.directory / name
        if path.suffix != ".json" or path.parent != self.directory or path.exists():
            return
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(path, text)
        except OSError as exc:
            logger.warning("could not cache a shared listing: %s", exc)

    def _path(self, config: ServerConfig) -> Path:
        # The server's name first, so that its listings of other configs are found by their prefix.
        named = _digest(config.name)[:12]
        configured = _digest(f"{config.name}\0{config.fingerprint()}")[:24]
        return self.directory / f"{named}-{configured}.json"

    def load(self, config: ServerConfig) -> Listing | None:
        path = self._path(config)
        try:
            data = json.loads(path.read_text())
            if data.get("format") != _FORMAT:
                return None
            items = {field: [model.model_validate(item) for item in data[field]] for field, model in _FIELDS.items()}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, ValidationError, AttributeError) as exc:
            logger.debug("ignoring unreadable cached listing %s: %s", path, exc)
            return None
        extensions = data.get("extensions")
        return Listing(**items, extensions=extensions if isinstance(extensions, dict) else None)  # type: ignore[arg-type]

    def save(self, config: ServerConfig, listing: Listing) -> None:
        data: dict[str, Any] = {"format": _FORMAT, "server": config.name}
        for field in _FIELDS:
            data[field] = [
                item.model_dump(by_alias=True, mode="json", exclude_none=True) for item in getattr(listing, field)
            ]
        if listing.extensions:
            data["extensions"] = listing.extensions
        path = self._path(config)
        text = json.dumps(data)
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(path, text)
        except OSError as exc:
            logger.warning("could not cache the listing of %s: %s", config.name, exc)
        if self.on_save is not None:
            self.on_save(path.name, text)
        self._drop_older(path)

    def drop(self, name: str) -> None:
        """Drop every listing of the server `name` (a config reload removed it)."""
        self._unlink(list(self.directory.glob(f"{_digest(name)[:12]}-*.json")))

    def _drop_older(self, saved: Path) -> None:
        """Drop the listings of `saved`'s server name past the latest `KEPT_PER_SERVER` (`saved` among them)."""
        prefix = saved.name.split("-", 1)[0]
        others = [path for path in self.directory.glob(f"{prefix}-*.json") if path != saved]
        self._unlink(sorted(others, key=_modified, reverse=True)[KEPT_PER_SERVER - 1 :])

    def _unlink(self, paths: list[Path]) -> None:
        for path in paths:
            path.unlink(missing_ok=True)
        if paths and self.on_drop is not None:
            self.on_drop([path.name for path in paths])


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # dropped meanwhile by another gateway sharing the data dir
        return 0.0
