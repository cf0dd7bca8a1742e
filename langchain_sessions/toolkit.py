"""The memory tools as LangChain ``StructuredTool``s, and ``SessionToolkit``."""

from __future__ import annotations

import json
import re
import threading
from typing import Annotated, Any, Literal, Mapping, Optional

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, BaseToolkit, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model

from sessions_core import SessionsError, Tool

from ._source import SessionSource, SessionSourceLike

try:  # ToolRuntime comes with langchain (LangGraph); without it tools read the run config only
    from langchain.tools import ToolRuntime
except ImportError:  # pragma: no cover - langchain-core alone
    ToolRuntime = None  # type: ignore[assignment,misc]

__all__ = ["SessionToolkit", "args_schema", "langchain_tools"]


class _EnumHint:
    """Shows ``enum`` in the JSON Schema without enforcing it: the tool checks the value itself
    and answers with its own error message (``Error: block "x" not found``)."""

    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler(core_schema)
        schema["enum"] = list(self.values)
        return schema

    def __repr__(self) -> str:
        return f"_EnumHint({self.values!r})"


_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
_MODELS: dict[str, type[BaseModel]] = {}
_MODELS_LOCK = threading.Lock()


def _class_name(name: str) -> str:
    return "".join(piece.capitalize() for piece in re.split(r"[^0-9A-Za-z]+", name) if piece) or "Args"


def _annotation(name: str, schema: Mapping[str, Any], advisory: bool) -> Any:
    kind = schema.get("type")
    if "enum" in schema:
        values = list(schema["enum"])
        if advisory and kind == "string":
            return Annotated[str, _EnumHint(values)]
        return Literal[tuple(values)]  # type: ignore[valid-type]
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return _model(name, schema)
    if kind == "object":
        return dict[str, Any]
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(name + "Item", items, False)] if isinstance(items, Mapping) else list[Any]
    if isinstance(kind, str) and kind in _SCALARS:
        return _SCALARS[kind]
    return Any


def _model(name: str, schema: Mapping[str, Any], advisory: frozenset[str] = frozenset()) -> type[BaseModel]:
    required = set(schema.get("required", ()))
    fields: dict[str, Any] = {}
    for prop, sub in schema.get("properties", {}).items():
        annotation = _annotation(name + _class_name(prop), sub, prop in advisory)
        description = sub.get("description")
        if prop in required:
            fields[prop] = (annotation, Field(..., description=description))
        else:
            fields[prop] = (Optional[annotation], Field(None, description=description))
    return create_model(_class_name(name), __config__=ConfigDict(extra="ignore"), **fields)


def args_schema(tool: Tool) -> type[BaseModel]:
    """A pydantic model of a core tool's JSON Schema (cached per name and schema). Enums the
    tool checks itself are shown to the model but not enforced."""
    key = json.dumps([tool.name, tool.parameters, sorted(tool.advisory_enums)], sort_keys=True, default=str)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _model(tool.name + "_args", tool.parameters, tool.advisory_enums)
            _MODELS[key] = model
        return model


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {k: _plain(v) for k, v in value.model_dump(exclude_none=True).items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in kwargs.items() if v is not None}


def _run_ids(runtime: Any, config: Any) -> tuple[Any, Any, Any]:
    """(context, config, thread id) of a tool call, from LangGraph's runtime or the run config."""
    if runtime is not None:
        config = getattr(runtime, "config", None) or config
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        return getattr(runtime, "context", None), config, thread
    return None, config, None


def _outcome(text: str) -> str:
    if text.startswith("Error:"):
        raise ToolException(text)
    return text


def _make_tool(tool: Tool, source: SessionSource, schema: type[BaseModel]) -> StructuredTool:
    name = tool.name

    def _pick(tools: list[Tool]) -> Tool:
        for candidate in tools:
            if candidate.name == name:
                return candidate
        raise ToolException(f"Error: the tool {name} is not available in this session")

    def _session_id(runtime: Any, config: Any) -> str:
        context, config, thread = _run_ids(runtime, config)
        try:
            return source.resolve_id(context=context, config=config, thread_id=thread)
        except SessionsError as error:
            raise ToolException(f"Error: {error}") from None

    if ToolRuntime is not None:

        def func(runtime: ToolRuntime = None, config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[assignment]
            session_id = _session_id(runtime, config)
            return _outcome(_pick(source.tools(session_id)).invoke(_arguments(kwargs)))

        async def coroutine(runtime: ToolRuntime = None, config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[assignment]
            session_id = _session_id(runtime, config)
            return _outcome(await _pick(await source.atools(session_id)).ainvoke(_arguments(kwargs)))

    else:  # pragma: no cover - langchain-core alone

        def func(config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[misc]
            return _outcome(_pick(source.tools(_session_id(None, config))).invoke(_arguments(kwargs)))

        async def coroutine(config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[misc]
            tools = await source.atools(_session_id(None, config))
            return _outcome(await _pick(tools).ainvoke(_arguments(kwargs)))

    return StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=name,
        description=tool.description,
        args_schema=schema,
        infer_schema=False,
        handle_tool_error=True,
    )


def langchain_tools(tools: list[Tool], source: SessionSource) -> list[BaseTool]:
    """``StructuredTool``s for core tools; each call runs on the session of its run."""
    return [_make_tool(tool, source, args_schema(tool)) for tool in tools]


class SessionToolkit(BaseToolkit):
    """The memory tools of a session as LangChain tools.

    ``SessionToolkit(session)`` binds every call to that session. With a ``SessionManager``
    (which adds ``session_search``) or a factory ``session_id -> Session``, each call finds its
    session at run time: the ``context_key`` field of the LangGraph context, then
    ``config["configurable"]["session_id"]``, the ``thread_id``, then ``default_session_id``.
    A tool never raises into the agent loop: a failure is an error ``ToolMessage``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    context_key: Optional[str] = None
    default_session_id: Optional[str] = None
    _source: SessionSource = PrivateAttr()

    def __init__(
        self,
        session_or_manager: SessionSourceLike,
        *,
        context_key: str | None = None,
        default_session_id: str | None = None,
    ) -> None:
        super().__init__(context_key=context_key, default_session_id=default_session_id)
        self._source = SessionSource(
            session_or_manager, context_key=context_key, default_session_id=default_session_id
        )

    @property
    def source(self) -> SessionSource:
        return self._source

    def get_tools(self) -> list[BaseTool]:
        """``set_context`` / ``load_context`` / ``unload_context`` / ``search_context`` as the
        blocks allow, and ``session_search`` with a manager."""
        return langchain_tools(self._source.template_tools(), self._source)
