"""The SQL of the stores is written once: no statement stands twice across the store modules,
compared with placeholders and the schema prefix normalised."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import sessions_core.stores as stores_package

STORES = Path(stores_package.__file__).parent
SQL_START = re.compile(r"^\s*(WITH|SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER)\b", re.IGNORECASE)


def _normalised(sql: str) -> str:
    sql = re.sub(r"%\(\w+\)s|%s|(?<![:\w]):\w+|\?", "?", sql)
    sql = re.sub(r'\{s\}\.|"\w+"\.|\{schema\}\.', "", sql)
    return " ".join(sql.split()).lower()


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with each interpolation as ``{expression}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else f"{{{ast.unparse(part.value)}}}" for part in node.values
        )
    return None


def _statements(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pieces = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        text = None if id(node) in pieces else _text(node)
        if text and SQL_START.match(text) and len(text.split()) >= 4:  # a statement, not a keyword
            found.append((_normalised(text), node.lineno))
    return found


def test_no_statement_stands_twice_across_the_store_modules():
    places = defaultdict(list)
    for path in sorted(STORES.glob("*.py")):
        for statement, line in _statements(path):
            places[statement].append(f"{path.name}:{line}")
    repeated = {statement: where for statement, where in places.items() if len(where) > 1}
    assert not repeated, repeated


def test_both_dialects_keep_their_migrations_as_ordered_files():
    for dialect in ("sqlite", "postgres"):
        names = sorted(p.name for p in (STORES / "migrations" / dialect).glob("*.sql"))
        assert names, dialect
        assert [int(name.split("_", 1)[0]) for name in names] == list(range(1, len(names) + 1))
