from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core")

from sessions_core import Session  # noqa: E402


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "chat.db")


@pytest.fixture
def session(db):
    with Session(db).for_session("user-1").with_context("memory", description="Learned facts", max_tokens=500) as s:
        yield s
