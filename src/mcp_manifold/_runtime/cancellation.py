"""Whether a cancellation that reached some code was asked for by a scope around it.

anyio cancels a whole task group when one of its tasks ends in a cancellation that none of the group's
scopes asked for (a bug of ours, a cancel from code outside anyio, or one wrapped in an exception group on
its way out). Code that serves many callers in one group (the stdio front's connection, the held calls)
asks `stray_cancellation` in its `except` and ends the one request or call, where otherwise every other
would end with it.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio

try:  # anyio's own test of whether a cancellation came from one of its scopes (private, on asyncio)
    from anyio._backends._asyncio import is_anyio_cancellation as _from_a_scope
except ImportError:  # pragma: no cover - another anyio layout: every cancellation counts as a scope's

    def _from_a_scope(exc: BaseException) -> bool:  # type: ignore[misc]
        return True


def stray_cancellation(exc: BaseException) -> bool:
    """In an `except` for `exc`: whether it is, or holds, a cancellation that no scope around this code asked
    for, with nothing in it that must end the process (a `KeyboardInterrupt`, a `SystemExit`).

    A cancellation is asked for when a scope around this code was cancelled (the request's own cancel, the
    gateway stopping) and it came from such a scope: one from outside anyio is never taken by a scope, even
    a cancelled one, and would go on to end the whole task group."""
    cancelled = anyio.get_cancelled_exc_class()
    leaves = list(_leaves(exc))
    cancellations = [leaf for leaf in leaves if isinstance(leaf, cancelled)]
    if not cancellations or any(not isinstance(leaf, Exception | cancelled) for leaf in leaves):
        return False
    if len(cancellations) < len(leaves):  # errors beside it: no scope takes the group whole
        return True
    scope_cancelled = anyio.current_effective_deadline() == float("-inf")
    return not (scope_cancelled and all(_from_a_scope(leaf) for leaf in cancellations))


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
