"""Schema details as search text (`RankingConfig.schema_details`): enum values and nested fields.

A tool's input schema often says what it is for only in its enums ("plus", "comfort", "black" for a
ride type) or in the fields of a nested object; with `schema_details` those words are BM25 text too.
BM25 only here: no model is loaded.
"""

from __future__ import annotations

from typing import Any

from mcp_manifold._search import RankingConfig, SearchIndex, ToolDocument
from mcp_manifold._search.explain import render
from mcp_manifold._search.ranking import document_terms, embedding_text

RIDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pickup": {"type": "string", "description": "Where the car picks the customer up"},
        "type": {"type": "string", "description": "The kind of car", "enum": ["pool", "comfort", "black"]},
    },
    "required": ["pickup", "type"],
}
MAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "message": {
            "type": "object",
            "properties": {
                "subject": {"type": "string"},
                "attachments": {
                    "type": "array",
                    "description": "Files sent along",
                    "items": {
                        "type": "object",
                        "properties": {"filename": {"type": "string", "description": "Shown to the recipient"}},
                    },
                },
            },
        },
    },
}
CATALOG = [
    ToolDocument("rides_request", "rides", "request", "Request a car for a customer.", RIDE_SCHEMA),
    ToolDocument("mail_send", "mail", "send", "Send a mail.", MAIL_SCHEMA),
    ToolDocument("trips_plan", "trips", "plan", "Plan a trip itinerary with stops.", {"type": "object"}),
    ToolDocument("files_upload", "files", "upload", "Upload a file to storage.", {"type": "object"}),
]
ON = RankingConfig(schema_details=True)


def _index(ranking: RankingConfig) -> SearchIndex:
    index = SearchIndex(ranking=ranking)
    index.update(CATALOG)
    return index


def test_schema_details_lists_enum_values_and_nested_fields_but_not_top_level_parameters() -> None:
    ride, mail = CATALOG[0], CATALOG[1]
    assert ride.schema_details() == "pool comfort black"
    lines = mail.schema_details().splitlines()
    assert lines == ["subject", "attachments: Files sent along", "filename: Shown to the recipient"]
    assert "pickup" not in ride.schema_details() and "to" not in lines  # parameters_text has those
    assert "comfort" in ride.text()


def test_schema_details_stop_at_their_depth_and_cut_long_enums() -> None:
    deep: dict[str, Any] = {"type": "string", "enum": ["bottom"]}
    for level in range(6):
        deep = {"type": "object", "properties": {f"level{level}": deep}}
    details = ToolDocument("d", "s", "d", "", deep).schema_details()
    # level5 is a top-level parameter; levels 4 to 2 lie one to three levels down, deeper is not read.
    assert details.splitlines() == ["level 4", "level 3", "level 2"]
    many = ToolDocument("c", "s", "c", "", {"properties": {"code": {"enum": [f"v{i}" for i in range(500)]}}})
    assert many.schema_details().split() == [f"v{i}" for i in range(20)]


def test_an_enum_value_finds_a_tool_only_with_schema_details() -> None:
    query = "book the comfort class"
    assert "rides_request" not in [hit.key for hit in _index(RankingConfig()).search(query)]
    assert [hit.key for hit in _index(ON).search(query)][:1] == ["rides_request"]


def test_a_nested_field_finds_a_tool_only_with_schema_details() -> None:
    query = "an attachment with a filename"
    assert "mail_send" not in [hit.key for hit in _index(RankingConfig()).search(query)]
    assert [hit.key for hit in _index(ON).search(query)][:1] == ["mail_send"]


def test_schema_details_are_lexical_only_and_off_by_default() -> None:
    ride = CATALOG[0]
    assert RankingConfig().schema_details is False
    assert "comfort" not in document_terms(ride, RankingConfig())
    assert "comfort" in document_terms(ride, ON)
    assert "comfort" not in embedding_text(ride)  # stored vectors stay valid either way


def test_explain_names_the_terms_only_the_schema_matched() -> None:
    found = _index(ON).explain("book the comfort class", "rides_request")
    assert found.rank == 1
    assert found.schema_terms == ("comfort",)
    assert any("enum values and nested fields: comfort" in line for line in render(found))
    plain = _index(ON).explain("request a car", "rides_request")
    assert plain.schema_terms == ()
    assert not any("enum values" in line for line in render(plain))
