"""A small JSON document kept in the data dir between runs (dispatch's connection aliases, say)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from mcp_manifold._files import atomic_write, private_dir

logger = logging.getLogger(__name__)


class JsonStateFile:
    """One JSON document at `path`: loaded when asked, saved whole. State is a convenience, so failures
    are logged, never raised: the gateway works on without remembering."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> Any:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable %s: %s", self.path, exc)
            return None

    def save(self, data: Any) -> None:
        try:
            private_dir(self.path.parent)
            atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True))
        except OSError as exc:
            logger.warning("could not save %s: %s", self.path, exc)
