"""A failed program's error, with the tool names it got wrong.

QuickJS says only `TypeError: not a function` when a program calls `tools.numbers_ad(...)`: the name is
not in `tools` (misspelt, or a tool its caller may not use), and neither the model nor its user learns
which. A program that calls a tool as a bare function (`numbers_add(...)`) gets `ReferenceError:
numbers_add is not defined`. Both are read here, from the program's text, once it has failed (nothing is
added to a program that runs). No correction is guessed from the wrong name: a tool the caller may not
use must fail exactly as a name nobody has, so the error lists the caller's own tools (when few) instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mcp_manifold._core.suggestions import shortened

# `tools.name` or `tools["name"]` / `tools['name']`, as programs name a tool.
_TOOL_REFERENCE = re.compile(r"""\btools\s*(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*(["'])(.*?)\2\s*\])""")
_NOT_DEFINED = re.compile(r"ReferenceError: ([A-Za-z_$][\w$]*) is not defined")
_NAMED_AT_MOST = 3  # unknown names listed in one error
_LISTED_AT_MOST = 10  # a program's tools listed in the error, when it has no more
_LONGEST = 100  # characters of a name quoted back (the program's own text: it may be long)


def with_name_hints(error: str, code: str, names: Sequence[str]) -> str:
    """`error` with what it means for the program's tool names, when it is about one; else as it is."""
    if error.startswith("TypeError"):
        known = set(names)
        referenced = (found.group(1) or found.group(3) for found in _TOOL_REFERENCE.finditer(code))
        unknown = [name for name in dict.fromkeys(referenced) if name not in known][:_NAMED_AT_MOST]
        if unknown:
            wrong = "; ".join(
                f"tools.{shortened(name, _LONGEST)} is not one of this program's tools" for name in unknown
            )
            return f"{error}: {wrong}; {_where_tools_are(names)}"
    elif (bare := _NOT_DEFINED.match(error)) and bare.group(1) in names:
        return f"{error} (a tool is called as tools.{bare.group(1)}(args), not by its bare name)"
    return error


def _where_tools_are(names: Sequence[str]) -> str:
    """The caller's tools when they are few, else where to find them. Never a correction chosen by the
    wrong name's spelling: a name the caller may not use must read exactly as one nobody has."""
    if 0 < len(names) <= _LISTED_AT_MOST:
        return f"its tools are {', '.join(f'tools.{name}' for name in names)}"
    return "search_tools finds tools by what they do"
