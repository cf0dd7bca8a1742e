"""The change feed of a session or a manager: subscribers told of every write, and ``mirror``,
which keeps an in-memory copy of the history in step with it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ._async import call
from .messages import SessionMessage
from .models import SessionEvent

logger = logging.getLogger("sessions_core")

Subscriber = Callable[[SessionEvent], Any]


class ChangeFeed:
    """Subscribers called with each :class:`SessionEvent` published, in subscription order.

    A subscriber may be plain or ``async def`` (awaited from sync code); one that fails is
    logged and never fails the write, nor keeps the others from being called.
    """

    __slots__ = ("_subscribers",)

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    @property
    def has_subscribers(self) -> bool:
        """Whether anyone listens (so that building an event can be skipped)."""
        return bool(self._subscribers)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Add ``callback``; return the function that removes it (idempotent)."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, event: SessionEvent) -> None:
        """Call every subscriber with ``event``."""
        for subscriber in list(self._subscribers):
            try:
                call(subscriber, event)
            except Exception as error:
                logger.warning("a change-feed subscriber failed on %s: %s", event.type, error)


def mirror(
    feed: ChangeFeed,
    read: Callable[[], list[SessionMessage]],
    get: Callable[[], list[SessionMessage]],
    set: Callable[[list[SessionMessage]], Any],
) -> Callable[[], None]:
    """Keep the list behind ``get`` / ``set`` equal to ``read()`` (the active history): ``set`` it
    now and after every write published on ``feed`` that changes the active branch (an append to
    its leaf extends the list; anything else reads it again). Returns the function that stops."""
    set(read())

    def follow(event: SessionEvent) -> None:
        if event.type == "block" or (event.type == "append" and not event.inserted):
            return
        if event.type == "append" and event.message is not None:
            current = get()
            last = current[-1] if current else None
            extends = (last.id if last else None) == event.parent_id
            # A last message without a time (not read from the store) cannot be ordered: read again.
            newest = last is None or (
                last.created_at is not None and (event.message.created_at or last.created_at) >= last.created_at
            )
            if extends and newest:
                set([*current, event.message])
                return
        set(read())

    return feed.subscribe(follow)
