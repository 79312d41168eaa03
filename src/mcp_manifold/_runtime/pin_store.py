"""The pins of every server's tools, in `pins.sqlite` in the data dir, and which tools are quarantined.

Each listing of a server (configured, or a hub instance) passes through `observe` before the
catalog takes it, so a changed tool is quarantined before any client can see the change. The
store keeps every pin in memory as well, so asking "is this tool quarantined?" on the call path is
a set lookup. `manifold pins approve` / `reject` run in another process: `watch` notices their
writes (SQLite's `data_version`) and reloads, and the gateway tells clients their lists changed.
What a listing means is decided in `core/pins.py`; here is only the keeping.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio

from mcp_manifold._core import pins
from mcp_manifold._core.apps import app_uris
from mcp_manifold._core.listing import Listing
from mcp_manifold._core.pins import NewTools, Pin, PinningMode
from mcp_manifold._errors import ManifoldError
from mcp_manifold._files import private_file

logger = logging.getLogger(__name__)

FILE_NAME = "pins.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    state TEXT NOT NULL,
    hash TEXT,
    definition TEXT,
    candidate_hash TEXT,
    candidate TEXT,
    changed_at REAL,
    PRIMARY KEY (server, tool)
);
"""


class PinStore:
    """Pins kept in SQLite, mirrored in memory; `mode` off keeps nothing and blocks nothing."""

    def __init__(
        self,
        data_dir: str | Path,
        mode: PinningMode = "warn",
        new_tools: NewTools = "allow",
        clock: Callable[[], float] = time.time,
        *,
        max_tools: int = 10_000,
    ) -> None:
        self.path = Path(data_dir).expanduser() / FILE_NAME
        self.mode = mode
        self.new_tools = new_tools
        self.clock = clock
        self.max_tools = max_tools
        self._pins: dict[tuple[str, str], Pin] = {}
        self._blocked: frozenset[tuple[str, str]] = frozenset()
        self._flipped: set[tuple[str, str]] = set()  # held or let go since `take_flipped` was last asked
        self._counts: dict[str, int] = {}  # pins per server, only servers with some (`_recompute` keeps it)
        # Tools a server lists past `max_tools` pins, by (server, session): never pinned, so a server that renames
        # its tools at every listing cannot grow the file without end; held under enforce. Only what is listed now.
        self._unpinned: dict[tuple[str, str | None], frozenset[str]] = {}
        self._apps: frozenset[tuple[str, str]] = frozenset()  # (server, ui:// URI) its pinned tools name
        # What this gateway's servers serve now, as it last judged them: another process's decision is about
        # the definition it saw, and what is served is judged again by it (`_judge_served`). By session: a
        # server with sessions per client (`session_scope: client`, keyed by the client; None: the shared one)
        # may list a tool one way to one client and another way to the next.
        self._served: dict[tuple[str, str], dict[str | None, dict[str, Any]]] = {}
        self._db: sqlite3.Connection | None = None
        self._version: int | None = None
        # Told every pin this store changed (replicas sharing state pass them on: shared_state/pins.py).
        self.on_change: Callable[[list[Pin]], None] | None = None
        self.on_forget: Callable[[str], None] | None = None  # told each server whose pins it forgot

    # --- reading ----------------------------------------------------------------------------------

    @property
    def enforcing(self) -> bool:
        return self.mode == "enforce"

    @property
    def any_blocked(self) -> bool:
        return bool(self._blocked)

    def blocked(self, server: str, tool: str) -> bool:
        """Whether the tool is quarantined (only ever true with `pinning: enforce`)."""
        return (server, tool) in self._blocked

    def quarantined(self) -> frozenset[tuple[str, str]]:
        """Every (server, tool) held now."""
        return self._blocked

    def unpinned(self) -> dict[str, set[str]]:
        """The tools each server lists now past `max_tools` pins (held under enforce), for the operator's views:
        they are pinned nowhere, so `pins()` has none of them."""
        held: dict[str, set[str]] = {}
        for (server, _session), tools in self._unpinned.items():
            held.setdefault(server, set()).update(tools)
        return held

    def take_flipped(self) -> set[tuple[str, str]]:
        """The (server, tool)s held, or let go, since this was last asked (their apps are listed or hidden with
        them), and forget them."""
        flipped, self._flipped = self._flipped, set()
        return flipped

    def pins(self) -> list[Pin]:
        self._open()
        return sorted(self._pins.values(), key=lambda pin: pin.key)

    def servers(self) -> set[str]:
        """The servers that have pins."""
        self._open()
        return set(self._counts)

    def get(self, server: str, tool: str) -> Pin | None:
        self._open()
        return self._pins.get((server, tool))

    # --- what a listing means ----------------------------------------------------------------------

    def observe(self, server: str, listing: Listing, session: str | None = None) -> bool:
        """Pin what is new and judge what changed in a server's listing; True when quarantines changed.
        `session`: the client whose own session listed it (`session_scope: client`), None for the shared one."""
        if self.mode == "off":
            return False
        self._open()
        known = server in self._counts  # not a scan of every pin: each listing of every server asks
        now = self.clock()
        for key in [key for key in self._served if key[0] == server and not pins.is_app(key[1])]:
            self._served_no_more(key, session)  # a tool it no longer lists to this session is served there no more
        changed: list[Pin] = []
        count, unpinned = self._counts.get(server, 0), []
        for tool in listing.tools:
            before = self._pins.get((server, tool.name))
            if before is None and count >= self.max_tools:
                unpinned.append(tool.name)
                continue
            count += before is None
            sessions = self._served.setdefault((server, tool.name), {})
            served = sessions[session] = pins.definition(tool)
            after = pins.observe(before, served, server=server, server_known=known, new_tools=self.new_tools, now=now)
            if before is not None and before.state != "pinned" and after.state == "pinned":
                # Served as approved here; a definition nobody approved that another session is served still holds
                # the tool, else a server lifts its quarantine by listing the approved one to another client.
                after = before if self._unapproved(after, sessions.values(), now) else after
            if after != before:
                changed.append(after)
                self._pins[after.key] = after
                if after.state != "pinned":
                    self._tell(after, before)
        unpinned_changed = self._note_unpinned(server, session, unpinned)
        if changed:
            self._keep(changed, f"what server {server!r} listed")
        elif not unpinned_changed:
            return False
        return self._recompute()

    def _note_unpinned(self, server: str, session: str | None, unpinned: list[str]) -> bool:
        """Keep (and log) the tools a listing had past `max_tools`; True when they changed."""
        before = self._unpinned.pop((server, session), frozenset())
        if not unpinned:
            return bool(before)
        self._unpinned[(server, session)] = frozenset(unpinned)
        shown = ", ".join(repr(name[:200]) for name in unpinned[:5]) + (
            f" and {len(unpinned) - 5} more" * (len(unpinned) > 5)
        )
        logger.warning(
            "server %r has %d pinned tools (pin_max_tools); %d it lists now are not pinned (%s): %s. Raise "
            "pin_max_tools, or forget its pins (manifold pins forget %r) to have what it serves pinned afresh",
            server,
            self._counts.get(server, 0),
            len(unpinned),
            shown,
            "held until then" if self.enforcing else "served unpinned (pinning: warn)",
            server,
        )
        return frozenset(unpinned) != before

    def observe_app(self, server: str, uri: str, defined: dict[str, Any]) -> bool:
        """Pin an MCP App's contents on its first read and judge them on every later one; True when it is
        quarantined. Its first read pins it as it comes, as a new server's tools are: a new tool that names a
        new app is judged by `pin_new_tools`, and the app's URI in the tool's `_meta` is part of its pin.
        A `ui://` resource no pinned tool of the server names is not an app here, and is not judged."""
        if self.mode == "off":
            return False
        self._open()
        if (server, uri) not in self._apps:  # only the apps its tools name: a caller cannot fill the file
            return False
        before = self._pins.get((server, uri))
        if before is None and self._counts.get(server, 0) >= self.max_tools:
            # Apps count in pin_max_tools: past it one is pinned nowhere, as a tool is not (held under enforce,
            # served under warn). Before, a tool naming another app at each listing added a pin per app read.
            self._unpinned_app(server, uri)
            return self.enforcing
        self._served[(server, uri)] = {None: defined}  # judged at each read: no other read can lift its refusal
        after = pins.observe(before, defined, server=server, server_known=False, new_tools="allow", now=self.clock())
        if after != before:
            self._pins[after.key] = after
            if after.state != "pinned":
                self._tell(after, before)
            self._keep([after], f"the app {uri!r} server {server!r} served")
            self._recompute()
        return self.blocked(server, uri)

    def _unpinned_app(self, server: str, uri: str) -> None:
        logger.warning(
            "server %r has %d pinned tools and apps (pin_max_tools); its app %r is not pinned: %s. Raise "
            "pin_max_tools, or forget its pins (manifold pins forget %r) to have what it serves pinned afresh",
            server,
            self._counts.get(server, 0),
            uri[:200],
            "held until then" if self.enforcing else "served unpinned (pinning: warn)",
            server,
        )

    def _tell(self, pin: Pin, before: Pin | None) -> None:
        held = "quarantined until approved" if self.enforcing else "still served (pinning: warn)"
        # "Pinned", not "approved": most pins were taken on first sight, and a server name that another config
        # sharing this data_dir gives to another server looks exactly like a change.
        what = (
            "is new on a server whose tools are pinned"
            if pin.state == "new"
            else "differs from the definition pinned for it (on first sight or by an approval; the same server "
            "name used for another server by a config sharing this data_dir looks like this too)"
        )
        if before is not None and before.state == pin.state:
            what = "changed again, still not approved"
        logger.warning(
            "%s %r of server %r %s; %s. Review: manifold pins diff %r",
            "app" if pins.is_app(pin.tool) else "tool",
            pin.tool,
            pin.server,
            what,
            held,
            f"{pin.server}/{pin.tool}",  # quoted as the name is: a server's escape sequences never reach a terminal
        )

    # --- the operator's decisions --------------------------------------------------------------------

    def approve(self, server: str, tool: str) -> Pin:
        return self._decide(server, tool, pins.approve)

    def reject(self, server: str, tool: str) -> Pin:
        return self._decide(server, tool, pins.reject)

    def _decide(self, server: str, tool: str, decide: Callable[[Pin, float], Pin]) -> Pin:
        self._open()
        pin = self._pins.get((server, tool))
        if pin is None:
            raise KeyError(f"{server}/{tool}")
        after = decide(pin, self.clock())
        if after != pin:
            self._pins[after.key] = after
            self._write([after])
            self._recompute()
        return after

    # --- forgetting ----------------------------------------------------------------------------------

    def forget(self, server: str, *, tell: bool = True) -> int:
        """Drop every pin of `server`, in memory and in the file: a hub instance whose id was generated is gone
        for good, and its pins would only pile up (and be scanned by every listing); or the operator's `manifold
        pins forget`, taken from the shared store. How many were dropped. What it is served now stays (`not_served`
        drops that for one that is gone): a server forgotten while it runs has its tools past `max_tools` held until
        its next listing judges them afresh, as when a gateway reads the forget from its file."""
        if self.mode == "off":
            return 0
        self._open()
        keys = [key for key in self._pins if key[0] == server]
        for key in keys:
            del self._pins[key]
        if tell and self.on_forget is not None:
            self.on_forget(server)
        if keys:
            try:
                with self._transaction() as db:
                    db.execute("DELETE FROM pins WHERE server = ?", (server,))
            except sqlite3.Error as exc:  # memory is clean; the next start holds them again, nothing worse
                logger.error("could not forget the pins of %r in %s: %s", server, self.path, exc)
            self._recompute()
        return len(keys)

    def drop(self, keys: list[tuple[str, str]]) -> None:
        """Drop these pins, in memory and in the file (one transaction): those of a server the shared store
        forgot, kept in a data dir `manifold pins` ran on before."""
        if not keys or self.mode == "off":
            return
        self._open()
        for key in keys:
            self._pins.pop(key, None)
        with self._transaction() as db:
            db.executemany("DELETE FROM pins WHERE server = ? AND tool = ?", keys)
        self._recompute()

    # --- another process's decisions -----------------------------------------------------------------

    def reload_if_changed(self) -> bool:
        """Reload when another process wrote to the store; True when quarantines changed."""
        if self.mode == "off" or self._db is None:
            return False
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version:
            return False
        self._version = version
        before, self._pins = self._pins, dict(self._read())
        if self.on_change is not None:
            changed = [pin for key, pin in self._pins.items() if before.get(key) != pin]
            if changed:
                self.on_change(changed)
        self._judge_served()
        return self._recompute()

    def merge(self, others: list[Pin]) -> bool:
        """Take the pins another replica changed, wherever they differ from ours (the shared store is the judge
        of what came last, never a machine's clock); True when quarantines changed."""
        if self.mode == "off":
            return False
        self._open()
        newer = [pin for pin in others if pin != self._pins.get(pin.key)]
        if not newer:
            return False
        for pin in newer:
            self._pins[pin.key] = pin
        self._keep(newer, "another replica's pins", tell=False)
        self._judge_served()
        return self._recompute()

    def not_served(self, server: str) -> None:
        """`server` serves nothing any more (a config reload removed it). Its pins stay, since an approval outlives
        a server taken out and put back; what it served goes, else every server a reload ever removed was kept
        (and scanned by each listing)."""
        for key in [key for key in self._served if key[0] == server]:
            del self._served[key]
        held = [key for key in self._unpinned if key[0] == server]  # past pin_max_tools: served no more either
        for key in held:
            del self._unpinned[key]
        if held:
            self._recompute()

    def forget_session(self, server: str, session: str) -> None:
        """A client's own session to `server` closed: what it was served is served no more."""
        for key in [key for key in self._served if key[0] == server]:
            self._served_no_more(key, session)
        if self._unpinned.pop((server, session), None):
            self._recompute()

    def _served_no_more(self, key: tuple[str, str], session: str | None) -> None:
        sessions = self._served.get(key)
        if sessions is not None:
            sessions.pop(session, None)
            if not sessions:  # kept only while served: a server renaming its tools must not grow it
                del self._served[key]

    def _unapproved(self, pin: Pin, served: Iterable[dict[str, Any]], now: float) -> dict[str, Any] | None:
        """The first of the definitions sessions are served that `pin` does not approve, if any."""
        return next(
            (
                defined
                for defined in served
                if pins.observe(
                    pin, defined, server=pin.server, server_known=True, new_tools=self.new_tools, now=now
                ).state
                != "pinned"
            ),
            None,
        )

    def _judge_served(self) -> None:
        """Judge what this gateway's servers serve now by pins another process or replica decided. An approval
        is of the definition the operator saw; a server that changed again meanwhile serves one nobody
        approved, held as changed here rather than served until its next listing. In memory only: the next
        listing records it, and gateways that serve different definitions do not overwrite each other."""
        now = self.clock()
        for key, sessions in self._served.items():
            pin = self._pins.get(key)
            if pin is None or not sessions:
                continue
            # Held while any session is served what the pin does not approve; else as the sessions serve it.
            served = self._unapproved(pin, sessions.values(), now) or next(iter(sessions.values()))
            after = pins.observe(pin, served, server=key[0], server_known=True, new_tools=self.new_tools, now=now)
            if after != pin:
                self._pins[key] = after
                self._tell(after, pin)

    async def watch(self, on_change: Callable[[], Any], interval: float = 1.0) -> None:
        """Call `on_change()` whenever another process's approvals or rejections change what is quarantined."""
        while True:
            await anyio.sleep(interval)
            try:
                if self.reload_if_changed():
                    await on_change()
            except sqlite3.Error as exc:
                logger.warning("could not read %s: %s", self.path, exc)
            except Exception:  # it runs in the gateway's task group: a fault costs this round only
                logger.exception("could not take the pins %s holds now; trying again in %gs", self.path, interval)

    # --- the file ------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the pins now (else on first use); nothing with `pinning: off`."""
        self._open()

    def _open(self) -> None:
        if self._db is not None or self.mode == "off":
            return
        private_file(self.path)  # 0600, and so its -wal and -shm files (SQLite gives them its mode)
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            self._version = db.execute("PRAGMA data_version").fetchone()[0]
            self._db = db
            self._pins = dict(self._read())
        except sqlite3.Error as exc:
            # Closed, not open: serving without the pins would serve every quarantined tool as new.
            self._db = None
            db.close()
            raise ManifoldError(
                f"the pins in {str(self.path)!r} cannot be read: {exc}. Nothing starts without them (their "
                "quarantines would be lifted); restore the file, or move it aside to pin every tool afresh"
            ) from None
        self._recompute()

    def _read(self) -> Iterator[tuple[tuple[str, str], Pin]]:
        assert self._db is not None
        rows = self._db.execute(
            "SELECT server, tool, state, hash, definition, candidate_hash, candidate, changed_at FROM pins"
        )
        for server, tool, state, digest, definition, candidate_hash, candidate, changed_at in rows:
            try:
                pin = Pin(server, tool, state, digest, _json(definition), candidate_hash, _json(candidate), changed_at)
            except ValueError as exc:  # a hand edit, another program's row: that tool is judged as never seen
                logger.error(
                    "%s: the pin of tool %r of server %r is unreadable (%s); skipped: the tool is judged as new",
                    self.path,
                    tool,
                    server,
                    exc,
                )
                continue
            yield pin.key, pin

    def _keep(self, changed: list[Pin], what: str, *, tell: bool = True) -> None:
        """`_write` for what the gateway learns by itself (a listing, another replica's pins). Those run in
        task groups every caller shares, where an error would end the gateway: a write that fails (the file
        locked past SQLite's busy timeout, a full disk) is logged, and the pins hold in memory only."""
        try:
            self._write(changed, tell=tell)
        except sqlite3.Error as exc:
            tools = ", ".join(f"{pin.server}/{pin.tool}" for pin in changed)
            logger.error(
                "could not save %s (pins of %s) to %s: %s. They hold in this gateway's memory, but the decision "
                "was not saved: `manifold pins` and other gateways do not see it, and a restart judges these "
                "tools again",
                what,
                tools,
                self.path,
                exc,
            )

    def _write(self, changed: list[Pin], *, tell: bool = True) -> None:
        assert self._db is not None
        if tell and self.on_change is not None:
            self.on_change(changed)
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO pins VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        pin.server,
                        pin.tool,
                        pin.state,
                        pin.hash,
                        _text(pin.definition),
                        pin.candidate_hash,
                        _text(pin.candidate),
                        pin.changed_at,
                    )
                    for pin in changed
                ],
            )
        # Our own writes do not move data_version; only another process's do.

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        assert self._db is not None
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # a COMMIT that failed (a full disk) leaves it open for the next write
                with suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            raise

    def _recompute(self) -> bool:
        blocked = frozenset(key for key, pin in self._pins.items() if pins.blocks(pin, self.mode))
        if self.enforcing and self._unpinned:  # judged by no pin: held as a new tool would be
            blocked |= {(server, tool) for (server, _session), tools in self._unpinned.items() for tool in tools}
        self._counts = Counter(server for server, _tool in self._pins)
        self._apps = frozenset(
            (pin.server, uri)
            for pin in self._pins.values()
            for defined in (pin.definition, pin.candidate)
            for uri in _apps_named(defined)
        )
        changed = blocked != self._blocked
        if changed:
            self._flipped |= blocked ^ self._blocked
        self._blocked = blocked
        return changed

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


UNPINNED_SHOWN = 50  # names per server an operator view carries: a server listing thousands is not copied whole


def unpinned_rows(held: dict[str, set[str]]) -> dict[str, dict[str, Any]]:
    """`PinStore.unpinned()` as the live status carries it (`manifold pins` reads it): per server, how many
    and the first names (each cut to 200 characters, as the log has them)."""
    return {
        server: {"count": len(tools), "tools": [name[:200] for name in sorted(tools)[:UNPINNED_SHOWN]]}
        for server, tools in sorted(held.items())
    }


def _apps_named(defined: dict[str, Any] | None) -> set[str]:
    """The apps (`ui://` URIs) a tool's pinned definition names (a hand-edited row may hold anything)."""
    meta = defined.get("_meta") if defined is not None else None
    return app_uris(meta) if isinstance(meta, dict) else set()


def _json(text: str | None) -> dict[str, Any] | None:
    """A stored definition; ValueError when it is not a JSON object."""
    if not text:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _text(value: dict[str, Any] | None) -> str | None:
    return json.dumps(value, sort_keys=True) if value is not None else None
