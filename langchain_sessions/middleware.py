"""``SessionMemoryMiddleware``: durable, searchable, self-edited memory for ``create_agent``."""

from __future__ import annotations

import functools
import logging
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Annotated, Any, TypeVar, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ToolCallRequest,
)
from langchain.agents.middleware.types import ModelCallResult, PrivateStateAttr
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from typing_extensions import NotRequired

from sessions_core import LATEST, create_compact_function
from sessions_core.integration import (
    COMPACTION_ID_PREFIX,
    CallView,
    Incoming,
    TurnService,
    prefer_async,
    run_in_thread,
    summary_message,
    view_segments,
)

from ._source import SessionSource, SessionSourceLike
from .conversion import source_id, to_langchain_messages, to_session_message
from .summarizer import ChatModelSummarizer, as_summarize
from .toolkit import langchain_tools

__all__ = ["SessionMemoryMiddleware", "SessionMemoryState"]

logger = logging.getLogger("langchain_sessions")

_Middleware = TypeVar("_Middleware", bound="SessionMemoryMiddleware")


class SessionMemoryState(AgentState):
    """The agent state as earlier versions declared it (the frozen prompt is no longer kept in
    the state, so that the middleware adds no graph step; the field stays for old checkpoints)."""

    session_memory_prompt: NotRequired[Annotated[str | None, PrivateStateAttr]]


class SessionMemoryMiddleware(AgentMiddleware):
    """Give a ``create_agent`` agent a session's memory: its history, its context blocks in the
    system message, its memory tools, and compaction with the agent's own model.

    ``session_or_manager`` is a ``Session`` (every run uses it), a ``SessionManager`` (a
    registered session per run, plus the ``session_search`` tool), a function
    ``session_id -> Session``, or a store's path or URL (``"chat.db"``: a ``SessionManager`` over
    it). Nothing is read from the store until the first run; the memory tools are registered
    only when the blocks (or a manager) have some, and ``memory_tools=False`` leaves them out
    (for a model without tool calling). A run's session id is the ``context_key`` field of the agent's
    context, else ``config["configurable"]["session_id"]``, else the ``thread_id``, else
    ``default_session_id``.

    Per run: the context blocks are rendered once, when it starts, and appended to the system
    message (the agent's own system prompt is kept); the text stays fixed for the run, so the
    model's prefix cache holds across the tool loop, and a block the model writes shows in the
    next run.

    History: the model sees the stored branch that leads to the first message of the graph
    state, then the state. With no checkpointer that is the whole stored history before the new
    input (so the agent remembers across restarts); with one, the thread's state already holds
    it and nothing is shown twice (a new thread on a session used before still sees what came
    before). The stored history is added to the model's input only, never written into the
    state, so it does not stream again to ``stream_mode="messages"`` consumers. Every new
    message, tool calls and results included, is stored once, by id, under the message before it
    in the state (a rewound thread branches in the store): the input and whatever else is new
    before each model call, the model's reply at once, each tool result as it comes (in call
    order; without memory tools, before the next model call). A message another middleware adds
    after the last model call of a run (one ending the run early) is stored when the next run
    calls the model.

    Compaction: when the model's input passes ``compact_at`` tokens (an ``int``; a ``float`` is
    a fraction of ``model.profile["max_input_tokens"]``; ``None`` turns it off), the middle of
    the history is summarised by the agent's model (or ``summarizer``), tagged so that it never
    streams to the user, and stored as an overlay: the model sees head + summary + the last
    ``keep_recent_tokens`` (default: a quarter of the trigger), while the state and the store
    keep every message; later runs read the history compacted. A failed summary leaves the
    history whole. The middleware sets each session's compaction function
    (``Session.on_compaction``) to this one.

    It uses only ``wrap_model_call`` and ``wrap_tool_call``, so it adds no step to the agent's
    graph (a ``recursion_limit`` that fits without it fits with it); ``wrap_tool_call`` only when
    it serves memory tools (the instance's class is then a subclass with the tool hooks), since
    ``create_agent`` adds its ``tools`` node for any middleware with that hook, and stops checking
    for unknown tools other middleware adds. ``redactor`` (a ``sessions_core.PIIRedactor`` or any
    callable ``str -> str``) masks what is stored (``Session.with_redaction``); the model still
    sees the run's own messages as they were. Their async forms run the
    store's work in a worker thread (the model and tool calls stay on the event loop), with
    summaries asked of the model natively async.
    """

    state_schema = SessionMemoryState

    def __init__(
        self,
        session_or_manager: SessionSourceLike,
        *,
        context_key: str | None = None,
        default_session_id: str | None = None,
        load_history: bool = True,
        compact_at: int | float | None = 0.8,
        keep_recent_tokens: int | None = None,
        protect_head: int = 3,
        summarizer: Any = None,
        summary_max_retries: int = 2,
        token_counter: Callable[[list[BaseMessage]], int] | None = None,
        memory_tools: bool = True,
        redactor: Any = None,
        name: str | None = None,
    ) -> None:
        super().__init__()
        self.source = SessionSource(
            session_or_manager, context_key=context_key, default_session_id=default_session_id, redactor=redactor
        )
        self.load_history = load_history
        self.compact_at = compact_at
        self.keep_recent_tokens = keep_recent_tokens
        self.protect_head = protect_head
        if isinstance(summarizer, (BaseChatModel, Runnable)):
            summarizer = ChatModelSummarizer(summarizer, max_retries=summary_max_retries)
        self.summarizer = as_summarize(summarizer) if summarizer is not None else None
        self.summary_max_retries = summary_max_retries
        self.token_counter = token_counter
        self._name = name
        self.memory_tools = memory_tools
        self.tools = langchain_tools(self.source.template_tools(), self.source) if memory_tools else []
        if self.tools and not isinstance(self, _ServesTools):
            self.__class__ = _serving_tools(type(self))
        self._tool_names = {tool.name for tool in self.tools}
        self.turns = TurnService(self.source.target, tools=memory_tools, compaction=self._compact)
        self._tool_lock = threading.Lock()
        self._answers: dict[tuple[str, str], dict[str, list[BaseMessage]]] = {}
        self._converted: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()
        self._last_model: Any = None
        self._warned_profile = False

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

    # -- sessions --------------------------------------------------------------------------

    def _session_id(self, runtime: Any) -> str:
        info = getattr(runtime, "execution_info", None)
        try:
            from langgraph.config import get_config

            config = get_config()
        except Exception:
            config = None
        return self.source.resolve_id(
            context=getattr(runtime, "context", None), config=config, thread_id=getattr(info, "thread_id", None)
        )

    # -- what of the state to store --------------------------------------------------------

    def _incoming(self, messages: Sequence[BaseMessage]) -> list[Incoming]:
        """Every message of the state that has an id, with the parent to store it under (the
        message before it in the state, so a rewound thread branches where it was rewound); the
        turn service stores those it does not know.

        An AI message's invalid tool calls are answered in the store right after it (the error
        ``create_agent`` answers them with, under an id derived from the call), so every stored
        tool call has its result on the path; the copy ``create_agent`` later inserts into the
        state is not stored again. A call the state answers itself keeps that answer."""
        ours = {
            a.tool_call_id: a.content for m in messages if isinstance(m, AIMessage) for a in _invalid_call_answers(m)
        }
        answered = {  # invalid calls the state answers itself (not with create_agent's copy of ours)
            m.tool_call_id for m in messages if isinstance(m, ToolMessage) and ours.get(m.tool_call_id) != m.content
        }
        incoming: list[Incoming] = []
        previous: str | None = None
        repaired: set[str] = set()
        for message in messages:
            if isinstance(message, ToolMessage) and message.tool_call_id in repaired:
                continue  # create_agent's answer to an invalid tool call: ours is stored instead
            ident = source_id(message)
            if not ident or ident.startswith(COMPACTION_ID_PREFIX):
                previous = None
                continue
            incoming.append(_incoming(message, ident, previous if previous is not None else LATEST))
            previous = ident
            if isinstance(message, AIMessage):
                repaired = set()
                for answer in _invalid_call_answers(message):
                    if answer.tool_call_id in answered:
                        continue
                    assert answer.id is not None
                    incoming.append(_incoming(answer, answer.id, previous))
                    previous = answer.id
                    repaired.add(answer.tool_call_id)
            elif not isinstance(message, ToolMessage):
                repaired = set()
        return incoming

    # -- tool results: stored as soon as every earlier call of the same AI message is done ----

    def _tool_results(self, request: Any, result: Any) -> None:
        messages = list(request.state.get("messages", [])) if isinstance(request.state, dict) else []
        caller = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        call_id = request.tool_call.get("id")
        if caller is None or not caller.id or call_id is None:
            return
        answers: list[BaseMessage] = [m for m in _messages_of(result) if isinstance(m, ToolMessage)]
        for answer in answers:
            if not answer.id:
                answer.id = str(uuid.uuid4())
        session_id = self._session_id(request.runtime)
        order = [c["id"] for c in caller.tool_calls]
        with self._tool_lock:
            done = self._answers.setdefault((session_id, caller.id), {})
            done[call_id] = answers
            ready: list[BaseMessage] = []
            for ident in order:
                if ident not in done:
                    break
                ready.extend(done[ident])
            if len(done) == len(order):
                del self._answers[(session_id, caller.id)]
            if ready:
                self.turns.after_call(session_id, self._incoming([*messages, *ready]))

    # -- wrap_model_call: system prompt, tools, compacted view -------------------------------

    def _convert(self, key: Any, make: Callable[[], list[Any]]) -> list[Any]:
        """The framework's form of a run's tools or of a stored branch, converted once."""
        converted = self._converted.get(key)
        if converted is None:
            converted = self._converted[key] = make()
        return converted

    def _prepare(self, request: ModelRequest, view: CallView, messages: Sequence[BaseMessage]) -> ModelRequest:
        run = view.run
        system = _with_prompt(request.system_message, run.prompt)
        ours = {tool.name: tool for tool in self._convert(run, lambda: langchain_tools(run.tools, self.source))}
        tools: list[Any] = []
        for tool in request.tools:
            name = getattr(tool, "name", None) if isinstance(tool, BaseTool) else None
            if name in self._tool_names:
                if name in ours:
                    tools.append(ours[name])
            else:
                tools.append(tool)
        if ours and not _binds_tools(request.model):
            raise NotImplementedError(
                f"{type(request.model).__name__} cannot call tools (it has no bind_tools), and"
                f" SessionMemoryMiddleware gives the agent its memory tools ({', '.join(ours)}): use a"
                " model with tool calling, or SessionMemoryMiddleware(..., memory_tools=False)"
            )
        before = view.before
        prefix: list[BaseMessage] = []
        if before is not None:
            in_state = {source_id(m) for m in messages}
            stored = self._convert(before, lambda: to_langchain_messages(before.messages))
            prefix = [m for m in stored if source_id(m) not in in_state]
        shown = _view([*prefix, *messages], view)
        # cast: LangChain types the request's messages as its union of concrete message classes
        return request.override(system_message=system, messages=cast("list[AnyMessage]", shown), tools=tools)

    def _trigger(self, model: Any) -> int | None:
        limit = self.compact_at
        if limit is None or isinstance(limit, int):
            return limit
        profile = getattr(model, "profile", None) or {}
        window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
        if not window:
            if not self._warned_profile:
                self._warned_profile = True
                logger.info("compact_at=%s needs model.profile['max_input_tokens']; compaction is off", limit)
            return None
        return int(window * limit)

    def _over(self, request: ModelRequest, trigger: int) -> bool:
        messages: list[BaseMessage] = (
            [request.system_message, *request.messages] if request.system_message else list(request.messages)
        )
        if self.token_counter is not None:
            used = self.token_counter(messages)
        else:
            used = count_tokens_approximately(messages, tools=request.tools)
        return used > trigger

    def _compaction_fn(self, model: Any, trigger: int) -> Callable[..., Any]:
        summarize = self.summarizer or ChatModelSummarizer(model, max_retries=self.summary_max_retries)
        keep = self.keep_recent_tokens if self.keep_recent_tokens is not None else max(1, trigger // 4)
        return create_compact_function(summarize=summarize, protect_head=self.protect_head, keep_recent_tokens=keep)

    def _compact(self, messages: Any, context: Any = None) -> Any:
        """The compaction function set on each session (what its own ``compact_after`` runs):
        with the last model seen, or ``summarizer``."""
        model = self._last_model
        if self.summarizer is None and model is None:
            return None
        trigger = self._trigger(model) if model is not None else None
        return self._compaction_fn(model, trigger or 80_000)(messages, context)

    def _before_call(self, request: ModelRequest) -> ModelRequest:
        """Store what is new in the state (starting a run when the state is not in a tool
        loop) and give the request the run's system prompt and tools and the compacted history
        (compacting first when the model's input is over the trigger)."""
        session_id = self._session_id(request.runtime)
        self._last_model = request.model
        messages = request.state.get("messages", []) if isinstance(request.state, dict) else []
        first = next((source_id(m) for m in request.messages if source_id(m)), None)
        view = self.turns.before_call(
            session_id,
            self._incoming(messages),
            new_run=not _in_tool_loop(messages),
            read_before=first if self.load_history else None,
        )
        prepared = self._prepare(request, view, request.messages)
        trigger = self._trigger(request.model)
        if trigger is not None and self._over(prepared, trigger):
            compactions = self.turns.compact(
                session_id, _last_stored(request.messages), self._compaction_fn(request.model, trigger)
            )
            if compactions is not None:
                prepared = self._prepare(request, replace(view, compactions=compactions), request.messages)
        return prepared

    def _after_call(self, request: ModelRequest, response: Any) -> ModelCallResult:
        """Store the model's reply under the state."""
        session_id = self._session_id(request.runtime)
        replies = list(getattr(response, "result", None) or [])
        for reply in replies:
            if not reply.id:
                reply.id = str(uuid.uuid4())
        messages = request.state.get("messages", []) if isinstance(request.state, dict) else []
        self.turns.after_call(session_id, self._incoming([*messages, *replies]))
        return response

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelCallResult]
    ) -> ModelCallResult:
        prepared = self._before_call(request)
        return self._after_call(request, handler(prepared))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelCallResult]]
    ) -> ModelCallResult:
        with prefer_async():
            prepared = await run_in_thread(self._before_call, request)
        response = await handler(prepared)
        return await run_in_thread(self._after_call, request, response)


class _ServesTools(SessionMemoryMiddleware):
    """The tool hooks, given only to a middleware that serves memory tools (see
    ``_serving_tools``): ``create_agent`` adds its ``tools`` node for any middleware whose class
    overrides ``wrap_tool_call`` and then skips its check for unknown tools, so one without tools
    to serve must not have them. They store each tool result as it comes."""

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]) -> Any:
        result = handler(request)
        self._tool_results(request, result)
        return result

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        result = await handler(request)
        await run_in_thread(self._tool_results, request, result)
        return result


@functools.cache
def _serving_tools(cls: type[_Middleware]) -> type[_Middleware]:
    """``cls`` with the tool hooks, under the same name (the middleware's default ``name``). A
    subclass comes first, so a ``wrap_tool_call`` of its own wins and its ``super()`` reaches ours."""
    bases = (_ServesTools,) if cls is SessionMemoryMiddleware else (cls, _ServesTools)
    served = type(
        cls.__name__,
        bases,
        {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__},
    )
    return cast("type[_Middleware]", served)


def _binds_tools(model: Any) -> bool:
    """Whether a chat model implements ``bind_tools`` (a model that is not a ``BaseChatModel``
    is given the benefit of the doubt)."""
    return not isinstance(model, BaseChatModel) or type(model).bind_tools is not BaseChatModel.bind_tools


def _in_tool_loop(messages: Sequence[BaseMessage]) -> bool:
    """Whether the state ends with tool results answering its last AI message's calls: the
    model is called again inside a run (else a run starts)."""
    answered = False
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered = True
            continue
        return answered and isinstance(message, AIMessage) and bool(message.tool_calls)
    return False


def _messages_of(result: Any) -> list[Any]:
    """The messages a tool call returned: a ``ToolMessage``, or those of a ``Command`` update."""
    if isinstance(result, BaseMessage):
        return [result]
    update = getattr(result, "update", None)
    if isinstance(update, dict):
        return list(update.get("messages") or [])
    return []


def _with_prompt(system: SystemMessage | None, prompt: str | None) -> SystemMessage | None:
    """The agent's system message with the context blocks appended (a string stays a string)."""
    if not prompt:
        return system
    if system is None:
        return SystemMessage(content=prompt)
    content = system.content
    if isinstance(content, str):
        merged: Any = f"{content}\n\n{prompt}" if content else prompt
    else:
        merged = [*content, {"type": "text", "text": prompt}]
    return system.model_copy(update={"content": merged})


def _invalid_call_answers(message: AIMessage) -> list[ToolMessage]:
    """The error results ``create_agent`` gives an AI message's invalid tool calls (its text,
    word for word), with ids derived from the message and the call."""
    answers = []
    for call in message.invalid_tool_calls:
        call_id = call.get("id")
        if call_id is None or not message.id:
            continue
        name = call.get("name") or "unknown"
        answers.append(
            ToolMessage(
                content=(
                    f"Tool call {name} with id {call_id} could not be executed - arguments were malformed or truncated."
                ),
                name=name,
                tool_call_id=call_id,
                status="error",
                id=f"{message.id}:invalid:{call_id}",
            )
        )
    return answers


def _last_stored(messages: Sequence[BaseMessage]) -> str | None:
    for message in reversed(messages):
        ident = source_id(message)
        if ident and not ident.startswith(COMPACTION_ID_PREFIX):
            return ident
    return None


def _view(messages: Sequence[BaseMessage], view: CallView) -> list[BaseMessage]:
    """The messages with each compaction overlay applied: the range it covers replaced by its
    summary. A summary already in the messages (history loaded compacted) stands where its
    range starts, so a later overlay of the same chain replaces it too."""
    if not view.compactions:
        return list(messages)
    shown: list[BaseMessage] = []
    for segment in view_segments([source_id(m) or "" for m in messages], view.compactions):
        if segment.overlay is None:
            shown.extend(messages[segment.start : segment.end])
        else:
            shown.extend(to_langchain_messages([summary_message(segment.overlay)]))
    return shown


def _incoming(message: BaseMessage, ident: str, parent: Any) -> Incoming:
    """A state message for the turn service: converted only if it is not known to be stored."""
    usage = None
    if isinstance(message, AIMessage) and message.usage_metadata:
        usage = (message.usage_metadata.get("input_tokens", 0), message.usage_metadata.get("output_tokens", 0))

    def convert() -> Any:
        try:
            return to_session_message(message)
        except (TypeError, ValueError) as error:
            logger.warning("message %r not stored: %s", message.id, error)
            return None

    return Incoming(ident, parent, convert, usage)
