"""`manifold audit`: tail and filter the audit log."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mcp_manifold._cli.common import ConfigOption, app, config_path, err, load, out
from mcp_manifold._cli.shown import json_line, printable


@app.command()
def audit(
    config: ConfigOption = None,
    lines: Annotated[int, typer.Option("--lines", "-n", help="Show the last N matching lines.")] = 20,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines as they come.")] = False,
    principal: Annotated[str | None, typer.Option(help="Only this principal.")] = None,
    profile: Annotated[str | None, typer.Option(help="Only this profile.")] = None,
    outcome: Annotated[
        str | None,
        typer.Option(
            help="Only this outcome: ok, error, cached, denied, quarantined, rate_limited, input_required, cancelled."
        ),
    ] = None,
    server: Annotated[str | None, typer.Option(help="Only this server.")] = None,
    name: Annotated[str | None, typer.Option(help="Only this exposed name (a trailing * matches a prefix).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON lines as written.")] = False,
) -> None:
    """Tail and filter the audit log: one line per call, read and prompt (who, what, outcome, sizes)."""
    from collections import deque

    from mcp_manifold._runtime.audit import STREAM, audit_dir, matches, read_entries

    cfg = load(config_path(config, [], required=False))
    if cfg.settings.audit_path == STREAM:
        err.print(
            'audit_path is "-": each gateway writes its audit lines to its standard output (standard error on '
            "stdio), for its log collector; there is no audit file to read here",
            markup=False,
        )
        raise typer.Exit(1)
    directory = audit_dir(cfg.settings.data_dir, cfg.settings.audit_path)
    filters = {"principal": principal, "profile": profile, "outcome": outcome, "server": server, "name": name}
    shown = 0

    def show(line: dict[str, Any]) -> None:
        if as_json:
            print(json_line(line), flush=True)
            return
        who = line.get("principal") or "-"
        if line.get("profile"):
            who += f" ({line['profile']})"
        where = f"{line.get('server') or '?'}/{line.get('original') or '?'}"
        text = (
            f"{line.get('time')} {who} {line.get('outcome')} {line.get('surface') or '-'} {line.get('name')} "
            f"[{where}] {line.get('duration_ms')} ms"
        )
        if line.get("error"):
            text += f": {line['error']}"
        # One line per entry, whatever a caller put in the name it called or a server in its error.
        out.print(printable(text), markup=False, highlight=False, soft_wrap=True)

    for line in deque((e for e in read_entries(directory) if matches(e, filters)), maxlen=max(0, lines)):
        show(line)
        shown += 1
    if not follow:
        if not shown and not as_json:
            err.print(f"no matching audit lines in {directory}", markup=False)
        return
    _follow(directory, filters, show)


def _follow(directory: Path, filters: dict[str, str | None], show: Any) -> None:
    """Print lines appended from now on (through rotations) until Ctrl-C."""
    from mcp_manifold._runtime.audit import FILE_NAME, matches

    path = directory / FILE_NAME
    position = path.stat().st_size if path.exists() else 0
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            size = path.stat().st_size if path.exists() else 0
            if size < position:  # rotated: start the new file from its beginning
                position = 0
            if size > position:
                with path.open(encoding="utf-8") as file:
                    file.seek(position)
                    chunk = file.read()
                    complete = chunk[: chunk.rfind("\n") + 1]
                    position += len(complete.encode("utf-8"))
                # At "\n" only: `splitlines` also breaks at U+2028, U+2029 and U+0085, which JSON leaves raw in
                # a string, so a line whose name (a caller's) or error (a server's) held one was never shown.
                for raw in complete.split("\n"):
                    try:
                        entry = json.loads(raw)
                    except ValueError:
                        continue
                    if matches(entry, filters):
                        show(entry)
            time.sleep(0.5)
