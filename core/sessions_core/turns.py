"""The turn service: what an agent framework's adapter does around each model call, written once
for both adapters.

An adapter converts its framework's messages and calls :class:`TurnService`; the service keeps,
per session, what the adapter would otherwise keep itself: the ids known to be stored, the run's
frozen prompt and tools, whether a compaction failed during the run, and the stored branch read
before the framework's state. It resolves each session once per call, stores each new message
once by id, and runs a compaction with the function the adapter passes (its framework's
summariser), with no context variable in between.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from . import reads
from .branching import ensure_session
from .compaction import CompactResult
from .errors import CompactionError
from .manager import SessionManager
from .messages import COMPACTION_ID_PREFIX, SessionMessage, is_marker
from .models import AppendResult, Compaction, SessionEvent
from .overlays import Segment, plan_overlays, summary_id
from .session import Session
from .stores.base import OverlayRow, _Latest
from .text import check_cache_size
from .tools import Tool
from .window import recent_window

logger = logging.getLogger(__name__)

DEFAULT_CACHE_SIZE = 1024

Parent = str | None | _Latest


class Incoming(NamedTuple):
    """A message of the framework's state that may need storing: its id, the parent to store it
    under (the message before it in the state, so a rewound thread branches where it was
    rewound; ``LATEST`` for the first), and how to convert it (called only when the id is not
    known to be stored; ``None``: it cannot be stored). ``usage``: input and output tokens to
    count when it is stored."""

    id: str
    parent: Parent
    convert: Callable[[], SessionMessage | None]
    usage: tuple[int, int] | None = None


@dataclass(frozen=True, eq=False)
class Run:
    """One agent run: the system prompt frozen at its start and the memory tools of its blocks."""

    prompt: str
    tools: list[Tool]


@dataclass(frozen=True, eq=False)
class StoredBranch:
    """The stored messages before the framework's state (what the model sees first)."""

    messages: list[SessionMessage]


@dataclass(frozen=True)
class CallView:
    """What an adapter needs to build the model's input for one call."""

    run: Run
    before: StoredBranch | None
    """The stored branch before the state's first message (``None``: not asked for)."""
    compactions: list[Compaction]
    """The session's compaction overlays, for :func:`view_segments`."""


class _Window:
    """The last window read, with what the service appended since: reused while the branch still
    ends where it did (the same leaf at the same depth) and nothing else changed it."""

    __slots__ = ("leaf", "depth", "budget", "messages", "complete", "counts", "count")

    def __init__(
        self,
        leaf: str,
        depth: int,
        budget: int,
        messages: list[SessionMessage],
        complete: bool,
        counts: dict[str, int],
        count: Callable[[SessionMessage], int],
    ) -> None:
        self.leaf, self.depth, self.budget = leaf, depth, budget
        self.messages = messages
        self.complete = complete
        """It starts where the branch starts (nothing older was left out)."""
        self.counts = counts
        """The token count of each message counted so far, by id (ids are unique on a branch)."""
        self.count = count


class _Exhausted:
    """An iterator that says whether it was read to its end, and how many items it gave."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = iter(items)
        self.exhausted = False
        self.given = 0

    def __iter__(self) -> _Exhausted:
        return self

    def __next__(self) -> Any:
        try:
            item = next(self._items)
        except StopIteration:
            self.exhausted = True
            raise
        self.given += 1
        return item


def _forget_cleared(service: weakref.ref[TurnService], event: SessionEvent) -> None:
    """A manager's ``clear`` (its session deleted or cleared): the service forgets the session."""
    live = service()
    if live is not None and event.type == "clear":
        live._forget(event.session_id)


_OLDER = object()  # stands for the messages older than a cached window: never fits a budget


@dataclass
class _Turns:
    session: Session
    known: set[str] = field(default_factory=set)
    run: Run | None = None
    failed: bool = False
    before: dict[str, StoredBranch] = field(default_factory=dict)
    stale: bool = False
    """The history was written since the run started: the next read starts a new run."""
    unsubscribe: Callable[[], None] | None = None
    window: _Window | None = None
    writing: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock)


class TurnService:
    """Per-session turn state for an adapter, the ``cache_size`` most recently used sessions.

    ``target`` is a ``Session`` (every id is that one), a ``SessionManager`` (a registered
    session per id: registered on first use, with ``session_search`` among the run's tools and
    each stored model reply's usage added to its counters) or a factory ``session_id ->
    Session``. A session is resolved once until it leaves the cache. ``tools=False``: runs
    carry no memory tools. ``compaction``: set as each session's compaction function when it
    is first resolved (what its own ``compact_after`` runs).
    """

    def __init__(
        self,
        target: Session | SessionManager | Callable[[str], Session],
        *,
        tools: bool = True,
        compaction: Callable[..., Any] | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        check_cache_size(cache_size)
        if not isinstance(target, (Session, SessionManager)) and not callable(target):
            raise TypeError(f"expected a Session, a SessionManager or a function session_id -> Session, not {target!r}")
        self.target = target
        self._tools = tools
        self._compaction = compaction
        self._cache_size = cache_size
        self._lock = threading.RLock()
        self._sessions: OrderedDict[str, _Turns] = OrderedDict()
        if isinstance(target, SessionManager):
            # A session deleted (erased, pruned, cleared) through the manager is resolved, and so
            # registered, again by its next turn.
            weakref.finalize(self, target.subscribe(partial(_forget_cleared, weakref.ref(self))))

    def _resolve(self, session_id: str) -> Session:
        target = self.target
        if isinstance(target, Session):
            return target
        if isinstance(target, SessionManager):
            ensure_session(target, session_id)
            return target.get_session(session_id)
        session = target(session_id)
        if not isinstance(session, Session):
            raise TypeError(f"the session factory returned {type(session).__name__}, not a Session")
        return session

    def _turns(self, session_id: str) -> _Turns:
        with self._lock:
            turns = self._sessions.get(session_id)
            if turns is not None:
                self._sessions.move_to_end(session_id)
                return turns
        session = self._resolve(session_id)
        evicted: list[_Turns] = []
        with self._lock:
            turns = self._sessions.get(session_id)
            if turns is None:
                turns = self._sessions[session_id] = _Turns(session)
                turns.unsubscribe = session.subscribe(lambda event: self._follow(turns, event))
                if self._compaction is not None:
                    session.on_compaction(self._compaction)
                while len(self._sessions) > self._cache_size:
                    evicted.append(self._sessions.popitem(last=False)[1])
        for gone in evicted:  # its session may live on (a manager's cache): it must not call back
            if gone.unsubscribe is not None:
                gone.unsubscribe()
        return turns

    def _follow(self, turns: _Turns, event: SessionEvent) -> None:
        """Deletes made in this process are stored again if the state still holds them; a
        message write other than the service's own appends drops the cached window."""
        if event.type != "block" and not (event.type == "append" and turns.writing):
            turns.window = None
        if event.type not in ("delete", "clear"):
            return
        with self._lock:
            if event.type == "clear":
                turns.known.clear()
            else:
                turns.known.difference_update(event.message_ids or ())
            turns.before.clear()

    def _forget(self, session_id: str) -> None:
        with self._lock:
            turns = self._sessions.pop(session_id, None)
        if turns is not None and turns.unsubscribe is not None:
            turns.unsubscribe()

    def session(self, session_id: str) -> Session:
        """The session of ``session_id`` (resolved once while it is cached)."""
        return self._turns(session_id).session

    # -- a model call ------------------------------------------------------------------------

    def before_call(
        self,
        session_id: str,
        incoming: Sequence[Incoming],
        *,
        new_run: bool,
        read_before: str | None = None,
    ) -> CallView:
        """Before a model call: store what of ``incoming`` is new, start a run when ``new_run``
        (the prompt frozen, the tools built; a compaction that failed in the last run may be
        tried again), and give what the model's input needs. ``read_before``: the id of the
        state's first message, to read the stored branch before it (read at the start of each
        run, so a branch changed by another process shows, and kept during the run)."""
        turns = self._turns(session_id)
        self._store(session_id, turns, incoming)
        if new_run or turns.run is None:  # a run resumed in another process did not start here
            self._start(session_id, turns)
        session = turns.session
        before, overlays = None, None
        if read_before is not None:
            before = None if new_run else turns.before.get(read_before)
            if before is None:
                before, overlays = self._read_before(turns, read_before)
        assert turns.run is not None
        if overlays is None:
            return CallView(turns.run, before, session.get_compactions())
        return CallView(turns.run, before, [reads.compaction(overlay.compaction) for overlay in overlays])

    def after_call(self, session_id: str, incoming: Sequence[Incoming]) -> None:
        """After a model call or a tool call: store what of ``incoming`` is new."""
        turns = self._turns(session_id)
        self._store(session_id, turns, incoming)

    def compact(self, session_id: str, leaf_id: str | None, compaction: Callable[..., Any]) -> list[Compaction] | None:
        """Compact the branch ending at ``leaf_id`` with ``compaction`` (a compaction function,
        ``create_compact_function``'s kind, summarising with the framework's model) unless one
        failed already in this run; the session's compactions after it, or ``None`` when
        nothing was compacted. A failure is logged and remembered until the next run; the
        history stays whole."""
        turns = self._turns(session_id)
        if turns.failed:
            return None
        try:
            result = turns.session.compact(leaf_id, using=compaction)
        except CompactionError as error:
            turns.failed = True
            logger.warning("compaction of session %r failed, history kept whole: %s", session_id, error)
            return None
        if result is None:
            return None
        return turns.session.get_compactions()

    # -- a memory read before each LLM call, and its writes ---------------------------------

    def run_prompt(self, session_id: str) -> str:
        """The system prompt of the current run, a new run starting (the prompt refreshed)
        when the history was written since the last one started."""
        turns = self._turns(session_id)
        with turns.lock:
            if turns.stale or turns.run is None:
                self._start(session_id, turns)
                turns.stale = False
            assert turns.run is not None
            return turns.run.prompt

    def recent(
        self, session_id: str, budget: Callable[[str], int], count: Callable[[SessionMessage], int]
    ) -> tuple[str, list[SessionMessage]]:
        """The run's prompt (:meth:`run_prompt`) and the newest messages of the active branch
        (compacted, without head markers) whose ``count`` fits ``budget(prompt)``, as
        ``recent_window`` cuts them. The window is read from the store once, then (a memory is
        read before every LLM call) from the last window and what :meth:`append` stored since,
        while the branch ends at the same leaf and depth and nothing else wrote to it. ``count``
        is one function per tokenizer (``tokens.message_counter``): its counts are kept with
        the window."""
        turns = self._turns(session_id)
        with turns.lock:
            prompt = self.run_prompt(session_id)
            limit = budget(prompt)
            session = turns.session
            latest = session.store.latest_leaf_totals(session.session_id)
            leaf, depth = (latest[0], latest[1].depth) if latest is not None else (None, 0)
            last = turns.window
            if (
                last is not None
                and leaf is not None
                and last.leaf == leaf
                and last.depth == depth
                and limit <= last.budget
                and last.count is count
            ):
                newest_first: Iterable[Any] = reversed(last.messages)
                if not last.complete:
                    newest_first = itertools.chain(newest_first, [_OLDER])
                return prompt, recent_window(newest_first, _counting(count, last.counts), limit)
            read = _Exhausted(
                m for m in session.history(leaf, newest_first=True) if not (m.role == "system" and is_marker(m))
            )
            counts: dict[str, int] = {}
            window = recent_window(read, _counting(count, counts), limit)
            # Complete: read to the branch's start with nothing left out (a window searching back
            # for its user message may read to the start and still leave older messages out).
            complete = read.exhausted and read.given == len(window)
            turns.window = None if leaf is None else _Window(leaf, depth, limit, window, complete, counts, count)
            return prompt, window

    def append(
        self, session_id: str, messages: Sequence[SessionMessage], *, compact_over: int | None = None
    ) -> list[AppendResult]:
        """Store ``messages`` as a chain under the latest one, each once, in one transaction
        (an agent turn), the cached window kept up to date; the next read starts a new run. When
        the batch ends with an assistant message (a turn is complete) and ``compact_over`` is
        given, the branch is compacted (with the session's compaction function) once its
        estimate passes it; a failed compaction is logged and the history kept whole."""
        if not messages:
            return []
        turns = self._turns(session_id)
        with turns.lock:
            turns.writing = True
            try:
                results = turns.session.append_messages(list(messages))
            finally:
                turns.writing = False
            turns.stale = True
            last = turns.window
            if last is not None and all(result.inserted for result in results):
                last.messages = [*last.messages, *(result.message for result in results)]
                last.leaf, last.depth = results[-1].message.id, last.depth + len(results)
            else:
                turns.window = None
        if compact_over is not None and messages[-1].role == "assistant":
            self.compact_if_over(session_id, compact_over)
        return results

    def compact_if_over(self, session_id: str, threshold: int) -> CompactResult | None:
        """Compact the active branch with the session's compaction function when its token
        estimate passes ``threshold``; ``None`` when not needed or when it failed (logged, the
        history kept whole)."""
        session = self._turns(session_id).session
        try:
            if session.get_token_estimate() > threshold:
                return self.compact_now(session_id)
        except CompactionError as error:
            logger.warning("compaction of session %r failed, history kept whole: %s", session_id, error)
        except Exception as error:  # a write must not fail because compaction did
            logger.warning("compaction of session %r failed: %s", session_id, error)
        return None

    def compact_now(self, session_id: str) -> CompactResult | None:
        """Compact the active branch now (``Session.compact``); raises ``CompactionError``
        (history unchanged) if the summary fails. The next read starts a new run."""
        result = self._turns(session_id).session.compact()
        self.changed(session_id)
        return result

    def changed(self, session_id: str) -> None:
        """The active branch was changed other than by :meth:`append` (moved, reset): the next
        read starts a new run and reads the window again."""
        turns = self._turns(session_id)
        with turns.lock:
            turns.stale = True
            turns.window = None

    # -- the parts ---------------------------------------------------------------------------

    def _start(self, session_id: str, turns: _Turns) -> None:
        prompt = turns.session.system_prompt_for_run()
        tools: list[Tool] = []
        if self._tools:
            tools = turns.session.tools()
            if isinstance(self.target, SessionManager):
                tools += self.target.tools()
        turns.run = Run(prompt, tools)
        turns.failed = False

    def _read_before(self, turns: _Turns, first_id: str) -> tuple[StoredBranch, list[OverlayRow]]:
        """The stored branch before ``first_id``, and the session's overlays (read with it)."""
        session = turns.session
        history, overlays = reads.history_and_overlays(session.store, session.session_id, first_id)
        branch = StoredBranch([m for m in history if m.id != first_id])
        with self._lock:
            turns.known.update(m.id for m in branch.messages if not m.id.startswith(COMPACTION_ID_PREFIX))
            turns.before[first_id] = branch
        return branch, overlays

    def _store(self, session_id: str, turns: _Turns, incoming: Sequence[Incoming]) -> None:
        # A message that is not stored (it cannot be converted, or is a compaction summary echoed
        # back) hands its own parent to the message after it: a parent must be a stored message.
        parent_of_unstored: dict[str, Parent] = {}
        for item in incoming:
            parent = item.parent
            if isinstance(parent, str):
                parent = parent_of_unstored.get(parent, parent)
            if item.id in turns.known:
                continue
            message = item.convert()
            if message is None or message.id.startswith(COMPACTION_ID_PREFIX):
                parent_of_unstored[item.id] = parent
                continue
            # A parent this service stored or read needs no check (a read) before the insert.
            known_parent = not isinstance(parent, str) or parent in turns.known
            result = turns.session._append(message, parent, None, check_parent=not known_parent)
            with self._lock:
                turns.known.add(item.id)
            manager = self.target if isinstance(self.target, SessionManager) else None
            if result.inserted and item.usage is not None and manager is not None and any(item.usage):
                manager.add_usage(session_id, input_tokens=item.usage[0], output_tokens=item.usage[1])


def view_segments(ids: Sequence[str], compactions: Sequence[Compaction]) -> list[Segment]:
    """The model's view of messages with these ids (a summary's id standing for the start of
    its range, as a history loaded compacted holds it): raw runs, and the runs each compaction
    overlay replaces by its summary."""
    if not compactions:
        return [Segment(0, len(ids), None)] if ids else []
    by_summary = {summary_id(c.id): c.from_message_id for c in compactions}
    return plan_overlays([by_summary.get(i, i) for i in ids], compactions)


__all__ = ["CallView", "Incoming", "Run", "StoredBranch", "TurnService", "view_segments"]


def _counting(count: Callable[[SessionMessage], int], counts: dict[str, int]) -> Callable[[Any], int]:
    """``count``, remembered in ``counts``; the messages older than a cached window never fit."""

    def counted(message: Any) -> int:
        if message is _OLDER:
            return sys.maxsize
        tokens = counts.get(message.id)
        if tokens is None:
            tokens = counts[message.id] = count(message)
        return tokens

    return counted
