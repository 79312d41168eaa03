"""The public API: what `mcp_manifold` exports is complete and importable, everything else is private by name,
and the Python examples in the README and docs import what they say."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mcp_manifold

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PUBLIC = {
    "Gateway",
    "Config",
    "load_config",
    "ProxyClient",
    "ProxyError",
    "add_proxy_tool",
    "ManifoldError",
    "__version__",
}


def test_every_exported_name_resolves_and_the_promised_ones_are_there() -> None:
    assert set(mcp_manifold.__all__) >= PUBLIC
    for name in mcp_manifold.__all__:
        assert getattr(mcp_manifold, name) is not None, name
    # The error tree is exported whole: every error class the package defines.
    from mcp_manifold import _errors

    errors = {name for name, value in vars(_errors).items() if isinstance(value, type) and issubclass(value, Exception)}
    assert errors <= set(mcp_manifold.__all__)


def test_nothing_public_besides_the_api() -> None:
    for name in mcp_manifold.__all__:
        getattr(mcp_manifold, name)  # resolve the lazy ones, so they are in the module's namespace
    public = {name for name in vars(mcp_manifold) if not name.startswith("_")}
    assert public <= set(mcp_manifold.__all__), public - set(mcp_manifold.__all__)
    modules = [info.name for info in pkgutil.iter_modules(mcp_manifold.__path__)]
    assert modules and all(name.startswith("_") for name in modules), modules


def test_unknown_names_fail_clearly() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Gatway'"):
        mcp_manifold.Gatway  # noqa: B018


def test_importing_the_package_stays_light() -> None:
    """`import mcp_manifold` must not pull in the SDK's sessions (the CLI and the grep worker start often)."""
    code = "import sys, mcp_manifold; print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'anyio')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def _python_imports(document: Path) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", document.read_text(), re.DOTALL)
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if re.match(r"\s*(from mcp_manifold\S* import |import mcp_manifold)", line)
    ]


EXAMPLES = [(document.name, line) for document in DOCUMENTS for line in _python_imports(document)]


def test_the_docs_have_examples_to_check() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize(("document", "line"), EXAMPLES, ids=[f"{doc}:{line}" for doc, line in EXAMPLES])
def test_documented_examples_import(document: str, line: str) -> None:
    done = subprocess.run([sys.executable, "-c", line], capture_output=True, text=True)
    assert done.returncode == 0, f"{document}: {line!r} fails: {done.stderr.strip().splitlines()[-1:]}"
