"""``SessionStore(redactor=...)`` (or a manager's ``with_redaction``) masks every string of an
item before it is stored, indexed or embedded, on the short put path, in batches and async; the
masked value is nowhere in the SQLite file; a redactor that raises stores nothing."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp

from langchain_sessions import SessionStore
from sessions_core import InvalidInputError, PIIRedactor, RedactionError, SessionManager

from .helpers import matched


class RecordingEmbeddings(Embeddings):
    """Embeds a text as its length and vowel count, and keeps every text it was given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float(len(text)), float(sum(text.count(v) for v in "aeiou")) + 1.0]


def _secret() -> str:
    return f"marker.{secrets.token_hex(6)}@example.com"


def test_every_put_path_stores_and_indexes_the_masked_value(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    emails = [_secret() for _ in range(4)]
    store = SessionStore(str(path), redactor=PIIRedactor())
    namespace = ("memories", "u1")
    store.put(namespace, "first", {"content": f"mail {emails[0]}"})  # the batch path (a new namespace)
    store.put(namespace, "short", {"content": f"mail {emails[1]}", "list": [emails[1]]})  # the short path
    store.batch([PutOp(namespace, "batch", {"content": f"mail {emails[2]}"})])
    asyncio.run(store.aput(namespace, "async", {"content": f"mail {emails[3]}"}))
    for key in ("first", "short", "batch", "async"):
        item = store.get(namespace, key)
        assert item is not None and item.value["content"] == "mail [EMAIL]"
    assert store.get(namespace, "short").value["list"] == ["[EMAIL]"]  # type: ignore[union-attr]
    assert matched(store.search(("memories",), query=emails[0])) == []
    assert {item.key for item in matched(store.search(("memories",), query="mail"))} == {
        "first",
        "short",
        "batch",
        "async",
    }
    store.close()
    for file in tmp_path.iterdir():
        data = file.read_bytes()
        assert not any(email.split("@")[0].encode() in data for email in emails), file.name


def test_the_embeddings_see_the_masked_text_and_a_manager_passes_its_redactor() -> None:
    embeddings = RecordingEmbeddings()
    manager = SessionManager(":memory:").with_redaction(PIIRedactor())
    store = SessionStore.from_manager(manager, index={"embed": embeddings, "dims": 2, "fields": ["content"]})
    email = _secret()
    store.put(("m",), "k", {"content": f"reach me at {email}"})
    asyncio.run(store.abatch([PutOp(("m",), "k2", {"content": f"or {email}"})]))
    assert embeddings.texts == ["reach me at [EMAIL]", "or [EMAIL]"]
    assert store.get(("m",), "k").value == {"content": "reach me at [EMAIL]"}  # type: ignore[union-attr]
    assert SessionStore.from_manager(manager, redactor=str.upper).items.redactor is str.upper
    manager.close()


def test_a_redactor_that_raises_stores_nothing() -> None:
    def failing(text: str) -> str:
        raise RuntimeError("detector down")

    store = SessionStore(":memory:", redactor=failing)
    with pytest.raises(RedactionError, match="detector down"):
        store.put(("m",), "k", {"content": "anything"})
    with pytest.raises(RedactionError):
        store.batch([PutOp(("m",), "a", {"content": "x"}), PutOp(("m",), "b", {"content": "y"})])
    assert store.search(("m",)) == []


def test_the_redactor_runs_once_on_each_string_with_embeddings() -> None:
    embeddings = RecordingEmbeddings()
    store = SessionStore(
        ":memory:", index={"embed": embeddings, "dims": 2, "fields": ["content"]}, redactor=lambda t: t + "!"
    )
    store.put(("m",), "k", {"content": "hello"})
    asyncio.run(store.aput(("m",), "k2", {"content": "there"}))
    assert store.get(("m",), "k").value == {"content": "hello!"}  # type: ignore[union-attr]
    assert store.get(("m",), "k2").value == {"content": "there!"}  # type: ignore[union-attr]
    assert embeddings.texts == ["hello!", "there!"]


def test_a_filter_on_a_masked_value_matches_its_own_with_a_salted_redactor_and_is_refused_without() -> None:
    first, second = _secret(), _secret()
    salted = SessionStore(":memory:", redactor=PIIRedactor(hash_salt="pepper"))
    for key, email in (("a", first), ("b", second)):
        salted.put(("contacts",), key, {"email": email, "rank": 1})
    assert [item.key for item in salted.search(("contacts",), filter={"email": first})] == ["a"]
    assert [item.key for item in salted.search(("contacts",), filter={"email": {"$ne": first}})] == ["b"]
    assert salted.search(("contacts",), filter={"email": _secret()}) == []
    with pytest.raises(InvalidInputError, match="'email'.*order"):
        salted.search(("contacts",), filter={"email": {"$gt": first}})
    salted.close()

    unsalted = SessionStore(":memory:", redactor=PIIRedactor())
    for key, email in (("a", first), ("b", second)):
        unsalted.put(("contacts",), key, {"email": email, "rank": 1})
    with pytest.raises(InvalidInputError, match="'email'.*hash_salt"):
        unsalted.search(("contacts",), filter={"email": first})
    with pytest.raises(InvalidInputError, match="'email'"):
        asyncio.run(unsalted.asearch(("contacts",), filter={"email": {"$eq": first}}))
    both = unsalted.search(("contacts",), filter={"rank": {"$gte": 1}, "email": "[EMAIL]"})  # nothing masked
    assert {item.key for item in both} == {"a", "b"}
    unsalted.close()


def test_a_query_finds_the_item_that_mentioned_it_with_a_salted_redactor_only() -> None:
    first, second = _secret(), _secret()
    for redactor, expected in ((PIIRedactor(hash_salt="pepper"), ["a"]), (PIIRedactor(), [])):
        store = SessionStore(":memory:", redactor=redactor)
        store.put(("contacts",), "a", {"note": f"invoice {first} monthly"})
        store.put(("contacts",), "b", {"note": f"invoice {second} yearly"})
        assert [item.key for item in matched(store.search(("contacts",), query=first))] == expected
        store.close()


def test_with_a_salted_redactor_the_embeddings_see_a_query_masked_as_the_items_were() -> None:
    embeddings, redactor, email = RecordingEmbeddings(), PIIRedactor(hash_salt="pepper"), _secret()
    seen: list[str] = []
    embeddings.embed_query = lambda text: seen.append(text) or [float(len(text)), 1.0]  # type: ignore[method-assign]
    store = SessionStore(":memory:", index={"embed": embeddings, "dims": 2, "fields": ["note"]}, redactor=redactor)
    store.put(("contacts",), "a", {"note": f"invoice {email}"})
    assert [item.key for item in store.search(("contacts",), query=f"who is {email}")] == ["a"]
    assert asyncio.run(store.asearch(("contacts",), query=email))[0].key == "a"
    assert seen[-2:] == [redactor(f"who is {email}"), redactor(email)]  # the queries, after the item's text
    assert not any(email in text for text in seen)
    store.close()
