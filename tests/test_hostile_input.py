"""Hostile input (issue 11), by property tests: arbitrary message dicts, search queries, tool
arguments, labels, keys, session ids and namespaces, SQL metacharacters and NUL characters.

Every property runs on SQLite and on PostgreSQL (fewer examples there; skipped when no server
answers). PostgreSQL text cannot hold a NUL character: where one would reach a text column the
store raises a ``StoreError`` naming it and stores nothing; on SQLite everything round-trips.
"""

from __future__ import annotations

import base64
import json
import math
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sessions_core import MessageValidationError, Session, SessionManager, SessionMessage, SqliteStore
from sessions_core.context import ContextError
from sessions_core.errors import SessionsError, StoreError
from sessions_core.messages import COMPACTION_ID_PREFIX, text_content
from sessions_core.providers import StoreSearchContext
from sessions_core.tokens import estimate_tokens

from .postgres import postgres_url, require_postgres, temporary_schema

FUNCTION_FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One store per backend for the module; every example works in fresh session ids."""
    if request.param == "sqlite":
        made = SqliteStore(":memory:")
        yield made
        made.close()
        return
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        made = PostgresStore(postgres_url(), schema=schema, min_size=1, max_size=2)
        try:
            yield made
        finally:
            made.close()


def is_postgres(store: Any) -> bool:
    return type(store).__name__ == "PostgresStore"


def examples(store: Any, sqlite: int = 100, postgres: int = 25) -> int:
    return postgres if is_postgres(store) else sqlite


def fresh_id() -> str:
    return f"s-{uuid.uuid4().hex}"


def refused_nul(error: BaseException) -> bool:
    return isinstance(error, StoreError) and "NUL" in str(error)


# -- strategies -------------------------------------------------------------------------------

SQL_BITS = [
    "'",
    '"',
    "';--",
    "'; DROP TABLE session_messages;--",
    '"); DELETE FROM sessions; --',
    "\x00",
    "a\x00b",
    "%s",
    "%(q)s",
    "{s}",
    "?",
    "\\",
    "*",
    "NEAR(",
    "OR 1=1",
    "/*",
    "$1",
    "😀",
    "\u202e",
]
HOSTILE = st.one_of(
    st.text(max_size=20),
    st.sampled_from(SQL_BITS),
    st.lists(st.one_of(st.sampled_from(SQL_BITS), st.text(max_size=4)), min_size=1, max_size=5).map("".join),
)
NONEMPTY = HOSTILE.filter(lambda s: s != "")

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | HOSTILE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE, inner, max_size=3),
    max_leaves=8,
)

PART_FIELDS = {
    "type",
    "text",
    "toolCallId",
    "tool_call_id",
    "toolName",
    "tool_name",
    "input",
    "output",
    "isError",
    "is_error",
    "mediaType",
    "media_type",
    "data",
    "url",
    "filename",
    "state",
}
MESSAGE_FIELDS = {"id", "role", "parts", "createdAt", "created_at", "metadata"}
PART_EXTRAS = st.dictionaries(HOSTILE.filter(lambda k: k not in PART_FIELDS), JSON, max_size=2)
MESSAGE_EXTRAS = st.dictionaries(HOSTILE.filter(lambda k: k not in MESSAGE_FIELDS), JSON, max_size=2)


def _with(extras: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    return {**extras, **part}


def _optional(**fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    """A dict holding any subset of ``fields`` (each a strategy)."""
    return st.fixed_dictionaries({}, optional=fields)


TEXT_PART = st.builds(_with, PART_EXTRAS, st.fixed_dictionaries({"type": st.just("text"), "text": HOSTILE}))
REASONING_PART = st.builds(
    _with,
    PART_EXTRAS,
    st.fixed_dictionaries({"type": st.just("reasoning")}, optional={"text": st.none() | HOSTILE}),
)
TOOL_CALL_PART = st.builds(
    _with,
    PART_EXTRAS,
    st.fixed_dictionaries(
        {"type": st.just("tool-call"), "toolCallId": HOSTILE, "toolName": HOSTILE}, optional={"input": JSON}
    ),
)
TOOL_RESULT_PART = st.builds(
    _with,
    PART_EXTRAS,
    st.fixed_dictionaries(
        {"type": st.just("tool-result"), "toolCallId": HOSTILE},
        optional={"toolName": st.none() | HOSTILE, "output": JSON, "isError": st.booleans()},
    ),
)
B64 = st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode("ascii"))
FILE_DATA = st.one_of(
    B64, B64.map(lambda b: "data:application/octet-stream;base64," + b), HOSTILE, st.just("sessions-blob:abc")
)
FILE_PART = st.builds(
    _with,
    PART_EXTRAS,
    st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("file"), "mediaType": HOSTILE, "data": FILE_DATA},
            optional={"filename": st.none() | HOSTILE, "url": HOSTILE},
        ),
        st.fixed_dictionaries({"type": st.just("file"), "mediaType": HOSTILE, "url": HOSTILE}),
    ),
)
UI_TOOL_PART = st.builds(
    _with,
    PART_EXTRAS,
    st.fixed_dictionaries(
        {
            "type": st.one_of(
                st.just("dynamic-tool"),
                HOSTILE.map(lambda s: "tool-" + s).filter(lambda t: t not in ("tool-call", "tool-result")),
            )
        },
        optional={
            "toolCallId": st.none() | HOSTILE,
            "toolName": st.none() | HOSTILE,
            "state": st.none() | st.sampled_from(["input-available", "output-available", "output-error"]) | HOSTILE,
            "input": JSON,
            "output": JSON,
        },
    ),
)
UNKNOWN_TYPES = st.one_of(
    st.sampled_from(["step-start", "source-url", "data-weather", "data-", "x"]),
    HOSTILE.filter(
        lambda t: (
            t not in ("text", "reasoning", "tool-call", "tool-result", "file")
            and t != "dynamic-tool"
            and not t.startswith("tool-")
        )
    ),
)
UNKNOWN_PART = st.builds(
    lambda extras, kind: {**extras, "type": kind},
    st.dictionaries(HOSTILE.filter(lambda k: k != "type"), JSON, max_size=3),
    UNKNOWN_TYPES,
)
PART = st.one_of(TEXT_PART, REASONING_PART, TOOL_CALL_PART, TOOL_RESULT_PART, FILE_PART, UI_TOOL_PART, UNKNOWN_PART)

MESSAGE_ID = NONEMPTY.filter(lambda s: not s.startswith(COMPACTION_ID_PREFIX))
VALID_MESSAGE = st.builds(
    lambda extras, core: {**extras, **core},
    MESSAGE_EXTRAS,
    st.fixed_dictionaries(
        {
            "id": MESSAGE_ID,
            "role": st.sampled_from(["system", "user", "assistant", "tool"]),
            "parts": st.lists(PART, max_size=4),
        },
        optional={"metadata": st.dictionaries(HOSTILE, JSON, max_size=3)},
    ),
)

NOT_A_LIST = st.one_of(st.none(), st.integers(), HOSTILE, st.dictionaries(HOSTILE, JSON, max_size=2))


@st.composite
def invalid_message(draw: st.DrawFn) -> Any:
    """A valid message with one defect, or something that is not a message at all."""
    message = dict(draw(VALID_MESSAGE))
    defect = draw(
        st.sampled_from(
            [
                "role",
                "no-id",
                "empty-id",
                "id-type",
                "no-role",
                "no-parts",
                "parts",
                "part-no-type",
                "part-not-dict",
                "tool-call-no-id",
                "text-not-str",
                "file-no-source",
                "metadata",
                "created",
                "not-a-dict",
            ]
        )
    )
    if defect == "role":
        message["role"] = draw(
            st.one_of(
                HOSTILE.filter(lambda r: r not in ("system", "user", "assistant", "tool")), st.none(), st.integers()
            )
        )
    elif defect == "no-id":
        del message["id"]
    elif defect == "empty-id":
        message["id"] = ""
    elif defect == "id-type":
        message["id"] = draw(st.one_of(st.none(), st.integers(), st.lists(HOSTILE, max_size=2)))
    elif defect == "no-role":
        del message["role"]
    elif defect == "no-parts":
        del message["parts"]
    elif defect == "parts":
        message["parts"] = draw(NOT_A_LIST)
    elif defect == "part-no-type":
        part = {k: v for k, v in draw(PART).items() if k != "type"}
        message["parts"] = [*message["parts"], part]
    elif defect == "part-not-dict":
        message["parts"] = [
            *message["parts"],
            draw(st.one_of(st.none(), st.integers(), HOSTILE, st.lists(JSON, max_size=2))),
        ]
    elif defect == "tool-call-no-id":
        part = draw(TOOL_CALL_PART)
        del part["toolCallId"]
        message["parts"] = [part, *message["parts"]]
    elif defect == "text-not-str":
        message["parts"] = [
            {"type": "text", "text": draw(st.one_of(st.none(), st.integers(), st.lists(HOSTILE, max_size=2)))}
        ]
    elif defect == "file-no-source":
        message["parts"] = [{"type": "file", "mediaType": draw(HOSTILE)}]
    elif defect == "metadata":
        message["metadata"] = draw(st.one_of(st.integers(), HOSTILE, st.lists(JSON, max_size=2)))
    elif defect == "created":
        message["createdAt"] = draw(st.sampled_from(["not a date", "2024-13-45", "'; DROP TABLE x;--", "\x00"]))
    else:
        return draw(st.one_of(st.none(), st.integers(), HOSTILE, st.lists(JSON, max_size=2)))
    return message


def seeded_session(store: Any, session_id: str | None = None) -> Session:
    session = Session(store).for_session(session_id or fresh_id())
    session.append_message({"id": "seed", "role": "user", "parts": [{"type": "text", "text": "seed marmalade"}]})
    return session


def nul_in_columns(message: dict[str, Any]) -> bool:
    """Whether a PostgreSQL text column would get a NUL (the id or the indexed text)."""
    parsed = SessionMessage.model_validate(message)
    return "\x00" in parsed.id or "\x00" in text_content(parsed)


# -- (a) arbitrary message dicts --------------------------------------------------------------


@pytest.mark.parametrize("property_", ["valid", "invalid"])
def test_message_dicts(store: Any, property_: str) -> None:
    @settings(max_examples=examples(store), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(VALID_MESSAGE if property_ == "valid" else invalid_message())
    def run(message: Any) -> None:
        session = seeded_session(store)
        if property_ == "valid":
            check_valid(store, session, message)
        else:
            check_invalid(session, message)

    run()


def check_valid(store: Any, session: Session, message: dict[str, Any]) -> None:
    assume(message["id"] != "seed")
    before = session.get_path_length()
    try:
        result = session.append_message(message)
    except StoreError as error:
        assert is_postgres(store) and refused_nul(error) and nul_in_columns(message), error
        assert session.get_path_length() == before
        return
    assert result.inserted
    stored = session.get_message(message["id"])
    assert stored is not None and stored.created_at is not None
    expected = SessionMessage.model_validate(message)
    expected.created_at = stored.created_at
    assert stored == expected
    dumped = stored.model_dump(by_alias=True, exclude_unset=True, mode="json")
    dumped.pop("createdAt")
    assert dumped == json.loads(json.dumps(message))
    assert session.get_path_length() == before + 1
    assert session.get_history()[-1] == stored


def check_invalid(session: Session, message: Any) -> None:
    before = session.get_path_length()
    found = [r.id for r in session.search("seed marmalade")]
    with pytest.raises(MessageValidationError):
        session.append_message(message)
    assert session.get_path_length() == before
    assert [r.id for r in session.search("seed marmalade")] == found == ["seed"]
    ident = message.get("id") if isinstance(message, dict) else None
    if isinstance(ident, str) and ident and ident != "seed":
        if is_postgres(session.store) and "\x00" in ident:
            with pytest.raises(StoreError, match="NUL"):  # not even a lookup can carry a NUL
                session.get_message(ident)
        else:
            assert session.get_message(ident) is None


# -- (b) arbitrary search queries -------------------------------------------------------------

OPERATORS = st.sampled_from(
    [
        '"',
        "'",
        "(",
        ")",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "*",
        ":",
        "^",
        "-",
        "+",
        "{",
        "}",
        "\x00",
        ";",
        "--",
        "%",
        "_",
        "\\",
        "&",
        "|",
        "!",
        "<->",
        ":*",
    ]
)
QUERIES = st.one_of(
    st.text(),
    HOSTILE,
    st.lists(st.one_of(OPERATORS, st.text(max_size=5)), max_size=30).map(" ".join),
    st.lists(st.one_of(OPERATORS, st.text(max_size=3)), max_size=30).map("".join),
)


def test_search_queries_never_raise(store: Any) -> None:
    manager = SessionManager(store, namespace=f"ns{uuid.uuid4().hex[:8]}")
    one, two = manager.create("one").id, manager.create("two").id
    for i, text in enumerate(["and or not near marmalade", "deploy production tonight", "NEAR( \" ' ;-- x"]):
        manager.append(
            one if i % 2 else two, {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": text}]}
        )
    session = manager.get_session(one)

    @settings(max_examples=examples(store, 200, 50), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(QUERIES)
    def run(query: str) -> None:
        for found in (session.search(query), manager.search(query), manager.search(query, limit=1)):
            assert isinstance(found, list)
        assert {r.id for r in session.search(query)} <= {"m1"}
        assert {r.session_id for r in manager.search(query)} <= {one, two}

    run()
    assert [r.id for r in manager.search("marmalade")] == ["m0"]


def test_search_queries_never_raise_in_any_mode(store: Any) -> None:
    """Semantic and hybrid search take any query, and return only their scope's messages."""
    pytest.importorskip("langchain_core")
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_sessions import SynonymEmbeddings, VectorStoreRecall

    index = VectorStoreRecall(InMemoryVectorStore(SynonymEmbeddings()))
    manager = SessionManager(store, namespace=f"ns{uuid.uuid4().hex[:8]}").with_semantic_recall(index, background=False)
    one, two = manager.create("one").id, manager.create("two").id
    for i, text in enumerate(["We agreed on the automobile lease", "deploy production tonight", "NEAR( \" ' ;-- x"]):
        manager.append(
            one if i % 2 else two, {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": text}]}
        )
    manager.drain_recall()
    session = manager.get_session(one)

    @settings(max_examples=examples(store, 100, 30), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(QUERIES, st.sampled_from(["semantic", "hybrid"]), st.integers(min_value=-1, max_value=50))
    def run(query: str, mode: str, limit: int) -> None:
        assert {r.id for r in session.search(query, mode=mode, limit=limit)} <= {"m1"}
        assert {r.session_id for r in manager.search(query, mode=mode, limit=limit)} <= {one, two}

    run()
    assert [r.id for r in manager.search("what did we decide about the car?", mode="semantic", limit=1)] == ["m0"]


# -- (c) arbitrary tool-call arguments --------------------------------------------------------


class MemorySkills:
    """A skill provider kept in memory: ``get`` lists, ``load`` reads, ``set`` writes."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {"intro": "Say hello."}

    def get(self) -> str:
        return "\n".join(f"- {key}" for key in self.docs)

    def load(self, key: str) -> str | None:
        return self.docs.get(key)

    def set(self, key: str, content: str, description: str | None = None) -> None:
        self.docs[key] = content


TOOL_NAMES = ["set_context", "load_context", "unload_context", "search_context", "session_search"]
KNOWN_KEYS = ["label", "content", "action", "metadata", "key", "query", "title", "description"]
LABELS = st.one_of(st.sampled_from(["notes", "kb", "skills", "nope", ""]), HOSTILE)
ARG_VALUE = st.one_of(
    JSON,
    LABELS,
    st.sampled_from(["replace", "append", "intro"]),
    st.fixed_dictionaries(
        {}, optional={"title": st.none() | HOSTILE | JSON, "description": st.none() | HOSTILE | JSON}
    ),
)
ARG_DICT = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(KNOWN_KEYS), HOSTILE), ARG_VALUE, max_size=5),
    st.fixed_dictionaries(
        {"label": LABELS},
        optional={
            "content": HOSTILE,
            "action": st.sampled_from(["replace", "append", "x"]) | JSON,
            "metadata": ARG_VALUE,
            "key": HOSTILE | st.just("intro"),
            "query": QUERIES,
        },
    ),
)
TOOL_ARGS = st.one_of(
    st.none(),
    ARG_DICT,
    ARG_DICT.map(lambda d: json.dumps(d, ensure_ascii=False)),
    ARG_DICT.map(lambda d: json.dumps(d).encode()),
    HOSTILE,
    st.text(),
    JSON,
    st.lists(JSON, max_size=3),
    st.lists(JSON, max_size=3).map(json.dumps),
    st.just("{not json"),
)
MAX_TOKENS = 40


def parsed_args(args: Any) -> Any:
    if isinstance(args, bytes):
        args = args.decode()
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    return {} if args is None else args


def snapshot(store: Any, session: Session, skills: MemorySkills) -> dict[str, Any]:
    entries = {row.key: row.content for row in store.search_entry_rows(session.session_id) if row.label == "kb"}
    return {"notes": store.get_block(session.session_id, "notes"), "kb": entries, "skills": dict(skills.docs)}


def expected_after(before: dict[str, Any], tool: str, args: Any, result: str) -> dict[str, Any]:
    """What a call's result says it wrote, applied to ``before``."""
    after = {"notes": before["notes"], "kb": dict(before["kb"]), "skills": dict(before["skills"])}
    if tool != "set_context" or result.startswith("Error:"):
        return after
    label, content = args["label"], args["content"]
    if label == "notes":
        assert result.startswith("Written to notes."), result
        old = before["notes"] or ""
        if args.get("action") == "append":
            content = old + ("\n" if old and not content.startswith("\n") else "") + content
        after["notes"] = content
    else:
        assert result.startswith('Indexed "') and result.endswith(f'" in {label}.'), result
        key = result[len('Indexed "') : -len(f'" in {label}.')]
        after["kb" if label == "kb" else "skills"][key] = content
    return after


def well_formed(tool: str, args: Any) -> bool:
    """Whether ``args`` passes the schema checks (the tool may still refuse it)."""
    if not isinstance(args, dict):
        return False
    required = {"set_context": ["label", "content"], "session_search": ["query"]}.get(tool, ["label", "key"])
    if tool == "search_context":
        required = ["label", "query"]
    return all(isinstance(args.get(name), str) for name in required)


def test_tool_arguments_never_raise_nor_corrupt_blocks(store: Any) -> None:
    manager = SessionManager(store, namespace=f"ns{uuid.uuid4().hex[:8]}")
    skills = MemorySkills()
    manager.with_context("notes", max_tokens=MAX_TOKENS)
    manager.with_context("kb", provider=StoreSearchContext())
    manager.with_context("skills", provider=skills)
    manager.append("chat", {"id": "m0", "role": "user", "parts": [{"type": "text", "text": "we like marmalade"}]})
    session = manager.get_session("chat")
    tools = {tool.name: tool for tool in manager.session_tools("chat")}
    assert sorted(tools) == sorted(TOOL_NAMES)

    @settings(max_examples=examples(store, 150, 40), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(st.sampled_from(TOOL_NAMES), TOOL_ARGS)
    def run(tool: str, args: Any) -> None:
        before = snapshot(store, session, skills)
        result = tools[tool].invoke(args)
        assert isinstance(result, str)
        parsed = parsed_args(args)
        if not well_formed(tool, parsed):
            assert result.startswith("Error: invalid arguments for " + tool), (args, result)
        after = snapshot(store, session, skills)
        assert after == expected_after(before, tool, parsed, result), (tool, args, result)
        if after["notes"] is not None:
            assert estimate_tokens(after["notes"]) <= MAX_TOKENS
        block = session.get_context_block("notes")
        assert block is not None and block.content == (after["notes"] or "")

    run()


# -- (d) arbitrary labels, keys and session ids -----------------------------------------------


def test_block_labels(store: Any) -> None:
    @settings(max_examples=examples(store), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(HOSTILE | st.text(min_size=200, max_size=400), HOSTILE, st.booleans())
    def run(label: str, content: str, at_runtime: bool) -> None:
        session_id = fresh_id()
        session = Session(store).for_session(session_id)
        if not label:
            with pytest.raises(ValueError):
                session.with_context(label) if not at_runtime else session.add_context(label)
            return
        try:
            if at_runtime:
                session.add_context(label)
            else:
                session.with_context(label)
            session.replace_context_block(label, content)
        except StoreError as error:
            assert is_postgres(store) and refused_nul(error) and "\x00" in label + content, error
            assert store.list_blocks(session_id) == []
            return
        assert session.get_context_block(label).content == content
        again = Session(store).for_session(session_id).with_context(label)
        assert again.get_context_block(label).content == content
        assert [(row.label, row.content) for row in store.list_blocks(session_id)] == [(label, content)]
        with pytest.raises(ContextError):
            session.add_context(label)

    run()


def test_search_entry_keys(store: Any) -> None:
    @settings(max_examples=examples(store), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(HOSTILE | st.text(min_size=200, max_size=400), HOSTILE, HOSTILE)
    def run(key: str, label: str, content: str) -> None:
        session_id = fresh_id()
        label = label or "kb"
        try:
            store.set_search_entry(session_id, label, key, content + " marmalade")
        except StoreError as error:
            assert is_postgres(store) and refused_nul(error) and "\x00" in key + label + content, error
            assert store.search_entry_rows(session_id) == [] if "\x00" not in session_id else True
            return
        rows = store.search_entry_rows(session_id)
        assert [(r.label, r.key, r.content) for r in rows] == [(label, key, content + " marmalade")]
        assert store.search_entries(session_id, label, "marmalade", 10) == [(key, content + " marmalade")]
        session = Session(store).for_session(session_id).with_context(label, provider=StoreSearchContext())
        assert session.get_context_block(label).content == "1 entries indexed."

    run()


def test_session_ids_and_namespaces(store: Any) -> None:
    @settings(max_examples=examples(store), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(HOSTILE | st.text(min_size=200, max_size=400), HOSTILE, MESSAGE_ID, HOSTILE)
    def run(session_id: str, namespace: str, message_id: str, text: str) -> None:
        namespace = f"{namespace}-{uuid.uuid4().hex[:6]}"
        if ":" in namespace:
            with pytest.raises(ValueError):
                SessionManager(store, namespace=namespace)
            return
        manager = SessionManager(store, namespace=namespace)
        other = SessionManager(store, namespace=namespace + "-other")
        message = {
            "id": message_id,
            "role": "user",
            "parts": [{"type": "text", "text": text + " marmalade"}],
            "metadata": {"k'\x00": 'v";--\x00'},
        }
        try:
            manager.create("named " + text)
            manager.append(session_id, message)
        except StoreError as error:
            assert is_postgres(store) and refused_nul(error), error
            assert "\x00" in session_id + namespace + message_id + text
            if "\x00" not in namespace:
                assert [s.name for s in manager.list_sessions()] in ([], ["named " + text])
                assert manager.search("marmalade") == []
            return
        history = manager.get_history(session_id)
        assert [m.id for m in history] == [message_id]
        assert history[0].metadata == message["metadata"]
        assert history[0].text == text + " marmalade"
        assert [r.id for r in manager.get_session(session_id).search("marmalade")] == [message_id]
        assert manager.search("marmalade") == []  # only registered sessions are searched across
        assert other.get_history(session_id) == [] and other.get_session(session_id).search("marmalade") == []
        assert [s.name for s in manager.list_sessions()] == ["named " + text]
        again = Session(store).for_session(manager.get_session(session_id).session_id)
        assert again.get_message(message_id) == history[0]

    run()


def test_session_id_must_be_a_string() -> None:
    with pytest.raises(TypeError):
        Session().for_session(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SessionManager(namespace="a:b")


# -- (e) SQL metacharacters and NUL characters everywhere -------------------------------------


def test_metacharacters_everywhere(store: Any) -> None:
    @settings(max_examples=examples(store), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(HOSTILE, MESSAGE_ID, HOSTILE, st.dictionaries(HOSTILE, JSON, max_size=3), HOSTILE)
    def run(session_id: str, message_id: str, text: str, metadata: dict[str, Any], update: str) -> None:
        session_id = session_id + uuid.uuid4().hex
        session = Session(store).for_session(session_id)
        message = {
            "id": message_id,
            "role": "assistant",
            "metadata": metadata,
            "parts": [
                {"type": "text", "text": text},
                {"type": "tool-call", "toolCallId": text, "toolName": message_id},
            ],
        }
        try:
            session.append_message(message)
        except StoreError as error:
            assert is_postgres(store) and refused_nul(error) and "\x00" in session_id + message_id + text, error
            if "\x00" not in session_id:
                assert session.get_path_length() == 0
            return
        stored = session.get_message(message_id)
        assert stored is not None and stored.to_dict() == {**message, "createdAt": stored.to_dict()["createdAt"]}
        changed = {**message, "parts": [{"type": "text", "text": update}]}
        try:
            assert session.update_message(changed)
        except StoreError as error:
            assert is_postgres(store) and refused_nul(error) and "\x00" in update, error
            assert session.get_message(message_id) == stored
            return
        assert session.get_message(message_id).parts == SessionMessage.model_validate(changed).parts
        assert session.delete_messages([message_id]) == [message_id]
        assert session.get_path_length() == 0

    run()


def test_nul_on_postgres_is_a_clear_error(store: Any) -> None:
    session = Session(store).for_session(fresh_id())
    message = {"id": "a\x00b", "role": "user", "parts": [{"type": "text", "text": "x"}]}
    if not is_postgres(store):
        session.append_message(message)
        assert session.get_message("a\x00b").id == "a\x00b"
        return
    with pytest.raises(SessionsError, match="NUL"):
        session.append_message(message)
    with pytest.raises(StoreError, match="NUL"):
        session.append_message({"id": "ok", "role": "user", "parts": [{"type": "text", "text": "nul\x00here"}]})
    assert session.get_path_length() == 0
    writable = session.with_context("notes").tools()[0]
    assert writable.invoke({"label": "notes", "content": "a\x00b"}).startswith("Error: ")
    assert store.list_blocks(session.session_id) == []


# -- nesting deeper than the parsers go ---------------------------------------------------------


def nested(depth: int) -> list[Any]:
    root = inner = []
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return root


@pytest.mark.parametrize("depth", [10, 150, 200, 240, 260, 1000, 5000])
def test_deeply_nested_messages_round_trip_or_are_refused(store: Any, depth: int) -> None:
    """Once stored, a message reads back, however deep its JSON: one nested too deeply to store
    raises ``MessageValidationError`` and stores nothing (it was stored and then unreadable)."""
    session = seeded_session(store)
    for odd in (object(), 10**5000):
        with pytest.raises(MessageValidationError, match="cannot be stored as JSON"):
            session.append_message({"id": "odd", "role": "user", "parts": [], "metadata": {"x": odd}})
    message = {
        "id": "deep",
        "role": "user",
        "parts": [{"type": "data-x", "data": nested(depth)}],
        "metadata": {"x": nested(depth)},
    }
    try:
        session.append_message(message)
    except MessageValidationError as error:
        assert depth > 200 and "cannot be stored as JSON" in str(error)
        assert session.get_path_length() == 1 and session.get_message("deep") is None
        return
    stored = session.get_message("deep")
    assert stored is not None and stored.to_dict() == {**message, "createdAt": stored.to_dict()["createdAt"]}
    assert [m.id for m in session.get_history()] == ["seed", "deep"]


def test_long_digit_runs_and_lone_surrogates(store: Any) -> None:
    """A 10,000-digit string is text like any other and reads back; an unpaired surrogate cannot
    be written as UTF-8 and is refused with ``MessageValidationError``, storing nothing."""
    session = seeded_session(store)
    digits = {
        "id": "digits",
        "role": "user",
        "parts": [{"type": "text", "text": "7" * 10_000}],
        "metadata": {"n": "1" * 5_000, "small": 12345},
    }
    session.append_message(digits)
    stored = session.get_message("digits")
    assert stored is not None and stored.to_dict() == {**digits, "createdAt": stored.to_dict()["createdAt"]}
    for where in ("text", "metadata"):
        message = {"id": "lone", "role": "user", "parts": [{"type": "text", "text": "ok"}], "metadata": {}}
        if where == "text":
            message["parts"][0]["text"] = "half \ud800 a pair"
        else:
            message["metadata"] = {"k": "\udfff"}
        with pytest.raises(MessageValidationError, match="holds a lone surrogate '.ud(800|fff)'"):
            session.append_message(message)
    assert session.get_message("lone") is None and session.get_path_length() == 2


def test_a_text_over_a_mebibyte_keeps_every_odd_value_or_is_refused(store: Any) -> None:
    """A message with a text part over 1 MiB is written by the json module (no UTF-8 copy of the
    text): every value reads back exactly as with pydantic's writer, and what that writer refuses
    (a lone surrogate, an integer too long to read back) is refused too, storing nothing."""
    session = seeded_session(store)
    long_text = '東京 "quoted" \\ \t\n 🙂 ' + "word " * 250_000
    odd = {
        "nan": float("nan"),
        "inf": float("inf"),
        "ninf": float("-inf"),
        "big": 10**300,
        "tiny": 5e-324,
        "nested": [{"k": [1, 2.5, None, True]}],
        "emoji 🙂": "\u0001\u001f",
    }
    message = {
        "id": "long",
        "role": "user",
        "metadata": odd,
        "parts": [
            {"type": "text", "text": long_text},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "input": odd},
            {"type": "step-start"},
        ],
    }
    session.append_message(message)
    stored = session.get_message("long").to_dict()
    del stored["createdAt"]
    assert json.dumps(stored, sort_keys=True) == json.dumps(message, sort_keys=True)
    assert math.isnan(stored["metadata"]["nan"]) and stored["metadata"]["big"] == 10**300
    for bad in ({"k": "\ud800"}, {"n": 10**5000}):
        refused = {**message, "id": "refused", "metadata": bad}
        with pytest.raises(MessageValidationError):
            session.append_message(refused)
    assert session.get_message("refused") is None and session.get_path_length() == 2


@pytest.mark.parametrize(
    "args",
    ["[" * 100_000, '{"label": "notes", "content": ' + "[" * 100_000, "{" * 50_000],
    ids=["list", "value", "object"],
)
def test_deeply_nested_tool_arguments_are_an_error(args: str) -> None:
    manager = SessionManager().with_context("notes", max_tokens=MAX_TOKENS)
    manager.with_context("kb", provider=StoreSearchContext()).with_context("skills", provider=MemorySkills())
    tools = manager.session_tools("chat")
    assert sorted(tool.name for tool in tools) == sorted(TOOL_NAMES)
    for tool in tools:
        for given_args in (args, args.encode()):
            result = tool.invoke(given_args)
            assert result.startswith(f"Error: invalid arguments for {tool.name}: not valid JSON"), result[:80]
        deep = {"label": nested(5000), "content": nested(5000), "key": nested(5000), "query": nested(5000)}
        assert tool.invoke(deep).startswith("Error: invalid arguments for ")
    assert manager.get_session("chat").get_context_block("notes").content == ""


@pytest.mark.parametrize("where", ["message id", "session id", "label"])
def test_very_long_ids_round_trip_or_are_refused(store: Any, where: str) -> None:
    """50,000 incompressible characters: SQLite keeps them; PostgreSQL cannot index them and
    says so ("value refused", not a failed connection), storing nothing."""
    import random
    import string

    long = "".join(random.Random(where).choices(string.ascii_letters + string.digits + "'\";-", k=50_000))
    session_id = long if where == "session id" else fresh_id()
    message_id = long if where == "message id" else "m"
    label = long if where == "label" else "notes"
    session = Session(store).for_session(session_id)
    try:
        session.append_message({"id": message_id, "role": "user", "parts": [{"type": "text", "text": "hi"}]})
        session.with_context(label).replace_context_block(label, "content")
    except StoreError as error:
        assert is_postgres(store) and "value refused" in str(error) and "connection" not in str(error), error
        if where == "label":
            assert store.list_blocks(session_id) == []
        else:
            assert session.get_path_length() == 0
        return
    assert session.get_message(message_id).id == message_id
    assert Session(store).for_session(session_id).with_context(label).get_context_block(label).content == "content"


def test_async_twins_behave_alike(store: Any) -> None:
    """``ainvoke`` and ``aappend_message`` give the same strings and errors as their sync twins."""
    import asyncio

    manager = SessionManager(store, namespace=f"ns{uuid.uuid4().hex[:8]}").with_context("notes", max_tokens=MAX_TOKENS)
    tools = manager.session_tools("chat")
    session = seeded_session(store)

    @settings(max_examples=examples(store, 40, 15), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(st.sampled_from(range(len(tools))), TOOL_ARGS.filter(lambda a: not isinstance(a, dict)), invalid_message())
    def run(index: int, args: Any, message: Any) -> None:
        result = asyncio.run(tools[index].ainvoke(args))
        assert isinstance(result, str)
        if result.startswith("Error: invalid arguments"):  # argument checks do not depend on state
            assert tools[index].invoke(args) == result
        with pytest.raises(MessageValidationError):
            asyncio.run(session.aappend_message(message))
        assert session.get_path_length() == 1

    run()


# -- (h) values JSON does not carry as such ---------------------------------------------------

SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
WILD_TEXT = st.one_of(
    HOSTILE,
    st.text(st.one_of(st.characters(), SURROGATE), max_size=6),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\ufffd", "\ud83d\ude00"]),
)
WILD_VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.floats()
    | st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0])
    | st.integers()
    | st.sampled_from([2**64, -(2**63)])
    | st.integers(4290, 4310).map(lambda n: 10**n)
    | WILD_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WILD_TEXT, inner, max_size=3),
    max_leaves=10,
)


def deeply_nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


WILD_MESSAGE = st.fixed_dictionaries(
    {
        "id": WILD_TEXT.filter(lambda s: s != "" and not s.startswith(COMPACTION_ID_PREFIX)),
        "role": st.sampled_from(["user", "assistant", "tool"]),
        "parts": st.lists(
            st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "text": WILD_TEXT}),
                st.fixed_dictionaries(
                    {
                        "type": st.just("tool-call"),
                        "toolCallId": WILD_TEXT,
                        "toolName": st.just("t"),
                        "input": st.one_of(WILD_VALUE, st.integers(1, 400).map(deeply_nested)),
                    }
                ),
                st.dictionaries(WILD_TEXT.filter(lambda k: k != "type"), WILD_VALUE, max_size=2).map(
                    lambda extra: {**extra, "type": "data-x"}
                ),
            ),
            max_size=3,
        ),
    },
    optional={"metadata": st.dictionaries(WILD_TEXT, WILD_VALUE, max_size=3)},
)


def same_json(a: Any, b: Any) -> bool:
    """Equal, NaN included (it is unequal to itself): compared as Python's json writes them."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)


def test_odd_values_read_back_exactly_or_are_refused(store: Any) -> None:
    """NaN, infinities, lone surrogates, NULs, huge integers, deep nesting and odd keys: a
    message reads back exactly equal, or the append raises a ``SessionsError`` and stores nothing."""
    from sessions_core.text import lone_surrogate

    session = seeded_session(store)

    @settings(max_examples=examples(store, 300, 60), deadline=None, suppress_health_check=FUNCTION_FIXTURE)
    @given(WILD_MESSAGE)
    def run(message: dict[str, Any]) -> None:
        assume(message["id"] != "seed")
        before = session.get_path_length()
        try:
            session.append_message(message)
        except SessionsError:
            assert session.get_path_length() == before
            if lone_surrogate(message["id"]) is None and not (is_postgres(store) and "\x00" in message["id"]):
                assert session.get_message(message["id"]) is None
            return
        stored = session.get_message(message["id"])
        assert stored is not None
        dumped = stored.model_dump(by_alias=True, exclude_unset=True, mode="json")
        dumped.pop("createdAt")
        assert same_json(dumped, message), (dumped, message)
        assert same_json(
            session.get_history()[-1].model_dump(by_alias=True, exclude_unset=True, mode="json"),
            stored.model_dump(by_alias=True, exclude_unset=True, mode="json"),
        )
        session.delete_messages([message["id"]])

    run()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_nan_and_infinities_round_trip_everywhere(store: Any, value: float) -> None:
    """Not stored as null: in metadata, tool input and an unknown part's fields, read back as
    they were (through export and import too)."""
    from sessions_core.transfer import export_lines, import_records

    session = seeded_session(store)
    message = {
        "id": "odd",
        "role": "assistant",
        "metadata": {"score": value, "nested": {"v": [value]}},
        "parts": [
            {"type": "tool-call", "toolCallId": "c1", "toolName": "t", "input": {"x": value}},
            {"type": "data-metric", "value": value},
        ],
    }
    session.append_message(message)
    for stored in (session.get_message("odd"), session.get_history()[-1]):
        assert stored is not None
        data = stored.to_dict()
        data.pop("createdAt")
        assert same_json(data, message) and "null" not in json.dumps(data)
    copy = SqliteStore(":memory:")
    import_records(copy, list(export_lines(store, session.session_id)))
    again = Session(copy).for_session(session.session_id).get_message("odd")
    assert again is not None and same_json(again.to_dict(), stored.to_dict())
    copy.close()


def test_lone_surrogates_outside_messages_are_refused_naming_the_field(store: Any) -> None:
    """Session ids, namespaces, names, labels, block content, keys and summaries: a lone
    surrogate gives ``InvalidTextError`` (a ``SessionsError`` and a ``ValueError``) naming the
    field, and nothing is stored."""
    from sessions_core import InvalidTextError

    bad = "x\ud800y"
    namespace = f"ns{uuid.uuid4().hex[:8]}"
    manager = SessionManager(store, namespace=namespace)
    info = manager.create("fine")
    session = Session(store).for_session(fresh_id()).with_context("memory", description="notes", max_tokens=500)
    session.with_context("kb", provider=StoreSearchContext())
    calls: list[tuple[str, Any]] = [
        ("session_id", lambda: Session(store).for_session(bad)),
        ("namespace", lambda: SessionManager(store, namespace=bad)),
        ("session_id", lambda: manager.get(bad)),
        ("name", lambda: manager.create(bad)),
        ("model", lambda: manager.create("n", model=bad)),
        ("name", lambda: manager.rename(info.id, bad)),
        ("name", lambda: manager.fork(info.id, "m", bad)),
        ("block label", lambda: Session(store).for_session(fresh_id()).with_context(bad)),
        ('the content for block "memory"', lambda: session.replace_context_block("memory", bad)),
        ('the content for block "memory"', lambda: session.append_context_block("memory", bad)),
        ("summary", lambda: session.add_compaction(bad, "a", "b")),
    ]
    for field, call in calls:
        with pytest.raises(InvalidTextError, match=f"^{re.escape(field)} holds a lone surrogate"):
            call()
    for lookup in (
        lambda: session.get_message(bad),
        lambda: session.get_history(bad),
        lambda: session.delete_messages([bad]),
        lambda: session.get_branches(bad),
    ):
        with pytest.raises(InvalidTextError, match="a value holds a lone surrogate"):
            lookup()  # an id no store can hold, reaching the store: its driver's error, as ours
    assert [i.name for i in manager.list_sessions()] == ["fine"]
    assert session.get_context_block("memory").content == ""
    assert session.get_compactions() == []
    tool = {t.name: t for t in session.tools()}["set_context"]
    assert tool.invoke({"label": "memory", "content": bad}).startswith('Error: the content for block "memory" holds')
    assert tool.invoke({"label": "kb", "key": "k", "content": bad}).startswith('Error: the content for block "kb"')
    assert session.get_context_block("memory").content == ""
    assert session.store.search_entry_rows(session.session_id, 0, 10) == []
    assert issubclass(InvalidTextError, SessionsError) and issubclass(InvalidTextError, ValueError)
