"""`SearchIndex`: the gateway's tool catalog, searchable by BM25 and, with an embedder, by meaning.

State is a dict of documents and a dict of vectors by content hash. Changes mark the derived search
structures (BM25 index, vector matrix) dirty; they are rebuilt in one go before the next search, so
a burst of `upsert` calls costs one rebuild. `update` rebuilds at once so the first search after it
is fast. All public methods are thread-safe, and searches keep being answered from the previous
state while a change waits on the embedder.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mcp_manifold._errors import InvalidRequest
from mcp_manifold._search.documents import SearchHit, ToolDocument
from mcp_manifold._search.embedder import Embedder
from mcp_manifold._search.errors import SearchError
from mcp_manifold._search.explain import Explanation, explain_row
from mcp_manifold._search.fusion import top_indices
from mcp_manifold._search.profiles import Profile, make_profile, profile_terms
from mcp_manifold._search.ranking import (
    EMBEDDING_TEXT_VERSION,
    RankingConfig,
    document_terms,
    embedding_text,
    schema_only_terms,
    score_all,
)
from mcp_manifold._search.snapshot import Snapshot, Vector, build_snapshot, visible_part
from mcp_manifold._search.store import IndexStore

log = logging.getLogger(__name__)

EMBED_BATCH = 64  # texts per embedder call: the unit of progress reports
# How much of a request a search reads. A request is a sentence or a paragraph, and the local model reads
# its first 256 tokens only; a megabyte of request took seconds of CPU to tokenise and match. A longer
# one is read up to here rather than refused: a model may well paste a page where a sentence belongs.
MAX_QUERY_CHARS = 4096
# Callers' views kept per catalog state: one per profile that hides tools. Each holds a BM25 index (about a
# kilobyte a tool, measured) and its tools' vectors (1.5 kB a tool of the local model). At least MIN_VIEWS are
# kept, and more while they hold less than VIEW_BYTES together; the least recently used goes first. (All 16
# were dropped when a 17th came: 17 profiles searching in turn remade a view at every search, 5,000 tools
# taking each from 74 to 325 ms.)
MIN_VIEWS = 16
MAX_VIEWS = 256
VIEW_BYTES = 256 * 1024 * 1024
_VIEW_ROW_BYTES = 1024
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class UpdateStats:
    """What an `update`, `upsert` or `remove` changed."""

    added: int = 0
    removed: int = 0
    changed: int = 0  # same key, new content
    unchanged: int = 0
    # Texts sent to the embedder, tools and server profiles (vectors found in memory or the store are not).
    embedded: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class IndexStatus:
    tools: int
    embedder: str  # "bm25" when there is none
    last_update: datetime | None
    stale: bool  # loaded from the store and not yet refreshed, or some tools lack a vector
    missing_vectors: int  # tools searchable by BM25 only (their embedding failed)
    last_error: str | None


@dataclass
class _Plan:
    """What one change will do, worked out before anything is modified."""

    removals: list[str]
    fresh: dict[str, tuple[ToolDocument, str]] = field(default_factory=dict)  # key → (doc, content hash)
    profiles: dict[str, Profile] = field(default_factory=dict)  # server → its profile after the change
    to_embed: dict[str, str] = field(default_factory=dict)  # content or profile hash → the text to embed
    added: int = 0
    changed: int = 0
    unchanged: int = 0


class SearchIndex:
    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        store: IndexStore | None = None,
        ranking: RankingConfig | None = None,
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._ranking = ranking or RankingConfig()
        self._lock = threading.RLock()  # guards the state below; held only briefly
        self._writer = threading.Lock()  # serialises changes, which may spend long in the embedder
        self._docs: dict[str, ToolDocument] = {}
        self._hashes: dict[str, str] = {}  # key → content hash
        self._vectors: dict[str, np.ndarray] = {}  # content hash → unit vector
        # Content or profile hash → BM25 terms, so a rebuild re-tokenises nothing.
        self._terms: dict[str, list[str]] = {}
        self._profiles: dict[str, Profile] = {}  # server → profile of its current tools
        self._snapshot: Snapshot | None = None
        # Callers' views of `_views_of` (`_visible`), by the rows each may see.
        self._views: dict[bytes, Snapshot] = {}
        self._views_of: Snapshot | None = None
        self._last_update: datetime | None = None
        self._last_error: str | None = None
        self._refreshed = store is None  # a store's contents are only "last known" until the first update
        if store is not None:
            self._load_from_store(store)

    # --- public API --------------------------------------------------------------------------

    def update(self, docs: Iterable[ToolDocument], *, progress: Progress | None = None) -> UpdateStats:
        """Make `docs` the whole catalog: add new tools, drop missing ones, embed only new content."""
        incoming = _unique(docs)
        return self._change(incoming.values(), lambda: [k for k in self._docs if k not in incoming], progress, True)

    def upsert(self, docs: Iterable[ToolDocument], *, progress: Progress | None = None) -> UpdateStats:
        """Add or replace these tools; every other tool stays."""
        return self._change(_unique(docs).values(), list, progress, False)

    def remove(self, keys: Iterable[str]) -> UpdateStats:
        """Drop these tools (unknown keys are ignored)."""
        wanted = list(dict.fromkeys(keys))
        return self._change([], lambda: [k for k in wanted if k in self._docs], None, False)

    def search(
        self, query: str, *, limit: int = 5, server: str | None = None, allowed: Callable[[str], bool] | None = None
    ) -> list[SearchHit]:
        """The `limit` best tools for `query`, best first, optionally only those of one server, and only
        the keys `allowed` passes (a caller's profile: what it may not call is never ranked)."""
        if limit < 1:
            raise InvalidRequest(f"limit must be at least 1, got {limit}")
        query = query[:MAX_QUERY_CHARS]
        if not query.strip():
            return []
        with self._lock:
            snapshot = self._current()
            embedder = self._embedder
        if allowed is not None:
            snapshot = self._visible(snapshot, allowed)
        if not snapshot.keys:
            return []
        scores, failure = self._scores(query, snapshot, embedder)
        if failure is not None:
            self._note_error(f"query embedding failed, BM25 only: {failure}")
        if server is not None:
            rows = snapshot.by_server.get(server)
            if rows is None:
                return []
            picked = rows[top_indices(scores[rows], limit, positive_only=True)]
        else:
            picked = top_indices(scores, limit, positive_only=True)
        return [SearchHit(snapshot.keys[i], float(scores[i])) for i in picked]

    def _scores(
        self, query: str, snapshot: Snapshot, embedder: Embedder | None, trace: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, SearchError | None]:
        """Every tool's score for `query`, and the embedding failure that left BM25 alone to score them:
        the embedding service failing must not take search down."""
        try:
            scores = score_all(
                query,
                snapshot.lexical,
                snapshot.server_ids,
                embedder,
                snapshot.matrix,
                snapshot.has_vector,
                self._ranking,
                snapshot.profiles,
                trace,
            )
            return scores, None
        except SearchError as exc:
            if trace is not None:
                trace.clear()
            lexical_only = score_all(
                query, snapshot.lexical, snapshot.server_ids, None, None, None, self._ranking, snapshot.profiles, trace
            )
            return lexical_only, exc

    def explain(self, query: str, key: str, *, limit: int = 5, server: str | None = None) -> Explanation:
        """Where tool `key` ranks for `query`, and the score of every ranking step that put it there."""
        with self._lock:
            snapshot = self._current()
            embedder = self._embedder
            content_hash = self._hashes.get(key)
            terms = self._terms.get(content_hash, []) if content_hash else []
            doc = self._docs.get(key)
        if key not in snapshot.keys:
            return Explanation(query, key, "bm25" if embedder is None else "hybrid", in_index=False, limit=limit)
        trace: dict[str, Any] = {}
        notes = []
        final, failure = self._scores(query, snapshot, embedder, trace)
        if failure is not None:
            notes.append(f"the query could not be embedded, so BM25 alone answered: {failure}")
        row = snapshot.keys.index(key)
        if embedder is not None and snapshot.has_vector is not None and not snapshot.has_vector[row]:
            notes.append("this tool has no embedding yet (its embedding failed), so only BM25 scores it")
        schema_only = schema_only_terms(doc, self._ranking) if doc is not None else []
        explanation = explain_row(
            query, snapshot.keys, row, final, trace, terms, int(snapshot.server_ids[row]), limit, schema_only
        )
        hidden = server is not None and self._docs[key].server != server
        return replace(explanation, hidden_by_server_filter=hidden, notes=tuple(notes))

    def status(self) -> IndexStatus:
        with self._lock:
            missing = 0
            if self._embedder is not None:
                missing = sum(1 for h in self._hashes.values() if h not in self._vectors)
            return IndexStatus(
                tools=len(self._docs),
                embedder=self._embedder.name if self._embedder is not None else "bm25",
                last_update=self._last_update,
                stale=not self._refreshed or missing > 0,
                missing_vectors=missing,
                last_error=self._last_error,
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._docs)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._docs

    # --- changes -----------------------------------------------------------------------------

    def _change(
        self,
        upserts: Iterable[ToolDocument],
        removals: Callable[[], list[str]],
        progress: Progress | None,
        full: bool,
    ) -> UpdateStats:
        """Plan under the lock, embed outside it (searches go on meanwhile), then commit under it."""
        started = time.perf_counter()
        with self._writer:  # one change at a time; searches only wait for the short commit
            with self._lock:
                plan = self._plan(upserts, removals())
            vectors, embedded = self._embed(plan, progress)
            with self._lock:
                self._commit(plan, vectors, full)
        return UpdateStats(
            added=plan.added,
            removed=len(plan.removals),
            changed=plan.changed,
            unchanged=plan.unchanged,
            embedded=embedded,
            seconds=time.perf_counter() - started,
        )

    def _plan(self, upserts: Iterable[ToolDocument], removals: list[str]) -> _Plan:
        plan = _Plan(removals=removals)
        for doc in upserts:
            old_hash = self._hashes.get(doc.key)
            new_hash = doc.content_hash()
            if old_hash == new_hash:
                plan.unchanged += 1
                continue
            if old_hash is None:
                plan.added += 1
            else:
                plan.changed += 1
            plan.fresh[doc.key] = (doc, new_hash)
        plan.profiles = self._profiles_after(plan) if plan.fresh or removals else dict(self._profiles)
        if self._embedder is not None:
            # Everything that will lack a vector: new content, and earlier failures to retry.
            gone = set(removals)
            kept = {h: self._docs[k] for k, h in self._hashes.items() if k not in plan.fresh and k not in gone}
            plan.to_embed = {h: embedding_text(d) for h, d in kept.items() if h not in self._vectors}
            plan.to_embed.update({h: embedding_text(d) for d, h in plan.fresh.values() if h not in self._vectors})
            plan.to_embed.update({p.hash: p.text for p in plan.profiles.values() if p.hash not in self._vectors})
        return plan

    def _profiles_after(self, plan: _Plan) -> dict[str, Profile]:
        """Every server's profile once `plan` is applied; only the servers it touches are worked out anew."""
        gone = set(plan.removals)
        touched = {doc.server for doc, _ in plan.fresh.values()}
        touched |= {self._docs[key].server for key in (*plan.fresh, *gone) if key in self._docs}
        staying = (d for k, d in self._docs.items() if d.server in touched and k not in gone and k not in plan.fresh)
        profiles = {server: p for server, p in self._profiles.items() if server not in touched}
        profiles.update(_profiles_of([*staying, *(doc for doc, _ in plan.fresh.values())]))
        return profiles

    def _embed(self, plan: _Plan, progress: Progress | None) -> tuple[dict[str, np.ndarray], int]:
        """Vectors for `plan.to_embed`: from the store where it has them, else from the embedder."""
        if self._embedder is None or not plan.to_embed:
            return {}, 0
        space = self._space()
        vectors = self._store.load_vectors(space, plan.to_embed) if self._store is not None else {}
        # Shortest first: every batch is padded to its longest text, and a catalog mixes one-line and
        # page-long descriptions; in catalog order embedding 384 benchmark tools took twice as long.
        todo = sorted(((h, text) for h, text in plan.to_embed.items() if h not in vectors), key=lambda t: len(t[1]))
        done = 0
        if progress is not None:
            progress(0, len(todo))
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            try:
                embedded = self._embedder.embed([text for _, text in batch])
            except SearchError as exc:
                # Keep what was embedded; the rest stays BM25-only until the next change retries it.
                self._note_error(f"embedding {len(todo) - done} texts failed: {exc}")
                return vectors, done
            fresh = {h: embedded[row] for row, (h, _) in enumerate(batch)}
            vectors.update(fresh)
            if self._store is not None:
                self._store.save_vectors(space, fresh)
            done += len(batch)
            if progress is not None:
                progress(done, len(todo))
        with self._lock:
            self._last_error = None
        return vectors, done

    def _commit(self, plan: _Plan, vectors: dict[str, np.ndarray], full: bool) -> None:
        for key, (doc, content_hash) in plan.fresh.items():
            self._docs[key] = doc
            self._hashes[key] = content_hash
            self._terms.setdefault(content_hash, document_terms(doc, self._ranking))
        for key in plan.removals:
            self._docs.pop(key, None)
            self._hashes.pop(key, None)
        self._profiles = plan.profiles
        self._vectors.update(vectors)
        self._forget_unused()
        if self._store is not None:
            self._store.write_documents([doc for doc, _ in plan.fresh.values()], plan.removals)
            self._store.set_meta("last_update", datetime.now(UTC).isoformat())
            if full and self._embedder is not None:
                # Only a full update knows which vectors are in use; the others age out of the store.
                self._store.mark_used(self._space(), self._hashes_in_use())
                self._store.prune_vectors()
        self._last_update = datetime.now(UTC)
        if full:
            self._refreshed = True
            self._rebuild()  # now, so the first search after an update is fast
        elif plan.fresh or plan.removals or vectors:
            self._snapshot = None  # rebuilt by the next search: a burst of upserts costs one rebuild

    def _hashes_in_use(self) -> set[str]:
        return set(self._hashes.values()) | {p.hash for p in self._profiles.values()}

    def _forget_unused(self) -> None:
        in_use = self._hashes_in_use()
        for cache in (self._vectors, self._terms):
            for h in [h for h in cache if h not in in_use]:
                del cache[h]

    # --- derived structures ------------------------------------------------------------------

    def _current(self) -> Snapshot:
        if self._snapshot is None:
            self._rebuild()
        assert self._snapshot is not None
        return self._snapshot

    def _rebuild(self) -> None:
        keys = sorted(self._docs)
        hashes = [self._hashes[k] for k in keys]
        embedded = self._embedder is not None and bool(self._vectors)
        self._snapshot = build_snapshot(
            keys,
            [self._docs[k].server for k in keys],
            [self._terms[h] for h in hashes],
            [self._docs[k].name for k in keys],
            [self._vectors.get(h) for h in hashes] if embedded else None,
            lambda server: self._profiles.get(server) or make_profile(server, []),
            lambda profile: (self._profile_terms(profile), self._vectors.get(profile.hash)),
            k1=self._ranking.k1,
            b=self._ranking.b,
        )

    def _visible(self, snapshot: Snapshot, allowed: Callable[[str], bool]) -> Snapshot:
        """The part of `snapshot` a caller may see (`allowed`), ranked as if the rest did not exist, so
        no score or order depends on a hidden tool; made once per catalog state and caller's view."""
        mask = np.fromiter(map(allowed, snapshot.keys), dtype=bool, count=len(snapshot.keys))
        if mask.all():
            return snapshot
        seen = np.packbits(mask).tobytes()  # the view's key: which rows, in the snapshot's fixed order
        with self._lock:
            if self._views_of is snapshot and (kept := self._views.pop(seen, None)) is not None:
                self._views[seen] = kept  # the most recently used last
                return kept
        embedded = snapshot.matrix is not None
        view = visible_part(
            snapshot,
            np.flatnonzero(mask),
            lambda profile: self._view_profile(profile, embedded),
            k1=self._ranking.k1,
            b=self._ranking.b,
        )
        with self._lock:
            if self._views_of is not snapshot:
                self._views_of, self._views = snapshot, {}
            self._views[seen] = view
            _trim_views(self._views)
        return view

    def _view_profile(self, profile: Profile, embedded: bool) -> tuple[list[str], Vector]:
        """BM25 terms and embedding of a server's profile in a caller's view (its visible tools' names):
        known, or from the store, or embedded now (once; the store keeps it)."""
        with self._lock:
            terms = self._terms.get(profile.hash)
            vector = self._vectors.get(profile.hash)
            embedder = self._embedder
        if terms is None:
            terms = profile_terms(profile, stemming=self._ranking.stemming)
        if vector is not None or not embedded or embedder is None:
            return terms, vector
        space = self._space()
        if self._store is not None:
            vector = self._store.load_vectors(space, [profile.hash]).get(profile.hash)
        if vector is None:
            try:
                vector = embedder.embed([profile.text])[0]
            except SearchError as exc:
                self._note_error(f"embedding a server profile failed: {exc}")
                return terms, None
            if self._store is not None:
                self._store.save_vectors(space, {profile.hash: vector})
        return terms, vector

    def _profile_terms(self, profile: Profile) -> list[str]:
        terms = self._terms.get(profile.hash)
        if terms is None:
            terms = self._terms[profile.hash] = profile_terms(profile, stemming=self._ranking.stemming)
        return terms

    # --- persistence -------------------------------------------------------------------------

    def _space(self) -> str:
        """The store's name for this embedder's vectors of this version of the document text."""
        assert self._embedder is not None
        return f"{self._embedder.name}#text-v{EMBEDDING_TEXT_VERSION}"

    def _load_from_store(self, store: IndexStore) -> None:
        docs = store.load_documents()
        for doc in docs:
            h = doc.content_hash()
            self._docs[doc.key] = doc
            self._hashes[doc.key] = h
            self._terms.setdefault(h, document_terms(doc, self._ranking))
        self._profiles = _profiles_of(docs)
        if self._embedder is not None and docs:
            self._vectors.update(store.load_vectors(self._space(), self._hashes_in_use()))
        stamp = store.get_meta("last_update")
        self._last_update = datetime.fromisoformat(stamp) if stamp else None

    def _note_error(self, message: str) -> None:
        log.warning("search index: %s", message)
        with self._lock:
            self._last_error = message


def _view_bytes(view: Snapshot) -> int:
    """About what a caller's view holds in memory."""
    return len(view.keys) * _VIEW_ROW_BYTES + (view.matrix.nbytes if view.matrix is not None else 0)


def _trim_views(views: dict[bytes, Snapshot]) -> None:
    """Drop the least recently used views (the first) down to the bounds above."""
    total = sum(map(_view_bytes, views.values()))
    while len(views) > MAX_VIEWS or (len(views) > MIN_VIEWS and total > VIEW_BYTES):
        total -= _view_bytes(views.pop(next(iter(views))))


def _profiles_of(docs: Iterable[ToolDocument]) -> dict[str, Profile]:
    names: dict[str, list[str]] = defaultdict(list)
    for doc in docs:
        names[doc.server].append(doc.name)
    return {server: make_profile(server, tools) for server, tools in names.items()}


def _unique(docs: Iterable[ToolDocument]) -> dict[str, ToolDocument]:
    out: dict[str, ToolDocument] = {}
    for doc in docs:
        if doc.key in out and out[doc.key] != doc:
            raise ValueError(f"two different tools share the key {doc.key!r}")
        out[doc.key] = doc
    return out
