"""workspace: a file tree and an issue tracker, deterministic, for the code-mode tasks of bench/code_mode.py.

``list_files(folder, cursor)`` pages (100 per page) through 300 files under ``/data`` with their sizes;
``search_issues(query)`` returns the issues whose title or body mentions ``query`` (12 of 60 mention
"timeout"); ``add_label(number, label)`` labels one issue. All results are structured.

Run: ``python tests/servers/workspace.py`` (stdio) or add ``--http PORT``.
"""

from _common import make_parser, run
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

parser = make_parser(__doc__.splitlines()[0])
args = parser.parse_args()
server = MCPServer("workspace", version="1.0.0", log_level="WARNING")

PAGE = 100
FILES = [(f"/data/{['logs', 'src', 'assets'][i % 3]}/file_{i:03d}.bin", (i * 7919) % 100_003 + 17) for i in range(300)]
TOPICS = ["timeout", "crash on start", "slow search", "typo in docs", "login fails"]
ISSUES = [
    {
        "number": 100 + i,
        "title": f"{TOPICS[i % 5].capitalize()} in module {i}",
        "body": f"Seen on build {i * 13}: {TOPICS[i % 5]} when the gateway handles request {i}. Steps follow.",
        "labels": ["bug"],
    }
    for i in range(60)
]


class File(BaseModel):
    path: str
    size: int


class FilePage(BaseModel):
    files: list[File]
    next_cursor: str | None


class Issue(BaseModel):
    number: int
    title: str
    body: str
    labels: list[str]


class Issues(BaseModel):
    issues: list[Issue]


class Labelled(BaseModel):
    number: int
    labels: list[str]


@server.tool()
def list_files(folder: str, cursor: str | None = None) -> FilePage:
    """List the files under `folder` with their sizes in bytes, a page at a time (pass `next_cursor` on)."""
    matching = [File(path=path, size=size) for path, size in FILES if path.startswith(folder.rstrip("/") + "/")]
    start = int(cursor or 0)
    end = start + PAGE
    return FilePage(files=matching[start:end], next_cursor=str(end) if end < len(matching) else None)


@server.tool()
def search_issues(query: str) -> Issues:
    """Find the issues whose title or body mentions `query` (case-insensitive)."""
    needle = query.lower()
    return Issues(issues=[Issue(**i) for i in ISSUES if needle in i["title"].lower() or needle in i["body"].lower()])


@server.tool()
def add_label(number: int, label: str) -> Labelled:
    """Add `label` to issue `number`; returns its labels."""
    issue = next(i for i in ISSUES if i["number"] == number)
    if label not in issue["labels"]:
        issue["labels"].append(label)
    return Labelled(number=number, labels=issue["labels"])


run(server, args)
