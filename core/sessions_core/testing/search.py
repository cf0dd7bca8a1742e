"""Search contract: stemming, every word, ranking, isolation, hostile queries."""

from __future__ import annotations

import pytest

from .builders import ids, msg


def _store(s):
    return s.session.store if hasattr(s, "_loop") else s.store


def test_search_stems_words(make_session):
    s = make_session()
    s.append_message(msg("a", "We are deploying the new release"))
    s.append_message(msg("b", "It was deployed yesterday", role="assistant"))
    s.append_message(msg("c", "Unrelated chatter"))
    assert sorted(ids(s.search("deploy"))) == ["a", "b"]
    assert sorted(ids(s.search("deploys"))) == ["a", "b"]


def test_every_word_must_match_but_need_not_be_adjacent(make_session):
    s = make_session()
    s.append_message(msg("a", "production deploy needs approval"))
    s.append_message(msg("b", "deploy to staging"))
    s.append_message(msg("c", "approval for production from the team"))
    assert ids(s.search("approval production")) in (["a", "c"], ["c", "a"])
    assert ids(s.search("deploy approval")) == ["a"]
    assert ids(s.search("production deploy")) == ["a"]
    assert s.search("deploy kubernetes") == []


def test_results_carry_role_content_time_and_session(make_session):
    s = make_session("sess")
    s.append_message(msg("a", "The quick brown fox", role="assistant"))
    [hit] = s.search("fox")
    assert (hit.id, hit.role, hit.content, hit.session_id) == ("a", "assistant", "The quick brown fox", "sess")
    assert hit.created_at == s.get_message("a").created_at


def test_ranking_puts_the_best_match_first(make_session):
    s = make_session()
    s.append_message(msg("weak", "a long message mentioning cache once among many other words here"))
    s.append_message(msg("strong", "cache cache cache"))
    assert ids(s.search("cache"))[0] == "strong"


def test_search_covers_every_branch_and_respects_limit(make_session):
    s = make_session()
    s.append_message(msg("m0", "topic zebra"))
    s.append_message(msg("m1", "zebra again"))
    s.append_message(msg("m1b", "zebra on a branch"), parent_id="m0")
    assert sorted(ids(s.search("zebra"))) == ["m0", "m1", "m1b"]
    assert len(s.search("zebra", limit=2)) == 2
    assert s.search("zebra", limit=0) == []


def test_search_is_isolated_per_session(make_session):
    a = make_session("a")
    b = make_session("b", store=_store(a))
    a.append_message(msg("x", "secret penguin"))
    b.append_message(msg("y", "other penguin"))
    assert ids(a.search("penguin")) == ["x"]
    assert ids(b.search("penguin")) == ["y"]


def test_only_text_parts_are_indexed(make_session):
    s = make_session()
    s.append_message(
        {
            "id": "t",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "hidden thoughts"},
                {"type": "tool-call", "toolCallId": "1", "toolName": "lookup", "input": {"q": "invisible"}},
                {"type": "text", "text": "visible answer"},
            ],
        }
    )
    assert ids(s.search("visible")) == ["t"]
    assert s.search("hidden") == [] and s.search("invisible") == []


@pytest.mark.parametrize(
    "query",
    ["", "   ", "***", '"', '""', "()", "AND", "a OR", "NOT x", "NEAR(a b)", "col:value", "^start", "-", "+"],
)
def test_hostile_queries_never_raise(make_session, query):
    s = make_session()
    s.append_message(msg("a", "and or not near value start"))
    assert isinstance(s.search(query), list)


def test_operators_are_plain_words(make_session):
    s = make_session()
    s.append_message(msg("a", "salt and pepper"))
    s.append_message(msg("b", "salt only"))
    assert ids(s.search("salt AND pepper")) == ["a"]
    assert ids(s.search('salt "pepper')) == ["a"]
    assert ids(s.search("pepp*")) == []


def test_a_session_token_is_never_a_search_word(make_session):
    s = make_session("abc")
    s.append_message(msg("a", "hello"))
    token = "s" + b"abc".hex()
    assert s.search(token) == []


def test_frequent_words_rank_the_most_recent_matches(make_session):
    """Past SEARCH_CANDIDATES matches only the newest are ranked; the newest always come back."""
    s = make_session("many")
    other = make_session("other", store=_store(s))
    for i in range(60):
        other.append_message(msg(f"o{i}", "common word"))
    for i in range(30):
        s.append_message(msg(f"m{i}", "common word " + "filler " * (i % 7)))
    hits = s.search("common", limit=100)
    assert sorted(ids(hits)) == sorted(f"m{i}" for i in range(30))
