"""The core: plain code with no I/O and no anyio (naming, catalog, arguments, results, breaker, health state).

Everything here is driven by what is handed in (listings, times, results) and is tested without
processes, the h11 way. The layering is checked in CI (import-linter, see pyproject.toml).
"""
