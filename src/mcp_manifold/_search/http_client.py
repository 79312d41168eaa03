"""A minimal JSON-over-HTTP POST for the OpenAI-compatible embedder.

Uses httpx when installed, else httpx2 (which the MCP SDK depends on), else the standard library,
so the embedder adds no dependency of its own.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from importlib import import_module
from types import ModuleType
from typing import Any

from mcp_manifold._search.errors import EmbedderError


def _httpx_module() -> ModuleType | None:
    for name in ("httpx", "httpx2"):
        try:
            return import_module(name)
        except ImportError:
            continue
    return None


class JsonPoster:
    """POSTs a JSON body and returns the decoded JSON answer; every failure is an `EmbedderError`."""

    def __init__(self, *, timeout: float) -> None:
        self._timeout = timeout
        self._httpx = _httpx_module()
        self._client: Any = self._httpx.Client(timeout=timeout) if self._httpx else None

    @property
    def backend(self) -> str:
        return self._httpx.__name__ if self._httpx else "urllib"

    def post(self, url: str, payload: Any, headers: dict[str, str]) -> Any:
        if self._client is not None:
            return self._post_httpx(url, payload, headers)
        return self._post_urllib(url, payload, headers)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _post_httpx(self, url: str, payload: Any, headers: dict[str, str]) -> Any:
        assert self._httpx is not None
        try:
            response = self._client.post(url, json=payload, headers=headers)
        except self._httpx.HTTPError as exc:
            raise EmbedderError(f"POST {url} failed: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise EmbedderError(f"POST {url} answered HTTP {response.status_code}: {response.text[:300]}")
        return _decode(url, response.content)

    def _post_urllib(self, url: str, payload: Any, headers: dict[str, str]) -> Any:
        request = urllib.request.Request(
            url,
            data=json.dumps(payload).encode("utf-8"),
            headers={"Content-Type": "application/json", **headers},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return _decode(url, response.read())
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")[:300]
            raise EmbedderError(f"POST {url} answered HTTP {exc.code}: {body}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise EmbedderError(f"POST {url} failed: {type(exc).__name__}: {exc}") from exc


def _decode(url: str, body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise EmbedderError(f"POST {url} answered with something other than JSON: {body[:200]!r}") from exc
