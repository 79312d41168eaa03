"""Reading a config file: JSON or YAML text into plain data, with duplicate keys found.

The only file I/O of the config package (besides checking that paths exist). Both parsers would
silently keep the last of two equal keys, which hides a user's mistake, so both record duplicates.
Failures come back as problems with line and column, never as exceptions, so they are reported
together with everything else wrong in the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from mcp_manifold._errors import ConfigError, ConfigProblem

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


class _DuplicateCheckingLoader(yaml.SafeLoader):
    """A safe YAML loader that records duplicate mapping keys instead of silently keeping the last."""

    duplicates: list[str]


def _construct_mapping(loader: _DuplicateCheckingLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            if key_node.value in seen:
                line = key_node.start_mark.line + 1
                loader.duplicates.append(f"duplicate key {key_node.value!r} at line {line}")
            seen.add(key_node.value)
    return loader.construct_mapping(node, deep=True)


_DuplicateCheckingLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str) -> tuple[Any, list[str]]:
    loader = _DuplicateCheckingLoader(text)
    loader.duplicates = []
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return None, [f"invalid YAML{where}: {exc.problem or exc.context}"]
    except yaml.YAMLError as exc:
        return None, [f"invalid YAML: {exc}"]
    finally:
        loader.dispose()
    return data, loader.duplicates


def _parse_json(text: str) -> tuple[Any, list[str]]:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                duplicates.append(f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        data = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        if not text.strip():
            return None, ['the file is empty: a config is a JSON object, at least {"mcpServers": {}}']
        return None, [f"invalid JSON at line {exc.lineno}, column {exc.colno}: {_json_trouble(text, exc)}"]
    return data, duplicates


def _json_trouble(text: str, exc: json.JSONDecodeError) -> str:
    """What a JSON error usually is, in the words of whoever wrote the file, not the parser's.

    A trailing comma reads "Expecting property name enclosed in double quotes" to Python, and a comment
    or a YAML file given as .json "Expecting value": the mistakes people make most, in desktop clients'
    files too (their editors allow comments and trailing commas in JSON with comments)."""
    at = text[exc.pos : exc.pos + 2]
    if at.startswith(("//", "/*", "#")):
        return "JSON has no comments: remove it, or write the config as YAML (a .yaml file), where # starts one"
    if text[: exc.pos].rstrip().endswith(",") and at[:1] in ("}", "]"):
        return f"a comma before {at[:1]!r}: JSON allows no trailing comma"
    if at.startswith("'"):
        return "JSON takes double quotes around names and strings, not single ones"
    if exc.pos == len(text) - len(text.lstrip()) and isinstance(_parse_yaml(text)[0], dict):
        return "this is YAML, not JSON: name the file .yaml (or .yml)"
    return exc.msg


def read_file(path: Path) -> tuple[Any, list[ConfigProblem]]:
    """Read and parse a config file; problems instead of exceptions, with line/column when parsing fails."""
    source = str(path)

    def failed(message: str) -> tuple[None, list[ConfigProblem]]:
        return None, [ConfigProblem(source, None, None, message)]

    suffix = path.suffix.lower()
    if path.is_dir():
        return failed("is a directory, not a config file: give the file in it (a .json, .yaml or .yml)")
    if suffix not in CONFIG_SUFFIXES:
        return failed(f"unsupported file type {path.suffix!r}: use .json, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate the BOM some Windows editors write
    except FileNotFoundError:
        return failed("file not found")
    except IsADirectoryError:
        return failed("is a directory, not a config file")
    except UnicodeDecodeError as exc:
        return failed(f"not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        return failed(f"cannot read: {exc.strerror or exc}")
    data, messages = _parse_json(text) if suffix == ".json" else _parse_yaml(text)
    return data, [ConfigProblem(source, None, None, message) for message in messages]


def read_config_data(path: str | Path) -> Any:
    """The parsed content of a JSON or YAML file; `ConfigError` if it is missing or does not parse."""
    data, problems = read_file(Path(path))
    if problems:
        raise ConfigError(problems)
    return data
