"""Server profiles: one short text per server, so a request can be matched to the server it is for.

A request usually needs one server ("make a PowerPoint about …", "plan a route …"), and the names of
a server's tools, read together, say what that server is for better than any single tool does. The
profile is the server name and its tool names as words ("osm mcp server: find nearby places, geocode
address, get route directions, …"); it is matched against the request by BM25 and, with an
embedder, by cosine, and every tool of the server gains `RankingConfig.server_match` times that
match (see `fusion.add_server_match`). Descriptions are left out: they drown the names, and a
server's own description is not part of what the gateway knows about its tools.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mcp_manifold._search.lexical import LexicalIndex
from mcp_manifold._search.terms import split_identifier, tokenize

# Bump when `profile_text` changes: stored vectors of the old text must not be reused.
PROFILE_TEXT_VERSION = 1


@dataclass(frozen=True)
class Profile:
    """A server's profile text and the key its vector is stored under."""

    text: str
    hash: str


def profile_terms(profile: Profile, *, stemming: bool) -> list[str]:
    return tokenize(profile.text, stemming=stemming)


def make_profile(server: str, tool_names: Iterable[str]) -> Profile:
    names = ", ".join(" ".join(split_identifier(name)) for name in sorted(set(tool_names)))
    text = f"{' '.join(split_identifier(server))}: {names}"
    # Prefixed so a profile can never share a key with a tool document's content hash.
    digest = hashlib.sha256(f"server-profile-v{PROFILE_TEXT_VERSION}\n{text}".encode()).hexdigest()
    return Profile(text, digest)


@dataclass(frozen=True)
class ProfileIndex:
    """The profiles of the servers in a snapshot, row `i` being server number `i`."""

    lexical: LexicalIndex
    matrix: np.ndarray | None  # unit vectors, zero rows where a profile has none yet
    has_vector: np.ndarray | None

    def match(self, query_terms: list[str], query_vectors: np.ndarray | None) -> np.ndarray:
        """How well each server matches the request, in [0, 1]: cosine when there are vectors, else BM25."""
        have = self.has_vector
        if query_vectors is not None and self.matrix is not None and have is not None and have.any():
            cosine = (self.matrix @ query_vectors.T).max(axis=1).astype(np.float64)
            lo, hi = float(cosine[have].min()), float(cosine[have].max())
            return np.where(have, (cosine - lo) / (hi - lo if hi > lo else 1.0), 0.0)
        lexical = self.lexical.scores(query_terms).astype(np.float64)
        best = float(lexical.max(initial=0.0))
        return lexical / best if best > 0 else lexical
