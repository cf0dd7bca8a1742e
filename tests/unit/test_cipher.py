"""The pure part of encryption at rest: key quoting and what a refused file's first bytes say."""

from __future__ import annotations

import os

import pytest

from sessions_core import InvalidInputError
from sessions_core.cipher import SQLITE_HEADER, key_pragma, key_problem, key_text, looks_encrypted


def test_a_passphrase_is_a_quoted_sql_string():
    assert key_pragma("secret") == "'secret'"
    assert key_pragma("it's") == "'it''s'"
    assert key_pragma("x'; DROP TABLE t; --") == "'x''; DROP TABLE t; --'"
    assert key_text("naïve 🔑") == "naïve 🔑"


def test_32_bytes_are_a_raw_key():
    key = bytes(range(32))
    assert key_text(key) == f"x'{key.hex()}'"
    assert key_pragma(key) == f"'x''{key.hex()}'''"


@pytest.mark.parametrize(
    ("key", "message"),
    [("", "non-empty"), ("a\x00b", "NUL"), ("\ud800", "lone surrogate"), (b"x" * 16, "32 bytes, not 16")],
)
def test_bad_keys_are_invalid_input(key, message):
    with pytest.raises(InvalidInputError, match=message):
        key_pragma(key)


def test_a_key_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="str passphrase or 32 bytes"):
        key_pragma(1234)  # type: ignore[arg-type]


def test_random_bytes_look_encrypted_text_and_sqlite_files_do_not():
    assert looks_encrypted(os.urandom(4096))
    assert not looks_encrypted(os.urandom(100))  # shorter than the smallest page
    assert not looks_encrypted(b"not a database, just text " * 100)
    assert not looks_encrypted(SQLITE_HEADER + os.urandom(4080))
    assert not looks_encrypted(b"")


def test_key_problem_names_the_case():
    encrypted, plain = os.urandom(4096), SQLITE_HEADER + bytes(4080)
    assert "wrong key" in (key_problem(encrypted, keyed=True) or "")
    assert "not encrypted" in (key_problem(plain, keyed=True) or "")
    assert "this database is encrypted: pass key=" in (key_problem(encrypted, keyed=False) or "")
    assert key_problem(b"some text " * 200, keyed=False) is None
    assert key_problem(b"", keyed=True) is not None  # unreadable head: the key is what was given
