"""The published MCP servers and third-party clients, run directly and through the gateway, for comparison.

Not a test module: `tests/test_real_servers.py` builds on it. Three parts:

- **Servers** (`RealServer`): the npm servers installed in `tests/node` by `make node` and the PyPI servers
  installed in `tests/.venv-servers` by `make servers`. `server.missing()` says why one cannot run here (a
  test skips with that reason); `server.entry()` is its `mcpServers` entry; `server.exposed(name)` and
  `server.exposed_uri(uri)` are the names the gateway should show for the server's own.
- **Clients**: `ts_client(...)` runs one session of the TypeScript SDK client (`tests/node/ts_client.mjs`)
  and returns a `TsSession`; `inspector_cli(...)` runs the MCP Inspector CLI once and returns an
  `InspectorRun`. Either talks to a stdio command (a list) or a streamable-HTTP URL (a string).
- **Comparison**: `gateway(config, transport)` runs `python -m mcp_manifold serve` (stdio: yields the command;
  http: starts it and yields its URL); `compare(server, config, ops, ...)` runs the same operations (written with the
  server's own names) directly and through a one-server gateway, and `as_exposed(...)` rewrites the direct
  answers into the names the gateway should use, so a test can assert "same answers, prefixes aside".

Operations are `ts_client.mjs`'s JSON operations: `{"op": "list_tools"}`, `{"op": "call_tool", "name": ...,
"arguments": {...}}`, `{"op": "read_resource", "uri": ...}`, `{"op": "get_prompt", ...}`, `{"op": "complete",
"ref": {...}, "argument": {...}}`, `{"op": "poll", "call": {...}, "contains": TEXT}`, `{"op": "set_roots", ...}`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
from mcp import StdioServerParameters

from tests.conftest import free_port, manifold_command, stop_process, wait_for_port

TESTS = Path(__file__).parent
NODE_DIR = TESTS / "node"
NODE_MODULES = NODE_DIR / "node_modules"
NODE_BIN = NODE_MODULES / ".bin"
TS_CLIENT = NODE_DIR / "ts_client.mjs"
INSPECTOR = NODE_BIN / "mcp-inspector"
SERVERS_VENV = TESTS / ".venv-servers"
SERVERS_BIN = SERVERS_VENV / "bin"

SEPARATOR = "_"
URI_SEPARATOR = "+"
CLIENT_TIMEOUT = 90.0  # seconds for one whole client session (subprocess), a backstop, never reached when healthy

T = TypeVar("T")
Transport = Literal["stdio", "http"]
Target = str | Sequence[str]  # a streamable-HTTP URL, or a stdio command with its arguments


def node_missing() -> str | None:
    """Why node-based parts cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (make test installs the npm servers and clients where node/npm exist)"
    if not (NODE_MODULES / "@modelcontextprotocol" / "sdk").is_dir():
        return "tests/node/node_modules is missing: `make node` installs it (needs the npm registry)"
    return None


def inspector_missing() -> str | None:
    """Why the MCP Inspector CLI cannot run here, or None."""
    if reason := node_missing():
        return reason
    if not INSPECTOR.exists():
        return "the MCP Inspector is not installed in tests/node (`make node` installs it; needs npm)"
    return None


# --- servers -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RealServer:
    """A published MCP server as an `mcpServers` entry named `key` (the key is also its prefix)."""

    key: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    package: str = ""  # what installs it, for skip messages

    def missing(self) -> str | None:
        """Why this server cannot run here, or None."""
        if self.command.startswith(str(NODE_DIR)) and (reason := node_missing()):
            return reason
        if not Path(self.command).exists():
            how = (
                "`make node` installs it in tests/node"
                if self.package.startswith("@")
                else ("`make servers` installs it in tests/.venv-servers")
            )
            return f"{self.package} is not installed ({how}; make test runs both where the registries answer)"
        return None

    def entry(self, **extra: Any) -> dict[str, Any]:
        """Its `mcpServers` entry, plus any per-server settings."""
        entry: dict[str, Any] = {"command": self.command, "args": list(self.args), **extra}
        if self.env:
            entry["env"] = {**dict(self.env), **extra.get("env", {})}
        return entry

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args]

    def params(self) -> StdioServerParameters:
        """For the Python SDK client, to reach the server directly."""
        return StdioServerParameters(command=self.command, args=list(self.args), env={**os.environ, **self.env})

    def exposed(self, name: str) -> str:
        return exposed_name(self.key, name)

    def exposed_uri(self, uri: str) -> str:
        return f"{self.key}{URI_SEPARATOR}{uri}"


def exposed_name(prefix: str, name: str) -> str:
    """The name the gateway should show for a server's tool or prompt: `{prefix}_{name}`, except that a
    name that already starts with the prefix keeps it once (issue 17: `git_status`, not `git_git_status`),
    and an empty prefix adds nothing."""
    if not prefix or name.startswith(prefix + SEPARATOR):
        return name
    return f"{prefix}{SEPARATOR}{name}"


def _node_server(key: str, package: str, *args: str, env: Mapping[str, str] | None = None) -> RealServer:
    binary = NODE_BIN / ("mcp-" + package.rpartition("/")[2])  # server-everything -> mcp-server-everything
    return RealServer(key, str(binary), tuple(args), dict(env or {}), package)


def _pypi_server(key: str, package: str, *args: str) -> RealServer:
    return RealServer(key, str(SERVERS_BIN / package), tuple(args), {}, package)


def everything(key: str = "everything") -> RealServer:
    return _node_server(key, "@modelcontextprotocol/server-everything")


def filesystem(*directories: Path | str, key: str = "filesystem") -> RealServer:
    return _node_server(key, "@modelcontextprotocol/server-filesystem", *map(str, directories))


def memory(store: Path | str, key: str = "memory") -> RealServer:
    return _node_server(key, "@modelcontextprotocol/server-memory", env={"MEMORY_FILE_PATH": str(store)})


def sequential_thinking(key: str = "thinking") -> RealServer:
    return _node_server(key, "@modelcontextprotocol/server-sequential-thinking")


def time_server(key: str = "time") -> RealServer:
    return _pypi_server(key, "mcp-server-time", "--local-timezone", "UTC")


def git(repository: Path | str, key: str = "git") -> RealServer:
    return _pypi_server(key, "mcp-server-git", "--repository", str(repository))


def fetch(key: str = "fetch") -> RealServer:
    return _pypi_server(key, "mcp-server-fetch")


def missing(*servers: RealServer) -> str | None:
    """The first reason any of `servers` cannot run here, or None."""
    return next((reason for server in servers if (reason := server.missing())), None)


def make_repository(path: Path) -> Path:
    """A git repository with one commit, for mcp-server-git."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README.md").write_text("a repository for the tests\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for command in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", *command], cwd=path, env=env, check=True)
    return path


# --- clients -----------------------------------------------------------------------------------------


@dataclass
class TsSession:
    """What one `ts_client.mjs` session printed (see the script's header for the fields)."""

    server: dict[str, Any] | None
    results: list[dict[str, Any]]
    notifications: list[dict[str, Any]]
    requests: list[dict[str, Any]]
    stderr: str = ""
    error: dict[str, Any] | None = None

    def answer(self, index: int) -> Any:
        """The result of operation `index`; fails the test, quoting the error, when it has none."""
        entry = self.results[index]
        assert "result" in entry, f"operation {index} ({entry.get('op')} {entry.get('name', '')}) failed: {entry}"
        return entry["result"]

    def failure(self, index: int) -> dict[str, Any] | None:
        """The JSON-RPC error of operation `index` ({"code", "message"}), or None when it answered."""
        return self.results[index].get("error")

    def names(self, index: int) -> set[str]:
        """What a list operation listed: tool and prompt names, resource URIs or template URIs."""
        (items,) = self.answer(index).values()
        return {item.get("uriTemplate") or item.get("uri") or item["name"] for item in items}

    def notified(self, method: str) -> int:
        return sum(1 for note in self.notifications if note["method"] == method)

    def undeclared_requests(self) -> list[dict[str, Any]]:
        """Requests the server sent although this client had not declared the capability they need."""
        return [request for request in self.requests if request.get("undeclared")]


async def ts_client(
    target: Target,
    ops: Sequence[Mapping[str, Any]],
    *,
    roots: Iterable[str] | None = None,
    sampling: bool = False,
    elicitation: bool = False,
    raw: bool = False,
    timeout_ms: int = 20000,
    env: Mapping[str, str] | None = None,
) -> TsSession:
    """One session of the TypeScript SDK client: connect, run `ops` in order, disconnect.

    `roots`: None declares no roots capability; a list (even empty) declares it and answers roots/list.
    """
    if reason := node_missing():
        raise RuntimeError(reason)
    command = ["node", str(TS_CLIENT), "--ops", json.dumps(list(ops)), "--timeout", str(timeout_ms)]
    if roots is not None:
        command.append("--roots-capability")
        for root in roots:
            command += ["--root", root]
    command += ["--sampling"] * sampling + ["--elicitation"] * elicitation + ["--raw"] * raw
    command += ["--url", target] if isinstance(target, str) else ["--", *target]
    with anyio.fail_after(CLIENT_TIMEOUT):
        done = await anyio.run_process(command, check=False, env={**os.environ, **(env or {})}, cwd=NODE_DIR)
    stdout = done.stdout.decode()
    if done.returncode != 0 or not stdout.strip():
        raise AssertionError(f"ts_client.mjs exited with {done.returncode}: {done.stderr.decode()[-2000:]}")
    printed = json.loads(stdout)
    session = TsSession(
        server=printed.get("server"),
        results=printed.get("results", []),
        notifications=printed.get("notifications", []),
        requests=printed.get("requests", []),
        stderr=printed.get("stderr", ""),
        error=printed.get("error"),
    )
    assert session.error is None, f"the TypeScript client could not connect: {session.error}; {session.stderr[-2000:]}"
    return session


@dataclass
class InspectorRun:
    """One run of the MCP Inspector CLI: its exit code, its JSON answer (None if it printed none), stderr."""

    returncode: int
    answer: Any
    stdout: str
    stderr: str


def inspector_command(target: Target, method: str, *options: str) -> list[str]:
    """The Inspector CLI command line that works against `manifold serve` over stdio: `--cli -- COMMAND
    ARGS --method M OPTIONS`. The server command goes after `--` (before it, the gateway's `--config`
    would be taken for the Inspector's own `--config`), and the Inspector's options go last, after the
    command (`--tool-arg` and `--prompt-args` take every following word, so put before the command they
    would swallow it). A URL needs no `--`. See /work/notes/inspector.md."""
    if isinstance(target, str):
        return [str(INSPECTOR), "--cli", target, "--method", method, *options]
    return [str(INSPECTOR), "--cli", "--", *target, "--method", method, *options]


async def inspector_cli(
    target: Target,
    method: str,
    *,
    tool_name: str | None = None,
    tool_args: Mapping[str, str] | None = None,
    uri: str | None = None,
    prompt_name: str | None = None,
    prompt_args: Mapping[str, str] | None = None,
) -> InspectorRun:
    """Run `mcp-inspector --cli --method METHOD ...` once against `target` (stdio command or URL)."""
    if reason := inspector_missing():
        raise RuntimeError(reason)
    options: list[str] = []
    if tool_name is not None:
        options += ["--tool-name", tool_name]
    if tool_args:
        options += ["--tool-arg", *(f"{key}={value}" for key, value in tool_args.items())]
    if uri is not None:
        options += ["--uri", uri]
    if prompt_name is not None:
        options += ["--prompt-name", prompt_name]
    if prompt_args:
        options += ["--prompt-args", *(f"{key}={value}" for key, value in prompt_args.items())]
    with anyio.fail_after(CLIENT_TIMEOUT):
        done = await anyio.run_process(inspector_command(target, method, *options), check=False, cwd=NODE_DIR)
    stdout = done.stdout.decode()
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    return InspectorRun(done.returncode, answer, stdout, done.stderr.decode())


# --- the gateway, and comparison -----------------------------------------------------------------------


def gateway_command(config: Path, *extra: str) -> list[str]:
    """`python -m mcp_manifold serve --config CONFIG`, as a client starts the gateway over stdio."""
    return manifold_command(config, *extra)


@asynccontextmanager
async def gateway(config: Path, transport: Transport = "stdio", *extra: str) -> AsyncIterator[Target]:
    """The target a client connects to: over stdio the command (each client session starts its own
    gateway), over HTTP the URL of one gateway started here and stopped after the block (a gateway that
    does not come up fails the test with the end of its stderr)."""
    if transport == "stdio":
        yield gateway_command(config, *extra)
        return
    port = free_port()
    log = config.with_name(f"{config.stem}-gateway-{port}.log")
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            gateway_command(config, "--http", "--port", str(port), *extra), start_new_session=True, stderr=stderr
        )
    try:
        try:
            await anyio.to_thread.run_sync(wait_for_port, port, process)
        except (RuntimeError, TimeoutError) as exc:
            raise AssertionError(
                f"the gateway did not start: {exc}; its stderr ends:\n{log.read_text()[-2000:]}"
            ) from None
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await anyio.to_thread.run_sync(stop_process, process)


async def gather(*calls: Awaitable[T]) -> list[T]:
    """Await these concurrently (client sessions are mostly waiting for processes); their results in order."""
    results: list[Any] = [None] * len(calls)

    async def run(index: int, call: Awaitable[T]) -> None:
        results[index] = await call

    async with anyio.create_task_group() as group:
        for index, call in enumerate(calls):
            group.start_soon(run, index, call)
    return results


def write_gateway_config(path: Path, servers: Mapping[str, Mapping[str, Any]], **settings: Any) -> Path:
    """A gateway config with these `mcpServers` entries (data kept beside it)."""
    manifold = {"data_dir": str(path.parent / f"{path.stem}-data"), **settings}
    path.write_text(json.dumps({"mcpServers": dict(servers), "manifold": manifold}, indent=2))
    return path


def exposed_op(server: RealServer, op: Mapping[str, Any]) -> dict[str, Any]:
    """An operation written with the server's own names, rewritten to the gateway's names for it."""
    exposed = dict(op)
    kind = op.get("op")
    if kind in ("call_tool", "get_prompt") and "name" in op:
        exposed["name"] = server.exposed(op["name"])
    if kind in ("read_resource", "subscribe", "unsubscribe") and "uri" in op:
        exposed["uri"] = server.exposed_uri(op["uri"])
    if kind == "complete":
        ref = dict(op["ref"])
        if ref.get("type") == "ref/prompt":
            ref["name"] = server.exposed(ref["name"])
        elif ref.get("type") == "ref/resource":
            ref["uri"] = server.exposed_uri(ref["uri"])
        exposed["ref"] = ref
    if kind == "poll":
        exposed["call"] = exposed_op(server, op["call"])
    return exposed


def as_exposed(server: RealServer, answer: Any, op: str = "") -> Any:
    """A direct answer to operation `op` with the server's names and URIs replaced by the exposed ones:
    tool and prompt names in their lists, and every `uri` / `uriTemplate` (resources, templates, resource
    links and embedded resources in tool results and prompt messages). Text is left alone."""
    if isinstance(answer, list):
        return [as_exposed(server, item) for item in answer]
    if not isinstance(answer, dict):
        return answer
    rewritten = {key: as_exposed(server, value) for key, value in answer.items()}
    for key in ("uri", "uriTemplate"):
        if isinstance(answer.get(key), str):
            rewritten[key] = server.exposed_uri(answer[key])
    for key in {"list_tools": "tools", "list_prompts": "prompts"}.get(op, "").split():
        rewritten[key] = [{**item, "name": server.exposed(item["name"])} for item in rewritten[key]]
    return rewritten


@dataclass
class Comparison:
    """The same operations run directly (`direct`) and through the gateway (`through`)."""

    server: RealServer
    direct: TsSession
    through: TsSession

    def pair(self, index: int) -> tuple[Any, Any]:
        """Operation `index`'s answers: direct (names rewritten to the exposed form) and through the gateway."""
        op = self.direct.results[index]["op"]
        return as_exposed(self.server, self.direct.answer(index), op), self.through.answer(index)


async def compare(
    server: RealServer,
    config: Path,
    ops: Sequence[Mapping[str, Any]],
    *,
    transport: Transport = "stdio",
    **client: Any,
) -> Comparison:
    """Run `ops` (in the server's own names) with the TypeScript client against `server` directly and
    through a gateway started from `config`, with the same client capabilities (`client`: roots,
    sampling, elicitation, raw, ...)."""

    async def through_gateway() -> TsSession:
        async with gateway(config, transport) as target:
            return await ts_client(target, [exposed_op(server, op) for op in ops], **client)

    direct, through = await gather(ts_client(server.argv, ops, env=server.env, **client), through_gateway())
    return Comparison(server, direct, through)
