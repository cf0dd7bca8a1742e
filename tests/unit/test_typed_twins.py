"""The async twins are visible to type checkers: ``core/sessions_core/_twins.py`` declares them,
written by ``scripts/generate_twins.py`` from the ``@io`` methods, and each class inherits its
``<Name>Twins`` class under ``TYPE_CHECKING`` (``object`` at run time)."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

import sessions_core
from sessions_core import _twins
from sessions_core._async import AsyncTwins

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "generate_twins.py"
STALE = "core/sessions_core/_twins.py is stale: run python scripts/generate_twins.py"


@functools.cache
def generator() -> ModuleType:
    """``scripts/generate_twins.py`` as a module."""
    spec = importlib.util.spec_from_file_location("generate_twins", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_generated_file_is_current():
    written = (ROOT / "core" / "sessions_core" / "_twins.py").read_text(encoding="utf-8")
    assert generator().render() == written, STALE


def test_the_check_option_says_whether_the_file_is_current():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, STALE + "\n" + done.stdout + done.stderr


def _runtime_classes() -> list[type]:
    """Every class of ``sessions_core`` deriving from ``AsyncTwins`` (in the modules imported)."""
    found: list[type] = []
    pending: list[type] = [AsyncTwins]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub not in found and sub.__module__.startswith("sessions_core.") and not sub.__qualname__.count("<"):
                found.append(sub)
                pending.append(sub)
    return found


def _generated_twins(cls: type) -> set[str]:
    """The twins ``AsyncTwins`` made for ``cls`` (not hand-written ones)."""
    body = vars(cls)
    return {
        name
        for name, value in body.items()
        if name.startswith("a") and name[1:] in body and getattr(value, "__wrapped__", None) is body[name[1:]]
    }


def _declared(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if inspect.iscoroutinefunction(value)}


def test_every_runtime_twin_has_a_typed_declaration_and_back():
    classes = generator().collect(generator().sources())[0]
    for twin_class in classes:
        importlib.import_module(twin_class.module)
    runtime = {cls.__name__: cls for cls in _runtime_classes() if _generated_twins(cls)}
    typed = {name.removesuffix("Twins"): getattr(_twins, name) for name in _twins.__all__}
    assert sorted(runtime) == sorted(typed), STALE
    for name, cls in runtime.items():
        assert _generated_twins(cls) == _declared(typed[name]), f"{name}: {STALE}"
        module = sys.modules[cls.__module__]
        assert getattr(module, f"{name}Twins") is object, f"{module.__name__}: {name}Twins must be object at run time"
        tree = ast.parse(inspect.getsource(module))
        (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
        bases = [ast.unparse(base) for base in node.bases]
        assert f"{name}Twins" in bases, f"class {name} must inherit {name}Twins (from ._twins under TYPE_CHECKING)"
        for twin in _declared(typed[name]):
            declared, method = inspect.signature(getattr(typed[name], twin)), inspect.signature(vars(cls)[twin[1:]])
            assert declared == method, f"{name}.{twin}: {declared} != {method}: {STALE}"


@pytest.mark.parametrize("cls", [sessions_core.Session, sessions_core.SessionManager], ids=lambda c: c.__name__)
def test_each_async_method_is_typed_generated_or_hand_written(cls):
    """Every coroutine (or async generator) method a type checker should see is either written in
    a class body of the MRO or declared in the ``<Name>Twins`` of one of those classes."""
    runtime = {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and (inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value))
    }
    typed: set[str] = set()
    for klass in cls.__mro__:
        typed |= {name for name in vars(klass) if name in runtime and name not in _generated_twins(klass)}
        twins = getattr(_twins, f"{klass.__name__}Twins", None)
        typed |= _declared(twins) if twins is not None else set()
    assert runtime == typed


GOOD = """
from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from llama_index.core.llms import ChatMessage

from langchain_sessions import SessionChatMessageHistory, SessionMemoryMiddleware
from llamaindex_sessions import SessionChatStore, SessionMemory
from sessions_core import (
    AppendResult, Compaction, ContextBlock, SearchResults, Session, SessionInfo, SessionManager, SessionMessage,
)

HI = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}


def sync_use() -> None:
    session = Session(":memory:").for_session("s1").with_context("notes")
    result: AppendResult = session.append_message(HI)
    history: list[SessionMessage] = session.get_history()
    hits: SearchResults = session.search("hi", limit=5)
    leaf: SessionMessage | None = session.get_latest_leaf()
    block: ContextBlock | None = session.get_context_block("notes")
    manager = SessionManager(":memory:")
    info: SessionInfo = manager.create("first")
    listed: list[SessionInfo] = manager.list_sessions()
    message_id: str = manager.append(info.id, HI)
    print(result, history, hits, leaf, block, listed, message_id)
    session.close()
    manager.close()


async def async_use() -> None:
    session = Session().for_session("s1")
    result: AppendResult = await session.aappend_message(HI, source="test")
    results: list[AppendResult] = await session.aappend_messages([HI], None)
    history: list[SessionMessage] = await session.aget_history(raw=True)
    found: SessionMessage | None = await session.aget_message("m1")
    hits: SearchResults = await session.asearch("hi", limit=3, mode="text")
    compactions: list[Compaction] = await session.aget_compactions()
    tokens: int = await session.aget_token_estimate()
    removed: bool = await session.aremove_context("notes")
    streamed: list[SessionMessage] = [message async for message in session.ahistory(newest_first=True)]
    manager = SessionManager()
    info: SessionInfo = await manager.acreate("first", model="m")
    again: SessionInfo | None = await manager.aget(info.id)
    listed: list[SessionInfo] = await manager.alist_sessions()
    old_listed: list[SessionInfo] = await manager.alist()
    message_id: str = await manager.aappend(info.id, HI)
    count: int = await manager.aget_message_count(info.id)
    print(result, results, history, found, hits, compactions, tokens, removed, streamed)
    print(again, listed, old_listed, message_id, count)

    chat = SessionChatMessageHistory(session)
    chat.add_messages([HumanMessage("hi")])
    await chat.aadd_messages([AIMessage("hello")])
    messages: list[BaseMessage] = await chat.aget_messages()
    middleware = SessionMemoryMiddleware(manager, default_session_id="s1")

    memory = SessionMemory(session)
    got: list[ChatMessage] = memory.get()
    await memory.aput(ChatMessage(role="user", content="hi"))
    agot: list[ChatMessage] = await memory.aget()
    store = SessionChatStore(manager)
    stored: list[ChatMessage] = store.get_messages("s1")
    astored: list[ChatMessage] = await store.aget_messages("s1")
    print(messages, middleware, got, agot, stored, astored)

    await session.aclose()
    await manager.aclose()
"""

BAD = """
from __future__ import annotations

from sessions_core import Session, SessionManager


async def wrong() -> None:
    session = Session()
    history: int = await session.aget_history()  # expect-error
    await session.aappend_message({}, unknown=1)  # expect-error
    await session.awith_context("notes")  # expect-error
    name: str = await SessionManager().aget("s1")  # expect-error
    print(history, name)
"""


def test_pyright_sees_the_twins(tmp_path):
    pyright = shutil.which("pyright") or shutil.which("pyright", path=str(Path(sys.executable).parent))
    if pyright is None:
        pytest.skip("pyright is not installed (pip install 'session-memory[test]')")
    good, bad = tmp_path / "good_use.py", tmp_path / "bad_use.py"
    good.write_text(textwrap.dedent(GOOD), encoding="utf-8")
    bad.write_text(textwrap.dedent(BAD), encoding="utf-8")
    done = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", sys.executable, str(good), str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,  # pyproject.toml's [tool.pyright] settings apply
        timeout=300,
    )
    report = json.loads(done.stdout)
    errors: dict[str, list[tuple[int, str]]] = {good.name: [], bad.name: []}
    for diagnostic in report["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            line = diagnostic["range"]["start"]["line"] + 1
            errors[Path(diagnostic["file"]).name].append((line, diagnostic["message"]))
    assert errors[good.name] == [], "\n".join(f"good_use.py:{line}: {message}" for line, message in errors[good.name])
    expected = [n for n, line in enumerate(bad.read_text().splitlines(), 1) if line.endswith("# expect-error")]
    assert sorted({line for line, _ in errors[bad.name]}) == expected, errors[bad.name]
