"""Packaging rules: the core imports no framework, and ``__all__`` is the public surface."""

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest

import sessions_core


def test_core_import_loads_no_optional_dependency():
    code = (
        "import sys, sessions_core\n"
        "heavy = [m for m in ('langchain', 'langchain_core', 'llama_index', 'psycopg', 'openai', 'tiktoken',"
        " 'sqlcipher3', 'mcp', 'click') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_all_lists_exactly_the_public_names():
    public = {
        name
        for name, value in vars(sessions_core).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(sessions_core.__all__) == public | set(sessions_core._LAZY)
    for name in sessions_core.__all__:
        assert hasattr(sessions_core, name), name


@pytest.mark.parametrize("package", ["sessions_core", "langchain_sessions", "llamaindex_sessions"])
def test_every_package_ships_the_py_typed_marker(package):
    spec = importlib.util.find_spec(package)  # found, not imported: the adapters need their framework
    assert spec is not None and spec.origin is not None
    assert (Path(spec.origin).parent / "py.typed").is_file()
