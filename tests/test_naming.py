"""Exposed names: always valid, unique, deterministic, and reversible through the assignment map."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_manifold._config.settings import SEPARATORS
from mcp_manifold._core.naming import NAME_PATTERN, assign_names, join_name, namespace_uri, sanitize, split_uri
from mcp_manifold._core.suggestions import close_names, quoted


def test_plain_names_are_prefix_separator_name() -> None:
    names = assign_names([("git", "status"), ("fs", "read_file")])
    assert names == {("git", "status"): "git_status", ("fs", "read_file"): "fs_read_file"}


def test_separator_is_configurable() -> None:
    assert assign_names([("git", "status")], separator="__") == {("git", "status"): "git__status"}


def test_invalid_characters_are_replaced() -> None:
    name = assign_names([("my server", "do.thing/now")])[("my server", "do.thing/now")]
    assert name == "my_server_do_thing_now"


def test_too_long_names_are_shortened_with_a_hash() -> None:
    long = "x" * 80
    name = assign_names([("srv", long)])[("srv", long)]
    assert len(name) <= 64 and NAME_PATTERN.match(name)
    assert name.startswith("srv_xxx")


def test_clashes_shorten_every_member_deterministically() -> None:
    # "a_b" + "c" and "a" + "b_c" both join to "a_b_c".
    owners = [("a_b", "c"), ("a", "b_c")]
    names = assign_names(owners)
    assert len(set(names.values())) == 2
    assert all(name != "a_b_c" for name in names.values())
    assert assign_names(list(reversed(owners))) == names


def test_reserved_names_win() -> None:
    names = assign_names([("proxy", "x"), ("a", "b")], reserved=["a_b"])
    assert names[("a", "b")] != "a_b"
    assert names[("proxy", "x")] == "proxy_x"


def test_empty_prefix_means_no_namespace() -> None:
    assert join_name("", "_", "status") == "status"


def test_a_name_that_already_carries_the_prefix_keeps_it_once() -> None:
    names = assign_names([("git", "git_status"), ("git", "log"), ("github", "git_clone")])
    assert names == {
        ("git", "git_status"): "git_status",
        ("git", "log"): "git_log",
        ("github", "git_clone"): "github_git_clone",
    }
    assert assign_names([("git", "git_status")], separator="-") == {("git", "git_status"): "git-git_status"}


def test_a_prefixed_name_and_its_unprefixed_twin_are_both_kept_apart() -> None:
    # "status" becomes git_status, and "git_status" stays git_status: both are shortened with hashes.
    names = assign_names([("git", "status"), ("git", "git_status")])
    assert len(set(names.values())) == 2 and "git_status" not in names.values()


def test_uri_namespacing_round_trips() -> None:
    exposed = namespace_uri("git", "file:///repo/README.md")
    assert exposed == "git+file:///repo/README.md"
    assert split_uri(exposed) == ("git", "file:///repo/README.md")
    assert split_uri("file:///no/prefix") is None


name_text = st.text(min_size=1, max_size=90)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=20), name_text), min_size=1, max_size=40))
def test_names_are_always_valid_unique_and_order_independent(owners: list[tuple[str, str]]) -> None:
    names = assign_names(owners)
    assert set(names) == set(owners)
    assert all(NAME_PATTERN.match(name) for name in names.values())
    assert len(set(names.values())) == len(names)
    shuffled = owners[:]
    random.Random(0).shuffle(shuffled)
    assert assign_names(shuffled) == names


@given(st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True), st.text(min_size=1))
def test_uri_split_inverts_namespace(prefix: str, uri: str) -> None:
    assert split_uri(namespace_uri(prefix, uri)) == (prefix, uri)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(min_size=1, max_size=20), st.text(max_size=40))
def test_an_app_uri_keeps_its_scheme_and_splits_back(prefix: str, rest: str) -> None:
    """`ui://` keeps its scheme with the prefix inside it; any prefix (sanitized) and rest, `+` in it too."""
    exposed = namespace_uri(prefix, "ui://" + rest)
    assert exposed.startswith("ui://")
    assert split_uri(exposed) == (sanitize(prefix), "ui://" + rest)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.text(max_size=10), st.text(max_size=70)), min_size=1, max_size=20),
    st.lists(st.text(max_size=70), max_size=20),
    st.sampled_from(SEPARATORS),
)
def test_a_reserved_name_is_never_handed_out_whatever_the_separator(
    owners: list[tuple[str, str]], reserved: list[str], separator: str
) -> None:
    """The gateway's own tools win any clash: with every separator the config allows, names stay valid and unique."""
    names = assign_names(owners, separator, reserved)
    assert not set(names.values()) & set(reserved)
    assert all(NAME_PATTERN.match(name) for name in names.values())
    assert len(set(names.values())) == len(names)


prefix_text = st.from_regex(r"[a-zA-Z0-9-]{1,12}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(prefix_text, name_text, st.booleans()), min_size=1, max_size=40))
def test_names_that_carry_their_prefix_stay_valid_unique_and_never_double(
    specs: list[tuple[str, str, bool]],
) -> None:
    # Half the names already start with their own prefix, as many servers' tools do.
    owners = [(prefix, f"{prefix}_{name}" if carries else name) for prefix, name, carries in specs]
    names = assign_names(owners)
    assert set(names) == set(owners)
    assert all(NAME_PATTERN.match(name) for name in names.values())
    assert len(set(names.values())) == len(names)  # collision-free, so the map reverses
    naturals = [join_name(prefix, "_", original) for prefix, original in set(owners)]
    for (prefix, original), exposed in names.items():
        natural = join_name(prefix, "_", original)
        assert natural.startswith(f"{prefix}_") and not (
            natural.startswith(f"{prefix}_{prefix}_") and not sanitize(original).startswith(f"{prefix}_{prefix}_")
        )  # the prefix is there once (twice only when the server's own name has it twice, once sanitized:
        # a tool `0_0:` of server `0` is `0_0_`)
        keeps_natural = naturals.count(natural) == 1 and len(natural) <= 64
        assert (exposed == natural) == keeps_natural  # otherwise shortened with a hash


def test_an_absurdly_long_name_is_quoted_short_and_suggests_nothing() -> None:
    name = "n" * 1_000_000
    said = quoted(name)
    assert len(said) < 200 and said.endswith("(1000000 characters)")
    assert quoted("kitchen_echo") == "'kitchen_echo'"
    assert close_names(name, ["n", "nn", "kitchen_echo"]) == []
