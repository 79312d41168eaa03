"""`manifold pins`: pinned tool definitions, what changed, approve or reject."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.table import Table

from mcp_manifold._cli.common import ConfigOption, JsonOption, config_among, config_path, err, load, out, pins_app
from mcp_manifold._cli.shown import json_text, plain, printable
from mcp_manifold._config import Config
from mcp_manifold._errors import ManifoldError


def _pin_store(config: Path | None) -> Any:
    from mcp_manifold._runtime.pin_store import PinStore
    from mcp_manifold._runtime.private_files import secure_data_dir

    cfg = load(config_path(config, [], required=False))
    secure_data_dir(Path(cfg.settings.data_dir).expanduser())  # as a gateway does: one line if it is unusable
    mode = cfg.settings.pinning
    if mode == "off":
        err.print("note: pinning is off in this config; showing the pins recorded before", markup=False)
    store = PinStore(cfg.settings.data_dir, "warn" if mode == "off" else mode)  # type: ignore[arg-type]
    if cfg.settings.state_url:  # what the replicas pinned, however far their data dirs are from this one
        from mcp_manifold._runtime.shared_state.pins import shared_pins_and_forgotten

        shared, forgotten = anyio.run(shared_pins_and_forgotten, cfg.settings.state_url)
        # A forgotten server's pins this dir kept from before its forget, which the store no longer has: shown, and
        # approved, they came back to every replica. (What the store has of it, pinned afresh since, stays.)
        held = {pin.key for pin in shared}
        store.drop([pin.key for pin in store.pins() if pin.server in forgotten and pin.key not in held])
        # The store is the judge of what came last: no clock of any machine is (they disagree).
        store.merge(shared)
    return cfg, store


def _find_pin(cfg: Config, store: Any, name: str) -> Any:
    """A pin by `server/tool`, by the tool's exposed name (`git_status`), or by its own name if one server has it."""
    pins = store.pins()
    server, slash, tool = name.partition("/")
    if slash:
        found = [pin for pin in pins if (pin.server, pin.tool) == (server, tool)]
    else:
        separator = cfg.settings.separator
        prefixes = {n: c.exposed_prefix for n, c in cfg.servers.items()}
        found = [p for p in pins if f"{prefixes.get(p.server, p.server)}{separator}{p.tool}" == name]
        found = found or [pin for pin in pins if pin.tool == name]
    if len(found) == 1:
        return found[0]
    if found:
        options = ", ".join(f"{pin.server}/{pin.tool}" for pin in found)
        raise ManifoldError(f"{name!r} is pinned on several servers: {options}; name it as SERVER/TOOL")
    from mcp_manifold._core.suggestions import did_you_mean

    raise ManifoldError(
        f"no pinned tool {name!r}{did_you_mean(name, [f'{p.server}/{p.tool}' for p in pins])} (see `manifold pins`)"
    )


@pins_app.callback()
def pins(
    ctx: typer.Context,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    changed: Annotated[bool, typer.Option("--changed", help="Only tools that are not approved as served.")] = False,
) -> None:
    """Every pinned tool and its state: pinned, changed, new or rejected (quarantined under pinning: enforce)."""
    if ctx.invoked_subcommand is not None:
        # `pins --config team.yaml diff NAME` (or `pins team.yaml diff NAME`): the subcommand's config unless
        # it names one itself; it read the default config instead, and another data dir's pins.
        ctx.obj = config
        return
    cfg, store = _pin_store(config)
    rows = [pin for pin in store.pins() if not changed or pin.state != "pinned"]
    quarantined = cfg.settings.pinning == "enforce"
    unpinned = _unpinned(cfg)
    if as_json:
        print(
            json_text(
                [
                    {
                        "server": pin.server,
                        "tool": pin.tool,
                        "state": pin.state,
                        "quarantined": quarantined and pin.state != "pinned",
                        "changed_at": pin.changed_at,
                        "served_hash": pin.candidate_hash,  # what `approve --expect` names, when not approved
                    }
                    for pin in rows
                ]
                + [
                    {"server": server, "tool": tool, "state": "unpinned", "quarantined": quarantined}
                    for server, (_count, tools) in unpinned.items()
                    for tool in tools
                ]
            )
        )
        return
    table = Table(title=f"{len(rows)} pinned tools and apps (pinning: {cfg.settings.pinning})")
    for column in ("server", "tool", "state", "since"):
        table.add_column(column)
    for pin in rows:
        state = (
            pin.state if pin.state == "pinned" else f"[red]{pin.state}{' (quarantined)' if quarantined else ''}[/red]"
        )
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(pin.changed_at)) if pin.changed_at else ""
        table.add_row(plain(pin.server), plain(pin.tool), state, since)  # a tool's own name, as its server wrote it
    out.print(table)
    for server, (count, tools) in unpinned.items():
        shown = tools[:5]
        names = ", ".join(printable(repr(tool)) for tool in shown) + f" and {count - len(shown)} more" * (
            count > len(shown)
        )
        err.print(
            f"{printable(server)}: {count} tool(s) it lists now are past pin_max_tools and pinned nowhere ({names}), "
            f"{'held' if quarantined else 'served unpinned'}: raise pin_max_tools, or run "
            f"`manifold pins forget {printable(server)}` to have what it serves pinned afresh",
            markup=False,
            highlight=False,
        )


def _unpinned(cfg: Config) -> dict[str, tuple[int, list[str]]]:
    """The tools the running gateways of this data dir hold past `pin_max_tools`, by server: how many and the
    first names. Only a gateway's memory has them (they are pinned nowhere); it writes them to its live status."""
    from mcp_manifold._runtime.live_status import live_dir, read_live

    held: dict[str, tuple[int, list[str]]] = {}
    for snapshot in read_live(live_dir(cfg.settings.data_dir)):
        for server, row in (snapshot.get("unpinned") or {}).items():
            count, tools = held.get(server, (0, []))
            merged = sorted({*tools, *row.get("tools", ())})  # gateways of one data dir may hold the same ones
            held[server] = (max(count, int(row.get("count", 0)), len(merged)), merged)
    return dict(sorted(held.items()))


@pins_app.command("diff")
def pins_diff(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="SERVER/TOOL, or the tool's exposed name.")],
    config: ConfigOption = None,
) -> None:
    """What changed in a tool since it was approved: description and schemas as a diff."""
    from mcp_manifold._core.pins import describe_change

    cfg, store = _pin_store(config or ctx.obj)
    pin = _find_pin(cfg, store, name)
    # What the operator reads to decide: no escape sequence in the new definition may rewrite it, and no
    # character a terminal shows as nothing (text for the model in Unicode tags) may hide in it.
    print(printable(describe_change(pin), lines=True, invisible=True))
    if pin.candidate_hash is not None:  # the server may change again before the decision: name what was shown
        named = printable(f"{pin.server}/{pin.tool}")
        print(f"\nto decide on exactly this: manifold pins approve|reject {named} --expect {pin.candidate_hash}")


ExpectOption = Annotated[
    str | None,
    typer.Option(
        "--expect",
        help="The served definition's hash `manifold pins diff` printed: nothing is decided if the server serves "
        "another one now (it changed after you looked). One name only.",
    ),
]


@pins_app.command("approve")
def pins_approve(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="SERVER/TOOL or exposed names.")],
    config: ConfigOption = None,
    expect: ExpectOption = None,
) -> None:
    """Approve the definition a tool is served with now; a running gateway lifts its quarantine within a second."""
    _decide(*config_among(names, config or ctx.obj), "approve", expect)


@pins_app.command("reject")
def pins_reject(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="SERVER/TOOL or exposed names.")],
    config: ConfigOption = None,
    expect: ExpectOption = None,
) -> None:
    """Refuse the definition a tool is served with now: quarantined until the server serves the approved one."""
    _decide(*config_among(names, config or ctx.obj), "reject", expect)


@pins_app.command("forget")
def pins_forget(
    ctx: typer.Context,
    servers: Annotated[list[str], typer.Argument(help="Servers (or hub instance ids) whose pins to forget.")],
    config: ConfigOption = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Forget them even when some are held: what it serves is then pinned as it is.")
    ] = False,
) -> None:
    """Forget every pin of a server: at its next listing what it serves is pinned afresh, as for a new server.

    For a server past `pin_max_tools` (one that renames its tools), or one you replaced with another under the
    same name. Its approvals go with its pins: what it serves at its next listing is trusted as it is."""
    servers, config = config_among(servers, config or ctx.obj)
    cfg, store = _pin_store(config)
    try:
        known = store.servers()
        for server in servers:
            if server not in known:
                from mcp_manifold._core.suggestions import did_you_mean

                raise ManifoldError(f"no pins of server {printable(server)!r}{did_you_mean(server, sorted(known))}")
        held = [pin for pin in store.pins() if pin.server in servers and pin.state != "pinned"]
        if held and not yes:
            names = ", ".join(printable(f"{pin.server}/{pin.tool}") for pin in held[:5])
            raise ManifoldError(
                f"{len(held)} of these pins are not approved ({names}{', ...' * (len(held) > 5)}): forgetting them "
                "pins what the server serves at its next listing as it is. Review them (manifold pins diff), or "
                "give --yes to forget them all the same; nothing forgotten"
            )
        for server in servers:
            count = store.forget(server)
            out.print(
                f"{printable(server)}: {count} pins forgotten; what it serves is pinned afresh at its next listing "
                "(a running gateway lists it again at its next announcement, reload or restart)",
                markup=False,
                highlight=False,
            )
    finally:
        store.close()
    if cfg.settings.state_url:
        from mcp_manifold._runtime.shared_state.pins import publish_forgotten

        anyio.run(publish_forgotten, cfg.settings.state_url, servers)
        out.print(f"published to every replica ({len(servers)} server(s))")


def _decide(names: list[str], config: Path | None, decision: str, expect: str | None = None) -> None:
    if expect is not None and len(names) != 1:
        raise ManifoldError(f"--expect names one definition: give one tool to {decision}, not {len(names)}")
    cfg, store = _pin_store(config)
    decided = []
    try:
        for name in names:
            pin = _find_pin(cfg, store, name)
            if expect is not None and pin.candidate_hash != expect:
                raise ManifoldError(
                    f"{printable(name)}: the server serves another definition now than the one --expect names (it "
                    f"changed after you looked); nothing decided. Review it again: manifold pins diff {printable(name)}"
                )
            if pin.candidate is None:
                shown = printable(f"{pin.server}/{pin.tool}")
                out.print(f"{shown}: nothing to {decision} (it is served as approved)", markup=False, highlight=False)
                continue
            after = getattr(store, decision)(pin.server, pin.tool)
            decided.append(after)
            out.print(f"{printable(f'{after.server}/{after.tool}')}: {after.state}", markup=False, highlight=False)
    finally:
        store.close()
    if decided and cfg.settings.state_url:  # every replica takes it within a second, whatever its data dir
        from mcp_manifold._runtime.shared_state.pins import publish_decisions

        anyio.run(publish_decisions, cfg.settings.state_url, decided)
        out.print(f"published to every replica ({len(decided)} decision(s))")
