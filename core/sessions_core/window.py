"""The recent window of a history within a hard token budget (pure).

Compaction's tail (``compaction.find_tail_cut``) may pass its budget to keep a tool call with its
results, because the rest of the history is summarised anyway. A window shown to a model instead
must fit its budget, so it drops messages from its old end until it starts at a user turn; only
the newest turn, when it alone is over the budget, is kept whole (as LlamaIndex's ``Memory``
keeps it: providers such as Bedrock refuse a history that does not start with the user).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from .messages import SessionMessage

__all__ = ["recent_window"]


def recent_window(
    newest_first: Iterable[SessionMessage], count: Callable[[SessionMessage], int], budget: int
) -> list[SessionMessage]:
    """The newest messages whose ``count`` fits ``budget``, oldest first (always the newest one).

    ``newest_first`` is read only as far as the window reaches. When older messages are left out,
    the window starts at its first ``user`` message, so no reply or tool result is shown without
    what it answers. With no user message within the budget, the window reaches back to the
    newest one before it, over the budget: the newest turn whole, from its user message. Only
    when there is none at all are leading ``tool`` messages dropped (the newest message always
    stays). An item of ``newest_first`` that is not a message (a caller's marker for "older
    messages") is never a user message.
    """
    window: list[SessionMessage] = []
    used = 0
    left_out: SessionMessage | None = None  # the newest message that did not fit
    rest = iter(newest_first)
    for message in rest:
        tokens = count(message)
        if window and used + tokens > budget:
            left_out = message
            break
        window.append(message)
        used += tokens
    window.reverse()
    if left_out is None:
        return window
    first_user = next((i for i, m in enumerate(window) if m.role == "user"), None)
    if first_user is not None:
        return window[first_user:]
    turn: list[SessionMessage] = []  # back to the newest user message, newest first
    for message in itertools.chain([left_out], rest):
        turn.append(message)
        if getattr(message, "role", None) == "user":
            return [*reversed(turn), *window]
    while len(window) > 1 and window[0].role == "tool":  # no user message at all
        window.pop(0)
    return window
