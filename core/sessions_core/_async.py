"""One source of truth for sync and async: the sync code runs in a worker thread for the
async twin, and async user callbacks met on the way run on the caller's event loop.

Callbacks with both forms (a ``summarizers.Summarizer``) use the native async one within
:func:`prefer_async`, the block an adapter's async path opens around its twin.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import CoroutineType
from typing import Any, TypeVar

T = TypeVar("T")

_caller_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "sessions_core_caller_loop", default=None
)
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("sessions_core_deadline", default=None)
_prefer_async: contextvars.ContextVar[bool] = contextvars.ContextVar("sessions_core_prefer_async", default=False)


@contextmanager
def prefer_async() -> Iterator[None]:
    """Within this block, and the worker threads of :func:`run_in_thread` started in it, a
    callback with a sync and an async form answers with its coroutine, which the core awaits
    on the caller's event loop (the model behind it is called natively async)."""
    token = _prefer_async.set(True)
    try:
        yield
    finally:
        _prefer_async.reset(token)


def prefers_async() -> bool:
    """Whether the current code runs within :func:`prefer_async`."""
    return _prefer_async.get()


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run blocking ``fn`` in a worker thread; coroutines it meets run back on this loop."""
    token = _caller_loop.set(asyncio.get_running_loop())
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    finally:
        _caller_loop.reset(token)


def caller_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of the async caller whose worker thread this is (``None`` outside one)."""
    return _caller_loop.get()


def resolve(value: T | Awaitable[T]) -> T:
    """Return ``value``, or the result of awaiting it when it is awaitable (from sync code)."""
    if not inspect.isawaitable(value):
        return value  # type: ignore[return-value]
    deadline = _deadline.get()
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    loop = _caller_loop.get()
    if loop is not None and loop.is_running() and not _in_loop_thread(loop):
        return asyncio.run_coroutine_threadsafe(_await(value, timeout), loop).result()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(value, timeout))
    # Called synchronously from inside a running loop: run on a private loop in another thread.
    result: dict[str, Any] = {}

    def runner() -> None:
        try:
            result["value"] = asyncio.run(_await(value, timeout))
        except BaseException as error:  # re-raised in the caller's thread
            result["error"] = error

    thread = threading.Thread(target=runner, name="sessions-core-await")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def call(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call a plain or ``async def`` function from sync code and return its result."""
    return resolve(fn(*args, **kwargs))


async def _await(value: Awaitable[T], timeout: float | None = None) -> T:
    """Await ``value``; past ``timeout`` seconds it is cancelled and ``TimeoutError`` raised."""
    if timeout is None:
        return await value
    try:
        return await asyncio.wait_for(value, timeout)
    except asyncio.TimeoutError as error:  # not the builtin TimeoutError before Python 3.11
        raise TimeoutError(f"gave up after {timeout:g} s") from error


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


_IO_MARK = "__sessions_io__"

F = TypeVar("F", bound=Callable[..., Any])


def io(method: F) -> F:
    """Mark a public method that may touch storage or a provider: a class deriving from
    :class:`AsyncTwins` gets its ``a``-prefixed async twin."""
    setattr(method, _IO_MARK, True)
    return method


def async_twin(method: Callable[..., T], *, prefer_async: bool = False) -> Callable[..., CoroutineType[Any, Any, T]]:
    """The ``a``-prefixed twin of a blocking method: same arguments, run off the event loop
    (within :func:`prefer_async` when ``prefer_async`` is true).

    The twin calls the method by name, so a subclass that overrides the method changes its
    twin too."""
    name = method.__name__

    @functools.wraps(method, updated=())
    async def twin(self: Any, *args: Any, **kwargs: Any) -> T:
        bound = getattr(self, name)
        if not prefer_async:
            return await run_in_thread(bound, *args, **kwargs)
        token = _prefer_async.set(True)
        try:
            return await run_in_thread(bound, *args, **kwargs)
        finally:
            _prefer_async.reset(token)

    owner = method.__qualname__.rpartition(".")[0]
    twin.__name__ = "a" + name
    twin.__qualname__ = f"{owner}.a{name}" if owner else "a" + name
    twin.__doc__ = f"Async twin of :meth:`{name}`: {method.__doc__ or ''}".rstrip()
    return twin


def call_with_timeout(timeout: float | None, fn: Callable[..., T], /, *args: Any) -> T:
    """``call(fn, *args)``, giving up with ``TimeoutError`` after ``timeout`` seconds.

    Coroutines awaited on the way (an ``async def`` ``fn``, or one that ``fn`` resolves with
    ``call``) are cancelled at the deadline. A plain function that hangs cannot be stopped: it
    is left to finish in a daemon thread.
    """
    if timeout is None:
        return call(fn, *args)
    context = contextvars.copy_context()
    context.run(_deadline.set, time.monotonic() + timeout)
    outcome: dict[str, Any] = {}

    def runner() -> None:
        try:
            outcome["value"] = context.run(call, fn, *args)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=runner, name="sessions-core-timeout", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"gave up after {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class AsyncTwins:
    """Base of the classes with async twins: every method a class body marks with :func:`io`
    gets ``a<name>``, unless the body defines that name itself (as ``ahistory``, an async
    generator, is)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if getattr(value, _IO_MARK, False) and "a" + name not in vars(cls):
                setattr(cls, "a" + name, async_twin(value))
