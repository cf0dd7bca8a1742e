"""Count the calls an adapter makes into the core (``sys.setprofile``): the boundary a turn crosses."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def crossings(adapter: str) -> Iterator[Counter[str]]:
    """Within the block, every call from a frame of the ``adapter`` package into a function of
    ``sessions_core``, by callee (``module.function``), in every thread."""
    counts: Counter[str] = Counter()
    entered: list[object] = []  # every frame counted, kept alive: a coroutine resumed is one call
    seen: set[int] = set()

    def profile(frame, event, arg):  # noqa: ANN001 - the profiler's signature
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back
        if caller is None or not callee.startswith("sessions_core"):
            return
        if caller.f_globals.get("__name__", "").startswith(adapter) and id(frame) not in seen:
            seen.add(id(frame))
            entered.append(frame)
            counts[f"{callee}.{frame.f_code.co_qualname}"] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
