"""``SessionSaver``: a LangGraph checkpointer whose threads are the sessions of a manager.

It converts LangGraph's configs and checkpoints (serialised with the saver's ``serde``) and
delegates to ``sessions_core``'s ``Checkpoints``: one statement per ``put``, ``put_writes`` and
``get_tuple``, in the same database as the conversation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.types import Interrupt, Send

from sessions_core import EraseResult, InvalidInputError, PIIRedactor, SessionManager
from sessions_core.integration import (
    CheckpointRewrite,
    CheckpointRow,
    Checkpoints,
    CheckpointWrite,
    check_redactor,
    redact_fields,
    redact_filter,
    redact_text,
)

from ._source import checked_conn_string
from .conversion import source_id, to_langchain_messages

__all__ = ["MaskedInterruptWarning", "SessionSaver", "redact_state"]

_LANGGRAPH_METADATA = frozenset({"source", "step", "parents", "run_id"})
"""The fields of a checkpoint's metadata LangGraph writes itself (ids, numbers, a kind): not redacted."""


class MaskedInterruptWarning(UserWarning):
    """A graph paused (``interrupt``) on values the saver's redactor masks: resumed from the
    checkpoint, it runs with the masks."""


class SessionSaver(BaseCheckpointSaver[str]):
    """A ``BaseCheckpointSaver`` (sync and async) over session-memory's store: a thread is a
    session of a ``SessionManager``'s namespace (registered by its first checkpoint, so
    ``list_sessions`` and ``session_search`` see it), and its messages are those
    ``SessionMemoryMiddleware`` stores; the checkpoints keep only the graph's state.

    ``store``: a path, ``":memory:"``, a ``postgresql://`` URL or a store object
    (``SqliteStore``, ``PostgresStore``); the saver opens a manager over it (``namespace``) and
    closes the store on :meth:`close` only if it opened it. :meth:`from_manager` shares a
    manager's store and namespace. ``delete_sessions``: ``delete_thread`` erases the thread's
    whole session (``SessionManager.erase``: messages, blocks, overlays, checkpoints...), not
    only its checkpoints.

    Beyond the base API it implements ``copy_thread``, ``delete_for_runs`` and ``prune``
    (``"keep_latest"`` or ``"delete"``; ``keep_latest`` refuses a thread whose graph uses a
    ``DeltaChannel``). Bad input raises ``sessions_core.InvalidInputError``.

    ``redactor`` (default: the manager's, ``SessionManager.with_redaction``, also when it is set
    after the saver is built; ``False``: none): the state a checkpoint or a pending write stores
    passes through it first (:func:`redact_state`), so that a value the sessions mask is not kept
    verbatim in the thread's checkpoints. A thread resumed from a checkpoint then sees the masks,
    as the session's history shows them: a graph that needs a masked value back after an
    interrupt (a tool call waiting for approval) should pass ``redactor=False`` and encrypt the
    file instead (``key=``); a pause on masked values warns (:class:`MaskedInterruptWarning`).
    The checkpoint's metadata goes through it too, but for LangGraph's own fields (``source``,
    ``step``, ``parents``, ``run_id``): the ids LangGraph copies from ``configurable`` (a
    ``user_id`` that is an e-mail address, say) are masked as the state is. A ``list`` filter's
    values are redacted the same way, so that they match; one that the redactor masks needs a
    redactor that masks each value apart (``PIIRedactor(hash_salt=...)``) and raises
    ``InvalidInputError`` otherwise. A redactor that raises stores nothing
    (``sessions_core.RedactionError``).
    """

    def __init__(
        self,
        store: Any = ":memory:",
        *,
        serde: SerializerProtocol | None = None,
        namespace: str = "",
        delete_sessions: bool = False,
        redactor: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        manager = store if isinstance(store, SessionManager) else SessionManager(store, namespace=namespace)
        self._owns_manager = manager is not store
        self.manager = manager
        self.checkpoints = Checkpoints(manager, erase_sessions=delete_sessions)
        self._redactor: Any = redactor if redactor is None or redactor is False else check_redactor(redactor)
        self._memo = _TextMemo()

    @property
    def redactor(self) -> Any:
        """What the state passes through before it is stored: the saver's own ``redactor``, else
        the manager's as it is now (``None``: none)."""
        if self._redactor is None:
            return self.manager.redactor
        return None if self._redactor is False else self._redactor

    @classmethod
    def from_manager(
        cls,
        manager: SessionManager,
        *,
        serde: SerializerProtocol | None = None,
        delete_sessions: bool = False,
        redactor: Any = None,
    ) -> SessionSaver:
        """A saver over ``manager``'s store and namespace (the manager keeps owning the store),
        redacting with ``redactor`` or else the manager's."""
        if not isinstance(manager, SessionManager):
            raise TypeError(f"from_manager takes a SessionManager, not {type(manager).__name__}")
        return cls(manager, serde=serde, delete_sessions=delete_sessions, redactor=redactor)

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        namespace: str = "",
        delete_sessions: bool = False,
        redactor: Any = None,
    ) -> SessionSaver:
        """A saver over ``conn_string`` (a SQLite path, ``":memory:"``, a ``postgresql://`` URL
        or libpq ``key=value`` string), for ``with`` or ``async with``, which close it: what
        LangGraph's savers' ``from_conn_string`` give, so code written for them runs unchanged."""
        return cls(
            checked_conn_string(conn_string, "SessionSaver"),
            serde=serde,
            namespace=namespace,
            delete_sessions=delete_sessions,
            redactor=redactor,
        )

    def close(self) -> None:
        """Close the store if this saver opened it (from a path or URL)."""
        if self._owns_manager:
            self.manager.close()

    def __enter__(self) -> SessionSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SessionSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # -- conversion ------------------------------------------------------------------------

    def _tuple(self, row: CheckpointRow, checkpoint_ns: str) -> CheckpointTuple:
        thread_id = row.thread_id
        writes = sorted(row.writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
        loads = self.serde.loads_typed
        return CheckpointTuple(
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": row.checkpoint_id,
                }
            },
            loads((row.type, row.checkpoint)),
            cast(CheckpointMetadata, json.loads(row.metadata)),
            {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": row.parent_checkpoint_id,
                }
            }
            if row.parent_checkpoint_id
            else None,
            [(w.task_id, w.channel, loads((w.type, w.value))) for w in writes],  # type: ignore[arg-type]
        )

    def _row(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> tuple[CheckpointRow, str | None]:
        configurable = _configurable(config)
        redactor = self.redactor
        if redactor is not None:
            values = checkpoint["channel_values"]
            redacted = self._redact_state(redactor, values)
            if redacted is not values:
                checkpoint = {**checkpoint, "channel_values": redacted}
        type_, data = self.serde.dumps_typed(checkpoint)
        merged = get_checkpoint_metadata(config, metadata)
        if redactor is not None:
            merged = cast(CheckpointMetadata, redact_fields(redactor, merged, kept=_LANGGRAPH_METADATA))
        try:
            metadata_json = json.dumps(merged, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise InvalidInputError(f"checkpoint metadata must be JSON: {error}") from error
        run_id = merged.get("run_id")
        row = CheckpointRow(
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", ""),
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            data,
            metadata_json,
        )
        return row, run_id if isinstance(run_id, str) else None

    def _redact_state(self, redactor: Any, value: Any) -> Any:
        """:func:`redact_state`, remembering what each text masks to when the redactor is a
        ``PIIRedactor`` (pure: a text always masks the same way), since every checkpoint holds
        the thread's whole state again and its texts are mostly those of the one before."""
        if type(redactor) is not PIIRedactor:  # a subclass or a callable may be impure
            return redact_state(redactor, value)
        return _redacted(redactor, value, frozenset(), self._memo.of(redactor))

    def _writes(self, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> list[CheckpointWrite]:
        dumps = self.serde.dumps_typed
        redactor = self.redactor
        if redactor is not None:
            redacted = [(channel, self._redact_state(redactor, value)) for channel, value in writes]
            if any(new is not old and _holds_interrupt(old) for (_, new), (_, old) in zip(redacted, writes)):
                warnings.warn(
                    "the graph paused on values the redactor masks (an Interrupt's, such as a tool call"
                    " waiting for approval): the checkpoint keeps them masked, so the resumed graph runs"
                    " with the masks; SessionSaver(redactor=False) keeps the state as the graph holds it",
                    MaskedInterruptWarning,
                    stacklevel=3,
                )
            writes = redacted
        return [
            CheckpointWrite(task_id, WRITES_IDX_MAP.get(channel, idx), channel, *dumps(value), task_path)
            for idx, (channel, value) in enumerate(writes)
        ]

    def _list_args(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> dict[str, Any]:
        redactor = self.redactor
        if filter and redactor is not None and isinstance(filter, dict):
            filter = redact_filter(redactor, filter, kept=_LANGGRAPH_METADATA)
        args: dict[str, Any] = {"metadata": filter, "limit": limit}
        if config is not None:
            configurable = _configurable(config)
            args["thread_id"] = str(configurable["thread_id"])
            args["checkpoint_ns"] = configurable.get("checkpoint_ns")
            args["checkpoint_id"] = get_checkpoint_id(config)
        if before is not None:
            args["before"] = get_checkpoint_id(before)
        return args

    # -- sync ------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its latest when it names none) with its pending writes."""
        configurable = _configurable(config)
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        row = self.checkpoints.get(str(configurable["thread_id"]), checkpoint_ns, get_checkpoint_id(config))
        return None if row is None else self._tuple(row, checkpoint_ns)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of the thread of ``config`` (``None``: of every thread of the
        namespace), newest first; ``filter`` on metadata, ``before`` a checkpoint, ``limit``."""
        for row in self.checkpoints.list_checkpoints(**self._list_args(config, filter, before, limit)):
            yield self._tuple(row, row.checkpoint_ns)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint under its parent (``config``'s checkpoint id); the config naming it."""
        row, run_id = self._row(config, checkpoint, metadata)
        self.checkpoints.put(row, run_id=run_id)
        return _config_of(row)

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes for the checkpoint ``config`` names."""
        configurable = _configurable(config)
        self.checkpoints.put_writes(
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", ""),
            str(configurable["checkpoint_id"]),
            self._writes(writes, task_id, task_path),
            replace=all(w[0] in WRITES_IDX_MAP for w in writes),
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes (``delete_sessions``: its whole session)."""
        self.checkpoints.delete_thread(str(thread_id))

    def erase_messages(self, thread_id: str, ids: Sequence[str], *, vacuum: bool = False) -> EraseResult:
        """Erase messages of the thread's session (``SessionManager.erase_messages``) and take
        them out of every checkpoint and pending write of the thread first (each value loaded
        with the saver's ``serde``, the messages with those ids left out of its lists and
        dicts, and dumped again), so that none of their text stays in the store and a resumed
        thread does not hand them back to the middleware. What was removed."""
        wanted = [str(message_id) for message_id in ids]
        rewrite = self._eraser(str(thread_id), wanted)
        return self.checkpoints.erase_messages(str(thread_id), wanted, rewrite, vacuum=vacuum)

    def _eraser(self, thread_id: str, ids: Sequence[str]) -> CheckpointRewrite:
        """How each serialised value of the thread loses the messages ``ids``: by id, and the
        graph's input before it got an id (the same type and content as an erased message);
        and the tool calls those messages made, wherever the graph copied them (see
        :func:`_without_messages`)."""
        session = self.manager.get_session(thread_id)
        stored = to_langchain_messages([found for found in map(session.get_message, ids) if found is not None])
        calls = [call for message in stored if isinstance(message, AIMessage) for call in message.tool_calls]
        twins = frozenset(_twin(message) for message in stored)
        call_ids = frozenset(call_id for call in calls if (call_id := call.get("id")))
        call_twins = frozenset(_call_twin(call) for call in calls)

        def rewrite(type_: str, data: bytes, wanted: frozenset[str]) -> tuple[str, bytes] | None:
            value = self.serde.loads_typed((type_, data))
            kept = _without_messages(value, _Erasure(wanted, twins, call_ids, call_twins))
            if kept is value:
                return None
            return self.serde.dumps_typed([] if kept is _ERASED else kept)

        return rewrite

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another."""
        self.checkpoints.copy_thread(str(source_thread_id), str(target_thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes these runs made."""
        self.checkpoints.delete_runs([str(run) for run in run_ids])

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep the latest checkpoint of each namespace of the threads (``"keep_latest"``), or none (``"delete"``)."""
        self.checkpoints.prune([str(t) for t in thread_ids], strategy=strategy)

    # -- async (the store's work runs in a worker thread) ----------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = _configurable(config)
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        row = await self.checkpoints.aget(str(configurable["thread_id"]), checkpoint_ns, get_checkpoint_id(config))
        return None if row is None else self._tuple(row, checkpoint_ns)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for row in self.checkpoints.alist_checkpoints(**self._list_args(config, filter, before, limit)):
            yield self._tuple(row, row.checkpoint_ns)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        row, run_id = self._row(config, checkpoint, metadata)
        await self.checkpoints.aput(row, run_id=run_id)
        return _config_of(row)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        configurable = _configurable(config)
        await self.checkpoints.aput_writes(
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", ""),
            str(configurable["checkpoint_id"]),
            self._writes(writes, task_id, task_path),
            replace=all(w[0] in WRITES_IDX_MAP for w in writes),
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self.checkpoints.adelete_thread(str(thread_id))

    async def aerase_messages(self, thread_id: str, ids: Sequence[str], *, vacuum: bool = False) -> EraseResult:
        """Async form of :meth:`erase_messages`."""
        wanted = [str(message_id) for message_id in ids]
        rewrite = await asyncio.to_thread(self._eraser, str(thread_id), wanted)
        return await self.checkpoints.aerase_messages(str(thread_id), wanted, rewrite, vacuum=vacuum)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.checkpoints.acopy_thread(str(source_thread_id), str(target_thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self.checkpoints.adelete_runs([str(run) for run in run_ids])

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self.checkpoints.aprune([str(t) for t in thread_ids], strategy=strategy)

    # -- DeltaChannel history (one statement per page of ancestors, not one per ancestor) ----

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """What ``BaseCheckpointSaver``'s walk gives (each channel's writes since its nearest
        stored value, and that value), read a page of ancestors per statement instead of one
        ``get_tuple`` per ancestor; a chain that loops ends where it repeats."""
        if not channels:
            return {}
        walk = _DeltaWalk(channels, self.serde)
        thread_id, checkpoint_ns, start = self._delta_start(config)
        if start is _LATEST:
            latest = self.checkpoints.get(thread_id, checkpoint_ns, None)
            start = None if latest is None else walk.target(latest)
        page = _ANCESTORS_FIRST_PAGE
        while isinstance(start, str) and walk.remaining:
            rows = self.checkpoints.ancestors(thread_id, checkpoint_ns, start, page, sorted(walk.remaining))
            start = walk.take(rows, page)
            page = min(page * _ANCESTORS_GROWTH, _ANCESTORS_MAX_PAGE)
        return walk.result()

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        walk = _DeltaWalk(channels, self.serde)
        thread_id, checkpoint_ns, start = self._delta_start(config)
        if start is _LATEST:
            latest = await self.checkpoints.aget(thread_id, checkpoint_ns, None)
            start = None if latest is None else walk.target(latest)
        page = _ANCESTORS_FIRST_PAGE
        while isinstance(start, str) and walk.remaining:
            rows = await self.checkpoints.aancestors(thread_id, checkpoint_ns, start, page, sorted(walk.remaining))
            start = walk.take(rows, page)
            page = min(page * _ANCESTORS_GROWTH, _ANCESTORS_MAX_PAGE)
        return walk.result()

    @staticmethod
    def _delta_start(config: RunnableConfig) -> tuple[str, str, Any]:
        configurable = _configurable(config)
        checkpoint_id = get_checkpoint_id(config)
        start = _LATEST if checkpoint_id is None else str(checkpoint_id)
        return str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""), start

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A channel's next version: ``"<n, 32 digits>.<random>"``, increasing (as LangGraph's
        own SQL savers make them)."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:032}.{random.random():016}"


_LATEST = object()
"""A config that names no checkpoint: its thread's latest."""
_ANCESTORS_FIRST_PAGE = 32
"""Ancestors read by the first statement of a DeltaChannel walk: LangGraph stores a channel's
value every 100 updates, so a walk reads some tens of ancestors; each next page is
``_ANCESTORS_GROWTH`` times larger, up to ``_ANCESTORS_MAX_PAGE``."""
_ANCESTORS_GROWTH = 8
_ANCESTORS_MAX_PAGE = 1024


class _DeltaWalk:
    """``BaseCheckpointSaver.get_delta_channel_history``'s walk over pages of ancestors: each
    ancestor's writes to the channels still seeking a value (newest first, collected before its
    own value is looked at), until each channel finds a stored value."""

    def __init__(self, channels: Sequence[str], serde: SerializerProtocol) -> None:
        self.channels = channels
        self.serde = serde
        self.remaining = set(channels)
        self.collected: dict[str, list[PendingWrite]] = {channel: [] for channel in channels}
        self.seeds: dict[str, Any] = {}
        self.walked: set[str] = set()
        self.skip_first = True
        """The first row read is the target itself, whose writes and value do not count."""

    def target(self, row: CheckpointRow) -> str | None:
        """The walk starts from ``row`` (the thread's latest, read apart): its parent."""
        self.walked.add(row.checkpoint_id)
        self.skip_first = False
        return row.parent_checkpoint_id

    def take(self, rows: list[CheckpointRow], page: int) -> str | None:
        """Walk ``rows`` (a page of ancestors, nearest first); the id to read the next page
        from, or ``None`` when the walk is over."""
        full = len(rows) == page
        if self.skip_first:
            if not rows:
                return None
            self.walked.add(rows[0].checkpoint_id)
            rows, self.skip_first = rows[1:], False
        for row in rows:
            if row.checkpoint_id in self.walked or not self.remaining:
                return None
            self.walked.add(row.checkpoint_id)
            writes = sorted(row.writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
            for write in reversed(writes):
                if write.channel in self.remaining:
                    value = self.serde.loads_typed((write.type, write.value))  # type: ignore[arg-type]
                    self.collected[write.channel].append((write.task_id, write.channel, value))
            values = self.serde.loads_typed((row.type, row.checkpoint))["channel_values"]
            for channel in [c for c in self.remaining if c in values]:
                self.seeds[channel] = values[channel]
                self.remaining.discard(channel)
        return rows[-1].parent_checkpoint_id if full and rows and self.remaining else None

    def result(self) -> dict[str, DeltaChannelHistory]:
        history: dict[str, DeltaChannelHistory] = {}
        for channel in self.channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(self.collected[channel]))}
            if channel in self.seeds:
                entry["seed"] = self.seeds[channel]
            history[channel] = entry
        return history


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    configurable = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(configurable, dict) or configurable.get("thread_id") in (None, ""):
        raise InvalidInputError('a checkpointer config needs {"configurable": {"thread_id": ...}}')
    return configurable


def _config_of(row: CheckpointRow) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": row.thread_id,
            "checkpoint_ns": row.checkpoint_ns,
            "checkpoint_id": row.checkpoint_id,
        }
    }


_MEMO_TEXT_CHARS = 16_384
"""A longer text is redacted each time rather than remembered."""
_MEMO_CHARS = 4_000_000
"""The characters a saver's memo holds before it starts again (a few MB)."""


class _TextMemo:
    """What texts mask to under one redactor (``of``), forgotten all at once when they pass
    :data:`_MEMO_CHARS` characters, or when the redactor changes."""

    def __init__(self) -> None:
        self._redactor: Any = None
        self._texts: dict[str, str] = {}
        self._chars = 0

    def of(self, redactor: Any) -> _TextMemo:
        if redactor is not self._redactor:
            self._redactor, self._texts, self._chars = redactor, {}, 0
        return self

    def get(self, text: str) -> str | None:
        return self._texts.get(text)

    def put(self, text: str, masked: str) -> None:
        if len(text) > _MEMO_TEXT_CHARS:
            return
        if self._chars + len(text) > _MEMO_CHARS:
            self._texts, self._chars = {}, 0
        self._texts[text] = masked
        self._chars += len(text)


_KEPT_MESSAGE_FIELDS = frozenset(
    {"id", "type", "name", "tool_call_id", "status", "index", "url", "base64", "data", "mime_type"}
    | {"source_type", "file_id", "signature"}
)
"""Fields of a message's content blocks and tool calls that identify, route or carry bytes: never
redacted (as ``sessions_core`` keeps a stored part's). What such a field holds is another field."""


def redact_state(redactor: Any, value: Any) -> Any:
    """``value`` (a graph's state, a channel's value or a write) with its free text through
    ``redactor``: every string of the dicts, lists and tuples it holds, and of each LangChain
    message its content, tool-call arguments, ``additional_kwargs`` and a tool result's
    artifact, of a ``Send`` its input and of an ``Interrupt`` its value. Identifiers, types,
    URLs, bytes and metadata of messages and tool calls are kept, as are objects of other kinds;
    the same object when nothing was masked."""
    return _redacted(redactor, value, frozenset())


def _holds_interrupt(value: Any) -> bool:
    """Whether a write's value is an ``Interrupt`` or a sequence of them (LangGraph's pause)."""
    if isinstance(value, (list, tuple)):
        return any(isinstance(item, Interrupt) for item in value)
    return isinstance(value, Interrupt)


def _redacted(redactor: Any, value: Any, kept: frozenset[str], memo: _TextMemo | None = None) -> Any:
    if isinstance(value, str):
        if not value:
            return value
        redacted = memo.get(value) if memo is not None else None
        if redacted is None:
            redacted = redact_text(redactor, value)
            if memo is not None:
                memo.put(value, redacted)
        return value if redacted == value else redacted
    if type(value) is dict:
        if not value:
            return value
        no_keys: frozenset[str] = frozenset()
        items = {key: item if key in kept else _redacted(redactor, item, no_keys, memo) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    if type(value) in (list, tuple):
        if not value:
            return value
        items = [_redacted(redactor, item, kept, memo) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, BaseMessage):
        return _redacted_message(redactor, value, memo)
    if isinstance(value, Send):  # a task's input: create_agent's tool calls
        arg = _redacted(redactor, value.arg, _KEPT_MESSAGE_FIELDS, memo)
        return value if arg is value.arg else Send(value.node, arg, timeout=value.timeout)
    if isinstance(value, Interrupt):  # what a paused graph asks about (the graph's own shape: every string)
        interrupt_value = _redacted(redactor, value.value, frozenset(), memo)
        return value if interrupt_value is value.value else dataclasses.replace(value, value=interrupt_value)
    return value


def _redacted_message(redactor: Any, message: BaseMessage, memo: _TextMemo | None) -> BaseMessage:
    fields = ["content", "additional_kwargs"]
    if isinstance(message, AIMessage):
        fields += ["tool_calls", "invalid_tool_calls"]
        if isinstance(message, AIMessageChunk):
            fields.append("tool_call_chunks")
    elif isinstance(message, ToolMessage):
        fields.append("artifact")
    changed = {}
    for name in fields:
        value = getattr(message, name)
        redacted = _redacted(redactor, value, _KEPT_MESSAGE_FIELDS, memo)
        if redacted is not value:
            changed[name] = redacted
    return message.model_copy(update=changed) if changed else message


_ERASED = object()
"""What :func:`_without_messages` makes of an erased message itself."""


def _twin(message: BaseMessage) -> tuple[str, str]:
    """What an id-less copy of ``message`` shares with it: its type and content."""
    return message.type, json.dumps(message.content, sort_keys=True, default=str)


@dataclasses.dataclass(frozen=True)
class _Erasure:
    """What an erasure takes out of a thread's values: the messages ``ids`` (or whose source id
    is one), id-less copies of them (``twins``, see :func:`_twin`), and the tool calls they made,
    by id (``calls``) and, where a copy has no id, by name and arguments (``call_twins``)."""

    ids: frozenset[str]
    twins: frozenset[tuple[str, str]] = frozenset()
    calls: frozenset[str] = frozenset()
    call_twins: frozenset[tuple[str, str]] = frozenset()


def _call_twin(call: Mapping[str, Any]) -> tuple[str, str]:
    """What a copy of a tool call without its id shares with it: its name and arguments."""
    return str(call.get("name")), json.dumps(call.get("args"), sort_keys=True, default=str)


def _without_messages(value: Any, erasure: _Erasure) -> Any:
    """``value`` without what ``erasure`` takes out, left out of the lists, tuples and dicts
    holding it (``value`` itself when it holds none of it; ``_ERASED`` when it is some of it):
    LangChain messages, and messages as dicts (an ``id``, a ``content`` and a ``type`` or
    ``role``); the erased messages' tool calls as dicts (in ``create_agent``'s ``Send`` to its
    tools node, which goes with its last call; a dict holding one as its ``tool_call`` goes with
    it), and the ``{"name": ..., "args": ...}`` without an id that an approval request of
    ``HumanInTheLoopMiddleware`` repeats; inside a ``Send``'s input and an ``Interrupt``'s value
    too. Other objects are kept as they are."""
    if isinstance(value, BaseMessage):
        if value.id is None:
            return _ERASED if _twin(value) in erasure.twins else value
        return _ERASED if value.id in erasure.ids or source_id(value) in erasure.ids else value
    kind = type(value)
    if kind is dict:
        if _is_erased_dict(value, erasure):
            return _ERASED
        kept_items = {}
        for key, inner in value.items():
            new = _without_messages(inner, erasure)
            if new is _ERASED and key == "tool_call":
                return _ERASED
            if new is not _ERASED:
                kept_items[key] = new
        changed = len(kept_items) != len(value) or any(kept_items[k] is not value[k] for k in kept_items)
        return kept_items if changed else value
    if kind is list or kind is tuple:
        kept = [new for new in (_without_messages(inner, erasure) for inner in value) if new is not _ERASED]
        if len(kept) == len(value) and all(new is old for new, old in zip(kept, value)):
            return value
        return kept if kind is list else tuple(kept)
    if isinstance(value, Send):
        arg = _without_messages(value.arg, erasure)
        if arg is value.arg:
            return value
        if arg is _ERASED or (isinstance(arg, (list, tuple)) and not arg):
            return _ERASED
        return Send(value.node, arg, timeout=value.timeout)
    if isinstance(value, Interrupt):
        asked = _without_messages(value.value, erasure)
        if asked is value.value:
            return value
        return dataclasses.replace(value, value=None if asked is _ERASED else asked)
    return value


def _is_erased_dict(value: dict[str, Any], erasure: _Erasure) -> bool:
    """Whether ``value`` is an erased message as a dict, or one of the erased messages' tool calls."""
    found = value.get("id")
    if found is not None and not isinstance(found, str):
        return False
    if found in erasure.ids and "content" in value and ("type" in value or "role" in value):
        return True
    if "name" not in value or "args" not in value:
        return False
    return found in erasure.calls if found is not None else _call_twin(value) in erasure.call_twins
