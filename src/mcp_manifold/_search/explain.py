"""Why a tool ranks where it does for a request: its score and place after every ranking step.

Users of a gateway see tools "silently go missing" from search results; an explanation names the step
that decided it: no shared words (BM25 0), a weak embedding match, siblings on a stronger server, the
destination slot taking its place, or a filter that left it out. It reads the scores `score_all`
records in its `trace`, so what it reports is exactly what the search did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The ranking steps in the order `score_all` applies them, and what each one is called here.
STEPS = (
    ("bm25", "BM25 (words)"),
    ("dense", "embedding cosine"),
    ("fused", "fusion of BM25 and cosine"),
    ("server_context", "+ strong siblings on its server"),
    ("profiles", "+ server profile match"),
)


@dataclass(frozen=True)
class Step:
    name: str
    score: float | None  # None: the step did not score this tool (no vector)
    rank: int | None  # 1-based place among the tools that step scored above 0; None: not a match there


@dataclass(frozen=True)
class Explanation:
    query: str
    key: str
    ranking: str  # what answered: "hybrid" (BM25 + embeddings) or "bm25"
    in_index: bool
    rank: int | None = None  # final place; None: the tool did not match at all
    limit: int = 5
    steps: tuple[Step, ...] = ()
    matched_terms: tuple[str, ...] = ()  # request terms found in the tool's BM25 text
    # Of those, the ones only its schema's enum values and nested fields have (RankingConfig.schema_details).
    schema_terms: tuple[str, ...] = ()
    query_terms: tuple[str, ...] = ()
    profile_match: float | None = None  # its server's profile match, 0..1
    moved_by_destination: bool = False  # the destination slot raised it
    displaced_by_destination: str | None = None  # the tool the destination slot put in front of it
    hidden_by_server_filter: bool = False
    ahead: tuple[tuple[str, float], ...] = ()  # the results shown, best first
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def shown(self) -> bool:
        return self.rank is not None and self.rank <= self.limit and not self.hidden_by_server_filter


def rank_of(scores: np.ndarray, row: int, *, positive_only: bool = True) -> int | None:
    """1-based place of `row` in `scores` (ties share the better place); None if it scored nothing."""
    value = scores[row]
    if np.isnan(value) or (positive_only and value <= 0):
        return None
    valid = np.where(np.isnan(scores), -np.inf, scores)
    return int((valid > value).sum()) + 1


def explain_row(
    query: str,
    keys: Sequence[str],
    row: int,
    final: np.ndarray,
    trace: dict[str, Any],
    document_terms: Sequence[str],
    server_of_row: int,
    limit: int,
    schema_only_terms: Sequence[str] = (),
) -> Explanation:
    """The explanation of document `row` from the scores `score_all` left in `trace`."""
    steps = []
    for name, label in STEPS:
        scores = trace.get(name)
        if scores is None:
            continue
        positive = name != "dense"  # a cosine can be negative and still rank
        value = float(scores[row])
        steps.append(Step(label, None if np.isnan(value) else value, rank_of(scores, row, positive_only=positive)))
    writer = trace.get("writer")
    rank = rank_of(final, row)
    before = rank_of(trace["profiles"] if "profiles" in trace else trace["server_context"], row)
    displaced = None
    if writer is not None and writer != row and rank is not None and before is not None and rank > before:
        displaced = keys[writer]
    terms = set(document_terms)
    matched = tuple(dict.fromkeys(t for t in trace["terms"] if t in terms))
    schema_only = set(schema_only_terms)
    order = np.argsort(-np.where(np.isnan(final), -np.inf, final), kind="stable")[:limit]
    profile = trace.get("profile_match")
    return Explanation(
        query=query,
        key=keys[row],
        ranking="hybrid" if "dense" in trace else "bm25",
        in_index=True,
        rank=rank,
        limit=limit,
        steps=tuple(steps),
        matched_terms=matched,
        schema_terms=tuple(t for t in matched if t in schema_only),
        query_terms=tuple(dict.fromkeys(trace["terms"])),
        profile_match=None if profile is None else float(profile[server_of_row]),
        moved_by_destination=writer == row and before != rank,
        displaced_by_destination=displaced,
        ahead=tuple((keys[i], float(final[i])) for i in order if final[i] > 0),
    )


def render(explanation: Explanation) -> list[str]:
    """The explanation as lines of plain text, for `manifold search --explain`."""
    e = explanation
    if not e.in_index:
        return [f"{e.key} is not in the search index.", *e.notes]
    where = f"ranks {e.rank}" if e.rank is not None else "does not match at all (score 0)"
    shown = "shown" if e.shown else f"not shown (limit {e.limit})"
    lines = [f"{e.key} {where} for {e.query!r}: {shown}; ranking: {e.ranking}"]
    if e.hidden_by_server_filter:
        lines.append("  hidden: the search was limited to another server")
    for step in e.steps:
        score = "no vector" if step.score is None else f"{step.score:.4f}"
        place = f"rank {step.rank}" if step.rank is not None else "no match"
        lines.append(f"  {step.name:<34} {score:>10}  {place}")
    if e.profile_match is not None:
        lines.append(f"  its server's profile matched {e.profile_match:.2f} (0 to 1)")
    matched = ", ".join(e.matched_terms) or "none"
    lines.append(f"  request terms: {', '.join(e.query_terms) or 'none'}; in this tool: {matched}")
    if e.schema_terms:
        lines.append(f"  found only in its schema's enum values and nested fields: {', '.join(e.schema_terms)}")
    if e.moved_by_destination:
        lines.append("  moved up by the destination slot: it writes the file the request saves to")
    if e.displaced_by_destination:
        lines.append(f"  pushed down one place by the destination slot ({e.displaced_by_destination})")
    lines.extend(f"  {note}" for note in e.notes)
    if not e.shown and e.ahead:
        lines.append("  shown instead: " + ", ".join(f"{key} {score:.2f}" for key, score in e.ahead))
    return lines
