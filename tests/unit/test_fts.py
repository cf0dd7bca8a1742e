import sqlite3

import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sessions_core import Session, fts
from sessions_core.fts import (
    MAX_QUERY_TERMS,
    MAX_TERM_CHARS,
    MAX_TERMS,
    Alternative,
    exact_units,
    fts5_expression,
    index_terms,
    parse_query,
    tsquery_literal,
    tsvector_literal,
)


def test_words_are_folded_and_stemmed():
    assert index_terms("Deploying the deployment, DEPLOYED!") == ["deploy", "the", "deploy", "deploy"]
    assert index_terms("Café naïve Straße Łódź ＡＰＩ") == ["cafe", "naiv", "strass", "lodz", "api"]


def test_identifiers_are_their_parts_then_the_whole():
    assert index_terms("getUserById") == ["get", "user", "by", "id", "getuserbyid"]
    assert index_terms("ERR_CONN_RESET") == ["err", "conn", "reset", "errconnreset"]
    assert index_terms("user_service.py") == ["user", "servic", "py", "userservicepy"]
    assert index_terms("HTTPServer v1.2.3") == ["http", "server", "httpserver", "v", "1", "2", "3", "v123"]
    assert index_terms("end. Next") == ["end", "next"]  # a joiner joins only between two words


def test_cjk_runs_are_bigrams_and_their_last_character():
    assert index_terms("生产环境") == ["生产", "产环", "环境", "境"]
    assert index_terms("東京でラーメン") == ["東京", "京で", "でラ", "ラー", "ーメ", "メン", "ン"]
    assert index_terms("금요일에 새") == ["금요", "요일", "일에", "에", "새"]
    assert index_terms("ｶﾞｲﾄﾞ") == ["ガイ", "イド", "ド"]  # half-width kana, composed
    assert index_terms("在Python中") == ["在", "python", "中"]


def test_queries_become_units_of_alternatives():
    assert parse_query("deploy") == ((Alternative(("deploy",)), Alternative(("deploy",), True, False)),)
    assert parse_query("to") == ((Alternative(("to",)),),)  # too short to be a prefix
    assert parse_query("UserById") == ((Alternative(("userbyid",)), Alternative(("user", "by", "id"), exact=False)),)
    assert parse_query("生产环境") == ((Alternative(("生产", "产环", "环境")),),)
    assert parse_query("东") == ((Alternative(("东",), True, False),),)
    assert parse_query('deploy "deploy" DEPLOY') == parse_query("deploy")
    assert parse_query("  ***  ") == () and parse_query(None) == ()


def test_exact_units_drop_prefixes():
    units = parse_query("deploy 东 to")
    only_prefix = Alternative(("东",), True, False)
    assert exact_units(units) == ((Alternative(("deploy",)),), (only_prefix,), (Alternative(("to",)),))


def test_renderings():
    units = parse_query("deploy UserById 环境")
    assert fts5_expression(units) == '("deploy" OR "deploy"*) AND ("userbyid" OR "user by id") AND "环境"'
    assert tsquery_literal(units) == (
        "(('deploy') | 'deploy':*) & (('userbyid') | ('user' <-> 'by' <-> 'id')) & (('环境'))"
    )
    assert fts5_expression(()) is None and tsquery_literal(()) is None
    assert tsvector_literal("deploy 环境") == "'deploy':1 '环境':2 '境':3"


def test_limits():
    assert len(index_terms("word " * 50_000)) == MAX_TERMS
    assert index_terms("x" * 500) == ["x" * MAX_TERM_CHARS]
    assert len(parse_query(" ".join(f"w{i}" for i in range(500)))) <= MAX_QUERY_TERMS
    letters = str.maketrans("0123456789", "abcdefghij")
    long_unique = " ".join(str(i).translate(letters) * 40 for i in range(20_000))  # the tsvector byte budget
    assert 10_000 < len(index_terms(long_unique)) < MAX_TERMS


_TERM = regex.compile(r"[\p{L}\p{N}\p{M}]+")


@settings(max_examples=300, deadline=None)
@given(st.text())
@example("\u2e80")  # a CJK radical: a symbol of the Han script, not a letter
@example("\u2f00\u4e2d\u2e80\u6587")
def test_terms_are_letters_digits_and_marks_only(text):
    for term in index_terms(text):
        assert _TERM.fullmatch(term) and len(term) <= MAX_TERM_CHARS


ASCII = st.text(alphabet=st.characters(max_codepoint=127)) | st.sampled_from(
    ["getUserById", "HTTPServer2 x86_64", "ERR_CONN_RESET v1.2.3", "don't stop", "a.b-c/d\\e:f@g#h", "iOS 17.2"]
)


@settings(max_examples=500, deadline=None)
@given(ASCII)
def test_the_ascii_fast_path_splits_as_the_unicode_path(text):
    tokens = fts._ASCII_TOKEN.findall(text)
    assert tokens == fts._TOKEN.findall(text)
    for token in tokens:
        for segment in fts._JOINER.split(token):
            assert fts._ASCII_BOUNDARY.split(segment) == fts._BOUNDARY.split(segment)


@settings(max_examples=500, deadline=None)
@given(st.lists(ASCII, min_size=1, max_size=4))
def test_an_ascii_text_is_indexed_by_its_tokens_terms_in_order(texts):
    # The ASCII path analyses (and remembers) whitespace-separated chunks, not tokens: the
    # same terms, whichever texts came first.
    for text in texts:
        tokens = fts._ASCII_TOKEN.findall(text)
        expected = [term for token in tokens for term in fts._token_terms(token)][: fts.MAX_TERMS]
        assert index_terms(text) == expected
        assert index_terms(text) == expected  # now from what it remembers


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
        "\\",
        "<->",
        "&",
        "|",
        "!",
        ":*",
    ]
)
QUERIES = st.one_of(
    st.text(),
    st.lists(st.one_of(OPERATORS, st.text(max_size=5)), max_size=30).map(" ".join),
    st.builds(lambda word, n: (word + " ") * n, st.text(min_size=1, max_size=8), st.integers(1, 2000)),
)


@settings(max_examples=300, deadline=None)
@given(QUERIES)
def test_any_query_is_a_valid_fts5_expression(query):
    expression = fts5_expression(parse_query(query))
    if expression is None:
        return
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='ascii')")
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


def test_a_long_text_is_indexed_by_its_beginning_without_tokenizing_all_of_it():
    import tracemalloc

    text = "deploying getUserById 部署服务器 " * 800_000  # 28 MB
    tracemalloc.start()
    terms = fts.index_terms(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(terms) == fts.MAX_TERMS
    assert terms[:12] == [
        "deploy",
        "get",
        "user",
        "by",
        "id",
        "getuserbyid",
        "部署",
        "署服",
        "服务",
        "务器",
        "器",
        "deploy",
    ]
    assert peak < len(text) // 20
