"""The pure parts of retention: durations, the namespace a storage id names, row counts."""

from datetime import timedelta

import pytest

from sessions_core import InvalidInputError
from sessions_core.retention import parse_duration
from sessions_core.stores.base import RowCounts, split_storage_id


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("1.5h", timedelta(minutes=90)),
        ("7D", timedelta(days=7)),
    ],
)
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "90", "d", "-3d", "3y", "3 days", "1d x"])
def test_what_is_no_duration(text):
    with pytest.raises(InvalidInputError, match="not a duration"):
        parse_duration(text)


def test_the_namespace_a_storage_id_names():
    assert split_storage_id("team:abc") == ("team", "abc")
    assert split_storage_id("user-42") == ("", "user-42")
    assert split_storage_id(":a:b") == ("", "a:b")  # the default namespace's id holding a colon
    assert split_storage_id("ns:a:b") == ("ns", "a:b")


def test_row_counts_add_up_by_kind():
    total = RowCounts(messages=2, blobs=1) + RowCounts(registry=1, messages=3)
    assert total == RowCounts(registry=1, messages=5, blobs=1) and total.total == 7
    assert list(total.as_dict())[:2] == ["registry", "messages"]
