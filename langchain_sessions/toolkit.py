"""The memory tools as LangChain ``StructuredTool``s, and ``SessionToolkit``."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, BaseToolkit, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, PrivateAttr

from sessions_core import SessionsError, Tool
from sessions_core.integration import async_twin, run_in_thread, tool_args_model

from ._source import SessionSource, SessionSourceLike

try:  # ToolRuntime comes with langchain (LangGraph); without it tools read the run config only
    from langchain.tools import ToolRuntime
except ImportError:  # pragma: no cover - langchain-core alone
    ToolRuntime = None  # type: ignore[assignment,misc]

__all__ = ["SessionToolkit", "langchain_tools"]


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


def _make_tool(tool: Tool, source: SessionSource) -> StructuredTool:
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
            call_id = getattr(runtime, "tool_call_id", None)  # kept with the block version it writes
            return _outcome(_pick(source.tools(session_id)).invoke(_arguments(kwargs), tool_call_id=call_id))

        async def coroutine(runtime: ToolRuntime = None, config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[assignment]
            return await run_in_thread(func, runtime, config, **kwargs)

    else:  # pragma: no cover - langchain-core alone

        def func(config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[misc]
            return _outcome(_pick(source.tools(_session_id(None, config))).invoke(_arguments(kwargs)))

        async def coroutine(config: RunnableConfig = None, **kwargs: Any) -> str:  # type: ignore[misc]
            return await run_in_thread(func, config, **kwargs)

    return StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=name,
        description=tool.description,
        args_schema=tool_args_model(tool),
        infer_schema=False,
        handle_tool_error=True,
    )


def langchain_tools(tools: list[Tool], source: SessionSource) -> list[BaseTool]:
    """``StructuredTool``s for core tools; each call runs on the session of its run."""
    return [_make_tool(tool, source) for tool in tools]


class SessionToolkit(BaseToolkit):
    """The memory tools of a session as LangChain tools.

    ``SessionToolkit(session)`` binds every call to that session. With a ``SessionManager``
    (which adds ``session_search``) or a factory ``session_id -> Session``, each call finds its
    session at run time: the ``context_key`` field of the LangGraph context, then
    ``config["configurable"]["session_id"]``, the ``thread_id``, then ``default_session_id``.
    A tool never raises into the agent loop: a failure is an error ``ToolMessage``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    context_key: str | None = None
    default_session_id: str | None = None
    _source: SessionSource = PrivateAttr()

    def __init__(
        self,
        session_or_manager: SessionSourceLike,
        *,
        context_key: str | None = None,
        default_session_id: str | None = None,
    ) -> None:
        # This class's fields, which pydantic's __init__ takes (a type checker knows only the base's).
        fields = {"context_key": context_key, "default_session_id": default_session_id}
        super().__init__(**fields)
        self._source = SessionSource(session_or_manager, context_key=context_key, default_session_id=default_session_id)

    @property
    def source(self) -> SessionSource:
        return self._source

    def get_tools(self) -> list[BaseTool]:
        """``set_context`` / ``load_context`` / ``unload_context`` / ``search_context`` as the
        blocks allow, and ``session_search`` with a manager."""
        return langchain_tools(self._source.template_tools(), self._source)

    aget_tools = async_twin(get_tools)
