"""langchain-tests' standard tool suites over every tool the adapter makes.

``ToolsUnitTests`` and ``ToolsIntegrationTests`` (langchain-tests 1.1) run against each memory
tool as the toolkit gives it (a ``Session`` and a ``SessionManager``, which adds
``session_search``) and as ``SessionMemoryMiddleware`` registers it. The integration suite needs
no network here: the tools work on a local store.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from langchain_sessions import SessionMemoryMiddleware, SessionToolkit
from sessions_core import Session, SessionManager


class Skills:
    """A skill provider held in memory."""

    def __init__(self) -> None:
        self.docs = {"tea": "Brew green tea at 80 C."}

    def get(self) -> str:
        return "\n".join(f"- {key}" for key in self.docs)

    def load(self, key: str) -> str | None:
        return self.docs.get(key)


class Docs:
    """A searchable provider held in memory."""

    def get(self) -> str:
        return "A few notes about tea."

    def search(self, query: str) -> str | None:
        return "Tea is a drink." if "tea" in query.lower() else None


def _configure(target: Any) -> Any:
    return (
        target.with_context("memory", description="Facts about the user", max_tokens=200)
        .with_context("skills", description="How-tos", provider=Skills())
        .with_context("docs", description="Reference notes", provider=Docs())
    )


EXAMPLES = {
    "set_context": {"label": "memory", "content": "The user likes tea."},
    "load_context": {"label": "skills", "key": "tea"},
    "unload_context": {"label": "skills", "key": "tea"},
    "search_context": {"label": "docs", "query": "tea"},
    "session_search": {"query": "tea"},
}


def _session_tools() -> list[BaseTool]:
    return SessionToolkit(_configure(Session(":memory:").for_session("u1"))).get_tools()


def _manager_tools() -> list[BaseTool]:
    return SessionToolkit(_configure(SessionManager(":memory:")), default_session_id="u1").get_tools()


def _middleware_tools() -> list[BaseTool]:
    return SessionMemoryMiddleware(_configure(SessionManager(":memory:")), default_session_id="u1").tools


SOURCES = {"Session": _session_tools, "Manager": _manager_tools, "Middleware": _middleware_tools}
EXPECTED = {
    "Session": ["set_context", "load_context", "unload_context", "search_context"],
    "Manager": [*EXAMPLES],
    "Middleware": [*EXAMPLES],
}


def _suite(base: type, source: str, name: str) -> type:
    def tool_constructor(self: Any) -> BaseTool:
        cache = self.__class__.__dict__.get("_tool")
        if cache is None:
            cache = next(tool for tool in SOURCES[source]() if tool.name == name)
            type(self)._tool = cache
        return cache

    def tool_invoke_params_example(self: Any) -> dict[str, Any]:
        return EXAMPLES[name]

    namespace: dict[str, Any] = {
        "tool_constructor": property(tool_constructor),
        "tool_invoke_params_example": property(tool_invoke_params_example),
        "__module__": __name__,
        # Upstream runs its async tests with asyncio_mode = "auto"; a class mark does the same
        # here (and pytest-asyncio's note about the sync tests under it is silenced).
        "pytestmark": [pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The test <Function .* is marked with")],
    }
    return type(f"Test{source}{''.join(part.title() for part in name.split('_'))}{base.__name__}", (base,), namespace)


for _source, _names in EXPECTED.items():
    for _name in _names:
        for _base in (ToolsUnitTests, ToolsIntegrationTests):
            _cls = _suite(_base, _source, _name)
            globals()[_cls.__name__] = _cls


@pytest.mark.parametrize("source", SOURCES)
def test_every_tool_is_covered(source):
    assert [tool.name for tool in SOURCES[source]()] == EXPECTED[source]
