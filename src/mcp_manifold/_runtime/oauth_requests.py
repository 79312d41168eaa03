"""The HTTP requests of an OAuth flow to a remote server, held to rules the SDK does not apply itself.

The SDK's flow fetches whatever addresses a remote party names (the `resource_metadata` of a 401, the
`authorization_servers` of its metadata, a registration or token endpoint), builds its requests with
`httpx2.Request()` (so the client's timeouts never apply), reads each answer whole, and puts answer bodies
into its error messages. Every OAuth request goes through `Guard` instead:

- its address must be https, or http on a loopback host; and it may resolve to a loopback, link-local,
  private or other non-public address (`_is_local`) only when the MCP server's own URL is on such an
  address (a local setup) or the server's `auth.allow_private_addresses` says so. That is checked twice:
  on the name's resolution just before each OAuth request (to refuse it with its document named), and on
  the address each connection of the server's client is actually made to (`PeerCheck`): a name may
  resolve to a public address for the first check and to a private one by connect time (DNS rebinding);
- it has a timeout of its own, and its answer is read up to `MAX_BODY` bytes, uncompressed, within
  `BODY_DEADLINE` seconds;
- what went wrong is told as `server 'X': <document> at <host>: <what>`, the status code and never the body.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2
from mcp.shared.auth import OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import ValidationError

from mcp_manifold._errors import BackendStartError

logger = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024  # bytes an OAuth document may have: real ones are a few kB
TIMEOUT = httpx2.Timeout(10.0)  # connect, read, write and pool, each
BODY_DEADLINE = 30.0  # seconds an answer may take in all (a body sent a byte at a time keeps reads alive)
LONGEST_LIFETIME = 100 * 365 * 24 * 3600  # seconds a token's expires_in may say (2**31 - 1, "never", is within)


class OAuthRequestFailed(BackendStartError):
    """An OAuth request of a server's flow was refused by our rules or failed; the message names the
    document and host, never what the answer said."""


@dataclass(frozen=True)
class Sent:
    """One OAuth request on its way: which document it asks for, and where."""

    what: str
    host: str


def document_of(request: httpx2.Request) -> str:
    """What an OAuth request of the SDK's flow asks for, from its shape (the SDK names none)."""
    path = request.url.path
    if request.method == "GET":
        if "oauth-authorization-server" in path or "openid-configuration" in path:
            return "authorization-server metadata"
        return "protected-resource metadata"
    if request.headers.get("content-type", "").startswith("application/json"):
        return "client registration"
    return "token endpoint"


# IPv6 prefixes whose last 32 bits are an IPv4 address the packets go to: NAT64's well-known prefix, and the
# deprecated IPv4-compatible addresses.
_CARRY_IPV4 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("::/96"))


def _is_local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `address` is anything but a public one: loopback, link-local, private, and also shared address
    space (100.64.0.0/10, where a cloud keeps its metadata service at 100.100.100.200) and other reserved
    ranges. An IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4) is judged by where it leads."""
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in prefix for prefix in _CARRY_IPV4):
            address = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        else:
            address = address.ipv4_mapped or address.sixtofour or address
    return not address.is_global


async def _addresses(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    found = await anyio.getaddrinfo(host, port, type=0)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]


async def is_local_url(url: str) -> bool:
    """Whether `url`'s host resolves to a loopback, link-local or private address (a local setup)."""
    parts = urlsplit(url)
    try:
        found = await _addresses(parts.hostname or "", parts.port or 443)
    except OSError:
        return False
    return bool(found) and all(_is_local(address) for address in found)


def _loopback_name(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")


class Guard:
    """The rules for one server's OAuth requests (see the module's docstring)."""

    def __init__(self, server: str, local_ok: bool) -> None:
        self.server = server
        self.local_ok = local_ok

    def network_backend(self) -> httpcore2.AsyncNetworkBackend | None:
        """What the server's HTTP client connects with: `PeerCheck` unless local addresses are allowed."""
        return None if self.local_ok else PeerCheck(self)

    def fail(self, sent: Sent, what: str) -> OAuthRequestFailed:
        # `what` may quote a remote party (the `iss` of an authorization response): never its escape sequences.
        return OAuthRequestFailed(self.server, f"{sent.what} at {sent.host}: {printable(what, 500)}")

    async def check(self, request: httpx2.Request) -> Sent:
        """Refuse `request` if its address breaks the rules; set its timeout and encoding otherwise."""
        url = request.url
        sent = Sent(document_of(request), f"{url.host}:{url.port}" if url.port else url.host or "?")
        if url.scheme != "https" and not (url.scheme == "http" and _loopback_name(url.host)):
            raise self.fail(
                sent, f"refused: an OAuth endpoint must be https (or http on a loopback host), not {url.scheme}"
            )
        if not self.local_ok:
            try:
                found = await _addresses(url.host, url.port or (443 if url.scheme == "https" else 80))
            except OSError as exc:
                raise self.fail(sent, f"the name does not resolve ({type(exc).__name__})") from None
            if any(_is_local(address) for address in found):
                raise self.fail(
                    sent,
                    "refused: it is on a loopback, link-local or private address and the server is not "
                    "(set auth.allow_private_addresses to allow it)",
                )
        request.extensions["timeout"] = TIMEOUT.as_dict()
        request.extensions[_MARK] = (self.server, sent)  # to name it if it goes unanswered (`unanswered`)
        request.headers["Accept-Encoding"] = "identity"  # a size cap on compressed bytes caps nothing
        return sent

    def cap(self, response: httpx2.Response, sent: Sent) -> None:
        """Make `response`'s body readable up to `MAX_BODY` bytes within `BODY_DEADLINE` seconds, else fail."""
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise self.fail(sent, f"HTTP {response.status_code}, compressed ({encoding}) though asked not to be")
        response.stream = _Capped(response.stream, self, sent)  # type: ignore[arg-type]

    async def checked_document(self, response: httpx2.Response, sent: Sent) -> None:
        """A JSON 200 answer to a metadata or token request must be that document: the SDK skips a malformed
        one silently (metadata) or with a bare parse error; say what is wrong instead. A 200 that is not
        JSON at all (a web page served at a well-known path) is left to the SDK, which tries the next one."""
        if response.status_code != 200 or sent.what == "client registration":
            return
        if "json" not in response.headers.get("content-type", "").lower():
            logger.debug("server %r: %s at %s is not JSON", self.server, sent.what, sent.host)
            return
        model = {
            "protected-resource metadata": ProtectedResourceMetadata,
            "authorization-server metadata": OAuthMetadata,
            "token endpoint": OAuthToken,
        }[sent.what]
        try:
            document = model.model_validate_json(await response.aread())
        except ValidationError as exc:
            raise self.fail(sent, f"HTTP 200, not a valid document ({_problems(exc)})") from None
        # Any integer validates, but the SDK adds it to the clock as a float (10**400 overflows) and a
        # negative one makes every request refresh first.
        lifetime = getattr(document, "expires_in", None)
        if lifetime is not None and not 0 <= lifetime <= LONGEST_LIFETIME:
            raise self.fail(sent, f"HTTP 200, not a valid document (expires_in: not from 0 to {LONGEST_LIFETIME})")

    def failed_answer(self, response: httpx2.Response, sent: Sent, exc: BaseException) -> OAuthRequestFailed:
        """What the SDK's error about `response` means, without the body it may have put in it (the log
        keeps a short, scrubbed excerpt, at debug level)."""
        try:
            body = response.content
        except httpx2.ResponseNotRead:
            body = b""
        status = response.status_code
        logger.debug("server %r: %s at %s answered %s: %r", self.server, sent.what, sent.host, status, _scrubbed(body))
        cause = exc if isinstance(exc, ValidationError) else exc.__cause__ or exc.__context__
        if isinstance(cause, ValidationError):
            return self.fail(sent, f"HTTP {status}, not a valid document ({_problems(cause)})")
        if isinstance(cause, ValueError):
            return self.fail(sent, f"HTTP {status}, not valid JSON")
        if 200 <= status < 300:  # the SDK refused what it was given: its words, which quote a field at most
            return self.fail(sent, f"HTTP {status}, refused: {printable(str(exc), 200)}")
        return self.fail(sent, f"HTTP {status}")


_MARK = "manifold_oauth"


def unanswered(exc: BaseException) -> OAuthRequestFailed | None:
    """`exc` as the failure of an OAuth request it is about (a timeout, a refused connection), if it is one:
    httpx2 raises those outside the auth flow, which never learns of them."""
    if not isinstance(exc, httpx2.TransportError):
        return None
    try:
        mark = exc.request.extensions.get(_MARK)
    except RuntimeError:  # no request attached
        return None
    if mark is None:
        return None
    server, sent = mark
    what = "no answer in time" if isinstance(exc, httpx2.TimeoutException) else "no answer"
    return OAuthRequestFailed(server, f"{sent.what} at {sent.host}: {what} ({type(exc).__name__})")


class PeerCheck(httpcore2.AsyncNetworkBackend):
    """Connects as httpcore2 does, then refuses a connection whose peer is on a loopback, link-local or
    private address before a byte is sent (a TLS handshake comes after). It holds for every request of the
    client, the MCP server's own included: its name resolved to a public address when the gateway judged
    it (`is_local_url`), so a private one now is a rebinding too."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        peer = stream.get_extra_info("server_addr")
        try:
            address = ipaddress.ip_address(str(peer[0]).split("%")[0])
        except (TypeError, IndexError, ValueError):  # not an IP socket: nothing to judge
            return stream
        if _is_local(address):
            await stream.aclose()
            raise self.guard.fail(
                Sent("a connection", f"{host}:{port}"),
                "refused: the name resolved to a loopback, link-local or private address when connecting, and "
                "the server is not on one (set auth.allow_private_addresses to allow it)",
            )
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return await self.inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _Capped(httpx2.AsyncByteStream):
    """A response body that stops at `MAX_BODY` bytes or `BODY_DEADLINE` seconds."""

    def __init__(self, inner: httpx2.AsyncByteStream, guard: Guard, sent: Sent) -> None:
        self.inner, self.guard, self.sent = inner, guard, sent

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size, started = 0, time.monotonic()
        async for chunk in self.inner:
            size += len(chunk)
            if size > MAX_BODY:
                raise self.guard.fail(self.sent, f"the answer is larger than {MAX_BODY // 1024} kB")
            if time.monotonic() - started > BODY_DEADLINE:
                raise self.guard.fail(self.sent, f"the answer took longer than {BODY_DEADLINE:g}s")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _WithoutBodies(logging.Filter):
    """The SDK logs each failed flow with its traceback, whose message may hold an answer's whole body: the
    record is kept, without it (`Guard.failed_answer` logs a short, scrubbed excerpt instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info is not None and record.exc_info[1] is not None:
            name = type(record.exc_info[1]).__name__
            record.msg, record.args = "OAuth flow error (%s; not logged: it may hold an answer's body)", (name,)
            record.exc_info, record.exc_text = None, None
        return True


logging.getLogger("mcp.client.auth.oauth2").addFilter(_WithoutBodies())


def _problems(exc: ValidationError) -> str:
    """Which fields were wrong and how, never their values."""
    shown = [
        f"{'.'.join(str(part) for part in error['loc']) or 'document'}: {error['msg']}" for error in exc.errors()[:3]
    ]
    return "; ".join(shown)


_SECRETISH = re.compile(r'("?(?:access_token|refresh_token|client_secret|id_token)"?\s*[:=]\s*"?)[^"&,\s]+')


def _scrubbed(body: bytes) -> str:
    """A short excerpt of an answer for the log: printable text only, token-like fields blanked."""
    return _SECRETISH.sub(r"\1***", printable(body[:200].decode("utf-8", "replace"), 200))


def printable(text: str, limit: int = 300) -> str:
    """`text` without control characters (a terminal acts on escape sequences), cut to `limit`."""
    return "".join(c for c in text if c.isprintable())[:limit]
