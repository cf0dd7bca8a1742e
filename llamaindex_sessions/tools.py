"""``SessionToolSpec``: the session's memory tools as LlamaIndex ``FunctionTool``s."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.tools import FunctionTool, ToolMetadata
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec

from sessions_core import InvalidInputError, Session, SessionManager, Tool
from sessions_core.integration import async_twin, tool_args_model

__all__ = ["SessionToolSpec", "to_function_tool"]


def to_function_tool(tool: Tool) -> FunctionTool:
    """A core ``Tool`` as a ``FunctionTool`` with its exact JSON Schema and both a sync and
    an async function. The tool answers with a string; failures come back as ``Error: ...``."""

    def call(**kwargs: Any) -> str:
        return tool.invoke(kwargs)

    async def acall(**kwargs: Any) -> str:
        return await tool.ainvoke(kwargs)

    call.__name__ = tool.name
    acall.__name__ = "a" + tool.name
    return FunctionTool(fn=call, async_fn=acall, metadata=_metadata(tool))


def _metadata(tool: Tool) -> ToolMetadata:
    fn_schema = tool_args_model(tool, exact_json_schema=True)
    return ToolMetadata(name=tool.name, description=tool.description, fn_schema=fn_schema)


def _spec_name(fn_name: str, spec_functions: list[SPEC_FUNCTION_TYPE]) -> str:
    """The tool (sync function) name of ``fn_name``, which may name either of a pair."""
    for spec in spec_functions:
        names = spec if isinstance(spec, tuple) else (spec,)
        if fn_name in names:
            return names[0]
    known = ", ".join(name for spec in spec_functions for name in (spec if isinstance(spec, tuple) else (spec,)))
    raise InvalidInputError(f"SessionToolSpec has no function {fn_name!r} (it has {known})")


def _runs(name: str, doc: str) -> Callable[..., str]:
    """A ``SessionToolSpec`` method that runs the core tool ``name`` on its keyword arguments."""

    def run(self: SessionToolSpec, **kwargs: Any) -> str:
        return self._run(name, kwargs)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run


class SessionToolSpec(BaseToolSpec):
    """The model's memory tools for a ``Session`` (``set_context``, ``load_context``,
    ``unload_context``, ``search_context``, as its blocks allow), a ``SessionManager``
    (``session_search`` across its sessions; with ``session_id``, that session's tools too),
    or a ``SessionMemory`` (its session); a SQLite path or ``postgresql://`` URL opens a
    ``SessionManager`` there.

    ``to_tool_list()`` reads the blocks each time it is called, so labels and loaded skills in
    the tool descriptions are current; in async code build them with ``await ato_tool_list()``
    (or LlamaIndex's ``to_tool_list_async``), which reads the store off the event loop. Each
    method of the same name runs the tool directly:
    ``spec.set_context(label="memory", content="...")``.
    """

    spec_functions: list[SPEC_FUNCTION_TYPE] = [
        ("set_context", "aset_context"),
        ("load_context", "aload_context"),
        ("unload_context", "aunload_context"),
        ("search_context", "asearch_context"),
        ("session_search", "asession_search"),
    ]

    def __init__(self, session_or_manager: Any, *, session_id: str | None = None) -> None:
        target = getattr(session_or_manager, "session", session_or_manager)  # a SessionMemory
        if isinstance(target, (str, Path)):
            target = SessionManager(target)
        if not isinstance(target, (Session, SessionManager)):
            raise TypeError(
                "SessionToolSpec takes a Session, a SessionManager (optionally with session_id=), a SessionMemory,"
                f" a SQLite path or a postgresql:// URL, not {type(target).__name__}"
            )
        if session_id is not None and not isinstance(target, SessionManager):
            raise InvalidInputError(
                "session_id= picks a session of a SessionManager (or of the store at a path or URL);"
                " a Session or SessionMemory already is one session: pass it without session_id="
            )
        self.target = target
        self.session_id = session_id

    def core_tools(self) -> list[Tool]:
        """The framework-neutral tools, read now."""
        if isinstance(self.target, Session):
            return self.target.tools()
        if self.session_id is not None:
            return self.target.session_tools(self.session_id)
        return self.target.tools()

    acore_tools = async_twin(core_tools)

    def to_tool_list(
        self,
        spec_functions: list[SPEC_FUNCTION_TYPE] | None = None,
        func_to_metadata_mapping: dict[str, ToolMetadata] | None = None,
    ) -> list[FunctionTool]:
        """``FunctionTool``s for the tools that apply now (optionally only those named in
        ``spec_functions``); ``func_to_metadata_mapping`` overrides a tool's metadata."""
        wanted = None
        if spec_functions is not None:
            wanted = {spec[0] if isinstance(spec, tuple) else spec for spec in spec_functions}
        tools = []
        for tool in self.core_tools():
            if wanted is not None and tool.name not in wanted:
                continue
            function_tool = to_function_tool(tool)
            override = (func_to_metadata_mapping or {}).get(tool.name)
            if override is not None:
                function_tool = FunctionTool(fn=function_tool.fn, async_fn=function_tool.async_fn, metadata=override)
            tools.append(function_tool)
        return tools

    ato_tool_list = async_twin(to_tool_list)
    # LlamaIndex's own name for it: BaseToolSpec's is a bare asyncio.to_thread, which would await
    # an async context provider on a private loop instead of the caller's.
    to_tool_list_async = ato_tool_list

    def get_fn_schema_from_fn_name(
        self, fn_name: str, spec_functions: list[SPEC_FUNCTION_TYPE] | None = None
    ) -> type[BaseModel] | None:
        """The arguments model of the tool behind ``fn_name`` (``set_context`` or its async
        ``aset_context``): the tool's exact JSON Schema. ``ValueError`` when this spec has no
        such function or the session's blocks do not offer that tool now."""
        return self.get_metadata_from_fn_name(fn_name, spec_functions).fn_schema

    def get_metadata_from_fn_name(
        self, fn_name: str, spec_functions: list[SPEC_FUNCTION_TYPE] | None = None
    ) -> ToolMetadata:
        """The ``ToolMetadata`` ``to_tool_list`` gives the tool behind ``fn_name`` (name,
        description, schema); ``ValueError`` as :meth:`get_fn_schema_from_fn_name`."""
        name = _spec_name(fn_name, spec_functions or self.spec_functions)
        tools = self.core_tools()
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            offered = ", ".join(t.name for t in tools) or "none"
            raise InvalidInputError(f"tool {name!r} is not available for these blocks (available now: {offered})")
        return _metadata(tool)

    aget_fn_schema_from_fn_name = async_twin(get_fn_schema_from_fn_name)
    aget_metadata_from_fn_name = async_twin(get_metadata_from_fn_name)

    def _run(self, name: str, kwargs: dict[str, Any]) -> str:
        tool = next((t for t in self.core_tools() if t.name == name), None)
        return tool.invoke(kwargs) if tool else f"Error: tool {name!r} is not available for these blocks"

    set_context = _runs("set_context", "Write to a context block.")
    aset_context = async_twin(set_context)
    load_context = _runs("load_context", "Load a skill document into context.")
    aload_context = async_twin(load_context)
    unload_context = _runs("unload_context", "Unload a loaded skill.")
    aunload_context = async_twin(unload_context)
    search_context = _runs("search_context", "Search a searchable context block.")
    asearch_context = async_twin(search_context)
    session_search = _runs("session_search", "Search past conversations across sessions.")
    asession_search = async_twin(session_search)
