"""The search structures derived from an index's documents, and the part of them one caller may see.

A caller whose profile hides tools (or for whom pinning quarantines some) is ranked over its own part
of the catalog, made here from the whole one: BM25's document frequencies and lengths, the scores'
normalisation, the server-context step and the server profiles count only the tools it may see.
Ranked over the whole catalog, a hidden tool shows through: a request only it matches lifted its
visible siblings (server context), so the caller got tools where "no tools match" was the answer
without it, and every visible tool it outscored got a lower score than it has without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mcp_manifold._search.lexical import LexicalIndex
from mcp_manifold._search.profiles import Profile, ProfileIndex, make_profile
from mcp_manifold._search.ranking import stack

Vector = np.ndarray | None


@dataclass(frozen=True)
class Snapshot:
    """Search structures derived from the documents, in one fixed order."""

    keys: list[str]
    by_server: dict[str, np.ndarray]  # server → its rows
    server_ids: np.ndarray  # row → server number
    lexical: LexicalIndex
    matrix: np.ndarray | None
    has_vector: np.ndarray | None
    profiles: ProfileIndex  # row i: the profile of server number i
    # What a caller's part is made from (`visible_part`): each row's BM25 terms and name on its server,
    # and each server number's name and profile.
    terms: list[list[str]]
    names: list[str]
    servers: list[str]
    server_profiles: list[Profile]


def build_snapshot(
    keys: list[str],
    row_servers: Sequence[str],
    terms: list[list[str]],
    names: list[str],
    vectors: Sequence[Vector] | None,
    profiles: Callable[[str], Profile],
    profile_parts: Callable[[Profile], tuple[list[str], Vector]],
    *,
    k1: float,
    b: float,
) -> Snapshot:
    """The snapshot of these rows. `vectors` (None without an embedder) are the rows' embeddings;
    `profiles` gives a server's profile, `profile_parts` a profile's BM25 terms and embedding."""
    numbers: dict[str, int] = {}
    server_ids = np.array([numbers.setdefault(server, len(numbers)) for server in row_servers], dtype=np.int64)
    servers = list(numbers)  # server number → name
    server_profiles = [profiles(server) for server in servers]
    parts = [profile_parts(profile) for profile in server_profiles]
    matrix = has_vector = profile_matrix = profile_has_vector = None
    dim = next((v.shape[0] for v in (*(vectors or ()), *(vector for _, vector in parts)) if v is not None), 0)
    if vectors is not None and dim:
        matrix, has_vector = stack(vectors, dim)
        profile_matrix, profile_has_vector = stack([vector for _, vector in parts], dim)
    return Snapshot(
        keys=keys,
        by_server={server: np.flatnonzero(server_ids == n) for server, n in numbers.items()},
        server_ids=server_ids,
        lexical=LexicalIndex(terms, k1=k1, b=b),
        matrix=matrix,
        has_vector=has_vector,
        profiles=ProfileIndex(LexicalIndex([terms for terms, _ in parts]), profile_matrix, profile_has_vector),
        terms=terms,
        names=names,
        servers=servers,
        server_profiles=server_profiles,
    )


def visible_part(
    snapshot: Snapshot,
    rows: np.ndarray,
    profile_parts: Callable[[Profile], tuple[list[str], Vector]],
    *,
    k1: float,
    b: float,
) -> Snapshot:
    """`snapshot` with only these rows, as if the others did not exist; a server some of whose tools are
    not among them gets the profile of the others (`profile_parts` gives its terms and embedding)."""
    row_servers = [snapshot.servers[int(snapshot.server_ids[row])] for row in rows]
    names = [snapshot.names[row] for row in rows]
    kept: dict[str, list[str]] = {}
    for server, name in zip(row_servers, names, strict=True):
        kept.setdefault(server, []).append(name)
    whole = {
        server: profile
        for server, profile, count in zip(
            snapshot.servers, snapshot.server_profiles, np.bincount(snapshot.server_ids), strict=True
        )
        if len(kept.get(server, ())) == count
    }
    vectors = None
    if snapshot.matrix is not None and snapshot.has_vector is not None:
        vectors = [snapshot.matrix[row] if snapshot.has_vector[row] else None for row in rows]
    return build_snapshot(
        [snapshot.keys[row] for row in rows],
        row_servers,
        [snapshot.terms[row] for row in rows],
        names,
        vectors,
        lambda server: whole.get(server) or make_profile(server, kept[server]),
        profile_parts,
        k1=k1,
        b=b,
    )
