"""Applying compaction overlays to a path (pure; section 7.5 of the reference)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from .messages import COMPACTION_ID_PREFIX


class OverlayLike(Protocol):
    @property
    def from_message_id(self) -> str: ...

    @property
    def to_message_id(self) -> str: ...


class Segment(NamedTuple):
    """Path positions ``start .. end - 1``: raw rows, or replaced by ``overlay`` when it is set."""

    start: int
    end: int
    overlay: OverlayLike | None


def summary_id(compaction_id: str) -> str:
    """The id of the summary message that the overlay ``compaction_id`` shows in its range."""
    return COMPACTION_ID_PREFIX + compaction_id


def is_summary_id(message_id: str) -> bool:
    """Whether ``message_id`` is the id of an overlay's summary message (never stored as a row)."""
    return message_id.startswith(COMPACTION_ID_PREFIX)


def plan_overlays(ids: Sequence[str], overlays: Sequence[OverlayLike]) -> list[Segment]:
    """Split a root-to-leaf path into raw runs and overlay-covered runs.

    Walking left to right, an overlay applies at position ``i`` when it starts at ``ids[i]`` and
    ends on the path at or after ``i``; among several, the newest (last in storage order) wins.
    Its covered range is skipped. Overlays anchored off the path are ignored.
    """
    if not overlays:
        return [Segment(0, len(ids), None)] if ids else []
    position = {message_id: i for i, message_id in enumerate(ids)}
    starting: dict[str, list[OverlayLike]] = {}
    for overlay in overlays:
        if overlay.from_message_id in position and overlay.to_message_id in position:
            starting.setdefault(overlay.from_message_id, []).append(overlay)
    segments: list[Segment] = []
    raw_start = 0
    i = 0
    while i < len(ids):
        chosen = None
        for overlay in reversed(starting.get(ids[i], ())):
            if position[overlay.to_message_id] >= i:
                chosen = overlay
                break
        if chosen is None:
            i += 1
            continue
        if raw_start < i:
            segments.append(Segment(raw_start, i, None))
        end = position[chosen.to_message_id] + 1
        segments.append(Segment(i, end, chosen))
        i = raw_start = end
    if raw_start < len(ids):
        segments.append(Segment(raw_start, len(ids), None))
    return segments


class Anchored(NamedTuple):
    """An overlay whose first message is an ancestor of its last, at the depths given."""

    overlay: OverlayLike
    order: int
    """Its position in storage order (a newer overlay wins where several could apply)."""
    from_depth: int
    to_depth: int


def overlay_ending_at(message_id: str, anchored: Sequence[Anchored]) -> Anchored | None:
    """The overlay :func:`plan_overlays` applies over the range ending at ``message_id``, given
    that ``message_id`` is the deepest end of an overlay on a path (a walk up from the leaf
    stops there first); ``None`` when the depths cannot tell (then read the whole path).

    Of the overlays ending there, the one starting highest applies (the left-to-right scan
    reaches it first; the newest if several start there), unless another overlay may capture
    its start first: one starting higher and ending inside its range, or one starting where it
    starts, newer, and ending inside it. Whether those ends are on the path is not known
    without walking the range, so either case means ``None``.
    """
    ending = [a for a in anchored if a.overlay.to_message_id == message_id]
    if not ending:
        return None
    chosen = min(ending, key=lambda a: (a.from_depth, -a.order))
    start, end = chosen.from_depth, chosen.to_depth
    for other in anchored:
        if other is chosen or other.to_depth >= end:
            continue
        if other.from_depth < start <= other.to_depth:
            return None
        if other.order > chosen.order and other.overlay.from_message_id == chosen.overlay.from_message_id:
            return None
    return chosen
