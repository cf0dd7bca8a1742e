"""``SessionToolSpec``: the session's memory tools as LlamaIndex ``FunctionTool``s."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Type

from llama_index.core.bridge.pydantic import BaseModel, ConfigDict, Field, create_model
from llama_index.core.tools import FunctionTool, ToolMetadata
from llama_index.core.tools.tool_spec.base import SPEC_FUNCTION_TYPE, BaseToolSpec

from sessions_core import Session, SessionManager, Tool

__all__ = ["SessionToolSpec", "to_function_tool"]

_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": Dict[str, Any],
    "array": List[Any],
}


def _schema_model(tool: Tool) -> Type[BaseModel]:
    """A pydantic model for ``fn_schema`` whose JSON Schema is exactly the tool's."""
    parameters = tool.parameters
    required = set(parameters.get("required", ()))
    fields: dict[str, Any] = {}
    for name, spec in parameters.get("properties", {}).items():
        annotation = _PY_TYPES.get(spec.get("type"), Any)
        description = spec.get("description")
        if name in required:
            fields[name] = (annotation, Field(..., description=description))
        else:
            fields[name] = (Optional[annotation], Field(None, description=description))
    schema = {"title": tool.name, **copy.deepcopy(parameters)}

    class _Exact(BaseModel):
        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    return create_model(tool.name, __base__=_Exact, **fields)


def to_function_tool(tool: Tool) -> FunctionTool:
    """A core ``Tool`` as a ``FunctionTool`` with its exact JSON Schema and both a sync and
    an async function. The tool answers with a string; failures come back as ``Error: ...``."""

    def call(**kwargs: Any) -> str:
        return tool.invoke(kwargs)

    async def acall(**kwargs: Any) -> str:
        return await tool.ainvoke(kwargs)

    call.__name__ = tool.name
    acall.__name__ = "a" + tool.name
    metadata = ToolMetadata(name=tool.name, description=tool.description, fn_schema=_schema_model(tool))
    return FunctionTool(fn=call, async_fn=acall, metadata=metadata)


class SessionToolSpec(BaseToolSpec):
    """The model's memory tools for a ``Session`` (``set_context``, ``load_context``,
    ``unload_context``, ``search_context``, as its blocks allow), a ``SessionManager``
    (``session_search`` across its sessions; with ``session_id``, that session's tools too),
    or a ``SessionMemory`` (its session).

    ``to_tool_list()`` reads the blocks each time it is called, so labels and loaded skills in
    the tool descriptions are current. Each method of the same name runs the tool directly:
    ``spec.set_context(label="memory", content="...")``.
    """

    spec_functions: List[SPEC_FUNCTION_TYPE] = [
        ("set_context", "aset_context"),
        ("load_context", "aload_context"),
        ("unload_context", "aunload_context"),
        ("search_context", "asearch_context"),
        ("session_search", "asession_search"),
    ]

    def __init__(self, session_or_manager: Any, *, session_id: Optional[str] = None) -> None:
        target = getattr(session_or_manager, "session", session_or_manager)  # a SessionMemory
        if not isinstance(target, (Session, SessionManager)):
            raise TypeError(f"expected a Session, SessionManager or SessionMemory, not {type(target).__name__}")
        if session_id is not None and not isinstance(target, SessionManager):
            raise TypeError("session_id goes with a SessionManager")
        self.target = target
        self.session_id = session_id

    def core_tools(self) -> list[Tool]:
        """The framework-neutral tools, read now."""
        if isinstance(self.target, Session):
            return self.target.tools()
        if self.session_id is not None:
            return self.target.session_tools(self.session_id)
        return self.target.tools()

    def to_tool_list(
        self,
        spec_functions: Optional[List[SPEC_FUNCTION_TYPE]] = None,
        func_to_metadata_mapping: Optional[Dict[str, ToolMetadata]] = None,
    ) -> List[FunctionTool]:
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

    def _run(self, name: str, kwargs: dict[str, Any]) -> str:
        tool = next((t for t in self.core_tools() if t.name == name), None)
        return tool.invoke(kwargs) if tool else f"Error: tool {name!r} is not available for these blocks"

    async def _arun(self, name: str, kwargs: dict[str, Any]) -> str:
        from sessions_core._async import run_in_thread

        return await run_in_thread(self._run, name, kwargs)

    def set_context(self, **kwargs: Any) -> str:
        """Write to a context block."""
        return self._run("set_context", kwargs)

    async def aset_context(self, **kwargs: Any) -> str:
        return await self._arun("set_context", kwargs)

    def load_context(self, **kwargs: Any) -> str:
        """Load a skill document into context."""
        return self._run("load_context", kwargs)

    async def aload_context(self, **kwargs: Any) -> str:
        return await self._arun("load_context", kwargs)

    def unload_context(self, **kwargs: Any) -> str:
        """Unload a loaded skill."""
        return self._run("unload_context", kwargs)

    async def aunload_context(self, **kwargs: Any) -> str:
        return await self._arun("unload_context", kwargs)

    def search_context(self, **kwargs: Any) -> str:
        """Search a searchable context block."""
        return self._run("search_context", kwargs)

    async def asearch_context(self, **kwargs: Any) -> str:
        return await self._arun("search_context", kwargs)

    def session_search(self, **kwargs: Any) -> str:
        """Search past conversations across sessions."""
        return self._run("session_search", kwargs)

    async def asession_search(self, **kwargs: Any) -> str:
        return await self._arun("session_search", kwargs)
