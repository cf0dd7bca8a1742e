"""The recent window of a history within a hard token budget (pure).

Compaction's tail (``compaction.find_tail_cut``) may pass its budget to keep a tool call with its
results, because the rest of the history is summarised anyway. A window shown to a model instead
must fit its budget, so it drops messages from its old end until it starts at a user turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .messages import SessionMessage

__all__ = ["recent_window"]


def recent_window(
    newest_first: Iterable[SessionMessage], count: Callable[[SessionMessage], int], budget: int
) -> list[SessionMessage]:
    """The newest messages whose ``count`` fits ``budget``, oldest first (always the newest one).

    ``newest_first`` is read only as far as the window reaches. When older messages are left out,
    the window starts at its first ``user`` message, so no reply or tool result is shown without
    what it answers; with no user message in it, leading ``tool`` messages are dropped (the
    newest message always stays).
    """
    window: list[SessionMessage] = []
    used = 0
    truncated = False
    for message in newest_first:
        tokens = count(message)
        if window and used + tokens > budget:
            truncated = True
            break
        window.append(message)
        used += tokens
    window.reverse()
    if truncated:
        first_user = next((i for i, m in enumerate(window) if m.role == "user"), None)
        if first_user is not None:
            window = window[first_user:]
        else:
            while len(window) > 1 and window[0].role == "tool":
                window.pop(0)
    return window
