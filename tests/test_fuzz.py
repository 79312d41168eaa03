"""A property-based fuzzer against real gateways: every method, every surface's tool arguments and the
JSON-RPC framing, in both protocol eras, over stdio and HTTP (strategies: tests/fuzz_strategies.py).

What must hold for every line a client may send, however broken:

- the gateway answers every request: a JSON-RPC error or a result (a tool error is a result), with the
  request's id, or with id null when the id itself is unusable or the line is no JSON; never silence,
  never an internal error, never a crash (on HTTP: never a 5xx);
- no backend is restarted because of input: each server keeps its process (pid) and its restart count
  (the live snapshot `manifold servers` reads);
- another client's calls, made meanwhile, all succeed (on HTTP a second client in its own thread, in
  both eras; on stdio, which serves one client, a good call after each fuzzed line on the same wire).

And differential fuzzers of the speed-ups that answer in the SDK's place: the fast lanes
(`test_fuzz_lane` over HTTP, `test_fuzz_stdio_lane`) and the raw backend legs (`test_fuzz_legs`, to a
server over HTTP and one over stdio). Plain calls, and plain calls with one thing changed, sent to two
gateways alike but for the speed-up, must get the same answers (over HTTP byte for byte).

`make test` runs it for `MANIFOLD_FUZZ_SECONDS` (default 60) shared by the six tests; `make fuzz`
runs it longer (`FUZZ_MINUTES`, default 10) and prints what it tried: counts per strategy and method,
the answers, and every failure. The backends are kitchen (its harmless tools only: no crash, sleep or
questions to the client, which would break the invariants on purpose rather than by input) and numbers.
Over HTTP every surface is exposed, code mode's too, and half the lines come from a client holding a
profile (`FUZZ_PROFILE`), so its refusals and the URI spellings it refuses are fuzzed as well.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import free_port, manifold_command, server_entry, server_over_http, stop_process, wait_for_port
from tests.fuzz_strategies import PLAIN_SERVERS, Case, cases, plain_calls

# Seconds for the whole file, the backends' checks included (not the gateways' starts): MANIFOLD_FUZZ_SECONDS,
# else FUZZ_MINUTES (make fuzz), else 60 (make test: with the starts, about a minute and a half).
FUZZ_SECONDS = float(os.environ.get("MANIFOLD_FUZZ_SECONDS") or float(os.environ.get("FUZZ_MINUTES") or 1) * 60)
GATEWAYS = 6  # the budget is shared by the six tests below
ANSWER_TIMEOUT = 60.0  # seconds; generous: a loaded machine is slow, and silence is what this looks for
CHUNK = 5  # examples of the first run, which measures what one costs
CHECK_RESERVE = 3.0  # seconds of each test's share kept for the final check of the backends

settings.register_profile(
    "manifold-fuzz",
    deadline=None,
    max_examples=CHUNK,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)

KITCHEN_TOOLS = ["echo", "add", "fail", "mixed", "image", "embedded"]
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz-peer", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SESSION_VERSION = "2025-11-25"


# The HTTP fuzzer's second client holds this profile (`/mcp/p/fuzz`): its refusals, and the URI spellings it
# refuses (`_core/uri_spelling.py`), are fuzzed on every surface too.
FUZZ_PROFILE = {
    "tools": ["*", "!numbers_multiply"],
    "resources": ["*", "!kitchen+kitchen://config"],
    "prompts": ["*", "!numbers_explain"],
}


def fuzz_config(
    tmp_path: Path,
    expose: list[str],
    servers: dict[str, Any] | None = None,
    profiles: dict[str, Any] | None = None,
    **settings: Any,
) -> Path:
    """The fuzzed gateway's config: kitchen.py (its harmless tools) and numbers.py, or `servers`."""
    servers = servers or {
        "kitchen": server_entry("kitchen.py", tools={"include": KITCHEN_TOOLS}),
        "numbers": server_entry("numbers.py"),
    }
    manifold = {
        "data_dir": str(tmp_path / "data"),
        "expose": expose,
        "discovery_dir": str(tmp_path / "instances"),
        "call_timeout": 30,
        **settings,
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers, "manifold": manifold, "profiles": profiles or {}}))
    return path


# --- what is expected of an answer ------------------------------------------------------------------


def expected_id(line: bytes) -> tuple[bool, Any]:
    """(whether `line` must be answered, the id the answer carries: None for JSON-RPC's null)."""
    if not line.strip():
        return False, None  # a blank line between messages is no message
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return True, None  # no JSON: a parse error, id null
    if not isinstance(message, dict):
        return True, None  # a batch or a bare value: invalid request, id null
    if "method" not in message:
        return False, None  # a response (or like one): never answered
    if "id" not in message:
        return False, None  # a notification: never answered
    request_id = message["id"]
    # A string id with a lone surrogate may come back as it came (escaped, as JSON allows) or as null.
    usable = isinstance(request_id, int | str) and not isinstance(request_id, bool)
    return True, request_id if usable else None


def answers(messages: list[dict[str, Any]], request_id: Any) -> dict[str, Any] | None:
    """The answer to a request with `request_id`: its own, or an error with id null."""
    for message in messages:
        if "method" in message:
            continue
        if message.get("id") == request_id and request_id is not None:
            return message
        if message.get("id") is None and "error" in message:
            return message
    return None


def gateway_failed(answer: dict[str, Any] | None) -> bool:
    """An internal error of the gateway's own; a server's, relayed with its code, names the server."""
    error = (answer or {}).get("error") or {}
    return error.get("code") == -32603 and "server '" not in str(error.get("message"))


def outcome(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "no answer (none due)"
    if "error" in answer:
        return f"error {answer['error'].get('code')}"
    result = answer.get("result")
    return "tool error" if isinstance(result, dict) and result.get("isError") else "result"


class Report:
    """What one gateway's fuzzing tried and found; printed at its end (`make fuzz` shows it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tried: Counter[tuple[str, str]] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.peer_calls = 0
        self.failures: list[str] = []
        self.started = time.monotonic()

    def share_left(self) -> float:
        """Seconds of this gateway's share of the budget still to fuzz for."""
        return FUZZ_SECONDS / GATEWAYS - (time.monotonic() - self.started) - CHECK_RESERVE

    def fail(self, case: Case, why: str) -> None:
        self.failures.append(f"{case.strategy} {case.method}: {why}; line {case.line[:300]!r}")
        raise AssertionError(self.failures[-1])

    def print(self) -> None:
        lines = [f"\nfuzz {self.name}: {sum(self.tried.values())} lines in {time.monotonic() - self.started:.0f}s"]
        lines += [f"  {count:6d}  {strategy:9s} {method}" for (strategy, method), count in sorted(self.tried.items())]
        lines.append("  answers: " + ", ".join(f"{name} {count}" for name, count in self.outcomes.most_common()))
        lines.append(f"  another client's calls meanwhile: {self.peer_calls}, all answered correctly")
        lines.append(f"  failures: {len(self.failures)}")
        lines += [f"    {failure}" for failure in self.failures]
        print("\n".join(lines))
        if path := os.environ.get("FUZZ_REPORT"):
            with open(path, "a") as report:
                report.write("\n".join(lines) + "\n")


def run_for(seconds: float, strategy: st.SearchStrategy[Any], check: Callable[[Any], None]) -> None:
    """Run `check` on examples of `strategy` for about `seconds`: a first run of CHUNK examples measures
    what one costs, then one run takes as many as the rest of the time allows (one long run explores
    better than many short ones, which each start again from the simplest example)."""
    started = time.monotonic()

    def run(examples: int) -> None:
        @settings(settings.get_profile("manifold-fuzz"), max_examples=examples)
        @given(strategy)
        def one(example: Any) -> None:
            check(example)

        one()

    done, examples = 0, CHUNK
    while True:
        run(examples)
        done += examples
        spent = time.monotonic() - started
        left = seconds - spent
        if left <= spent / done:
            return
        examples = max(1, int(0.9 * left / (spent / done)))  # a little short: the last examples may be slow


def backends_now(data_dir: Path, timeout: float = 30.0) -> dict[str, tuple[int | None, int]]:
    """Each backend's (pid, restarts), from a live snapshot written after this call."""
    asked = time.time()
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        for path in (data_dir / "live").glob("*.json"):
            try:
                snapshot = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if snapshot.get("written_at", 0) > asked:
                return {row["name"]: (row["pid"], row["restarts"]) for row in snapshot["servers"]}
        time.sleep(0.2)
    raise TimeoutError(f"no live snapshot in {data_dir}")


# --- stdio ------------------------------------------------------------------------------------------


class StdioWire:
    """A gateway on stdio, written to line by line; a thread collects what it writes back."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.log = (config.parent / "gateway-stderr.log").open("ab")
        self.process = subprocess.Popen(
            manifold_command(config),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env={**os.environ, **(env or {})},
        )
        self.messages: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.count = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            with self.arrived:
                self.messages.append(message)
                self.arrived.notify_all()
        with self.arrived:
            self.arrived.notify_all()

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.replace(b"\n", b" ") + b"\n")
        self.process.stdin.flush()

    def wait(self, found: Callable[[list[dict[str, Any]]], Any], timeout: float = ANSWER_TIMEOUT) -> Any:
        limit = time.monotonic() + timeout
        with self.arrived:
            while True:
                result = found(self.messages)
                if result is not None or self.process.poll() is not None or time.monotonic() > limit:
                    return result
                self.arrived.wait(timeout=0.5)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        self.count += 1
        request_id = f"good-{self.count}"
        start = len(self.messages)
        self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())
        return self.wait(lambda messages: answers_with_id(messages[start:], request_id))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.log.close()


def answers_with_id(messages: list[dict[str, Any]], request_id: Any) -> dict[str, Any] | None:
    return next((m for m in messages if "method" not in m and m.get("id") == request_id), None)


def echo_params(token: str, era: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "kitchen_echo", "arguments": {"text": token}}
    if era == "modern":
        params["_meta"] = MODERN_META
    return params


def echoed(answer: dict[str, Any] | None, token: str) -> bool:
    result = (answer or {}).get("result") or {}
    content = result.get("content") or [{}]
    return not result.get("isError") and content[0].get("text") == token


def open_wire(wire: StdioWire, era: str) -> None:
    """The client's opening of its era, then a first call (which starts the backends)."""
    if era == "session":
        opened = wire.request(
            "initialize",
            {"protocolVersion": SESSION_VERSION, "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}},
        )
        assert opened is not None and "result" in opened, opened
        wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    else:
        opened = wire.request("server/discover", {"_meta": MODERN_META})
        assert opened is not None and "result" in opened, opened
    assert echoed(wire.request("tools/call", echo_params("warm", era)), "warm")


@pytest.fixture
def stdio_wire(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[StdioWire, str, Path]]:
    era, expose = request.param
    config = fuzz_config(tmp_path, expose)
    wire = StdioWire(config)
    try:
        open_wire(wire, era)
        yield wire, era, tmp_path / "data"
    finally:
        wire.close()


@pytest.mark.parametrize(
    "stdio_wire",
    # The fast lane (stdio, `direct` alone) in both eras; every surface is fuzzed over HTTP below.
    [("session", ["direct"]), ("modern", ["direct"])],
    ids=["session-fast-lane", "modern-fast-lane"],
    indirect=True,
)
def test_fuzz_stdio(stdio_wire: tuple[StdioWire, str, Path]) -> None:
    wire, era, data_dir = stdio_wire
    report = Report(f"stdio {era}")  # its share of the budget counts from here, checks included
    before = backends_now(data_dir)

    def check(case: Case) -> None:
        report.tried[(case.strategy, case.method)] += 1
        start = len(wire.messages)
        wire.send(case.line)
        token = f"peer-{report.peer_calls}"
        peer = wire.request("tools/call", echo_params(token, era))
        if not echoed(peer, token):
            report.fail(case, f"the good call after it failed: {peer}")
        report.peer_calls += 1
        due, request_id = expected_id(case.line)
        answer = wire.wait(lambda messages: answers(messages[start:], request_id)) if due else None
        if due and answer is None:
            report.fail(case, "no answer" if wire.process.poll() is None else "the gateway exited")
        report.outcomes[outcome(answer)] += 1
        if gateway_failed(answer):
            report.fail(case, f"an internal error: {answer}")

    try:
        run_for(report.share_left(), cases(era), check)
        after = backends_now(data_dir)
        assert after == before, f"a backend was restarted: {before} -> {after}"
    finally:
        report.print()


@pytest.fixture
def stdio_lane_and_sdk(tmp_path: Path) -> Iterator[dict[str, tuple[StdioWire, StdioWire]]]:
    """Per era, two stdio gateways alike but for the fast lane: on in the first, off in the second."""
    wires: dict[str, tuple[StdioWire, StdioWire]] = {}
    opened: list[StdioWire] = []
    try:
        for era in ("session", "modern"):
            pair = []
            for lane in ("1", "0"):
                folder = tmp_path / f"{era}-lane-{lane}"
                folder.mkdir()
                config = fuzz_config(folder, ["direct"], breaker_threshold=10**9)  # no breaker: see lane_and_sdk
                wire = StdioWire(config, {"MANIFOLD_STDIO_LANE": lane})
                opened.append(wire)
                open_wire(wire, era)
                pair.append(wire)
            wires[era] = (pair[0], pair[1])
        yield wires
    finally:
        for wire in opened:
            wire.close()


def test_fuzz_stdio_lane(stdio_lane_and_sdk: dict[str, tuple[StdioWire, StdioWire]]) -> None:
    """The stdio fast lane against the SDK server's path, as `test_fuzz_lane` does for HTTP: the same
    lines to two gateways alike but for the lane, the same answers (compared as JSON: the lane writes
    non-ASCII characters as they are, the SDK's writer too, but their escapes of others may differ)."""
    report = Report("stdio lane against the SDK's path (both eras)")

    def check(example: tuple[str, Case]) -> None:
        era, case = example
        report.tried[(f"{case.strategy}/{era}", case.method)] += 1
        due, request_id = expected_id(case.line)
        found = []
        for wire in stdio_lane_and_sdk[era]:
            start = len(wire.messages)
            wire.send(case.line)
            answer = wire.wait(lambda messages, start=start: answers(messages[start:], request_id)) if due else None
            if due and answer is None:
                report.fail(case, f"({era}) no answer")
            found.append(answer)
        if found[0] != found[1]:
            report.fail(case, f"({era}) the lane answered {found[0]!r:.600}, the SDK's path {found[1]!r:.600}")
        report.outcomes[outcome(found[1])] += 1

    strategy = st.sampled_from(["session", "modern"]).flatmap(lambda era: st.tuples(st.just(era), plain_calls(era)))
    try:
        run_for(report.share_left(), strategy, check)
    finally:
        report.print()


# --- HTTP -------------------------------------------------------------------------------------------

BASE_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def read_messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages in a response body: JSON, or server-sent events."""
    text = response.text
    if not text.strip():
        return []
    if "text/event-stream" in response.headers.get("content-type", ""):
        lines = text.replace("\r\n", "\n").split("\n")  # SSE's line ends only (not U+2028, which splitlines takes)
        found = [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()]
        return [message for message in found if isinstance(message, dict)]
    try:
        body = json.loads(text)
    except ValueError:
        return []
    return [message for message in (body if isinstance(body, list) else [body]) if isinstance(message, dict)]


class HttpSession:
    """One client of an HTTP gateway: a session-era session (opened here) or 2026-07-28 requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx2.Client(timeout=ANSWER_TIMEOUT)
        response = self.post_json(
            {
                "jsonrpc": "2.0",
                "id": "open",
                "method": "initialize",
                "params": {
                    "protocolVersion": SESSION_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "f", "version": "1"},
                },
            },
            "session",
        )
        self.session_id = response.headers["mcp-session-id"]
        self.post_json({"jsonrpc": "2.0", "method": "notifications/initialized"}, "session")

    def headers(
        self, era: str, method: str = "", name: str = "", extra: tuple[tuple[str, str], ...] = ()
    ) -> dict[str, str]:
        headers = dict(BASE_HEADERS)
        if era == "session":
            headers["mcp-protocol-version"] = SESSION_VERSION
            if getattr(self, "session_id", None):
                headers["mcp-session-id"] = self.session_id
        else:
            headers["mcp-protocol-version"] = "2026-07-28"
            headers.update({"mcp-method": method, **({"mcp-name": name} if name else {})})
        headers.update(dict(extra))
        return headers

    def post_json(self, message: dict[str, Any], era: str) -> httpx2.Response:
        name = (message.get("params") or {}).get("name", "")
        headers = self.headers(era, message.get("method", ""), name)
        return self.client.post(self.url, content=json.dumps(message).encode(), headers=headers)

    def post_case(self, case: Case, era: str) -> httpx2.Response:
        headers = self.headers(era)
        if era == "modern":
            headers.pop("mcp-method", None)
            headers.update(dict(case.headers))
        return self.client.post(self.url, content=case.line, headers=headers)

    def echo(self, token: str, era: str) -> bool:
        message = {"jsonrpc": "2.0", "id": token, "method": "tools/call", "params": echo_params(token, era)}
        response = self.post_json(message, era)
        return response.status_code == 200 and echoed(answers_with_id(read_messages(response), token), token)


class Peer:
    """Another client, calling all along in its own thread, in both eras; every call must succeed."""

    def __init__(self, url: str) -> None:
        self.session = HttpSession(url)
        self.calls = 0
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            era = "session" if self.calls % 2 else "modern"
            token = f"peer-{self.calls}"
            try:
                ok = self.session.echo(token, era)
            except httpx2.HTTPError as exc:
                ok, token = False, f"{token}: {exc!r}"
            if not ok:
                self.failures.append(f"{era} call {token} failed")
            self.calls += 1
            time.sleep(0.05)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=ANSWER_TIMEOUT)


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    config = fuzz_config(
        tmp_path, ["direct", "proxy", "dispatch", "retrieve", "hub", "code"], profiles={"fuzz": FUZZ_PROFILE}
    )
    port = free_port()
    log = (tmp_path / "gateway-stderr.log").open("ab")
    process = subprocess.Popen(
        manifold_command(config, "--http", "--port", str(port)), start_new_session=True, stderr=log
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp", tmp_path / "data"
    finally:
        stop_process(process)
        log.close()


def test_fuzz_http(http_url: tuple[str, Path]) -> None:
    url, data_dir = http_url
    report = Report("http (both eras)")
    fuzzers = {"": HttpSession(url), "/profiled": HttpSession(url.replace("/mcp", "/mcp/p/fuzz"))}
    for fuzzer in fuzzers.values():
        assert fuzzer.echo("warm", "session") and fuzzer.echo("warm-modern", "modern")  # the backends run
    before = backends_now(data_dir)
    peer = Peer(url)

    def check(example: tuple[str, str, Case]) -> None:
        era, profiled, case = example
        fuzzer = fuzzers[profiled]
        report.tried[(f"{case.strategy}/{era}{profiled}", case.method)] += 1
        try:
            response = fuzzer.post_case(case, era)
        except httpx2.HTTPError as exc:
            report.fail(case, f"({era}) no HTTP answer: {exc!r}")
        if response.status_code >= 500:
            report.fail(case, f"({era}) status {response.status_code}: {response.text[:300]}")
        due, request_id = expected_id(case.line)
        answer = answers(read_messages(response), request_id) if due else None
        if due and answer is None:
            report.fail(case, f"({era}) no JSON-RPC answer: status {response.status_code} {response.text[:300]!r}")
        report.outcomes[outcome(answer)] += 1
        if gateway_failed(answer):
            report.fail(case, f"({era}) an internal error: {answer}")
        if peer.failures:
            report.fail(case, f"another client's call failed meanwhile: {peer.failures[:3]}")

    strategy = st.sampled_from(["session", "modern"]).flatmap(
        lambda era: st.tuples(st.just(era), st.sampled_from(sorted(fuzzers)), cases(era))
    )
    try:
        run_for(report.share_left(), strategy, check)
        peer.close()
        report.peer_calls = peer.calls
        assert not peer.failures, peer.failures[:5]
        after = backends_now(data_dir)
        assert after == before, f"a backend was restarted: {before} -> {after}"
    finally:
        peer.close()
        report.print()


def raw_messages(response: httpx2.Response) -> list[str]:
    """Each JSON-RPC message of a response as the text it was sent as: the JSON body, or each event's data."""
    if "text/event-stream" in response.headers.get("content-type", ""):
        lines = response.text.replace("\r\n", "\n").split("\n")
        return [line[5:].strip() for line in lines if line.startswith("data:") and line[5:].strip()]
    return [response.text] if response.text.strip() else []


@contextmanager
def gateway_pair(
    tmp_path: Path, switches: list[str], servers: dict[str, Any] | None = None
) -> Iterator[tuple[str, str]]:
    """Two gateways over HTTP alike but for the speed-ups behind environment variables `switches`: on in
    the first, off in the second."""
    processes, urls, logs = [], [], []
    try:
        for on in ("1", "0"):
            folder = tmp_path / f"speed-ups-{on}"
            folder.mkdir()
            # No breaker: a run of server errors would pause a server on one gateway a moment before the other.
            config = fuzz_config(folder, ["direct"], servers, breaker_threshold=10**9)
            port = free_port()
            logs.append((folder / "gateway-stderr.log").open("ab"))
            env = {**os.environ, **dict.fromkeys(switches, on)}
            command = manifold_command(config, "--http", "--port", str(port))
            processes.append(subprocess.Popen(command, start_new_session=True, stderr=logs[-1], env=env))
            wait_for_port(port, processes[-1], timeout=60)
            urls.append(f"http://127.0.0.1:{port}/mcp")
        yield urls[0], urls[1]
    finally:
        for process in processes:
            stop_process(process)
        for log in logs:
            log.close()


def fuzz_pair(name: str, first: str, second: str, counter: str, servers: dict[str, str] = PLAIN_SERVERS) -> None:
    """Plain calls, and plain calls with one thing changed, to two gateways over HTTP: the JSON-RPC messages
    that come back must be the same bytes, with the same status at 2026-07-28 (a session's answer is JSON
    on the lane and an event on the SDK's path, as designed). `counter`: a /metrics line of the first
    gateway that must have grown, so the speed-up compared did take calls."""
    report = Report(name)
    clients = HttpSession(first), HttpSession(second)
    for client in clients:
        assert client.echo("warm", "session") and client.echo("warm-modern", "modern")

    def check(example: tuple[str, Case]) -> None:
        era, case = example
        report.tried[(f"{case.strategy}/{era}", case.method)] += 1
        one, other = (client.post_case(case, era) for client in clients)
        if era == "modern" and one.status_code != other.status_code:
            report.fail(case, f"({era}) status {one.status_code} against {other.status_code}")
        expected = raw_messages(other)
        if raw_messages(one) != expected:
            report.fail(case, f"({era}) answered {raw_messages(one)!r:.600} against {expected!r:.600}")
        report.outcomes[outcome(answers(read_messages(other), expected_id(case.line)[1]))] += 1

    eras = st.sampled_from(["session", "modern"])
    strategy = eras.flatmap(lambda era: st.tuples(st.just(era), plain_calls(era, servers)))
    try:
        run_for(report.share_left(), strategy, check)
        metrics = httpx2.get(first.removesuffix("/mcp") + "/metrics").text
        counted = [line for line in metrics.splitlines() if line.startswith(counter)]
        assert counted and all(not line.endswith(" 0.0") for line in counted), counted  # it took calls
    finally:
        report.print()


def test_fuzz_lane(tmp_path: Path) -> None:
    """The HTTP fast lane against the SDK's path."""
    with gateway_pair(tmp_path, ["MANIFOLD_HTTP_LANE"]) as (lane, sdk):
        fuzz_pair(
            "http lane against the SDK's path (both eras)", lane, sdk, 'manifold_http_tool_calls_total{path="lane"}'
        )


def test_fuzz_legs(tmp_path: Path) -> None:
    """The raw backend legs against the SDK's client: kitchen.py over HTTP (the HTTP leg) and over stdio
    (the stdio leg), each reached both ways."""
    with server_over_http("kitchen.py") as url:
        tools = {"include": KITCHEN_TOOLS}
        servers = {"kitchen": {"url": url, "tools": tools}, "piped": server_entry("kitchen.py", tools=tools)}
        with gateway_pair(tmp_path, ["MANIFOLD_HTTP_LEG", "MANIFOLD_STDIO_LEG"], servers) as (legs, sdk):
            counter = "manifold_backend_raw_leg_calls_total"
            fuzz_pair(
                "raw legs against the SDK's client (both eras)",
                legs,
                sdk,
                counter,
                dict.fromkeys(servers, "kitchen.py"),
            )
