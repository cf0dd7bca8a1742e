"""``SessionMemory``: a LlamaIndex ``BaseMemory`` over a session of ``sessions_core``."""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr
from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseMemory
from llama_index.core.utils import get_tokenizer

from sessions_core import (
    CompactResult,
    InvalidInputError,
    Session,
    SessionManager,
    SessionMessage,
    StaticContext,
    StoreContext,
    StoreSearchContext,
    create_compact_function,
)
from sessions_core.integration import (
    Registration,
    TurnService,
    async_twin,
    message_counter,
    raw_history,
    set_active_history,
    soft_reset,
    store_url,
)

from ._pointers import open_store, store_label, store_of_uri, store_schema, store_url_of
from .conversion import from_chat_messages, to_chat_messages
from .summarizer import llm_summarizer

__all__ = ["SessionMemory"]

logger = logging.getLogger("llamaindex_sessions")

_FILE_TOKENS = 256  # what LlamaIndex's Memory estimates for an image, audio or video block


class _Handle:
    """What every memory object of one live session shares: the session with its turn service
    (the run's prompt, the cached window), the LLM that writes compaction summaries, and
    whether the handle opened the session (and its store)."""

    __slots__ = ("session", "turns", "llm", "owns", "compaction_installed", "registration", "__weakref__")

    def __init__(self, session: Session, owns: bool) -> None:
        self.session = session
        self.turns = TurnService(session, tools=False, cache_size=1)
        self.llm: Any = None
        self.owns = owns
        self.compaction_installed = False
        self.registration: Registration | None = None
        """A manager's session: registered again by the next write after the manager deleted it."""

    def register(self) -> None:
        if self.registration is not None:
            self.registration.ensure()

    def resolve_llm(self) -> Any:
        if self.llm is not None:
            return self.llm
        from llama_index.core import Settings

        return Settings.llm  # LlamaIndex's default; raises without one (compaction then fails safely)

    def summarize(self, prompt: str) -> str | Awaitable[str]:
        """The summary, or within ``prefer_async()`` the coroutine of ``llm.achat`` (``Summarizer``)."""
        return llm_summarizer(self.resolve_llm())(prompt)

    def __del__(self) -> None:
        if self.owns:
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to report to
                self.session.close()
                self.session.store.close()  # opened here, also when a schema made it a store object


def _default_tokenizer(text: str) -> list:
    """LlamaIndex's default tokenizer, loaded on first use: loading it reads files, which a
    memory built inside async code must not do on the event loop."""
    return get_tokenizer()(text)


_handles: weakref.WeakValueDictionary[str, _Handle] = weakref.WeakValueDictionary()
_handles_lock = threading.Lock()


# Keyword spellings of ``Memory.from_defaults`` / ``ChatMemoryBuffer.from_defaults`` that have no
# meaning here, with what to pass instead.
_COMPACTED = "history is compacted instead of flushed: use compact_threshold= and keep_recent_tokens="
_REFUSED = {
    "memory_blocks": "declare context blocks with blocks=['memory', ...] or Session.with_context(...)",
    "memory_blocks_template": "blocks render with the session's own template; use insert_method= for where",
    "chat_history_token_ratio": _COMPACTED,
    "token_flush_size": _COMPACTED,
    "image_token_size_estimate": "a file part counts 256 tokens; use tokenizer_fn= for text",
    "audio_token_size_estimate": "a file part counts 256 tokens; use tokenizer_fn= for text",
    "video_token_size_estimate": "a file part counts 256 tokens; use tokenizer_fn= for text",
    "table_name": "session-memory keeps its own tables: pass store= (a SQLite path or a postgresql:// URL)",
    "async_engine": "pass store= (a SQLite path or a postgresql:// URL) or session=",
    "status": (
        "no message is archived here (compaction keeps every message, stored and searchable):"
        " get_all() is the whole active branch, reset() starts an empty one and deletes nothing"
    ),
}


def _block_specs(session: Session) -> list[dict[str, Any]]:
    """JSON declarations of the session's context blocks, to re-declare them in a new process."""
    specs = []
    for config in session.context_configs:
        spec: dict[str, Any] = {"label": config.label}
        if config.description is not None:
            spec["description"] = config.description
        if config.max_tokens is not None:
            spec["max_tokens"] = config.max_tokens
        provider = config.provider
        if provider is None or type(provider) is StoreContext:
            spec["kind"] = "writable"
        elif type(provider) is StoreSearchContext:
            spec["kind"] = "searchable"
        elif type(provider) is StaticContext:
            spec.update(kind="static", text=provider.text)
        else:
            spec["kind"] = "custom"
        specs.append(spec)
    return specs


def _declare(session: Session, specs: Iterable[Any]) -> None:
    for spec in specs:
        if isinstance(spec, str):
            spec = {"label": spec}
        kind = spec.get("kind", "writable")
        options: dict[str, Any] = {"description": spec.get("description"), "max_tokens": spec.get("max_tokens")}
        if kind == "writable":
            session.with_context(spec["label"], **options)
        elif kind == "searchable":
            session.with_context(spec["label"], provider=StoreSearchContext(), **options)
        elif kind == "static":
            session.with_context(spec["label"], provider=StaticContext(spec.get("text", "")), **options)
        else:
            logger.warning(
                "context block %r has a custom provider that cannot be rebuilt from a serialised memory;"
                " create SessionMemory(session=...) with the configured session in this process first",
                spec["label"],
            )


class SessionMemory(BaseMemory):
    """LlamaIndex memory backed by a durable, searchable, branching session.

    ``get`` returns the session's context blocks rendered as one system message, followed by
    the history with compaction overlays applied, cut from the oldest end to ``token_limit``
    (never between a tool call and its result). The system prompt is frozen for a run: it is
    refreshed (``Session.system_prompt_for_run``) on the first ``get`` after the history was
    written, so a ``set_context`` call shows in the next run's system message while every LLM
    call of one run sees the same prefix. ``put``/``put_messages`` store each message once,
    tool calls and results included; ``set`` moves to a branch holding exactly the given
    messages and ``reset`` starts an empty branch: nothing stored is ever deleted.

    After each completed turn the branch is compacted once its estimate passes ``compact_threshold``
    (default 80% of ``token_limit``), with ``llm`` (see :meth:`bind`; else ``Settings.llm``);
    a failed summary leaves the history whole. ``compaction=False`` keeps the session's own
    compaction setup instead.

    The object serialises as a pointer (``store``: the SQLite file's absolute path or the
    PostgreSQL URL without its password, ``store_schema``, ``session_id``, block declarations,
    settings): a workflow ``Context`` that rebuilds it reopens the same session, and in the same
    process finds the same live session again (through ``handle``). A process reopening a
    PostgreSQL pointer gets the password as libpq does (``PGPASSWORD``, ``PGPASSFILE``,
    ``~/.pgpass``) or from ``from_dict(data, store=<the full URL>)``, which is used, never kept.

    ``session`` is a ``Session``, a ``SessionManager`` (with ``session_id``), or a SQLite path or
    ``postgresql://`` URL (with ``session_id``); without one the memory is in ``:memory:``.
    ``redactor`` (a ``sessions_core.PIIRedactor`` or any callable ``str -> str``) masks what is
    stored (``Session.with_redaction``); it is not part of the pointer: pass it again to a
    memory rebuilt from one. ``key`` opens an encrypted SQLite file (``Session(path, key=...)``);
    it is never part of the pointer either: ``from_dict(data, key=...)`` reopens one.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: str | None = Field(
        default=None, description="SQLite path or postgresql:// URL (never with a password) of the store."
    )
    store_schema: str | None = Field(default=None, description="PostgreSQL schema of the store (None: public).")
    session_id: str = Field(default="", description="The session's id in the store.")
    handle: str = Field(default_factory=lambda: uuid.uuid4().hex, description="Finds the live session in-process.")
    blocks: list[Any] = Field(
        default_factory=list, description="Context blocks declared when the memory opens the session."
    )
    token_limit: int = Field(default=30_000, gt=0, description="Token budget of what get() returns.")
    insert_method: Literal["system", "user"] = Field(
        default="system", description="Render the context as a leading system message, or into the latest user message."
    )
    compaction: bool = Field(default=True, description="Compact with the bound LLM after writes.")
    compact_threshold: int | None = Field(default=None, description="Compact above this many tokens.")
    keep_recent_tokens: int | None = Field(default=None, description="Tokens kept verbatim at the end.")
    tokenizer_fn: Callable[[str], list] = Field(default=_default_tokenizer, exclude=True)

    _handle: _Handle = PrivateAttr()
    _counter: tuple[Any, Callable[[SessionMessage], int]] | None = PrivateAttr(default=None)  # tokenizer, counter
    _prompt_count: tuple[str, Any, int] | None = PrivateAttr(default=None)  # prompt, tokenizer, tokens

    def __init__(
        self,
        session: Session | SessionManager | str | Path | None = None,
        *,
        llm: Any = None,
        redactor: Any = None,
        key: str | bytes | None = None,
        **data: Any,
    ) -> None:
        rebuilt = session is None and "handle" in data  # from a serialised pointer
        _refuse_unknown(data, type(self).model_fields)
        session, registration = _as_session(session, data)
        if session is not None:
            data.setdefault("session_id", session.session_id)
            data.setdefault("blocks", _block_specs(session))
        elif not rebuilt:
            _default_pointer(data)
        super().__init__(**data)
        with _handles_lock:
            handle = _handles.get(self.handle)
            if handle is not None and not self._points_to(handle.session, session):
                handle = None
                self.handle = uuid.uuid4().hex
            if handle is None:
                handle = self._open(session, rebuilt, key)
                _handles[self.handle] = handle
        if registration is not None and handle.registration is None:
            handle.registration = registration
        self._handle = handle
        # The pointer names the store as store_url does: an absolute path, a URL without password.
        self.store = store_url(handle.session.store)
        self.store_schema = store_schema(handle.session)
        if llm is not None:
            handle.llm = llm
        if redactor is not None:
            handle.session.with_redaction(redactor)
        if self.compaction and not handle.compaction_installed:
            handle.session.on_compaction(
                create_compact_function(summarize=handle.summarize, keep_recent_tokens=self._keep_recent())
            )
            handle.compaction_installed = True

    def _points_to(self, live: Session, given: Session | None) -> bool:
        """Whether the live session of this memory's handle is the one it means."""
        if given is not None:
            return live is given
        return live.session_id == self.session_id and store_url(live.store) == store_url_of(self.store)

    def _open(self, session: Session | None, rebuilt: bool, key: str | bytes | None) -> _Handle:
        if session is not None:
            return _Handle(session, owns=False)
        if not self.store:
            raise InvalidInputError(
                f"SessionMemory {self.session_id!r} cannot be reopened: its session was on a store without an"
                " address (a custom store), which only the process that created it can use; pass store="
                " (a SQLite path or a postgresql:// URL) or session= (a Session) to from_dict"
            )
        if rebuilt and self.store == ":memory:":
            logger.warning(
                "SessionMemory %r reopened on a new ':memory:' store: the history is not there;"
                " use a SQLite file or Postgres to keep memory across a serialised Context",
                self.session_id,
            )
        opened = Session(open_store(self.store, self.store_schema), key=key).for_session(self.session_id)
        _declare(opened, self.blocks)
        return _Handle(opened, owns=True)

    @classmethod
    def class_name(cls) -> str:
        return "SessionMemory"

    @classmethod
    def from_defaults(
        cls,
        session: Session | SessionManager | str | Path | None = None,
        *,
        store: str | Path | None = None,
        session_id: str | None = None,
        llm: Any = None,
        chat_history: list[ChatMessage] | None = None,
        chat_store: Any = None,
        chat_store_key: str | None = None,
        async_database_uri: str | None = None,
        db_schema: str | None = None,
        **kwargs: Any,
    ) -> SessionMemory:
        """``SessionMemory(session=...)``, or a memory that opens ``store`` / ``session_id``
        itself (declaring ``blocks=[...]``, e.g. ``["memory"]``); ``chat_history`` is ``set``.

        The spellings of ``Memory.from_defaults`` and ``ChatMemoryBuffer.from_defaults`` work
        where they mean something here: ``session_id`` or ``chat_store_key``, ``token_limit``
        (from ``llm``'s context window when not given, as ``ChatMemoryBuffer`` does),
        ``tokenizer_fn``, ``insert_method``, ``async_database_uri`` (a ``sqlite+aiosqlite://``
        or ``postgresql+asyncpg://`` URI) with ``db_schema``, and ``chat_store`` when it is a
        ``SessionChatStore``. The others raise ``TypeError`` saying what to pass instead.
        Without a store the memory is in ``:memory:``, under a new session id unless one is given.
        """
        if chat_store is not None:
            manager = getattr(chat_store, "manager", None)
            if not isinstance(manager, SessionManager):
                raise TypeError(
                    f"chat_store must be a SessionChatStore, not {type(chat_store).__name__}: pass store= (a SQLite"
                    " path or a postgresql:// URL) or session= (a Session) to keep the history in session-memory"
                )
            session = manager
            chat_store_key = chat_store_key or DEFAULT_CHAT_STORE_KEY  # ChatMemoryBuffer's default key
        if chat_store_key is not None:
            kwargs.setdefault("session_id", chat_store_key)
        if session_id is not None:
            kwargs["session_id"] = session_id
        if async_database_uri is not None:
            store = store or store_of_uri(async_database_uri)
        if store is not None:
            kwargs["store"] = str(store)
        if db_schema is not None:
            kwargs["store_schema"] = db_schema
        if llm is not None and "token_limit" not in kwargs:
            context_window = getattr(getattr(llm, "metadata", None), "context_window", None)
            if isinstance(context_window, int) and context_window > 0:
                kwargs["token_limit"] = int(context_window * 0.75)  # ChatMemoryBuffer's ratio
        insert_method = kwargs.get("insert_method")
        if insert_method is not None and not isinstance(insert_method, str):
            kwargs["insert_method"] = getattr(insert_method, "value", insert_method)  # LlamaIndex's InsertMethod
        memory = cls(session, llm=llm, **kwargs)
        if chat_history:
            memory.set(chat_history)
        return memory

    def to_string(self) -> str:
        """The pointer as JSON: ``ChatMemoryBuffer``'s name for ``to_json``."""
        return self.to_json()

    @classmethod
    def from_string(cls, json_str: str, **kwargs: Any) -> SessionMemory:
        """The memory a :meth:`to_string` pointer names: ``ChatMemoryBuffer``'s name for ``from_json``."""
        return cls.from_json(json_str, **kwargs)

    @classmethod
    def from_manager(cls, manager: SessionManager | str | Path, session_id: str, **kwargs: Any) -> SessionMemory:
        """The memory of a ``SessionManager``'s session ``session_id`` (a path or URL opens a
        manager there), registered with the manager under that id if it is not yet (so
        ``session_search`` and ``list_sessions`` see it)."""
        if isinstance(manager, (str, Path)):
            manager = SessionManager(manager)
        if not isinstance(manager, SessionManager):
            raise TypeError(
                "from_manager takes a SessionManager, a SQLite path or a postgresql:// URL,"
                f" not {type(manager).__name__}; for a Session use SessionMemory(session)"
            )
        return cls(manager, session_id=session_id, **kwargs)

    # -- live handle -----------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The live ``Session`` (shared by every memory object of the same ``handle``)."""
        return self._handle.session

    @property
    def llm(self) -> Any:
        """The LLM that writes compaction summaries (``None``: ``Settings.llm``)."""
        return self._handle.llm

    def bind(self, target: Any) -> SessionMemory:
        """Compact with the LLM of ``target``: an ``LLM``, an agent (``FunctionAgent``,
        ``ReActAgent``...), an ``AgentWorkflow`` (its root agent) or a chat engine.

        A ``ReActAgent`` without a ``system_prompt`` drops the first message it gets when that is
        a system message (it builds its own), so the context would never reach the model: for
        such an agent the memory switches to ``insert_method="user"``.
        """
        agents = _agents(target)
        llm = _llm_of(target, agents)
        if llm is not None:
            self._handle.llm = llm
        if any(_is_react(agent) and not getattr(agent, "system_prompt", None) for agent in agents):
            if self.insert_method != "user":
                logger.info("ReActAgent without a system_prompt: rendering the context into the user message")
            self.insert_method = "user"
        return self

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> SessionMemory:
        return self  # a live handle: workflow state copies must share it

    def __reduce__(self) -> Any:
        return (_rebuild, (self.to_dict(), type(self)))  # a subclass comes back as itself

    def __bool__(self) -> bool:
        return True  # agents replace a falsy memory with a ChatMemoryBuffer

    # -- reading ---------------------------------------------------------------------------

    def _keep_recent(self) -> int:
        return self.keep_recent_tokens if self.keep_recent_tokens is not None else max(1, self.token_limit * 2 // 5)

    def _threshold(self) -> int:
        return self.compact_threshold if self.compact_threshold is not None else self.token_limit * 4 // 5

    def _message_counter(self) -> Callable[[SessionMessage], int]:
        """As ``ChatMemoryBuffer``: the content's tokens, no overhead per message (tool arguments
        counted too), a file part as LlamaIndex's ``Memory`` estimates it; one per tokenizer."""
        known = self._counter
        if known is None or known[0] is not self.tokenizer_fn:
            tokenize = self.tokenizer_fn
            known = self._counter = (
                tokenize,
                message_counter(lambda text: len(tokenize(text)), file_tokens=_FILE_TOKENS),
            )
        return known[1]

    def _prompt_tokens(self, prompt: str) -> int:
        """The tokens of the rendered context (counted once while it stays the same)."""
        known = self._prompt_count
        if known is None or known[0] != prompt or known[1] is not self.tokenizer_fn:
            known = self._prompt_count = (prompt, self.tokenizer_fn, len(self.tokenizer_fn(prompt)) if prompt else 0)
        return known[2]

    def get(self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any) -> list[ChatMessage]:
        """The context as a system message plus the compacted history within ``token_limit``
        (minus ``initial_token_count``, which chat engines pass), starting with a user message:
        the newest turn is kept whole even when it alone is over the budget (as LlamaIndex's
        ``Memory``); fresh objects every call. ``ValueError`` (as ``ChatMemoryBuffer``) when
        ``initial_token_count`` alone exceeds ``token_limit``."""
        initial = int(initial_token_count or 0)
        if initial > self.token_limit:
            raise InvalidInputError("Initial token count exceeds token limit")
        prompt, history = self._handle.turns.recent(
            self.session.session_id,
            lambda prompt: self.token_limit - initial - self._prompt_tokens(prompt),
            self._message_counter(),
        )
        messages = to_chat_messages(history)
        if not prompt:
            return messages
        if self.insert_method == "user":
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].role == MessageRole.USER:
                    target = messages[i]
                    messages[i] = ChatMessage(
                        role=target.role,
                        blocks=[TextBlock(text=prompt), *target.blocks],
                        additional_kwargs=dict(target.additional_kwargs),
                    )
                    return messages
        return [ChatMessage(role=MessageRole.SYSTEM, content=prompt), *messages]

    def get_all(self, **unsupported: Any) -> list[ChatMessage]:
        """Every message of the active branch as written (no compaction, no token limit).
        ``Memory``'s ``status=`` raises ``TypeError`` saying why (nothing is archived here)."""
        _refuse_arguments("get_all", unsupported)
        return to_chat_messages(raw_history(self.session))

    # -- writing ---------------------------------------------------------------------------

    def put(self, message: ChatMessage) -> None:
        """Store one message under the latest one."""
        self.put_messages([message])

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Store messages as a chain under the latest one (an agent turn: the assistant's tool
        calls, the tool results, the answer), each once. When the batch ends with an assistant
        message (a turn is complete) the branch is compacted if over the threshold."""
        converted = from_chat_messages(messages)
        self._handle.register()
        self._handle.turns.append(
            self.session.session_id, converted, compact_over=self._threshold() if self.compaction else None
        )

    def set(self, messages: list[ChatMessage]) -> None:
        """Make ``messages`` the active history without deleting anything: the part shared with
        the current branch is kept, the rest becomes a new branch (nothing happens when they are
        equal). A leading system message equal to this memory's rendered context is ignored, so
        passing back what ``get`` returned is safe."""
        messages = list(messages)
        self._handle.register()
        turns, session_id = self._handle.turns, self.session.session_id
        if (
            messages
            and messages[0].role == MessageRole.SYSTEM
            and messages[0].content
            and messages[0].content == turns.run_prompt(session_id)
        ):
            messages = messages[1:]
        set_active_history(self.session, from_chat_messages(messages), same=_same_for_llamaindex)
        turns.changed(session_id)
        if self.compaction:
            turns.compact_if_over(session_id, self._threshold())

    def reset(self, **unsupported: Any) -> None:
        """Start an empty branch (a soft reset): the old messages stay stored and searchable,
        the context blocks stay as they are. ``Memory``'s ``status=`` raises ``TypeError``
        saying why (nothing is archived here)."""
        _refuse_arguments("reset", unsupported)
        soft_reset(self.session)
        self._handle.turns.changed(self.session.session_id)

    def compact(self) -> CompactResult | None:
        """Compact the active branch now; raises ``CompactionError`` (history unchanged) if the
        summary fails."""
        return self._handle.turns.compact_now(self.session.session_id)

    # -- async (each runs off the event loop; async providers and LLMs run back on it) -------

    aget = async_twin(get)
    aget_all = async_twin(get_all)
    aput = async_twin(put)
    aput_messages = async_twin(put_messages)
    aset = async_twin(set)
    areset = async_twin(reset)
    acompact = async_twin(compact)

    # -- tools -----------------------------------------------------------------------------

    def tools(self) -> list[Any]:
        """This session's memory tools as LlamaIndex ``FunctionTool``s (``SessionToolSpec``)."""
        from .tools import SessionToolSpec

        return SessionToolSpec(self.session).to_tool_list()

    atools = async_twin(tools)


def _refuse_arguments(method: str, unsupported: dict[str, Any]) -> None:
    """``TypeError`` for keywords of ``Memory``'s ``method`` that mean nothing here, with the
    hint ``from_defaults`` gives for its own."""
    if not unsupported:
        return
    names = sorted(unsupported)
    hints = "; ".join(f"{name}: {_REFUSED[name]}" for name in names if name in _REFUSED)
    raise TypeError(
        f"SessionMemory.{method}() got unexpected keyword argument{'s' if len(names) > 1 else ''} {', '.join(names)}"
        + (f" ({hints})" if hints else "")
    )


def _refuse_unknown(data: dict[str, Any], fields: Iterable[str]) -> None:
    unknown = sorted(set(data) - set(fields))
    if not unknown:
        return
    hints = "; ".join(f"{name}: {_REFUSED[name]}" for name in unknown if name in _REFUSED)
    raise TypeError(
        f"SessionMemory got unexpected keyword arguments {', '.join(unknown)}"
        + (f" ({hints})" if hints else "")
        + "; it takes session= (a Session, a SessionManager with session_id=, a SQLite path or a postgresql://"
        " URL) or store= with session_id=, and token_limit=, tokenizer_fn=, insert_method=, blocks=, compaction="
    )


def _as_session(session: Any, data: dict[str, Any]) -> tuple[Session | None, Registration | None]:
    """The ``Session`` passed as ``session``, with a manager's registration of it; a path or URL
    becomes ``store`` (opened later)."""
    if session is None or isinstance(session, Session):
        return session, None
    if isinstance(session, (str, Path)):
        data["store"] = str(session)
        return None, None
    if isinstance(session, SessionManager):
        session_id = data.pop("session_id", None)  # the manager's id; the pointer keeps the storage id
        if not session_id:
            raise InvalidInputError("SessionMemory over a SessionManager needs session_id= (which of its sessions)")
        registration = Registration(session, session_id)
        registration.ensure()
        return session.get_session(session_id), registration
    raise TypeError(
        f"session must be a Session, a SessionManager (with session_id=), a SQLite path or a postgresql:// URL,"
        f" not {type(session).__name__}"
    )


def _default_pointer(data: dict[str, Any]) -> None:
    """A new memory without a session: ``:memory:`` unless a store is given; a session id is
    made up only for ``:memory:``, where nothing could find it again anyway."""
    if not data.get("store"):
        data["store"] = ":memory:"
    store = data["store"]
    if not data.get("session_id"):
        if store != ":memory:":
            raise InvalidInputError(
                f"SessionMemory on {store_label(store)!r} needs session_id= (the conversation to open there),"
                " e.g. SessionMemory.from_defaults(store=..., session_id='user-42')"
            )
        data["session_id"] = uuid.uuid4().hex


def _rebuild(data: dict[str, Any], cls: type[SessionMemory] | None = None) -> SessionMemory:
    """The memory a pickle holds (``cls``: its class; ``None`` in pickles of earlier versions)."""
    return (cls or SessionMemory).from_dict(data)


def _same_for_llamaindex(stored: SessionMessage, new: SessionMessage) -> bool:
    """Equal as LlamaIndex sees them (ids, generated call ids and key order aside)."""
    return to_chat_messages([stored]) == to_chat_messages([new])


def _is_react(agent: Any) -> bool:
    from llama_index.core.agent.workflow import ReActAgent

    return isinstance(agent, ReActAgent)


def _agents(target: Any) -> list[Any]:
    agents = getattr(target, "agents", None)
    if isinstance(agents, dict):
        return list(agents.values())
    return [target]


def _llm_of(target: Any, agents: list[Any]) -> Any:
    from llama_index.core.llms import LLM

    if isinstance(target, LLM):
        return target
    root = getattr(target, "root_agent", None)
    if isinstance(getattr(target, "agents", None), dict) and root in target.agents:
        return getattr(target.agents[root], "llm", None)
    for name in ("llm", "_llm"):
        value = getattr(target, name, None)
        if isinstance(value, LLM):
            return value
    return None
