"""An item value's JSON and keyword text: a plain JSON value (what LangGraph and LangMem put)
goes through ``orjson``, anything else through ``json`` with its conversions; both store the
same value, index the same text, and refuse the same input."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions_core.errors import InvalidInputError
from sessions_core.items import _dump, _dump_plain, _plain_text, value_text

_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _texts
)
_plain = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4))


@given(st.dictionaries(_texts, _plain, max_size=5))
def test_a_plain_value_is_stored_and_indexed_as_json_stores_and_indexes_it(value):
    assert _plain_text(value) == value_text(value)
    assert json.loads(_dump_plain(value, "k")) == json.loads(_dump(value, "k")) == value


@pytest.mark.parametrize(
    "value",
    [
        {"n": math.nan},
        {"n": math.inf},
        {1: "an int key"},
        {"big": 1 << 64},
        {"tuple": (1, 2)},
        {"when": datetime(2026, 12, 7, tzinfo=timezone.utc)},
        {"id": uuid.UUID(int=7)},
        {"set": {"a"}},
        {"nested": [{"n": -math.inf}]},
    ],
)
def test_a_value_json_converts_or_refuses_is_not_plain(value):
    assert _plain_text(value) is None


@pytest.mark.parametrize(("value", "problem"), [({"a": "x\ud800"}, "lone surrogate"), ({"a": "nul\x00"}, "NUL")])
def test_a_plain_value_json_refuses_is_refused_the_same_way(value, problem):
    with pytest.raises(InvalidInputError, match=problem) as plain:
        _dump_plain(value, "k")
    with pytest.raises(InvalidInputError) as general:
        _dump(value, "k")
    assert str(plain.value) == str(general.value)


@pytest.mark.parametrize("text", ["a literal \\u0000 in a text", "\\\\u0000", "ends with \\"])
def test_a_backslash_before_u0000_is_text_not_a_nul(text):
    for dump in (_dump, _dump_plain):
        assert json.loads(dump({"a": text, text: 1}, "k")) == {"a": text, text: 1}
