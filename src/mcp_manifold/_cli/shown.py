"""Text that came from outside the operator's own config, made safe to print on the operator's terminal.

Servers write tool descriptions, original tool names, their name and version, stderr lines and errors; a
caller writes the tool name an audit line records (a name that exists or not) and an identity provider the
principal. Printed as it came, such text was rich markup (`[link=...]` made a hyperlink the operator did
not write, `[/]` ended the command with a MarkupError) and its escape sequences acted on the terminal:
cleared it, set its title, moved the cursor up over lines already shown (so `manifold pins diff` could be
made to show a harmless change). Here every control character is written out as an escape (`\\x1b`), and
`plain` makes the text a rich `Text`, which is never read as markup.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.text import Text

# C0 but tab and newline, DEL, and C1 (U+009B is a CSI to a terminal that reads C1 controls).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# In a field shown on one line, a tab or a line break too: a newline in a tool name would forge a line.
_ONE_LINE_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_C1 = re.compile(r"[\x7f-\x9f]")  # DEL and C1: inside JSON strings only, where `\\u` escapes them


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: object, *, lines: bool = False) -> str:
    """`text` with every control character written out (`\\x1b`, `\\n`); with `lines`, line breaks and tabs
    are kept (a stderr tail, a diff)."""
    return (_CONTROLS if lines else _ONE_LINE_CONTROLS).sub(_escaped, str(text))


def plain(text: object, *, lines: bool = False, style: str = "") -> Text:
    """`printable(text)` as a rich `Text`: a table cell or a line that is never read as markup."""
    return Text(printable(text, lines=lines), style=style)


def json_line(data: Any) -> str:
    """`data` as one line of JSON, non-ASCII kept; the C1 controls (which `json` leaves as they are) escaped."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return _C1.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
