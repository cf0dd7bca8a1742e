"""Peers for the benchmark: the frameworks' own SQL chat stores behind one small interface.

Every peer class takes a SQLite *file* path and offers::

    peer = Peer(path)                       # opens/creates the database (not timed by callers)
    peer.prepare(session_id)                # optional: build per-session objects before timing
    peer.append_one(session_id, message)    # one message, one commit (the peer's single-message API)
    peer.append_batch(session_id, messages) # the peer's batch API, one call
    peer.read_all(session_id) -> list       # full history, as the framework's message objects
    peer.read_recent(session_id, n) -> list # the last n messages
    peer.count(session_id) -> int
    peer.close()

Messages given to ``append_*`` are the framework's own objects, made beforehand (untimed) from
our message dicts with :func:`to_langchain` / :func:`to_llamaindex`; ``peer.convert`` is the
right one for each class.

Durability: our store runs SQLite in WAL mode with ``synchronous=NORMAL``. By default
(``durability="wal"``) every peer gets the same two pragmas, set by a SQLAlchemy ``connect``
event on its engine, so each commit costs the same kind of I/O on both sides. Everything else
is the peer's default configuration: SQLAlchemy's default pool for a file database
(``QueuePool`` / ``AsyncAdaptedQueuePool``), the frameworks' default tables and serialisation.
``durability="default"`` leaves SQLite's own defaults (rollback journal ``DELETE``,
``synchronous=FULL``: an fsync of the journal and of the database on every commit).

Peers:

* ``LangChainSQL`` - ``langchain_community.chat_message_histories.SQLChatMessageHistory`` over
  ``sqlite:///path``; one history object per session, all sharing one ``Engine``. Per call: an
  ORM ``Session`` (``scoped_session``), ``message_to_dict`` + ``json.dumps`` into a TEXT column,
  ORM unit-of-work flush (one ``INSERT``), one COMMIT. ``add_messages`` adds all rows to one
  ORM session and commits once, but the flush still runs one ``INSERT ... RETURNING id`` per row
  (the ORM fetches each autoincrement key; measured: 1,800 statements for 1,800 messages).
  Reads go through the ORM (one mapped object per row, then ``json.loads`` +
  ``messages_from_dict``); they allocate enough to trigger the cyclic GC, so their times are
  bimodal unless the caller controls ``gc``. The table
  ``message_store(id, session_id, message)`` has NO index on ``session_id``: every read scans
  the whole table, all sessions included.
* ``LlamaIndexSQLAlchemy`` - ``llama_index.core.storage.chat_store.sql.SQLAlchemyChatStore``
  (async only) over ``sqlite+aiosqlite:///path``, driven from one long-lived event loop owned by
  the peer. Per call: a Core ``insert()`` (no ORM objects) inside an ``AsyncSession``, the
  message as ``ChatMessage.model_dump(mode="json")`` in a JSON column, one COMMIT; aiosqlite runs
  every statement on its own worker thread. ``add_messages`` is ONE multi-row
  ``INSERT ... VALUES (...), (...)`` statement with 5 bound parameters per message, so
  ``SQLITE_MAX_VARIABLE_NUMBER`` caps a batch: 6,553 messages with SQLite's default of 32,766,
  50,000 with this Python's SQLite 3.40.1 (built with 250,000). Timestamps are
  ``time.time_ns()`` (+ i within a batch) and reads order by (timestamp, id). Reads: ``json.loads`` +
  ``ChatMessage.model_validate`` per row. Indexed on ``key``, ``timestamp`` and ``status``.
* ``LlamaIndexMemory`` - ``llama_index.core.memory.Memory`` (the agents' default memory) over
  the same chat store (table ``llama_index_memory``), with a token limit so large that nothing is
  ever archived or flushed to memory blocks. ``put`` / ``put_messages`` insert as above and then
  run ``Memory._manage_queue``, which READS THE WHOLE ACTIVE HISTORY back and counts its tokens
  with tiktoken (``cl100k_base``): each append costs O(length of the session).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, func, select
from sqlalchemy.ext.asyncio import create_async_engine

# ------------------------------------------------------------------------------------------------
# Converters (run before timing).
# ------------------------------------------------------------------------------------------------


def _text(message: dict[str, Any]) -> str:
    return "\n".join(p["text"] for p in message["parts"] if p["type"] == "text")


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    results = [p for p in message["parts"] if p["type"] == "tool-result"]
    if len(results) != 1:
        # LangChain's ToolMessage and LlamaIndex's tool ChatMessage each answer exactly one call.
        raise ValueError(f"tool message {message.get('id')!r} has {len(results)} tool-result parts, expected 1")
    return results[0]


def to_langchain(message: dict[str, Any]):  # -> langchain_core.messages.BaseMessage
    """Our message dict -> a LangChain message (``id`` kept in the message's own ``id`` field).

    user -> HumanMessage, system -> SystemMessage, assistant -> AIMessage (content: the text
    parts; ``tool_calls``: one ToolCall per tool-call part), tool -> ToolMessage (one tool-result
    part: ``tool_call_id``, ``name``, content = the output, JSON-encoded unless already a str).
    """
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    role = message["role"]
    mid = message.get("id")
    if role == "user":
        return HumanMessage(content=_text(message), id=mid)
    if role == "system":
        return SystemMessage(content=_text(message), id=mid)
    if role == "assistant":
        calls = [
            {
                "type": "tool_call",
                "id": p["toolCallId"],
                "name": p["toolName"],
                "args": p["input"] if isinstance(p["input"], dict) else {"input": p["input"]},
            }
            for p in message["parts"]
            if p["type"] == "tool-call"
        ]
        return AIMessage(content=_text(message), tool_calls=calls, id=mid)
    if role == "tool":
        part = _tool_result(message)
        return ToolMessage(
            content=_output_text(part["output"]), tool_call_id=part["toolCallId"], name=part["toolName"], id=mid
        )
    raise ValueError(f"unknown role {role!r}")


def to_llamaindex(message: dict[str, Any]):  # -> llama_index.core.base.llms.types.ChatMessage
    """Our message dict -> a LlamaIndex ``ChatMessage``, shaped like llama-index-core 0.14 agents.

    Assistant tool calls are ``ToolCallBlock`` blocks after the text (what
    ``llama-index-llms-openai`` >= 0.6 puts in the response message that ``FunctionAgent`` stores;
    the provider-specific ``additional_kwargs["tool_calls"]`` copy of the raw SDK objects is left
    out). Tool results are ``role=tool`` with the output as a TextBlock and
    ``additional_kwargs={"tool_call_id": ...}``, as ``FunctionAgent.handle_tool_call_results``
    writes them (it stores no tool name). ChatMessage has no id field: our ``id`` is dropped.
    """
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

    role = message["role"]
    if role in ("user", "system"):
        return ChatMessage(
            role=MessageRole.USER if role == "user" else MessageRole.SYSTEM,
            blocks=[TextBlock(text=p["text"]) for p in message["parts"] if p["type"] == "text"],
        )
    if role == "assistant":
        blocks: list[Any] = []
        for p in message["parts"]:
            if p["type"] == "text":
                blocks.append(TextBlock(text=p["text"]))
            elif p["type"] == "tool-call":
                blocks.append(
                    ToolCallBlock(tool_call_id=p["toolCallId"], tool_name=p["toolName"], tool_kwargs=p["input"])
                )
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
    if role == "tool":
        part = _tool_result(message)
        return ChatMessage(
            role=MessageRole.TOOL,
            blocks=[TextBlock(text=_output_text(part["output"]))],
            additional_kwargs={"tool_call_id": part["toolCallId"]},
        )
    raise ValueError(f"unknown role {role!r}")


# Normalised views, for checking a round trip: (role, tool-call ids) of a message.


def signature_of_dict(message: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    ids = tuple(p["toolCallId"] for p in message["parts"] if p["type"] in ("tool-call", "tool-result"))
    return message["role"], ids


def signature_of_langchain(message) -> tuple[str, tuple[str, ...]]:
    role = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}[message.type]
    if role == "assistant":
        return role, tuple(c["id"] for c in message.tool_calls)
    if role == "tool":
        return role, (message.tool_call_id,)
    return role, ()


def signature_of_llamaindex(message) -> tuple[str, tuple[str, ...]]:
    from llama_index.core.base.llms.types import ToolCallBlock

    role = message.role.value
    if role == "tool":
        return role, (message.additional_kwargs["tool_call_id"],)
    return role, tuple(b.tool_call_id for b in message.blocks if isinstance(b, ToolCallBlock))


# ------------------------------------------------------------------------------------------------
# Engines.
# ------------------------------------------------------------------------------------------------

DURABILITY_CHOICES = ("wal", "default")


def _set_durability(sync_engine, durability: str) -> None:
    """``wal``: WAL + synchronous=NORMAL on every new DBAPI connection (our store's setting)."""
    if durability not in DURABILITY_CHOICES:
        raise ValueError(f"durability must be one of {DURABILITY_CHOICES}, not {durability!r}")
    if durability == "default":
        return

    @event.listens_for(sync_engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()


class _AsyncPeer:
    """Owns one event loop for the peer's lifetime, so loop creation is never inside a timing."""

    def __init__(self, path: Path, durability: str) -> None:
        self.path = Path(path)
        self.uri = f"sqlite+aiosqlite:///{self.path}"
        self.loop = asyncio.new_event_loop()
        self.engine = create_async_engine(self.uri)
        _set_durability(self.engine.sync_engine, durability)

    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    def pragmas(self) -> dict[str, Any]:
        async def go():
            async with self.engine.connect() as conn:
                return {
                    "journal_mode": (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar(),
                    "synchronous": (await conn.exec_driver_sql("PRAGMA synchronous")).scalar(),
                }

        return self._run(go())

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
            self._run(self.engine.dispose())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()


# ------------------------------------------------------------------------------------------------
# (a) LangChain: SQLChatMessageHistory.
# ------------------------------------------------------------------------------------------------


class LangChainSQL:
    """``SQLChatMessageHistory`` (langchain-community), one per session, one shared sync Engine.

    ``read_recent`` is ``read_all()[-n:]``: ``BaseChatMessageHistory`` has no "last n" API (the
    ``messages`` property always loads the whole session, and the table has no session index).
    """

    name = "langchain-sql"
    TABLE = "message_store"  # the class's default table name

    def __init__(self, path: Path, durability: str = "wal") -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "langchain-community is being sunset"
            from langchain_community.chat_message_histories import SQLChatMessageHistory
        self._cls = SQLChatMessageHistory
        self.path = Path(path)
        self.engine = create_engine(f"sqlite:///{self.path}")
        _set_durability(self.engine, durability)
        self._histories: dict[str, Any] = {}

    convert = staticmethod(to_langchain)
    signature = staticmethod(signature_of_langchain)

    def _history(self, session_id: str):
        history = self._histories.get(session_id)
        if history is None:
            # The constructor builds a mapped class and runs CREATE TABLE IF NOT EXISTS.
            history = self._histories[session_id] = self._cls(session_id=session_id, connection=self.engine)
        return history

    def prepare(self, session_id: str) -> None:
        self._history(session_id)

    def append_one(self, session_id: str, message) -> None:
        self._history(session_id).add_message(message)

    def append_batch(self, session_id: str, messages) -> None:
        self._history(session_id).add_messages(messages)

    def read_all(self, session_id: str) -> list:
        return self._history(session_id).messages

    def read_recent(self, session_id: str, n: int) -> list:
        """No recent-window API in LangChain's chat histories: the whole history, then ``[-n:]``."""
        return self.read_all(session_id)[-n:] if n > 0 else []

    def count(self, session_id: str) -> int:
        history = self._history(session_id)
        model = history.sql_model_class
        with self.engine.connect() as conn:
            return conn.execute(
                select(func.count()).select_from(model).where(model.session_id == session_id)
            ).scalar_one()

    def pragmas(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            return {
                "journal_mode": conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
                "synchronous": conn.exec_driver_sql("PRAGMA synchronous").scalar(),
            }

    def close(self) -> None:
        for history in self._histories.values():
            history.session_maker.remove()
        self._histories.clear()
        self.engine.dispose()


# ------------------------------------------------------------------------------------------------
# (b) LlamaIndex: SQLAlchemyChatStore.
# ------------------------------------------------------------------------------------------------


class LlamaIndexSQLAlchemy(_AsyncPeer):
    """``SQLAlchemyChatStore`` (llama-index-core), async API run on the peer's own event loop.

    ``read_recent``: the store has no "last n" call; ``get_messages(key, limit=, offset=)``
    orders by (timestamp, id) and takes from the oldest end, so this does what a user of the API
    would: ``count_messages`` (which fetches every id of the session and takes ``len``) then
    ``get_messages(offset=count - n, limit=n)``; two queries, one ``run_until_complete``.
    """

    name = "llamaindex-sqlalchemy"
    TABLE = "llama_index_chat"

    def __init__(self, path: Path, durability: str = "wal") -> None:
        from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

        super().__init__(path, durability)
        self.store = SQLAlchemyChatStore(table_name=self.TABLE, async_database_uri=self.uri, async_engine=self.engine)
        # First use creates the table and opens a pooled connection: do it here, not in a timing.
        self._run(self.store.count_messages("__warmup__"))

    convert = staticmethod(to_llamaindex)
    signature = staticmethod(signature_of_llamaindex)

    def prepare(self, session_id: str) -> None:
        """Nothing to build per session: the store keys every row by its session id."""

    def append_one(self, session_id: str, message) -> None:
        self._run(self.store.add_message(session_id, message))

    def append_batch(self, session_id: str, messages) -> None:
        self._run(self.store.add_messages(session_id, list(messages)))

    def read_all(self, session_id: str) -> list:
        return self._run(self.store.get_messages(session_id))

    def read_recent(self, session_id: str, n: int) -> list:
        if n <= 0:
            return []

        async def go():
            total = await self.store.count_messages(session_id)
            return await self.store.get_messages(session_id, limit=n, offset=max(0, total - n))

        return self._run(go())

    def count(self, session_id: str) -> int:
        return self._run(self.store.count_messages(session_id))


# ------------------------------------------------------------------------------------------------
# (c) LlamaIndex: Memory (short-term FIFO over the same chat store).
# ------------------------------------------------------------------------------------------------


class LlamaIndexMemory(_AsyncPeer):
    """``Memory.from_defaults`` (llama-index-core), one per session, over one shared AsyncEngine.

    Each Memory gets its own ``SQLAlchemyChatStore`` (what ``from_defaults`` builds from
    ``async_database_uri``; we also pass ``async_engine`` so the sessions share one pool and the
    durability pragmas apply). ``token_limit`` is huge, so ``_manage_queue`` never archives or
    flushes anything; it still runs after every ``put``/``put_messages`` and reads + tokenises
    the whole active history. Uses the async methods (``aput``, ``aput_messages``, ``aget_all``,
    ``aget``) on the peer's loop; the sync wrappers would only add ``asyncio_run`` around them.

    ``read_recent`` is ``Memory.get()[-n:]``: ``get`` is Memory's way to fetch the recent window
    for the LLM, but the window is enforced at put time (by archiving), so with this token limit
    ``get`` returns every active message (after counting their tokens) and the slice is ours.
    """

    name = "llamaindex-memory"
    TABLE = "llama_index_memory"  # from_defaults' default
    TOKEN_LIMIT = 10**12

    def __init__(self, path: Path, durability: str = "wal") -> None:
        from llama_index.core.memory import Memory
        from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

        super().__init__(path, durability)
        self._Memory = Memory
        self._memories: dict[str, Any] = {}
        # Create the table once (each Memory's store re-checks it on its own first call).
        self._run(SQLAlchemyChatStore(table_name=self.TABLE, async_engine=self.engine).count_messages("__warmup__"))

    convert = staticmethod(to_llamaindex)
    signature = staticmethod(signature_of_llamaindex)

    def _memory(self, session_id: str):
        memory = self._memories.get(session_id)
        if memory is None:
            memory = self._Memory.from_defaults(
                session_id=session_id,
                token_limit=self.TOKEN_LIMIT,
                table_name=self.TABLE,
                async_database_uri=self.uri,
                async_engine=self.engine,
            )
            self._run(memory.sql_store.count_messages(session_id))  # the store's one-time init
            self._memories[session_id] = memory
        return memory

    def prepare(self, session_id: str) -> None:
        self._memory(session_id)

    def append_one(self, session_id: str, message) -> None:
        self._run(self._memory(session_id).aput(message))

    def append_batch(self, session_id: str, messages) -> None:
        self._run(self._memory(session_id).aput_messages(list(messages)))

    def read_all(self, session_id: str) -> list:
        return self._run(self._memory(session_id).aget_all())

    def read_recent(self, session_id: str, n: int) -> list:
        """``Memory.get()`` (all active messages, token-counted) then ``[-n:]``; see the class doc."""
        return self._run(self._memory(session_id).aget())[-n:] if n > 0 else []

    def count(self, session_id: str) -> int:
        return self._run(self._memory(session_id).sql_store.count_messages(session_id))


PEERS: dict[str, type] = {
    LangChainSQL.name: LangChainSQL,
    LlamaIndexSQLAlchemy.name: LlamaIndexSQLAlchemy,
    LlamaIndexMemory.name: LlamaIndexMemory,
}


# ------------------------------------------------------------------------------------------------
# Smoke run.
# ------------------------------------------------------------------------------------------------


def _smoke() -> int:
    import gc
    import sys
    import tempfile
    import time

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_core import ChatGenerator, take

    total, singles, recent, deep = 2_000, 200, 50, 20
    sessions = {"s1": take(ChatGenerator(1, "a"), total + deep), "s2": take(ChatGenerator(2, "b"), total + deep)}

    print(
        f"{total:,} messages per session, 2 sessions; append_one x{singles}, append_batch x{total - singles}, "
        f"then append_one x{deep} at depth {total:,}"
    )
    print(
        f"{'peer':24} {'pragmas':14} {'append_one µs':>14} {'batched µs/msg':>15} {'read_all ms':>12} "
        f"{'read_recent ms':>15} {'append_one@2k µs':>17}"
    )
    with tempfile.TemporaryDirectory(prefix="peers-smoke-") as tmp:
        for name, cls in PEERS.items():
            peer = cls(Path(tmp) / f"{name}.db")
            try:
                mode = peer.pragmas()
                converted = {sid: [cls.convert(m) for m in msgs] for sid, msgs in sessions.items()}
                one, batch, read, rec, one_deep = [], [], [], [], []
                for sid, msgs in converted.items():
                    peer.prepare(sid)
                    t0 = time.perf_counter()
                    for m in msgs[:singles]:
                        peer.append_one(sid, m)
                    one.append((time.perf_counter() - t0) / singles)
                    t0 = time.perf_counter()
                    peer.append_batch(sid, msgs[singles:total])
                    batch.append((time.perf_counter() - t0) / (total - singles))
                    gc.collect()
                    t0 = time.perf_counter()
                    got = peer.read_all(sid)
                    read.append(time.perf_counter() - t0)
                    assert len(got) == total == peer.count(sid), (name, sid, len(got), peer.count(sid))
                    want = [signature_of_dict(m) for m in sessions[sid][:total]]
                    assert [cls.signature(m) for m in got] == want, (name, sid, "round trip")
                    gc.collect()
                    t0 = time.perf_counter()
                    last = peer.read_recent(sid, recent)
                    rec.append(time.perf_counter() - t0)
                    assert [cls.signature(m) for m in last] == want[-recent:], (name, sid, "recent")
                    t0 = time.perf_counter()
                    for m in msgs[total:]:
                        peer.append_one(sid, m)
                    one_deep.append((time.perf_counter() - t0) / deep)
                    assert peer.count(sid) == total + deep
                assert sum(peer.count(s) for s in sessions) == 2 * (total + deep)
                pr = f"{mode['journal_mode']}/{mode['synchronous']}"
                print(
                    f"{name:24} {pr:14} {1e6 * sum(one) / 2:14.0f} {1e6 * sum(batch) / 2:15.1f} "
                    f"{1e3 * sum(read) / 2:12.1f} {1e3 * sum(rec) / 2:15.1f} {1e6 * sum(one_deep) / 2:17.0f}"
                )
            finally:
                peer.close()
    print("round trips ok: counts, roles and tool-call ids (synchronous: 0=OFF 1=NORMAL 2=FULL)")
    return 0


if __name__ == "__main__":
    raise SystemExit(_smoke())
