import pytest

from sessions_core import Session


@pytest.fixture
def session():
    with (
        Session(":memory:")
        .for_session("thread-1")
        .with_context("memory", description="Facts about the user", max_tokens=200) as session
    ):
        yield session
