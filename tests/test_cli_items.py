"""``sessions items``: the LangGraph store items of a store (issue 33), a page at a time, per
manager namespace, and ``--versions KEY`` for one item's versions; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")
pytest.importorskip("rich", reason="the cli extra is not installed (pip install 'session-memory[cli]')")

from click.testing import CliRunner

from langchain_sessions import SessionStore
from sessions_core import SqliteStore
from sessions_core.cli import build_cli

from .postgres import postgres_url, require_postgres, temporary_schema


def run(*args: str):
    return CliRunner(env={"SESSIONS_STORE": None}).invoke(build_cli(), list(args), catch_exceptions=False)


def assert_error(result, code: int, expected: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [f"Error: {expected}"], result.stderr


def populate(store) -> None:
    """Items in the default namespace (one updated, one deleted, one long) and one in "team"."""
    with SessionStore(store) as items:
        items.put(("memories", "sam"), "drink", {"content": "Sam drinks tea"})
        items.put(("memories", "sam"), "drink", {"content": "Sam drinks green tea"})
        items.put(("memories", "ada"), "car", {"content": "Ada cycles"})
        items.delete(("memories", "ada"), "car")
        items.put(("notes",), "long", {"content": "word " * 100})
    with SessionStore(store, namespace="team") as team:
        team.put(("memories", "sam"), "drink", {"content": "the team's own"})


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "items.db"
    store = SqliteStore(path)
    populate(store)
    store.close()
    return str(path)


def test_items_lists_the_live_items_newest_first_with_key_version_and_update(db):
    result = run("--store", db, "items")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "KEY", "VERSION", "UPDATED", "VALUE"]
    assert [line.split()[:3] for line in lines[1:-1]] == [["notes", "long", "1"], ["memories.sam", "drink", "2"]]
    assert '{"content":"Sam drinks green tea"}' in lines[2] and lines[1].endswith("…") and len(lines[1]) < 140
    assert lines[-1] == "items 1-2 shown (page 1)"
    assert not any(line != line.rstrip() for line in lines)

    under = run("--store", db, "items", "memories", "sam")
    assert [line.split()[:2] for line in under.stdout.splitlines()[1:-1]] == [["memories.sam", "drink"]]
    assert (
        run("--store", db, "items", "memories", "ada").stdout.strip() == "No items under memories.ada (namespace '')."
    )

    listed = json.loads(run("--store", db, "items", "--json").stdout)
    assert [(item["namespace"], item["key"], item["version"]) for item in listed] == [
        (["notes"], "long", 1),
        (["memories", "sam"], "drink", 2),
    ]
    assert listed[1]["value"] == {"content": "Sam drinks green tea"} and listed[1]["updated_at"].endswith("+00:00")


def test_items_of_another_namespace_are_listed_only_with_it(db):
    team = json.loads(run("--store", db, "items", "--namespace", "team", "--json").stdout)
    assert [(item["key"], item["value"]) for item in team] == [("drink", {"content": "the team's own"})]
    versions = json.loads(run("--store", db, "items", "memories", "sam", "--versions", "drink", "--json").stdout)
    assert [v["value"]["content"] for v in versions] == ["Sam drinks green tea", "Sam drinks tea"]
    assert run("--store", db, "items", "--namespace", "nobody").stdout.strip() == (
        "No items under the root (namespace 'nobody')."
    )


def test_items_pages(db):
    first = run("--store", db, "items", "--limit", "1")
    assert first.stdout.splitlines()[1].split()[:2] == ["notes", "long"]
    assert first.stdout.splitlines()[-1] == "items 1-1 shown (page 1; --page 2 for the next 1)"
    second = run("--store", db, "items", "--limit", "1", "--page", "2")
    assert second.stdout.splitlines()[1].split()[:2] == ["memories.sam", "drink"]
    assert second.stdout.splitlines()[-1] == "items 2-2 shown (page 2)"
    assert_error(
        run("--store", db, "items", "--limit", "1", "--page", "3"),
        2,
        "--page 3 is past the end: the root (namespace '') holds fewer than 3 items",
    )


def test_item_versions_newest_first_a_deletion_without_a_value(db):
    result = run("--store", db, "items", "memories", "ada", "--versions", "car")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["VERSION", "WRITTEN", "VALUE"]
    assert lines[1].split()[0] == "2" and lines[1].endswith("(deleted)")
    assert lines[2].split()[0] == "1" and lines[2].endswith('{"content":"Ada cycles"}')
    assert lines[-1] == "2 versions of item 'car' in memories.ada (namespace '')"
    versions = json.loads(run("--store", db, "items", "memories", "ada", "--versions", "car", "--json").stdout)
    assert [(v["version"], v["value"]) for v in versions] == [(2, None), (1, {"content": "Ada cycles"})]


def test_erase_an_item_with_every_version_of_it(db):
    assert b"Ada cycles" in Path(db).read_bytes()  # a deleted item's value, kept as a version
    result = run("--store", db, "items", "memories", "ada", "--erase", "car")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Erased item 'car' of memories.ada (namespace '') with all its versions."
    assert b"Ada cycles" not in b"".join(p.read_bytes() for p in (Path(db), Path(db + "-wal")) if p.exists())
    assert_error(
        run("--store", db, "items", "memories", "ada", "--versions", "car"),
        1,
        "no item 'car' in memories.ada (namespace '') (see `sessions items`)",
    )
    erased = run("--store", db, "items", "memories", "sam", "--erase", "drink", "--namespace", "team", "--json")
    assert json.loads(erased.stdout) == {"erased": "drink", "items": 1, "vacuumed": False}
    kept = json.loads(run("--store", db, "items", "memories", "sam", "--versions", "drink", "--json").stdout)
    assert [v["value"]["content"] for v in kept] == ["Sam drinks green tea", "Sam drinks tea"]  # another namespace's
    assert_error(
        run("--store", db, "items", "memories", "ada", "--erase", "car"),
        1,
        "no item 'car' in memories.ada (namespace '') (see `sessions items`)",
    )
    assert_error(
        run("--store", db, "items", "--erase", "car"),
        2,
        "--erase KEY needs the item's namespace path: sessions items LABEL... --erase KEY",
    )
    assert_error(run("--store", db, "items", "memories", "--vacuum"), 2, "--vacuum goes with --erase KEY")
    assert_error(
        run("--store", db, "items", "memories", "--erase", "a", "--versions", "a"),
        2,
        "give --versions KEY or --erase KEY, not both",
    )


def test_items_bad_input_and_unknown_items(db, tmp_path):
    assert_error(
        run("--store", db, "items", "memories", "--versions", "nope"),
        1,
        "no item 'nope' in memories (namespace '') (see `sessions items`)",
    )
    assert_error(
        run("--store", db, "items", "--versions", "drink"),
        2,
        "--versions KEY needs the item's namespace path: sessions items LABEL... --versions KEY",
    )
    assert_error(run("--store", db, "items", "a.b"), 2, "namespace label 'a.b' of ('a.b',) holds '.' or NUL")
    assert_error(
        run("--store", db, "items", "memories", "--versions", "drink", "--page", "2"),
        2,
        "--page goes with the list of items, not with --versions",
    )
    assert run("--store", db, "items", "--limit", "0").exit_code == 2
    missing = tmp_path / "missing.db"
    assert_error(
        run("--store", str(missing), "items"),
        1,
        f"no SQLite database at {missing} (pass --store or set SESSIONS_STORE)",
    )
    assert not missing.exists()


def test_items_on_postgres():
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        store = PostgresStore(postgres_url(), schema=schema)
        try:
            populate(store)
        finally:
            store.close()
        pg = ("--store", postgres_url(), "--schema", schema)
        listed = json.loads(run(*pg, "items", "memories", "--json").stdout)
        assert [(item["namespace"], item["key"], item["version"]) for item in listed] == [
            (["memories", "sam"], "drink", 2)
        ]
        versions = run(*pg, "items", "memories", "ada", "--versions", "car")
        assert versions.exit_code == 0 and versions.stdout.splitlines()[-1] == (
            "2 versions of item 'car' in memories.ada (namespace '')"
        )
        team = json.loads(run(*pg, "items", "--namespace", "team", "--json").stdout)
        assert [item["value"] for item in team] == [{"content": "the team's own"}]
