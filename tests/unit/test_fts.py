import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_core import Session
from sessions_core.fts import MAX_QUERY_TERMS, match_all_words, query_terms


def test_terms_are_words_lowercased_and_deduplicated():
    assert query_terms('Deploy "production" deploy, NOT (x)*') == ["deploy", "production", "not", "x"]
    assert query_terms("snake_case") == ["snake", "case"]
    assert query_terms("  ***  ") == []
    assert query_terms("用户喜欢咖啡 café") == ["用户喜欢咖啡", "café"]


def test_expression_quotes_every_term():
    assert match_all_words("deploy production") == '"deploy" "production"'
    assert match_all_words('"";--') is None
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)))) == MAX_QUERY_TERMS


OPERATORS = st.sampled_from(
    ['"', "'", "(", ")", "AND", "OR", "NOT", "NEAR", "NEAR(", "*", ":", "^", "-", "+", "{", "}", "\x00", ";", "--"]
)
QUERIES = st.one_of(
    st.text(),
    st.lists(st.one_of(OPERATORS, st.text(max_size=5)), max_size=30).map(" ".join),
    st.builds(lambda word, n: (word + " ") * n, st.text(min_size=1, max_size=8), st.integers(1, 2000)),
)


@settings(max_examples=300, deadline=None)
@given(QUERIES)
def test_any_query_is_a_valid_fts5_expression(query):
    expression = match_all_words(query)
    if expression is None:
        return
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t VALUES ('and or not near start value')")
    conn.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()


_session = Session()
_session.append_message({"id": "a", "role": "user", "parts": [{"type": "text", "text": "and or not near x"}]})


@settings(max_examples=300, deadline=None)
@given(QUERIES)
def test_session_search_never_raises(query):
    results = _session.search(query)
    assert isinstance(results, list)


def test_a_ten_thousand_character_query():
    assert _session.search("near " * 2000) != []
    assert _session.search("x" * 10_000) == []
