"""Unit tests of mcp_manifold._search: tokenising, ranking, updates, persistence, fusion and embedders.

No processes are started; the OpenAI-compatible embedder talks to a tiny HTTP server on 127.0.0.1
run in a thread of this process. The local model (part of the base install) is loaded once per
session and checked against vectors sentence-transformers made (tests/data/minilm_reference.json).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from mcp_manifold import InvalidRequest
from mcp_manifold._search import (
    EmbedderError,
    EmbedderUnavailable,
    IndexStore,
    RankingConfig,
    SearchIndex,
    ToolDocument,
    http_client,
    local_embedder,
    make_embedder,
    split_identifier,
    tokenize,
)
from mcp_manifold._search import index as index_module
from mcp_manifold._search.embedder import Embedder, normalise
from mcp_manifold._search.ensemble import EnsembleEmbedder
from mcp_manifold._search.fusion import add_server_match, promote, reciprocal_rank, server_context, weighted_sum
from mcp_manifold._search.index import MAX_QUERY_CHARS
from mcp_manifold._search.openai_embedder import OpenAIEmbedder
from mcp_manifold._search.profiles import make_profile
from mcp_manifold._search.query import clauses, destinations, lexical_query
from mcp_manifold._search.ranking import MAX_FIELD_CHARS, document_terms, embedding_text
from tests.conftest import JsonEndpoint, serve_endpoint

# --- fixture catalog -------------------------------------------------------------------------


def _tool(server: str, name: str, description: str, /, **params: str) -> ToolDocument:
    schema = {"type": "object", "properties": {p: {"type": "string", "description": d} for p, d in params.items()}}
    return ToolDocument(f"{server}_{name}", server, name, description, schema)


CATALOG = [
    _tool(
        "github",
        "create_issue",
        "Create a new issue in a GitHub repository.",
        owner="Repository owner",
        repo="Repository name",
        title="Issue title",
        body="Issue body",
    ),
    _tool(
        "github",
        "list_issues",
        "List issues in a GitHub repository, filtered by state or labels.",
        owner="Repository owner",
        repo="Repository name",
        state="open, closed or all",
    ),
    _tool("github", "get_issue", "Get the details of one issue.", owner="Repository owner", issue_number="Number"),
    _tool(
        "github",
        "add_issue_comment",
        "Add a comment to an existing issue or pull request.",
        issue_number="Number",
        body="Comment text",
    ),
    _tool(
        "github",
        "create_pull_request",
        "Open a pull request from a branch.",
        head="Source branch",
        base="Target branch",
        title="Title",
    ),
    _tool("github", "list_repositories", "List the repositories of a user or organisation.", owner="User or org"),
    _tool("github", "search_code", "Search code across GitHub repositories.", query="Search query"),
    _tool("github", "get_file_contents", "Get the contents of a file from a repository branch.", path="File path"),
    _tool(
        "weather",
        "get_current_weather",
        "Current weather conditions (temperature, wind, rain) for a city.",
        city="City name",
        units="metric or imperial",
    ),
    _tool(
        "weather",
        "get_forecast",
        "Weather forecast for the next days for a city.",
        city="City name",
        days="How many days",
    ),
    _tool(
        "weather",
        "get_alerts",
        "Active severe weather alerts (storms, floods) for a region.",
        region="Region or state code",
    ),
    _tool("weather", "get_air_quality", "Air quality index and pollutants for a location.", city="City name"),
    _tool("filesystem", "read_file", "Read the complete contents of a file from disk.", path="Path to the file"),
    _tool(
        "filesystem",
        "write_file",
        "Create a new file or overwrite an existing file with new content.",
        path="Path to the file",
        content="Text to write",
    ),
    _tool("filesystem", "list_directory", "List the files and folders in a directory.", path="Directory path"),
    _tool("filesystem", "move_file", "Move or rename a file or directory.", source="From", destination="To"),
    _tool(
        "filesystem",
        "search_files",
        "Recursively search for files whose names match a pattern.",
        path="Where to start",
        pattern="Glob pattern",
    ),
    _tool(
        "filesystem", "get_file_info", "Size, creation and modification time and permissions of a file.", path="Path"
    ),
    _tool("filesystem", "create_directory", "Create a directory, including missing parents.", path="Path"),
    _tool("filesystem", "delete_file", "Delete a file from disk.", path="Path"),
    _tool("slack", "post_message", "Post a message to a Slack channel.", channel_id="Channel", text="Message text"),
    _tool(
        "slack",
        "reply_to_thread",
        "Reply to a thread in a Slack channel.",
        channel_id="Channel",
        thread_ts="Thread timestamp",
        text="Reply text",
    ),
    _tool("slack", "list_channels", "List the public channels of the Slack workspace.", limit="Maximum count"),
    _tool("slack", "get_channel_history", "Recent messages of a Slack channel.", channel_id="Channel"),
    _tool("slack", "add_reaction", "Add an emoji reaction to a message.", channel_id="Channel", name="Emoji name"),
    _tool("slack", "get_user_profile", "Profile of a Slack user: name, title, email, time zone.", user_id="User"),
    _tool("slack", "search_messages", "Search messages across the Slack workspace.", query="Search query"),
    _tool("slack", "set_channel_topic", "Set the topic of a Slack channel.", channel_id="Channel", topic="Topic"),
]


SERVERS = sorted({doc.server for doc in CATALOG})  # one profile text each is embedded besides the tools


@pytest.fixture(scope="module")
def bm25_index() -> SearchIndex:
    index = SearchIndex()
    index.update(CATALOG)
    return index


# --- a deterministic embedder that knows a few synonyms ----------------------------------------

_CONCEPTS = {
    w: slot
    for slot, words in enumerate(
        [
            "weather forecast rain umbrella temperature sunny storm",
            "file files disk document folder directory",
            "issue issues bug ticket problem",
            "message messages chat post say tell slack",
        ]
    )
    for w in words.split()
}


class ConceptEmbedder:
    """Bag of concepts: synonyms share a dimension, other words hash into the rest. Counts its work."""

    dim = 48

    def __init__(self, name: str = "test:concepts") -> None:
        self.name = name
        self.calls = 0
        self.texts: list[str] = []
        self.fail = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise EmbedderError("embedding service is down")
        self.calls += 1
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in split_identifier(text):
                slot = _CONCEPTS.get(word, 8 + zlib.crc32(word.encode()) % (self.dim - 8))
                out[row, slot] += 3.0 if word in _CONCEPTS else 1.0
        return normalise(out)


def _ranked(index: SearchIndex, query: str, limit: int = 3, **kw: Any) -> list[str]:
    return [hit.key for hit in index.search(query, limit=limit, **kw)]


# --- tokenising --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("github_create_issue", ["github", "create", "issue"]),
        ("get-station-code", ["get", "station", "code"]),
        ("getWeatherForecast", ["get", "weather", "forecast"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("convert_mp3ToWav2", ["convert", "mp", "3", "to", "wav", "2"]),
        ("read  file.v2", ["read", "file", "v", "2"]),
        ("查询天气 now", ["查", "询", "天", "气", "now"]),
    ],
)
def test_split_identifier(text: str, words: list[str]) -> None:
    assert split_identifier(text) == words


def test_tokenize_drops_stopwords_and_folds_plurals() -> None:
    terms = tokenize("Could you please list the issues of my repositories?")
    assert "please" not in terms and "the" not in terms and "could" not in terms
    assert {"list", "issues", "issue", "repositories", "repository"} <= set(terms)


def test_tokenize_keeps_camel_case_brand_whole() -> None:
    # "GitHub" in prose must meet "github" in an identifier.
    assert "github" in tokenize("open an issue on GitHub")


def test_document_text_has_every_field() -> None:
    doc = CATALOG[0]
    text = doc.text()
    assert text.startswith("github create issue")
    assert "Create a new issue" in text
    assert "owner: Repository owner" in text and "title: Issue title" in text


def test_content_hash_is_stable_and_sensitive() -> None:
    doc = CATALOG[0]
    reordered = ToolDocument(doc.key, doc.server, doc.name, doc.description, dict(reversed(doc.input_schema.items())))
    assert doc.content_hash() == reordered.content_hash()
    assert doc.content_hash() == ToolDocument.from_json(doc.to_json()).content_hash()
    assert len(doc.content_hash()) == 64
    changed = ToolDocument(doc.key, doc.server, doc.name, doc.description + "!", doc.input_schema)
    assert changed.content_hash() != doc.content_hash()


def test_lexical_query_replaces_paths_and_urls() -> None:
    rewritten = lexical_query("Open https://www.youtube.com/watch?v=x. and read ~/notes/markdown/a.md")
    assert "markdown" not in rewritten and "notes" not in rewritten
    assert rewritten == "Open url youtube. and read file md"


@pytest.mark.parametrize(
    ("request_text", "rewritten"),
    [
        (
            "Summarise NCT0428 and save it as Markdown to /root/md/a.md.",
            "Summarise NCT0428 and save it as Markdown to write file md.",
        ),
        ("Generate a report in /root/pdf/r.pdf", "Generate a report in write file pdf"),
        (
            "Read the data under /data/sales.xlsx, plot it and save it in /figs/sale.png",
            "Read the data under file xlsx, plot it and save it in write file png",
        ),
        (
            "Save the notes. Then read /root/a.txt",
            "Save the notes. Then read file txt",
        ),  # the verb is in another sentence
        ("List /root/git", "List directory"),
    ],
)
def test_a_path_the_request_saves_to_becomes_write_file(request_text: str, rewritten: str) -> None:
    assert lexical_query(request_text) == rewritten
    assert lexical_query(request_text, output_paths=False) == rewritten.replace("write file", "file")


def test_saving_to_a_path_finds_the_tool_that_writes_files(bm25_index: SearchIndex) -> None:
    query = "Summarise the open issues and save the summary to /root/markdown/issues.md"
    assert "filesystem_write_file" in _ranked(bm25_index, query, limit=5)
    plain = SearchIndex(ranking=RankingConfig(output_paths=False))
    plain.update(CATALOG)
    assert "filesystem_write_file" not in _ranked(plain, query, limit=5)


def test_destinations_are_the_paths_the_request_saves_to() -> None:
    assert destinations("Summarise https://example.com/a.html and save it to /root/md/a.md.") == ["write file md"]
    assert destinations("Read /data/a.csv, plot it and save it in /figs/a.png") == ["write file png"]
    assert destinations("Write the chart to /figs/a.png, then export the table to /data/t.csv") == [
        "write file png",
        "write file csv",
    ]
    assert destinations("Read /root/a.txt and summarise it") == []
    assert destinations("Save the notes. Then read /root/a.txt") == []


SAVE_REQUEST = (
    "List the open issues and pull requests of the GitHub repository with their comments, "
    "and save a summary to /root/md/issues.md"
)


@pytest.fixture(scope="module")
def slot_index() -> SearchIndex:
    """BM25 with the destination slot at 2nd place (off by default, see RankingConfig)."""
    index = SearchIndex(ranking=RankingConfig(destination_slot=2))
    index.update(CATALOG)
    return index


def test_the_tool_that_writes_the_destination_gets_the_slots_place(slot_index: SearchIndex) -> None:
    # The subject (GitHub) fills the whole ranking; the destination is the request's second need.
    without = SearchIndex(ranking=RankingConfig(destination_slot=0))
    without.update(CATALOG)
    assert "filesystem_write_file" not in _ranked(without, SAVE_REQUEST, limit=5)
    ranked = _ranked(slot_index, SAVE_REQUEST, limit=5)
    assert ranked[1] == "filesystem_write_file"
    # Everything else keeps its order.
    assert [k for k in ranked if k != "filesystem_write_file"] == _ranked(without, SAVE_REQUEST, limit=4)
    # Within one server the order is that of its own tools, with the writer where it ranks.
    assert _ranked(slot_index, SAVE_REQUEST, limit=1, server="filesystem") == ["filesystem_write_file"]


def test_explain_names_the_step_that_placed_a_tool(slot_index: SearchIndex) -> None:
    ranked = _ranked(slot_index, SAVE_REQUEST, limit=5)
    writer = slot_index.explain(SAVE_REQUEST, "filesystem_write_file", limit=5)
    assert writer.rank == 2 and writer.shown and writer.moved_by_destination and writer.ranking == "bm25"
    assert writer.steps[0].name == "BM25 (words)"
    pushed = slot_index.explain(SAVE_REQUEST, ranked[2], limit=2)
    assert pushed.rank == 3 and not pushed.shown and pushed.displaced_by_destination == "filesystem_write_file"
    assert [key for key, _ in pushed.ahead] == ranked[:2]
    # Its rank is the rank `search` gives it, and a tool with no shared word does not match at all.
    for place, key in enumerate(ranked, 1):
        assert slot_index.explain(SAVE_REQUEST, key).rank == place
    unrelated = slot_index.explain("weather forecast", "slack_add_reaction")
    assert unrelated.rank is None and unrelated.matched_terms == () and "weather" in unrelated.query_terms
    assert not slot_index.explain("anything", "no_such_tool").in_index
    assert slot_index.explain("weather", "weather_get_forecast", server="slack").hidden_by_server_filter


def test_explain_shows_the_embedding_steps_of_a_hybrid_search() -> None:
    index = SearchIndex(embedder=ConceptEmbedder())
    index.update(CATALOG)
    found = index.explain("should I take an umbrella", "weather_get_forecast")
    names = [step.name for step in found.steps]
    assert found.ranking == "hybrid" and names[:3] == ["BM25 (words)", "embedding cosine", "fusion of BM25 and cosine"]
    assert found.steps[0].rank is None and found.steps[1].score is not None and found.rank is not None
    assert found.profile_match is not None


def test_only_a_tool_that_writes_is_put_in_the_destination_place() -> None:
    readers = [d for d in CATALOG if d.key not in {"filesystem_write_file"}]
    index = SearchIndex()
    index.update(readers)
    plain = SearchIndex(ranking=RankingConfig(destination_slot=0))
    plain.update(readers)
    # No tool says "write": nothing is promoted (read_file matches "file" but must not be pushed up).
    assert _ranked(index, SAVE_REQUEST, limit=10) == _ranked(plain, SAVE_REQUEST, limit=10)


def test_promote_moves_one_document_and_keeps_the_rest() -> None:
    scores = np.array([0.9, 0.1, 0.8, 0.5, 0.7])
    order = list(np.argsort(-promote(scores, 1, 2), kind="stable"))
    assert order == [0, 1, 2, 4, 3]
    assert int(np.argmax(promote(scores, 1, 1))) == 1
    assert np.array_equal(promote(scores, 2, 3), scores)  # already 2nd: unchanged
    tied = promote(np.array([0.5, 0.5, 0.5, 0.0]), 3, 2)
    assert tied[3] > 0 and list(np.argsort(-tied, kind="stable"))[:2] == [3, 0]


def test_clauses_split_steps_and_keep_short_fragments_attached() -> None:
    assert clauses("Find the trending repos. Then, draft an intro. Finally") == [
        "Find the trending repos.",
        "Then, draft an intro. Finally",
    ]
    assert clauses("read the file, then write a summary") == ["read the file", "write a summary"]


# --- BM25 ranking ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("create an issue on github", "github_create_issue"),
        ("what's the weather", "weather_get_current_weather"),
        ("weather forecast for next week in Paris", "weather_get_forecast"),
        ("read a file", "filesystem_read_file"),
        ("send a message to a slack channel", "slack_post_message"),
        ("list my repositories", "github_list_repositories"),
        ("open a pull request", "github_create_pull_request"),
        ("rename a folder", "filesystem_move_file"),
        ("is the air polluted today", "weather_get_air_quality"),
    ],
)
def test_plain_queries_find_the_right_tool_in_the_top_3(bm25_index: SearchIndex, query: str, expected: str) -> None:
    assert expected in _ranked(bm25_index, query)


def test_scores_are_descending(bm25_index: SearchIndex) -> None:
    scores = [hit.score for hit in bm25_index.search("file", limit=10)]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


@pytest.mark.parametrize("embedder", [None, ConceptEmbedder()], ids=["bm25", "hybrid"])
def test_what_a_caller_may_not_see_changes_nothing_it_is_shown(embedder: ConceptEmbedder | None) -> None:
    """A search limited by `allowed` (a caller's profile) answers exactly what a catalog without the
    hidden tools answers: no hidden tool lifts its siblings, lowers a score or shapes a server profile."""
    hidden = {"github_create_issue", "github_list_issues", "slack_post_message", "weather_get_forecast"}
    everything, without = SearchIndex(embedder=embedder), SearchIndex(embedder=embedder)
    everything.update(CATALOG)
    without.update([doc for doc in CATALOG if doc.key not in hidden])
    for query in ("create an issue on github", "post a message", "weather forecast", "issues", "read a file"):
        for server in (None, "github"):
            seen = everything.search(query, limit=10, server=server, allowed=lambda key: key not in hidden)
            expected = without.search(query, limit=10, server=server)
            assert [hit.key for hit in seen] == [hit.key for hit in expected], (query, server)
            assert [hit.score for hit in seen] == pytest.approx([hit.score for hit in expected]), (query, server)


def test_more_profiles_than_sixteen_in_turn_keep_their_views(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each caller's view is made once per catalog state, however many profiles search in turn (while views
    fit in memory). Before, the 17th dropped all 16 kept, so 17 profiles in turn remade one at every search
    (5,000 tools: 74 -> 325 ms a search through the gateway)."""
    made: list[int] = []
    make = index_module.visible_part
    monkeypatch.setattr(index_module, "visible_part", lambda *a, **k: made.append(1) or make(*a, **k))
    index = SearchIndex()
    index.update(CATALOG)
    keys = [doc.key for doc in CATALOG][:20]
    for _ in range(3):
        for hidden in keys:
            index.search("file", limit=3, allowed=lambda key, hidden=hidden: key != hidden)
    assert len(made) == len(keys)
    # Past the memory they may take, the least recently used go (down to MIN_VIEWS, here 2).
    monkeypatch.setattr(index_module, "MIN_VIEWS", 2)
    monkeypatch.setattr(index_module, "VIEW_BYTES", 0)
    made.clear()
    index = SearchIndex()
    index.update(CATALOG)
    a, b, c = keys[:3]
    for hidden in [a, b, a, c, a, b]:  # c makes b the one to go; a stays in use
        index.search("file", limit=3, allowed=lambda key, hidden=hidden: key != hidden)
    assert len(made) == 4  # a, b, c, and b again


def test_server_filter(bm25_index: SearchIndex) -> None:
    hits = bm25_index.search("search", limit=10, server="slack")
    assert hits and all(hit.key.startswith("slack_") for hit in hits)
    assert _ranked(bm25_index, "search", limit=1, server="slack") == ["slack_search_messages"]
    assert bm25_index.search("search", server="no-such-server") == []


def test_limit(bm25_index: SearchIndex) -> None:
    assert len(bm25_index.search("file", limit=2)) == 2
    assert len(bm25_index.search("file", limit=1000)) <= len(CATALOG)
    with pytest.raises(InvalidRequest):
        bm25_index.search("file", limit=0)


def test_a_search_reads_a_query_up_to_its_bound(bm25_index: SearchIndex) -> None:
    """A megabyte of request costs what its first MAX_QUERY_CHARS do (it took seconds of CPU)."""
    padding = " " * (MAX_QUERY_CHARS - len("create an issue"))
    assert _ranked(bm25_index, "create an issue" + padding + " weather", limit=1) == ["github_create_issue"]
    assert _ranked(bm25_index, " " * MAX_QUERY_CHARS + "create an issue on github " * 50_000) == []  # past the bound


def test_a_field_is_read_only_up_to_its_bound() -> None:
    """A server's megabytes of description cost what its first MAX_FIELD_CHARS do (it took 20 s to index)."""
    filler = " ".join(f"filler{i}" for i in range(200_000))
    essay = _tool("essays", "write_sonnet", f"Compose a sonnet. {filler} zebra")
    assert len(essay.description) > 50 * MAX_FIELD_CHARS
    assert len(document_terms(essay, RankingConfig())) < MAX_FIELD_CHARS / 2
    assert len(embedding_text(essay)) <= 2 * MAX_FIELD_CHARS
    index = SearchIndex()
    index.update([essay, *CATALOG[:5]])
    assert _ranked(index, "compose a sonnet", limit=1) == ["essays_write_sonnet"]
    assert _ranked(index, "zebra") == []  # past the bound: never read


def test_empty_and_unmatched_queries(bm25_index: SearchIndex) -> None:
    assert bm25_index.search("   ") == []
    assert bm25_index.search("zzzqqq xyzzy") == []
    assert bm25_index.search("the of and") == []  # only stopwords


def test_name_words_can_weigh_more_than_parameter_text() -> None:
    index = SearchIndex(ranking=RankingConfig(name_repeat=3))
    index.update(
        [
            _tool("a", "delete_branch", "Remove a branch.", name="The issue it fixed"),
            _tool("b", "close_issue", "Close it.", number="Which one"),
        ]
    )
    assert _ranked(index, "issue", limit=1) == ["b_close_issue"]


# --- changes -----------------------------------------------------------------------------------


def test_update_replaces_the_whole_set() -> None:
    index = SearchIndex()
    first = index.update(CATALOG[:10])
    assert (first.added, first.removed, first.changed, first.unchanged) == (10, 0, 0, 0)
    edited = ToolDocument(CATALOG[0].key, "github", "create_issue", "File a bug report.", {})
    second = index.update([edited, *CATALOG[1:5], *CATALOG[10:12]])
    assert (second.added, second.removed, second.changed, second.unchanged) == (2, 5, 1, 4)
    assert len(index) == 7
    assert CATALOG[9].key not in index
    assert _ranked(index, "bug report", limit=1) == [CATALOG[0].key]


def test_upsert_and_remove_change_results() -> None:
    index = SearchIndex()
    index.update(CATALOG)
    assert "jira_create_ticket" not in _ranked(index, "create a jira ticket")
    stats = index.upsert([_tool("jira", "create_ticket", "Create a Jira ticket in a project.", project="Key")])
    assert stats.added == 1 and len(index) == len(CATALOG) + 1
    assert _ranked(index, "create a jira ticket", limit=1) == ["jira_create_ticket"]
    assert _ranked(index, "jira", server="jira") == ["jira_create_ticket"]

    stats = index.remove(["jira_create_ticket", "not-there"])
    assert stats.removed == 1 and len(index) == len(CATALOG)
    assert "jira_create_ticket" not in _ranked(index, "create a jira ticket", limit=10)
    assert index.search("jira", server="jira") == []


def test_duplicate_keys_are_refused() -> None:
    clash = ToolDocument(CATALOG[0].key, "other", "x", "Something else.", {})
    with pytest.raises(ValueError, match="share the key"):
        SearchIndex().update([CATALOG[0], clash])


def test_status_without_embedder(bm25_index: SearchIndex) -> None:
    status = bm25_index.status()
    assert status.tools == len(CATALOG) == len(bm25_index)
    assert status.embedder == "bm25"
    assert status.last_update is not None and not status.stale and status.last_error is None


# --- hybrid ranking ----------------------------------------------------------------------------


def test_hybrid_finds_what_words_alone_miss() -> None:
    query = "do I need an umbrella in Oslo"
    bm25 = SearchIndex()
    bm25.update(CATALOG)
    hybrid = SearchIndex(embedder=ConceptEmbedder())
    hybrid.update(CATALOG)
    assert not any(key.startswith("weather_") for key in _ranked(bm25, query))
    assert _ranked(hybrid, query)[0].startswith("weather_")
    # ... and keeps what BM25 gets right.
    assert _ranked(hybrid, "create an issue on github", limit=1) == ["github_create_issue"]


@pytest.mark.parametrize("fusion", ["weighted", "rrf", "dense"])
def test_every_fusion_ranks_the_obvious_tool_first(fusion: str) -> None:
    index = SearchIndex(embedder=ConceptEmbedder(), ranking=RankingConfig(fusion=fusion))  # type: ignore[arg-type]
    index.update(CATALOG)
    assert _ranked(index, "post a chat message in slack", limit=1) == ["slack_post_message"]


def test_weighted_sum_and_rrf_handle_missing_vectors() -> None:
    lexical = np.array([3.0, 0.0, 1.0, 0.0])
    dense = np.array([0.1, 0.9, np.nan, 0.5])
    fused = weighted_sum(lexical, dense, dense_weight=0.5)
    assert fused.argmax() == 0 and fused[2] > 0 and np.isfinite(fused).all()
    rrf = reciprocal_rank(lexical, dense, k=60, dense_weight=0.5)
    assert rrf[0] > rrf[3] > 0 and rrf[2] > 0  # no vector: ranked on BM25 alone
    assert np.argsort(-rrf)[0] in (0, 1)


def test_server_context_lifts_strong_servers_and_keeps_order_within_one() -> None:
    scores = np.array([1.0, 0.8, 0.0, 0.85, 0.1])
    servers = np.array([0, 0, 0, 1, 1])
    boosted = server_context(scores, servers, weight=0.5)
    assert boosted[1] > boosted[3]  # a tool whose sibling matches strongly overtakes one whose siblings do not
    assert boosted[0] > boosted[1] > boosted[2] and boosted[3] > boosted[4]
    np.testing.assert_array_equal(server_context(scores, servers, weight=0.0), scores)


def test_server_match_lifts_whole_servers_and_keeps_order_within_one() -> None:
    scores = np.array([1.0, 0.5, 0.0, 0.7, 0.2])
    servers = np.array([0, 0, 0, 1, 1])
    match = np.array([0.0, 1.0])
    lifted = add_server_match(scores, servers, match, weight=0.5)
    assert lifted[3] > lifted[0] and lifted[4] > lifted[1]  # the matching server's tools move up
    assert lifted[0] > lifted[1] > lifted[2] and lifted[3] > lifted[4]  # same order within each server
    zero = np.zeros(5)
    np.testing.assert_array_equal(add_server_match(zero, servers, match, weight=0.5), zero)  # nothing matched


def test_server_profile_brings_in_the_server_the_request_is_for() -> None:
    # Two servers with an identical, vague "search" tool: only the calendar server's other tools say
    # what its search is about.
    docs = [
        _tool("acme", "search", "Search everything."),
        _tool("acme", "list_events", "All upcoming entries."),
        _tool("acme", "create_event", "Add an entry."),
        _tool("globex", "search", "Search everything."),
        _tool("globex", "get_invoice", "One invoice."),
    ]
    query = "search my calendar events"
    with_profiles = SearchIndex(ranking=RankingConfig(server_boost=0.0))
    without = SearchIndex(ranking=RankingConfig(server_boost=0.0, server_match=0.0))
    for index in (with_profiles, without):
        index.update(docs)
    hits = {hit.key: hit.score for hit in without.search(query, limit=5)}
    assert hits["acme_search"] == hits["globex_search"]
    ranked = _ranked(with_profiles, query, limit=5)
    assert ranked.index("acme_search") < ranked.index("globex_search")
    assert _ranked(with_profiles, "search", limit=1, server="globex") == ["globex_search"]


def test_profiles_follow_the_tool_names_of_each_server() -> None:
    embedder = ConceptEmbedder()
    index = SearchIndex(embedder=embedder)
    index.update(CATALOG)
    profiles = {make_profile(server, [d.name for d in CATALOG if d.server == server]).text for server in SERVERS}
    assert set(embedder.texts) == {embedding_text(d) for d in CATALOG} | profiles
    assert len(embedder.texts) == len(CATALOG) + len(SERVERS)
    assert make_profile("slack", ["post_message", "list_channels"]).text == "slack: list channels, post message"

    # A new description changes no name: the tool alone is embedded again.
    edited = ToolDocument(CATALOG[0].key, "github", "create_issue", "File a bug.", {})
    embedder.texts.clear()
    assert index.upsert([edited]).embedded == 1
    # A new tool changes its server's profile: the tool and that profile are embedded.
    embedder.texts.clear()
    assert index.upsert([_tool("github", "merge_pull_request", "Merge a pull request.")]).embedded == 2
    assert any(t.startswith("github: add issue comment, create issue, create pull request") for t in embedder.texts)
    # A server that loses its last tool has no profile left to embed or search.
    embedder.texts.clear()
    index.remove([doc.key for doc in CATALOG if doc.server == "weather"])
    assert embedder.texts == [] and not any(key.startswith("weather_") for key in _ranked(index, "weather", limit=10))


def test_query_embedding_failure_falls_back_to_bm25() -> None:
    embedder = ConceptEmbedder()
    index = SearchIndex(embedder=embedder)
    index.update(CATALOG)
    embedder.fail = True
    assert _ranked(index, "create an issue on github", limit=1) == ["github_create_issue"]
    assert "BM25 only" in (index.status().last_error or "")


def test_embedding_failure_on_update_leaves_tools_searchable_and_is_retried() -> None:
    embedder = ConceptEmbedder()
    embedder.fail = True
    index = SearchIndex(embedder=embedder)
    stats = index.update(CATALOG)
    assert stats.embedded == 0 and len(index) == len(CATALOG)
    status = index.status()
    assert status.stale and status.missing_vectors == len(CATALOG) and "down" in (status.last_error or "")
    assert _ranked(index, "read a file", limit=1) == ["filesystem_read_file"]

    embedder.fail = False
    assert index.update(CATALOG).embedded == len(CATALOG) + len(SERVERS)
    status = index.status()
    assert not status.stale and status.missing_vectors == 0 and status.last_error is None


def test_searches_are_answered_while_an_update_waits_on_the_embedder() -> None:
    class SlowEmbedder(ConceptEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.entered = threading.Event()
            self.release = threading.Event()

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            if len(texts) > 2:  # the catalog batch, not a query nor the first tool and its profile
                self.entered.set()
                assert self.release.wait(10)
            return super().embed(texts)

    embedder = SlowEmbedder()
    index = SearchIndex(embedder=embedder)
    index.update(CATALOG[:1])  # one tool: not held back
    worker = threading.Thread(target=index.update, args=(CATALOG,))
    worker.start()
    try:
        assert embedder.entered.wait(10)
        assert _ranked(index, "create an issue", limit=1) == ["github_create_issue"]  # the old catalog
        assert len(index) == 1
    finally:
        embedder.release.set()
        worker.join(10)
    assert len(index) == len(CATALOG)


def test_a_catalog_is_embedded_shortest_text_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each batch pads to its longest text, so a catalog is sent in order of length, not catalog order.
    monkeypatch.setattr(index_module, "EMBED_BATCH", 3)
    long_first = [
        ToolDocument(f"t_{n}", "t", f"tool{n}", "word " * (40 - 3 * n), {"type": "object"}) for n in range(10)
    ]
    embedder = ConceptEmbedder()
    SearchIndex(embedder=embedder).update(long_first)
    lengths = [len(text) for text in embedder.texts]
    assert len(lengths) == len(long_first) + 1  # and the server's profile
    assert lengths == sorted(lengths)
    assert embedder.calls == 4


def test_progress_reports_embedding() -> None:
    seen: list[tuple[int, int]] = []
    SearchIndex(embedder=ConceptEmbedder()).update(CATALOG, progress=lambda done, total: seen.append((done, total)))
    total = len(CATALOG) + len(SERVERS)
    assert seen[0] == (0, total) and seen[-1] == (total, total)


# --- persistence -------------------------------------------------------------------------------


def test_restart_reuses_stored_vectors_and_reembeds_only_changes(tmp_path: Path) -> None:
    path = tmp_path / "data" / "search.sqlite"
    first = ConceptEmbedder()
    index = SearchIndex(embedder=first, store=IndexStore(path))
    assert index.update(CATALOG).embedded == len(CATALOG) + len(SERVERS)
    assert len(first.texts) == len(CATALOG) + len(SERVERS)

    # A new process: the index answers from the store at once, marked stale until refreshed.
    second = ConceptEmbedder()
    restarted = SearchIndex(embedder=second, store=IndexStore(path))
    assert len(restarted) == len(CATALOG)
    assert restarted.status().stale and restarted.status().last_update is not None
    stats = restarted.update(CATALOG)
    assert stats.embedded == 0 and stats.unchanged == len(CATALOG)
    assert second.texts == []  # nothing was embedded for the catalog
    assert not restarted.status().stale

    edited = ToolDocument(CATALOG[3].key, "github", CATALOG[3].name, "Comment on an issue thread.", {})
    stats = restarted.update([edited, *CATALOG[:3], *CATALOG[4:]])
    assert (stats.changed, stats.embedded) == (1, 1)
    assert second.texts == ["github add issue comment: Comment on an issue thread."]

    assert _ranked(restarted, "umbrella", limit=1)[0].startswith("weather_")
    assert second.calls == 2  # one update embedding, one query


def test_restart_tokenises_and_writes_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "search.sqlite"
    SearchIndex(embedder=ConceptEmbedder(), store=IndexStore(path)).update(CATALOG)

    tokenised: list[str] = []
    written: list[str] = []
    real_terms = index_module.document_terms
    store = IndexStore(path)
    real_write = store.write_documents

    def counting_terms(doc: ToolDocument, config: RankingConfig) -> list[str]:
        tokenised.append(doc.key)
        return real_terms(doc, config)

    def counting_write(upsert: Iterable[ToolDocument], remove: Iterable[str]) -> None:
        upsert = list(upsert)
        written.extend(doc.key for doc in upsert)
        real_write(upsert, remove)

    monkeypatch.setattr(index_module, "document_terms", counting_terms)
    monkeypatch.setattr(store, "write_documents", counting_write)
    embedder = ConceptEmbedder()
    restarted = SearchIndex(embedder=embedder, store=store)
    assert len(tokenised) == len(CATALOG)  # the stored catalog is read back once, at start
    tokenised.clear()

    stats = restarted.update(CATALOG)
    assert (stats.unchanged, stats.embedded) == (len(CATALOG), 0)
    assert tokenised == [] and written == [] and embedder.texts == []  # nothing re-indexed, re-written or re-embedded

    edited = ToolDocument(CATALOG[5].key, "github", CATALOG[5].name, "List every repository of an owner.", {})
    stats = restarted.update([*CATALOG[:5], edited, *CATALOG[6:]])
    assert (stats.changed, stats.embedded) == (1, 1)
    assert tokenised == written == [edited.key] and len(embedder.texts) == 1


def test_vectors_are_kept_per_embedder(tmp_path: Path) -> None:
    path = tmp_path / "search.sqlite"
    SearchIndex(embedder=ConceptEmbedder("test:a"), store=IndexStore(path)).update(CATALOG)
    other = ConceptEmbedder("test:b")
    stats = SearchIndex(embedder=other, store=IndexStore(path)).update(CATALOG)
    assert stats.embedded == len(CATALOG) + len(SERVERS)


def test_store_without_embedder_keeps_documents(tmp_path: Path) -> None:
    path = tmp_path / "search.sqlite"
    SearchIndex(store=IndexStore(path)).update(CATALOG[:5])
    reopened = SearchIndex(store=IndexStore(path))
    assert len(reopened) == 5
    assert _ranked(reopened, "create an issue", limit=1) == ["github_create_issue"]
    reopened.remove([CATALOG[0].key])
    assert len(SearchIndex(store=IndexStore(path))) == 4


def test_store_prunes_only_long_unused_vectors(tmp_path: Path) -> None:
    store = IndexStore(tmp_path / "s.sqlite")
    store.save_vectors("space", {"h1": np.ones(4, dtype=np.float32), "h2": np.zeros(4, dtype=np.float32)})
    assert store.prune_vectors() == 0
    assert set(store.load_vectors("space", ["h1", "h2", "h3"])) == {"h1", "h2"}
    assert store.prune_vectors(retention_s=-1) == 2
    assert store.load_vectors("space", ["h1"]) == {}


# --- embedders ---------------------------------------------------------------------------------


def test_make_embedder_settings() -> None:
    assert make_embedder("bm25") is None
    assert isinstance(make_embedder("openai", base_url="http://127.0.0.1:9", model="m", api_key="k"), OpenAIEmbedder)
    with pytest.raises(ValueError, match="bm25, hybrid, openai"):
        make_embedder("word2vec")


def test_fake_embedder_meets_the_protocol() -> None:
    assert isinstance(ConceptEmbedder(), Embedder)


class _FakeEmbeddings(JsonEndpoint):
    """An OpenAI-compatible /v1/embeddings that answers out of order and records what it got."""

    requests: ClassVar[list[dict[str, Any]]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:  # the name http.server calls
        body = self.read_json()
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if type(self).status != 200:
            self.reply(type(self).status, {"error": {"message": "quota exceeded"}})
            return
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.0]}
            for i, text in enumerate(body["input"])
        ]
        self.reply(200, {"object": "list", "data": list(reversed(data)), "model": body["model"]})


@pytest.fixture
def embeddings_server() -> Iterator[str]:
    _FakeEmbeddings.requests = []
    _FakeEmbeddings.status = 200
    with serve_endpoint(_FakeEmbeddings) as url:
        yield url


@pytest.mark.parametrize("transport", ["httpx", "urllib"])
def test_openai_embedder_against_a_local_endpoint(
    embeddings_server: str, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if transport == "urllib":
        monkeypatch.setattr(http_client, "_httpx_module", lambda: None)
    elif http_client._httpx_module() is None:
        pytest.skip("neither httpx nor httpx2 is installed")
    embedder = OpenAIEmbedder(embeddings_server + "/", "tiny-embed", "sk-test", batch_size=2)
    vectors = embedder.embed(["a", "bbb", "cc"])

    assert vectors.shape == (3, 3) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    expected = normalise(np.array([[1.0, 1, 0], [3, 1, 0], [2, 1, 0]]))
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)  # answers came back reversed
    assert [len(r["body"]["input"]) for r in _FakeEmbeddings.requests] == [2, 1]
    first = _FakeEmbeddings.requests[0]
    assert first["path"] == "/v1/embeddings" and first["auth"] == "Bearer sk-test"
    assert first["body"]["model"] == "tiny-embed"
    assert embedder.dim == 3 and embedder.name == "openai:tiny-embed"
    assert "sk-test" not in repr(embedder)


def test_openai_embedder_http_error(embeddings_server: str) -> None:
    _FakeEmbeddings.status = 429
    with pytest.raises(EmbedderError, match=r"HTTP 429.*quota exceeded"):
        OpenAIEmbedder(embeddings_server, "m", "k").embed(["x"])


def test_openai_embedder_unreachable() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EmbedderError, match="failed"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", "k", timeout=2).embed(["x"])


def test_search_index_with_openai_embedder(embeddings_server: str, tmp_path: Path) -> None:
    index = SearchIndex(embedder=OpenAIEmbedder(embeddings_server, "m", "k"), store=IndexStore(tmp_path / "s.db"))
    assert index.update(CATALOG[:4]).embedded == 4 + 1  # four tools and the profile of their one server
    assert index.status().embedder == "openai:m"
    assert _ranked(index, "create an issue", limit=1) == ["github_create_issue"]


def test_missing_model_says_how_to_reinstall(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local_embedder, "BUNDLED_FOLDER", tmp_path / "not-built")
    real = local_embedder.import_module

    def no_model(name: str, package: str | None = None) -> Any:
        if name == local_embedder.MODEL_PACKAGE:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(local_embedder, "import_module", no_model)
    with pytest.raises(EmbedderUnavailable, match=r"pip install --force-reinstall mcp-manifold"):
        make_embedder("hybrid")


def test_missing_runtime_is_reported_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    real = local_embedder.import_module

    def no_runtime(name: str, package: str | None = None) -> Any:
        if name == "onnxruntime":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(local_embedder, "import_module", no_runtime)
    embedder = make_embedder("hybrid")  # the package is found; the runtime is only needed to embed
    assert embedder is not None
    with pytest.raises(EmbedderUnavailable, match="ONNX Runtime"):
        embedder.embed(["x"])


REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The bundled model, loaded once for every test that embeds with it."""
    embedder = make_embedder("hybrid")
    assert embedder is not None
    return embedder


def test_local_model_equals_sentence_transformers(minilm: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """ONNX Runtime's vectors are sentence-transformers' (reference made by bench/embedding_equivalence.py)."""

    def no_network(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"the local model tried to connect to {address}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert minilm.name == "local:all-MiniLM-L6-v2@0.1.0" and minilm.dim == 384
    # Short, long (past the 256-token limit), Chinese: one batch of different lengths, as an update embeds.
    vectors = minilm.embed(REFERENCE["texts"])
    assert vectors.shape == (len(REFERENCE["texts"]), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    cosines = (vectors * np.array(REFERENCE["vectors"], dtype=np.float32)).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    one_by_one = np.array([minilm.embed([text])[0] for text in REFERENCE["texts"]])
    np.testing.assert_allclose(one_by_one, vectors, atol=1e-5)  # padding in a batch changes nothing
    assert "torch" not in sys.modules


def test_hybrid_search_with_the_local_model(minilm: Embedder) -> None:
    index = SearchIndex(embedder=minilm)
    index.update(CATALOG)
    # No shared word with any tool's text: only the model knows that an umbrella is about rain.
    assert _ranked(index, "should I take an umbrella tomorrow", limit=2)[0].startswith("weather_")
    assert index.status().embedder == "local:all-MiniLM-L6-v2@0.1.0" and index.status().missing_vectors == 0


# --- search_models: model folders and ensembles ---------------------------------------------------


class _SeededEmbedder:
    """Deterministic, deliberately not unit-length vectors per text; `name` and `dim` as given."""

    def __init__(self, name: str, dim: int, seed: int) -> None:
        self._name, self._dim, self._seed = name, dim, seed

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.random.default_rng([self._seed, zlib.crc32(t.encode())]).normal(size=self._dim) * 3 for t in texts]
        return np.array(rows, dtype=np.float32).reshape(len(texts), self._dim)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_ensemble_dot_product_is_the_mean_of_the_models_cosines() -> None:
    parts = [_SeededEmbedder("a", 3, 1), _SeededEmbedder("b", 5, 2), _SeededEmbedder("c", 4, 3)]
    ensemble = EnsembleEmbedder(parts)
    texts = ["create an issue", "weather in Paris"]
    vectors = ensemble.embed(texts)
    assert ensemble.dim == 12 and vectors.shape == (2, 12) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    cosines = [_cosine(*part.embed(texts)) for part in parts]
    assert len({round(c, 3) for c in cosines}) == 3  # the parts really disagree
    assert float(vectors[0] @ vectors[1]) == pytest.approx(sum(cosines) / 3, abs=1e-5)
    assert ensemble.embed([]).shape == (0, 12)
    assert isinstance(ensemble, Embedder)
    with pytest.raises(ValueError, match="two or more"):
        EnsembleEmbedder(parts[:1])


def test_ensemble_name_changes_with_any_part() -> None:
    a, b = _SeededEmbedder("local:a@1", 3, 1), _SeededEmbedder("local:b@1", 3, 2)
    name = EnsembleEmbedder([a, b]).name
    assert "local:a@1" in name and "local:b@1" in name
    assert EnsembleEmbedder([a, _SeededEmbedder("local:b@2", 3, 2)]).name != name
    assert EnsembleEmbedder([b, a]).name != name  # another order is another vector layout
    assert EnsembleEmbedder([a, b]).name == name


def _model_folder(root: Path, name: str = "my-model") -> Path:
    folder = root / name
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text("[]")
    (folder / "1_Pooling" / "config.json").write_text('{"word_embedding_dimension": 768}')
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_folder_model_is_named_by_folder_and_its_files(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path)
    embedder = local_embedder.LocalEmbedder(folder)  # nothing is loaded before the first embedding
    assert embedder.name.startswith("local:my-model@") and embedder.dim == 768
    assert local_embedder.LocalEmbedder(folder).name == embedder.name  # stable across starts
    weights = folder / "model.safetensors"
    weights.write_bytes(b"WEIGHTS")  # same size, new content: the mtime tells
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000_000))
    renamed = local_embedder.LocalEmbedder(folder).name
    assert renamed != embedder.name
    weights.write_bytes(b"more weights")
    assert local_embedder.LocalEmbedder(folder).name not in (embedder.name, renamed)


def test_hybrid_with_search_models(tmp_path: Path) -> None:
    one, two = _model_folder(tmp_path, "one"), _model_folder(tmp_path, "two")
    single = make_embedder("hybrid", models=[str(one)])
    assert isinstance(single, local_embedder.LocalEmbedder) and single.name.startswith("local:one@")
    both = make_embedder("hybrid", models=[str(one), str(two)])
    assert isinstance(both, EnsembleEmbedder) and both.dim == 1536
    assert [part.name.split("@")[0] for part in both.parts] == ["local:one", "local:two"]
    with pytest.raises(EmbedderUnavailable, match="neither 'minilm' nor an existing directory"):
        make_embedder("hybrid", models=[str(tmp_path / "missing")])
    with pytest.raises(EmbedderUnavailable, match=r"no modules\.json or config\.json"):
        make_embedder("hybrid", models=[str(tmp_path)])


def test_search_models_reach_the_embedder(tmp_path: Path) -> None:
    from mcp_manifold._config import Settings
    from mcp_manifold._runtime.search_index import _embedder_options

    folder = str(_model_folder(tmp_path))
    assert _embedder_options(Settings(search_embedder="hybrid", search_models=["minilm", folder])) == {
        "models": ["minilm", folder]
    }
    assert _embedder_options(Settings(search_embedder="hybrid")) == {}


def test_model_folder_loads_offline(minilm: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"the model folder tried to connect to {address}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    # A folder of its own holding the bundled model's files (linked, not copied: 90 MB).
    bundled = local_embedder.BUNDLED_FOLDER
    folder = tmp_path / "saved-minilm"
    for source in bundled.rglob("*"):
        if source.is_file():
            (folder / source.relative_to(bundled)).parent.mkdir(parents=True, exist_ok=True)
            (folder / source.relative_to(bundled)).symlink_to(source)
    from_folder = make_embedder("hybrid", models=[str(folder)])
    default = minilm
    assert from_folder is not None
    assert from_folder.name.startswith("local:saved-minilm@") and from_folder.name != default.name
    texts = ["create an issue on github", "open a bug report in a repository"]
    np.testing.assert_allclose(from_folder.embed(texts), default.embed(texts), atol=1e-5)
    # The same model twice: the ensemble's cosine is that model's cosine.
    twice = make_embedder("hybrid", models=["minilm", str(folder)])
    assert twice is not None and twice.dim == 768
    vectors, single = twice.embed(texts), default.embed(texts)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(float(single[0] @ single[1]), abs=1e-5)


def test_a_model_folder_that_cannot_load_leaves_bm25(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path)  # its "weights" are eight bytes of text
    (folder / "tokenizer.json").write_text("{}")
    embedder = local_embedder.LocalEmbedder(folder)
    with pytest.raises(EmbedderUnavailable, match="cannot load the model in"):
        embedder.embed(["x"])
    index = SearchIndex(embedder=embedder)
    index.update([_tool("github", "create_issue", "Create an issue")])
    assert [hit.key for hit in index.search("create issue", limit=1)] == ["github_create_issue"]
    assert "cannot load the model" in (index.status().last_error or "")


def test_a_model_folder_with_its_own_onnx_export_runs_it(minilm: Embedder, tmp_path: Path) -> None:
    """A folder that brings onnx/model.onnx (sentence-transformers' ONNX export layout) is run as it is."""
    from mcp_manifold._search.bert_graph import bert_onnx_model

    bundled = local_embedder.BUNDLED_FOLDER
    folder = tmp_path / "exported"
    (folder / "onnx").mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json"):
        (folder / name).symlink_to(bundled / name)
    (folder / "1_Pooling").symlink_to(bundled / "1_Pooling")
    (folder / "onnx" / "model.onnx").write_bytes(bert_onnx_model(bundled))
    exported = make_embedder("hybrid", models=[str(folder)])
    assert exported is not None
    texts = REFERENCE["texts"][:3]
    np.testing.assert_allclose(exported.embed(texts), minilm.embed(texts), atol=1e-5)


# --- compact schemas for search answers ---------------------------------------------------------


def test_compact_schema_keeps_what_a_model_needs_to_fill_it() -> None:
    from mcp_manifold._search.compact_schema import parameter_lines

    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file. Must be absolute, e.g. /tmp/a."},
            "mode": {"enum": ["read", "write"], "default": "read", "title": "Mode"},
            "options": {
                "type": "object",
                "properties": {"depth": {"type": "integer", "description": "How deep"}, "hidden": {"type": "boolean"}},
                "required": ["depth"],
            },
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "default": None},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "size": {"type": ["integer", "string"]},
        },
        "required": ["path"],
        "$defs": {"Tag": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    }
    assert parameter_lines(schema) == [
        "path: string* — Path to the file",
        'mode: "read"|"write" = "read"',
        "options: {depth: integer (How deep), hidden?: boolean}",
        "tags: {name: string}[]",
        "when: string<date-time>|null",
        "labels: {[key]: string}",
        "size: integer|string",
    ]
    assert parameter_lines({"type": "object"}) == []
    many = {"properties": {"c": {"enum": list(range(20))}}}
    assert parameter_lines(many) == ["c: 0|1|2|3|4|5|6|7|…"]
    deep: dict[str, Any] = {"type": "string"}
    for level in range(6):
        deep = {"type": "object", "properties": {f"l{level}": deep}}
    assert parameter_lines({"properties": {"x": deep}}) == ["x: {l5?: {l4?: {l3?: {…}}}}"]
