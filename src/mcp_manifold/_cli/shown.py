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
import unicodedata
from typing import Any

from rich.text import Text

# The bidirectional marks, embeddings, overrides and isolates: a terminal shows the text after them
# reordered, so `abc\u202edcb` reads as another name, and a diff line as another change.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 but tab and newline, DEL, C1 (U+009B is a CSI to a terminal that reads C1 controls), and the above.
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
# In a field shown on one line, a tab or a line break too: a newline in a tool name would forge a line.
_ONE_LINE_CONTROLS = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# What `json` leaves as it is: inside JSON strings only, where `\\u` escapes them.
_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}]")


def _escaped(match: re.Match[str]) -> str:
    return _escaped_char(match.group())


def printable(text: object, *, lines: bool = False, invisible: bool = False) -> str:
    """`text` with every control character written out (`\\x1b`, `\\n`); with `lines`, line breaks and tabs
    are kept (a stderr tail, a diff); with `invisible`, so is every character a terminal shows as nothing."""
    shown = (_CONTROLS if lines else _ONE_LINE_CONTROLS).sub(_escaped, str(text))
    return "".join(_escaped_char(ch) if _is_invisible(ch) else ch for ch in shown) if invisible else shown


def _is_invisible(ch: str) -> bool:
    """Format characters (zero-width, bidi controls, Unicode tags), variation selectors, private and unassigned
    code points: a model reads text written in them (tags spell out ASCII), a person sees nothing or a box.
    In a diff an operator approves by, a line that differs only in these would look unchanged."""
    code = ord(ch)
    if code < 0xAD:
        return False
    return unicodedata.category(ch) in ("Cf", "Co", "Cn") or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def _escaped_char(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii")


def plain(text: object, *, lines: bool = False, style: str = "") -> Text:
    """`printable(text)` as a rich `Text`: a table cell or a line that is never read as markup."""
    return Text(printable(text, lines=lines), style=style)


def json_line(data: Any) -> str:
    """`data` as one line of JSON, non-ASCII kept; the C1 and bidirectional controls (which `json` leaves as
    they are) escaped."""
    return _json_escaped(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def json_text(data: Any) -> str:
    """`data` as indented JSON for `--json`, escaped as `json_line` is (rich's `print_json` leaves them)."""
    return _json_escaped(json.dumps(data, ensure_ascii=False, indent=2))


def _json_escaped(text: str) -> str:
    return _IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
