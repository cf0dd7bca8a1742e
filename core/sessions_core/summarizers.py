"""One convention for compaction summarisers: ``summarize(prompt) -> str``, sync or async.

``create_compact_function(summarize=...)`` takes any callable that returns the summary or an
awaitable of it. A model that has both a blocking and a native async call is wrapped once in a
:class:`Summarizer`: the blocking call on sync paths, the async one within
``_async.prefer_async`` (the block the adapters' async paths run in), awaited by the core on the
caller's event loop.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from ._async import prefers_async, run_in_thread
from .errors import InvalidInputError

__all__ = ["Summarizer"]


class Summarizer:
    """A compaction ``summarize(prompt) -> str`` with a sync form, an async form, or both.

    Calling it runs ``sync``; within ``prefer_async()`` (or without a sync form) it returns the
    coroutine of ``asynchronous`` instead. :meth:`ainvoke` is the async form (the sync one in a
    worker thread when there is no async form).
    """

    def __init__(
        self,
        sync: Callable[[str], str] | None = None,
        asynchronous: Callable[[str], Awaitable[str]] | None = None,
    ) -> None:
        if sync is None and asynchronous is None:
            raise InvalidInputError("a Summarizer needs a sync or an async function")
        if asynchronous is not None and not inspect.iscoroutinefunction(asynchronous):
            raise TypeError("the async form of a Summarizer must be an async def")
        self._sync = sync
        self._async = asynchronous

    def __call__(self, prompt: str) -> str | Awaitable[str]:
        if self._async is not None and (self._sync is None or prefers_async()):
            return self._async(prompt)
        assert self._sync is not None
        return self._sync(prompt)

    async def ainvoke(self, prompt: str) -> str:
        if self._async is not None:
            return await self._async(prompt)
        assert self._sync is not None
        return await run_in_thread(self._sync, prompt)
