"""What the adapters promise: they use only the core's declared API (the package root and
``sessions_core.integration``), and every public I/O method of their classes has an async twin."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from pydantic import BaseModel

import sessions_core
import sessions_core.integration

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ("langchain_sessions", "llamaindex_sessions")
DECLARED = {
    "sessions_core": set(sessions_core.__all__),
    "sessions_core.integration": set(sessions_core.integration.__all__),
}


def adapter_modules() -> list[Path]:
    return sorted(path for package in ADAPTERS for path in (ROOT / package).rglob("*.py"))


def boundary_violations(source: str) -> list[str]:
    """Every use of the core in ``source`` that is not a declared public name."""
    found: list[str] = []
    core_aliases = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sessions_core":
                    core_aliases.add(alias.asname or alias.name)
                elif alias.name.startswith("sessions_core."):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module != "sessions_core" and not module.startswith("sessions_core."):
                continue
            if module not in DECLARED:
                found.append(f"line {node.lineno}: from {module} (not a declared module)")
                continue
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_") or alias.name not in DECLARED[module]:
                    found.append(f"line {node.lineno}: from {module} import {alias.name} (not in its __all__)")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in core_aliases:
            if node.attr not in DECLARED["sessions_core"]:
                found.append(f"line {node.lineno}: sessions_core.{node.attr} (not in its __all__)")
    return found


@pytest.mark.parametrize("path", adapter_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_adapters_import_only_the_declared_core_api(path: Path) -> None:
    assert boundary_violations(path.read_text(encoding="utf-8")) == []


def test_the_boundary_check_catches_what_it_forbids() -> None:
    source = (
        "import sessions_core\n"
        "import sessions_core.stores.sqlite\n"
        "from sessions_core import Session, _LAZY\n"
        "from sessions_core._async import run_in_thread\n"
        "from sessions_core.session import summary_message\n"
        "from sessions_core.integration import run_in_thread as ok, resolve\n"
        "from sessions_core.integration import *\n"
        "sessions_core.session\n"
    )
    assert [v.split(":")[0] for v in boundary_violations(source)] == [f"line {n}" for n in (2, 3, 4, 5, 6, 7, 8)]


def test_the_declared_names_exist_and_are_public() -> None:
    for module_name, names in DECLARED.items():
        module = sessions_core if module_name == "sessions_core" else sessions_core.integration
        for name in names:
            assert not name.startswith("_"), name
            assert getattr(module, name) is not None, f"{module_name}.{name}"


# -- async twins -------------------------------------------------------------------------------

# Public names of the adapter classes that do no I/O of their own (or construct an object).
SYNC_ONLY = {
    "SessionMemoryMiddleware": {"name"},
    "SessionChatMessageHistory": {"from_manager"},
    "SessionToolkit": {"source"},
    "SessionMemory": {
        "bind",
        "class_name",
        "from_defaults",
        "from_manager",
        "from_string",
        "llm",
        "session",
        "to_string",
    },
    "SessionChatStore": {"class_name", "manager"},
    "SessionToolSpec": set(),
}
# The frameworks' names for a twin that is not ``a`` + the sync name.
TWIN_NAMES = {
    ("SessionChatMessageHistory", "messages"): "aget_messages",
    ("SessionChatStore", "add_message"): "async_add_message",
}


def adapter_classes() -> list[type]:
    import langchain_sessions
    import llamaindex_sessions

    return [
        langchain_sessions.SessionMemoryMiddleware,
        langchain_sessions.SessionChatMessageHistory,
        langchain_sessions.SessionToolkit,
        llamaindex_sessions.SessionMemory,
        llamaindex_sessions.SessionChatStore,
        llamaindex_sessions.SessionToolSpec,
    ]


def public_methods(cls: type) -> set[str]:
    """Public functions and properties that the adapter class (not its framework base) defines."""
    names = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith(ADAPTERS):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or isinstance(value, type) or hasattr(BaseModel, name):
                continue
            if inspect.isfunction(value) or isinstance(value, (property, classmethod, staticmethod)):
                names.add(name)
    return names


@pytest.mark.parametrize("cls", adapter_classes(), ids=lambda cls: cls.__name__)
def test_every_public_io_method_has_an_async_twin(cls: type) -> None:
    names = public_methods(cls)
    twins = {"a" + name for name in names} | set(TWIN_NAMES.values())
    # An async method is no sync one, whatever its name (a framework's own, as to_tool_list_async).
    twins |= {name for name in names if inspect.iscoroutinefunction(getattr(cls, name, None))}
    sync = {name for name in names if name not in twins} - SYNC_ONLY[cls.__name__]
    assert sync, "the class has no sync I/O method: the check would prove nothing"
    missing = []
    for name in sorted(sync):
        twin = TWIN_NAMES.get((cls.__name__, name), "a" + name)
        if not inspect.iscoroutinefunction(getattr(cls, twin, None)):
            missing.append(f"{name} -> {twin}")
    assert missing == []
