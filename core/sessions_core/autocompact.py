"""The compaction runner of a session: the compaction function and its timeout, the threshold
and token counter of automatic compaction, the cached estimate of the active branch, the error
handler; and storing a compaction's overlay so that successive compactions form one chain."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._async import call_with_timeout
from ._time import now_us
from .compaction import CompactContext, CompactResult, TokenCounter
from .errors import CompactionError
from .messages import COMPACTION_ID_PREFIX, SessionMessage, TextPart
from .stores.base import CompactionRow, Store
from .tokens import estimate_message_tokens, estimate_tokens

logger = logging.getLogger("sessions_core")

__all__ = ["CompactionRunner", "TokenCounter", "compact_result", "store_overlay"]


class CompactionRunner:
    """One session's compaction settings and state.

    ``estimate`` caches ``(leaf_id, tokens)`` of the branch last appended to, so that the
    automatic check after an append reads no history; any other write drops it (``forget``).
    """

    def __init__(self) -> None:
        self.fn: Callable[..., Any] | None = None
        self.timeout: float | None = None
        self.threshold: int | None = None
        self.token_counter: TokenCounter | None = None
        self.error_handler: Callable[[BaseException], Any] | None = None
        self.lock = threading.RLock()  # one compaction of a session object at a time
        self.estimate: tuple[str, int] | None = None
        self._warned_noop = False
        self._prompt_tokens: tuple[str, int] | None = None

    @property
    def automatic(self) -> bool:
        """Whether appends are followed by the threshold check."""
        return self.threshold is not None and self.fn is not None

    def forget(self) -> None:
        """Drop the cached estimate (the branch changed other than by an append)."""
        self.estimate = None

    def count(self, messages: list[SessionMessage]) -> int:
        """Tokens of ``messages`` by the configured counter (default: the heuristic)."""
        return (self.token_counter or estimate_message_tokens)(messages)

    def prompt_tokens(self, prompt: str) -> int:
        """Tokens of the system prompt (cached while the prompt object is the same)."""
        cached = self._prompt_tokens
        if cached is not None and cached[0] is prompt:
            return cached[1]
        counter = self.token_counter
        count_text: Callable[[str], int] | None = getattr(counter, "count_text", None)  # as TiktokenCounter's
        if counter is None:
            tokens = estimate_tokens(prompt)
        elif callable(count_text):
            tokens = count_text(prompt)
        else:
            tokens = counter([SessionMessage(id="system-prompt", role="system", parts=[TextPart(text=prompt)])])
        self._prompt_tokens = (prompt, tokens)
        return tokens

    def track(self, leaf_id: str, tokens: int, parent_id: str | None, history_tokens: Callable[[str], int]) -> None:
        """Update the estimate after ``leaf_id`` (of ``tokens``) was stored under ``parent_id``:
        added to the cached total when it extends that branch, else ``history_tokens(leaf_id)``."""
        if not self.automatic:
            return
        cached = self.estimate
        if parent_id is not None and cached is not None and cached[0] == parent_id:
            total = cached[1] + tokens
        else:
            total = history_tokens(leaf_id)
        self.estimate = (leaf_id, total)

    def run(self, history: list[SessionMessage], using: Callable[..., Any] | None = None) -> CompactResult | None:
        """Call the compaction function (``using``, else the configured one) on ``history``;
        ``None`` when it found nothing to do. Raises ``CompactionError`` if it fails, times out
        or returns something unusable."""
        context = CompactContext(token_counter=self.count)
        fn = using or self.fn
        assert fn is not None, "run() needs a compaction function (Session.compact checks)"
        try:
            outcome = call_with_timeout(self.timeout, fn, history, context)
        except Exception as error:
            raise CompactionError(f"compaction function failed: {error}") from error
        return compact_result(outcome)

    def compacted(self) -> None:
        """A compaction was stored: warn again the next time one finds nothing."""
        self._warned_noop = False

    def after_append(
        self,
        session_id: str,
        leaf_id: str,
        prompt_tokens: Callable[[], int],
        compact: Callable[[str], CompactResult | None],
    ) -> None:
        """Compact the branch of ``leaf_id`` when its estimate plus ``prompt_tokens()`` is over
        the threshold. A failure goes to the error handler (or the log), never to the caller."""
        threshold = self.threshold
        if threshold is None or not self.automatic or self.estimate is None:
            return
        try:
            if self.estimate[1] + prompt_tokens() <= threshold:
                return
            if compact(leaf_id) is None and not self._warned_noop:
                self._warned_noop = True
                logger.warning(
                    "session %r is over its compaction threshold but the compaction function found"
                    " nothing to compress; the token counter may under-count the tail",
                    session_id,
                )
        except Exception as error:
            self._report(session_id, error)

    def _report(self, session_id: str, error: BaseException) -> None:
        handler = self.error_handler
        if handler is None:
            logger.warning("automatic compaction of session %r failed: %s", session_id, error)
            return
        try:
            call_with_timeout(None, handler, error)
        except Exception as handler_error:
            logger.warning("the compaction error handler failed: %s", handler_error)


def compact_result(outcome: Any) -> CompactResult | None:
    """A compaction function's result as a ``CompactResult`` (``None`` when there is none)."""
    if outcome is None:
        return None
    if isinstance(outcome, Mapping):
        get: Callable[..., Any] = outcome.get  # values of any type: checked below
        outcome = CompactResult(
            get("summary"), get("from_message_id", get("fromMessageId")), get("to_message_id", get("toMessageId"))
        )
    summary = getattr(outcome, "summary", None)
    start = getattr(outcome, "from_message_id", None)
    end = getattr(outcome, "to_message_id", None)
    if not (isinstance(summary, str) and isinstance(start, str) and isinstance(end, str)):
        raise CompactionError(f"a compaction function must return a CompactResult or None, not {outcome!r}")
    if not summary.strip():
        return None
    return CompactResult(summary, start, end)


def store_overlay(
    store: Store, session_id: str, leaf: str, history: list[SessionMessage], result: CompactResult
) -> tuple[CompactionRow | None, str]:
    """Store the overlay of ``result``, computed on ``history`` (the branch of ``leaf``, overlays
    applied), and return it with its start: the start of the earliest overlay visible on the
    branch, so that successive compactions form one chain. The row is ``None`` when an overlay
    stored meanwhile already covers more. Raises ``CompactionError`` when the range does not
    lie on the branch in order."""
    visible = {message.id for message in history}
    if result.to_message_id not in visible or result.to_message_id.startswith(COMPACTION_ID_PREFIX):
        raise CompactionError(f"compaction function named {result.to_message_id!r}, which is not on the branch")
    existing = [
        c
        for c in store.get_compactions(session_id)
        if COMPACTION_ID_PREFIX + c.id in visible or (c.from_message_id in visible and c.to_message_id in visible)
    ]
    from_id = existing[0].from_message_id if existing else result.from_message_id
    position = {entry.id: i for i, entry in enumerate(store.path(session_id, leaf))}
    if position.get(from_id, len(position)) > position[result.to_message_id]:
        raise CompactionError(
            f"compaction function named the range {from_id!r} .. {result.to_message_id!r},"
            " which does not lie on the branch in that order"
        )
    # The overlay's time is taken once the check has run: newest wins, so storage order must be
    # the order in which compactions were checked.
    row = store.add_compaction_unless(
        session_id,
        lambda: CompactionRow(str(uuid.uuid4()), result.summary, from_id, result.to_message_id, now_us()),
        lambda compactions: _superseded(
            store, session_id, compactions, visible, from_id, result.to_message_id, leaf, position
        ),
    )
    return row, from_id


def _superseded(
    store: Store,
    session_id: str,
    compactions: Sequence[CompactionRow],
    visible: set[str],
    from_id: str,
    to_id: str,
    leaf: str,
    position: Mapping[str, int],
) -> bool:
    """Whether an overlay the compaction function did not see (stored meanwhile by another
    ``Session``, in this process or another) already covers ``from_id .. to_id`` and more on
    this branch: storing this one, the newest, would show again what that one summarised."""
    for overlay in compactions:
        if overlay.from_message_id != from_id or COMPACTION_ID_PREFIX + overlay.id in visible:
            continue
        end = position.get(overlay.to_message_id)
        if end is not None:
            if end > position[to_id]:
                return True
        elif any(entry.id == leaf for entry in store.path(session_id, overlay.to_message_id)):
            return True  # it ends after messages appended to this branch since the read
    return False
