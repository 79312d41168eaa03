"""Query latency and build time of `mcp_manifold._search` on a synthetic 10,000-tool catalog.

The catalog is generated deterministically (fixed seed, fixed vocabulary): 250 servers × 40 tools,
names like ``acme_crm_create_invoice_batch``, two-sentence descriptions and 1–4 parameters each.
Queries are short requests built from the same vocabulary, so most of them match something.

Measured:
* BM25: time to index the whole catalog (tokenising included), time of an `upsert` of one tool plus
  the rebuild it triggers, and p50/p99 of `search(query, limit=10)`.
* hybrid (only when the `semantic` extra is installed): time to embed the catalog and its 250 server
  profiles (cached in bench/results/latency-vectors.sqlite, pass --fresh to redo it), p50/p99 of a
  hybrid search, and p50 of the query embedding alone, which is most of that.

Run: ``.venv/bin/python bench/search_latency.py`` (``--tools N``, ``--queries N``, ``--fresh``).
Writes ``bench/results/search_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp_manifold._search import IndexStore, SearchIndex, ToolDocument, make_embedder
from mcp_manifold._search.errors import EmbedderUnavailable
from mcp_manifold._search.ranking import RankingConfig, query_texts

RESULTS = Path(__file__).resolve().parent / "results"
SEED = 20240611


def _words(text: str) -> list[str]:
    return text.split()


_VENDORS = _words("acme globex initech umbrella stark wayne hooli vandelay wonka cyberdyne soylent tyrell")
_DOMAINS = _words(
    "crm billing storage calendar mail chat tickets wiki repo ci deploy metrics logs search maps weather "
    "finance hr docs sheets slides forms photos video music news travel shop payments auth secrets dns"
)
_VERBS = _words("get list create update delete search find send upload download export import sync archive share")
_NOUNS = _words(
    "invoice customer contact file folder event message channel issue page commit build release alert "
    "dashboard record report document sheet slide photo album track article flight hotel order payment "
    "user token domain note task project comment label branch"
)
_QUALIFIERS = ["", "", "", "batch", "by_id", "details", "history", "summary", "status", "v2"]
_ADJECTIVES = _words("recent archived shared public private pending failed scheduled tagged starred")
_PARAMS = _words("id name query limit offset since until owner path format region language tags")


def synthetic_catalog(n_tools: int, seed: int = SEED) -> list[ToolDocument]:
    rng = random.Random(seed)
    servers = [f"{v}_{d}" for v in _VENDORS for d in _DOMAINS]
    rng.shuffle(servers)
    per_server = 40
    docs: list[ToolDocument] = []
    for i in range(n_tools):
        server = servers[(i // per_server) % len(servers)] + ("" if i < per_server * len(servers) else f"{i}")
        verb, noun, qualifier = rng.choice(_VERBS), rng.choice(_NOUNS), rng.choice(_QUALIFIERS)
        name = "_".join(p for p in (verb, noun, qualifier) if p) + f"_{i % per_server}"
        adjective = rng.choice(_ADJECTIVES)
        description = (
            f"{verb.capitalize()} {adjective} {noun}s in the {server.split('_')[1]} service of {server.split('_')[0]}. "
            f"Use it to {rng.choice(_VERBS)} a {rng.choice(_NOUNS)} or to {rng.choice(_VERBS)} its "
            f"{rng.choice(_NOUNS)}s; results are paged."
        )
        params = rng.sample(_PARAMS, rng.randint(1, 4))
        schema = {
            "type": "object",
            "properties": {p: {"type": "string", "description": f"The {p} of the {noun}."} for p in params},
        }
        docs.append(ToolDocument(f"{server}_{name}", server, name, description, schema))
    return docs


def synthetic_queries(n: int, seed: int = SEED + 1) -> list[str]:
    rng = random.Random(seed)
    templates = [
        "{verb} my {adj} {noun}s",
        "how do I {verb} a {noun} in {domain}",
        "{verb} the {noun} {noun2} for {vendor}",
        "I need to {verb} every {adj} {noun} and then {verb2} the {noun2}",
    ]
    return [
        rng.choice(templates).format(
            verb=rng.choice(_VERBS),
            verb2=rng.choice(_VERBS),
            noun=rng.choice(_NOUNS),
            noun2=rng.choice(_NOUNS),
            adj=rng.choice(_ADJECTIVES),
            domain=rng.choice(_DOMAINS),
            vendor=rng.choice(_VENDORS),
        )
        for _ in range(n)
    ]


def percentiles_ms(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * p99,
        "mean_ms": 1000 * statistics.fmean(ordered),
    }


def timed(calls: Sequence[Callable[[], Any]]) -> list[float]:
    samples = []
    for call in calls:
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def bench_bm25(docs: Sequence[ToolDocument], queries: Sequence[str]) -> dict[str, Any]:
    index = SearchIndex()
    started = time.perf_counter()
    index.update(docs)
    build_s = time.perf_counter() - started

    changed = ToolDocument(docs[0].key, docs[0].server, docs[0].name, docs[0].description + " Changed.", {})
    started = time.perf_counter()
    index.upsert([changed])
    index.search("warm the rebuilt index", limit=1)  # the rebuild happens on the first search after a change
    upsert_s = time.perf_counter() - started

    for q in queries[:20]:
        index.search(q, limit=10)
    latency = percentiles_ms(timed([lambda q=q: index.search(q, limit=10) for q in queries]))
    server = docs[len(docs) // 2].server
    filtered = percentiles_ms(timed([lambda q=q: index.search(q, limit=10, server=server) for q in queries]))
    return {"build_s": build_s, "upsert_one_and_rebuild_s": upsert_s, "query": latency, "query_server_filter": filtered}


def bench_hybrid(docs: Sequence[ToolDocument], queries: Sequence[str], fresh: bool) -> dict[str, Any] | str:
    try:
        embedder = make_embedder("hybrid")
    except EmbedderUnavailable as exc:
        return f"skipped: {exc}"
    assert embedder is not None
    path = RESULTS / "latency-vectors.sqlite"
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    started = time.perf_counter()
    embedder.embed(["load the model"])
    load_s = time.perf_counter() - started

    index = SearchIndex(embedder=embedder, store=IndexStore(path))
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if total and time.perf_counter() - last[0] > 10:
            last[0] = time.perf_counter()
            print(f"  embedding the catalog: {done}/{total}", flush=True)

    stats = index.update(docs, progress=progress)
    for q in queries[:5]:
        index.search(q, limit=10)
    latency = percentiles_ms(timed([lambda q=q: index.search(q, limit=10) for q in queries]))
    config = RankingConfig()
    embed_only = percentiles_ms(timed([lambda q=q: embedder.embed(query_texts(q, config)) for q in queries]))
    return {
        "embedder": embedder.name,
        "model_load_s": load_s,
        "update_s": stats.seconds,
        "texts_embedded": stats.embedded,  # tools and server profiles not yet in the store
        "embed_texts_per_s": stats.embedded / stats.seconds if stats.embedded else None,
        "query": latency,
        "query_embedding": embed_only,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--fresh", action="store_true", help="re-embed the catalog instead of using cached vectors")
    args = parser.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)

    docs = synthetic_catalog(args.tools)
    queries = synthetic_queries(args.queries)
    print(f"{len(docs)} tools on {len({d.server for d in docs})} servers, {len(queries)} queries")

    bm25 = bench_bm25(docs, queries)
    print(
        f"bm25    build {bm25['build_s']:.2f} s | upsert one + rebuild {bm25['upsert_one_and_rebuild_s'] * 1000:.0f} ms"
        f" | query p50 {bm25['query']['p50_ms']:.2f} ms p99 {bm25['query']['p99_ms']:.2f} ms"
        f" | with server filter p50 {bm25['query_server_filter']['p50_ms']:.2f} ms"
    )
    hybrid = bench_hybrid(docs, queries, args.fresh)
    if isinstance(hybrid, str):
        print(f"hybrid  {hybrid}")
    else:
        embedded = f"embedded {hybrid['texts_embedded']} texts in {hybrid['update_s']:.1f} s"
        print(
            f"hybrid  {embedded if hybrid['texts_embedded'] else 'vectors from the store'}"
            f" | query p50 {hybrid['query']['p50_ms']:.1f} ms p99 {hybrid['query']['p99_ms']:.1f} ms"
            f" | query embedding alone p50 {hybrid['query_embedding']['p50_ms']:.1f} ms"
        )
    out = RESULTS / "search_latency.json"
    out.write_text(json.dumps({"tools": len(docs), "queries": len(queries), "bm25": bm25, "hybrid": hybrid}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
