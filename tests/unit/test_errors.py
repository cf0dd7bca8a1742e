"""The error tree of ``sessions_core.errors``: its shape, representative raises, and a check that
no public module raises a bare ``ValueError`` / ``RuntimeError`` instead of a class of the tree."""

from __future__ import annotations

import ast
import inspect
import os
from pathlib import Path
from typing import Any

import pytest

import sessions_core
from sessions_core import (
    CompactionError,
    ConflictError,
    ContextError,
    EncryptionKeyError,
    InvalidInputError,
    InvalidParentError,
    InvalidRecordError,
    InvalidTextError,
    MessageTooLargeError,
    MessageValidationError,
    NotFoundError,
    RecallError,
    RedactionError,
    SemanticRecall,
    Session,
    SessionManager,
    SessionNotFoundError,
    SessionsError,
    SqliteStore,
    StoreContext,
    StoreError,
    StoreUnavailableError,
    UnsupportedOperationError,
    parse_message,
)
from sessions_core import errors as errors_module

ROOT = Path(__file__).resolve().parents[2]

TREE = {
    InvalidInputError: (SessionsError, ValueError),
    MessageValidationError: (InvalidInputError,),
    MessageTooLargeError: (InvalidInputError,),
    InvalidRecordError: (InvalidInputError,),
    InvalidParentError: (InvalidInputError,),
    InvalidTextError: (InvalidInputError,),
    NotFoundError: (SessionsError, LookupError),
    SessionNotFoundError: (NotFoundError,),
    ConflictError: (SessionsError, RuntimeError, ValueError),
    StoreError: (SessionsError,),
    StoreUnavailableError: (StoreError,),
    EncryptionKeyError: (StoreError,),
    UnsupportedOperationError: (StoreError, NotImplementedError),
    CompactionError: (SessionsError,),
    ContextError: (SessionsError,),
    RecallError: (SessionsError,),
    RedactionError: (SessionsError,),
}


def _error_classes() -> list[type[BaseException]]:
    return [
        value
        for value in vars(errors_module).values()
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors_module.__name__
    ]


def test_the_tree_has_the_documented_shape():
    assert set(_error_classes()) == {SessionsError, *TREE}
    for cls, bases in TREE.items():
        assert cls.__bases__ == bases, cls
        assert issubclass(cls, SessionsError)
    # The categories stay apart: a store failure is no bad input, a conflict no missing thing.
    assert not issubclass(StoreError, ValueError) and not issubclass(NotFoundError, ValueError)
    assert not issubclass(InvalidInputError, (LookupError, RuntimeError))


def test_every_error_is_exported_and_named_in_the_docstring():
    doc = errors_module.__doc__ or ""
    for cls in _error_classes():
        assert cls.__name__ in sessions_core.__all__, cls
        assert getattr(sessions_core, cls.__name__) is cls
        assert cls.__name__ in doc, f"{cls.__name__} is missing from the tree in errors.py's docstring"


@pytest.mark.parametrize(
    ("make", "cls", "message"),
    [
        (lambda: Session().search("tea", mode="fuzzy"), InvalidInputError, "mode must be one of"),
        (lambda: Session().search("tea", mode="semantic"), InvalidInputError, "needs semantic recall"),
        (lambda: Session().search("tea", match="some"), InvalidInputError, "match must be one of"),
        (lambda: Session().with_context("memory", keep_versions=0), InvalidInputError, "keep_versions"),
        (lambda: Session().with_context(""), InvalidInputError, "non-empty string label"),
        (lambda: SqliteStore(":memory:", synchronous="FAST"), InvalidInputError, "synchronous must be"),
        (lambda: SqliteStore(":memory:", read_only=True), InvalidInputError, "read_only=True takes"),
        (lambda: SessionManager(namespace="a:b"), InvalidInputError, "without ':'"),
        (lambda: parse_message({"id": "m", "role": "robot", "parts": []}), MessageValidationError, "role"),
        (lambda: StoreContext().get(), ConflictError, "not bound to a store"),
    ],
)
def test_bad_input_raises_the_tree_class_and_the_builtin(make, cls, message):
    with pytest.raises(cls, match=message) as raised:
        make()
    assert isinstance(raised.value, SessionsError)
    builtin = RuntimeError if cls is ConflictError else ValueError
    assert isinstance(raised.value, builtin)  # what callers caught before still catches it


class _Index:
    """A vector index never called: these tests stop before anything is sent."""

    def add(self, ids, texts, metadatas):  # pragma: no cover
        raise AssertionError("never sent")

    def delete(self, ids):  # pragma: no cover
        raise AssertionError("never sent")

    def search(self, query, k, where):  # pragma: no cover
        return []


def _index() -> Any:
    return _Index()  # the sync methods suffice (no aadd...), which the protocol's type does not say


def test_options_for_a_shared_recall_are_invalid_input_not_a_type_error():
    with Session() as session:
        shared = SemanticRecall(_index(), background=False)
        with pytest.raises(InvalidInputError, match="pass them when creating the shared one"):
            session.with_semantic_recall(shared, min_score=0.1)
    with pytest.raises(InvalidInputError, match="larger than chunk_overlap"):
        SemanticRecall(_index(), chunk_chars=10, chunk_overlap=10)


def test_a_recall_on_two_stores_and_one_unattached_are_conflicts():
    recall = SemanticRecall(_index(), background=False)
    with pytest.raises(ConflictError, match="not attached") as unattached:
        recall.store  # noqa: B018 - the property raises
    assert isinstance(unattached.value, RuntimeError)
    first, second = SqliteStore(":memory:"), SqliteStore(":memory:")
    recall.attach(first)
    with pytest.raises(ConflictError, match="already serves another store") as twice:
        recall.attach(second)
    assert isinstance(twice.value, ValueError)
    first.close()
    second.close()


def test_an_unknown_session_is_not_found_and_a_lookup_error():
    from sessions_core.transfer import export_session

    store = SqliteStore(":memory:")
    with pytest.raises(LookupError) as raised:
        export_session(store, "nobody")
    store.close()
    assert isinstance(raised.value, SessionNotFoundError) and isinstance(raised.value, NotFoundError)


def test_a_deleted_sqlite_file_is_an_unavailable_store(tmp_path):
    path = tmp_path / "gone.db"
    session = Session(str(path)).for_session("s")
    session.append_message({"id": "a", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    with pytest.raises(StoreUnavailableError, match="was deleted"):
        session.append_message({"id": "b", "role": "user", "parts": [{"type": "text", "text": "again"}]})
    session.close()


def test_an_unreachable_postgres_is_an_unavailable_store():
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    from sessions_core.stores.postgres import PostgresStore

    store = PostgresStore("postgresql://postgres@127.0.0.1:1/none", connect_timeout=2)
    try:
        with pytest.raises(StoreUnavailableError, match="cannot connect to PostgreSQL"):
            store.setup()
    finally:
        store.close()


# -- no bare ValueError / RuntimeError leaves the public API ----------------------------------------

_BUILTINS = {"ValueError", "RuntimeError"}
_SOURCES = [ROOT / "core" / "sessions_core", ROOT / "langchain_sessions", ROOT / "llamaindex_sessions"]


def _bare_raises(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(target, ast.Name) and target.id in _BUILTINS:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: raise {target.id}")
    return found


def test_no_public_module_raises_a_bare_value_or_runtime_error():
    """Raise a class of ``sessions_core.errors`` (``InvalidInputError``, ``ConflictError``...):
    they subclass the built-ins, so callers catching those still work. ``sessions_core.testing``
    (the conformance suite's helpers) is left out."""
    testing = ROOT / "core" / "sessions_core" / "testing"
    files = [p for root in _SOURCES for p in sorted(root.rglob("*.py")) if testing not in p.parents]
    assert len(files) > 40  # the walk found the packages
    offenders = [line for path in files for line in _bare_raises(path)]
    assert offenders == [], "use the error tree (sessions_core.errors) instead:\n" + "\n".join(offenders)
