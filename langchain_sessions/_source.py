"""Which session a LangChain run or tool call works on."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sessions_core import Session, SessionManager, SessionsError, Tool
from sessions_core.integration import Registration, async_twin

SessionSourceLike = Session | SessionManager | Callable[[str], Session] | str | os.PathLike


def checked_conn_string(value: Any, owner: str) -> str:
    """``value`` if it is a ``from_conn_string`` argument (a path, ``":memory:"`` or a PostgreSQL
    URL or ``key=value`` string); ``TypeError`` naming ``owner``'s constructor otherwise."""
    if not isinstance(value, str):
        raise TypeError(
            f"from_conn_string takes a path or a PostgreSQL URL, not {type(value).__name__};"
            f" give a store object or a manager to {owner}(...) itself"
        )
    return value


def _opened(target: Any) -> Any:
    """A path or URL opened as a ``SessionManager`` (a session per run id); anything else as is."""
    if isinstance(target, (str, os.PathLike)):
        return SessionManager(target)
    return target


class SessionSource:
    """A ``Session`` (always that one), a ``SessionManager`` (one registered session per id), a
    factory ``session_id -> Session`` (called once per id), or a store's path or URL (opened as
    a ``SessionManager``). Nothing is read from the store until a run needs it.

    The id of a run is, in order: the ``context_key`` field of the run's context, the
    ``session_id`` of ``config["configurable"]``, the LangGraph ``thread_id``, then
    ``default_session_id``. ``redactor`` goes to every session's ``with_redaction``.
    """

    def __init__(
        self,
        target: SessionSourceLike,
        *,
        context_key: str | None = None,
        default_session_id: str | None = None,
        redactor: Any = None,
    ) -> None:
        target = _opened(target)
        if isinstance(target, Session):
            self.kind = "session"
        elif isinstance(target, SessionManager):
            self.kind = "manager"
        elif callable(target):
            self.kind = "factory"
        else:
            raise TypeError(
                'expected a store\'s path or URL (such as "chat.db" or "postgresql://..."), a Session,'
                f" a SessionManager or a function session_id -> Session, not {type(target).__name__}"
            )
        if redactor is not None and isinstance(target, (Session, SessionManager)):
            target.with_redaction(redactor)
        self.target = target
        self.redactor = redactor
        self.context_key = context_key
        self.default_session_id = default_session_id
        self._sessions: dict[str, Session] = {}
        self._registrations: dict[str, Registration] = {}
        self._lock = threading.Lock()

    @property
    def manager(self) -> SessionManager | None:
        return self.target if isinstance(self.target, SessionManager) else None

    def resolve_id(self, *, context: Any = None, config: Mapping[str, Any] | None = None, thread_id: Any = None) -> str:
        """The session id of a run (see the class docstring); ``SessionsError`` if none."""
        if isinstance(self.target, Session):
            return self.target.session_id
        if self.context_key is not None and context is not None:
            if isinstance(context, Mapping):
                value = context.get(self.context_key)
            else:
                value = getattr(context, self.context_key, None)
            if value is not None and value != "":
                return str(value)
        configurable = (config or {}).get("configurable") or {}
        candidates = (configurable.get("session_id"), thread_id, configurable.get("thread_id"), self.default_session_id)
        for value in candidates:
            if value is not None and value != "":
                return str(value)
        where = f'a "{self.context_key}" context field, ' if self.context_key else ""
        raise SessionsError(
            f"no session for this run: pass {where}config={{'configurable': {{'thread_id': ...}}}}"
            " or set default_session_id"
        )

    def get(self, session_id: str) -> Session:
        """The session for ``session_id`` (registered in the manager's registry on first use)."""
        target = self.target
        if isinstance(target, Session):
            return target
        if isinstance(target, SessionManager):
            with self._lock:
                registration = self._registrations.get(session_id)
                if registration is None:
                    registration = self._registrations[session_id] = Registration(target, session_id)
            registration.ensure()  # again after the manager deleted it
            return target.get_session(session_id)
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                session = target(session_id)
                if not isinstance(session, Session):
                    raise TypeError(f"the session factory returned {type(session).__name__}, not a Session")
                if self.redactor is not None:
                    session.with_redaction(self.redactor)
                self._sessions[session_id] = session
            return session

    aget = async_twin(get)

    def tools(self, session_id: str) -> list[Tool]:
        """The memory tools of a session (plus ``session_search`` with a manager)."""
        if isinstance(self.target, SessionManager):
            self.get(session_id)
            return self.target.session_tools(session_id)
        return self.get(session_id).tools()

    atools = async_twin(tools)

    def template_tools(self) -> list[Tool]:
        """The tools as declared, built without reading the store or registering a session:
        their names and argument schemas are the same for every session of a manager."""
        target = self.target
        if isinstance(target, Session):
            return target.declared_tools()
        template = self.default_session_id or ""
        if isinstance(target, SessionManager):
            return target.get_session(template).declared_tools() + target.tools()
        return self.get(template).declared_tools()

    def add_usage(self, session_id: str, input_tokens: int, output_tokens: int) -> None:
        """Add a model call's tokens to the manager's counters of the session (a manager only)."""
        if isinstance(self.target, SessionManager) and (input_tokens or output_tokens):
            self.target.add_usage(session_id, input_tokens=input_tokens, output_tokens=output_tokens)

    aadd_usage = async_twin(add_usage)
