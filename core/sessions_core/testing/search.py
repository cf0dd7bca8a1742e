"""Search contract: stemming, every word, ranking, isolation, hostile queries, every language and code."""

from __future__ import annotations

import pytest

from ..providers import StoreSearchContext
from .builders import ids, msg, untimed
from .harness import skip_where_unsupported


def _store(s):
    return s.session.store if hasattr(s, "_loop") else s.store


def test_search_stems_words(make_session):
    s = make_session()
    s.append_message(msg("a", "We are deploying the new release"))
    s.append_message(msg("b", "It was deployed yesterday", role="assistant"))
    s.append_message(msg("c", "Unrelated chatter"))
    assert sorted(ids(s.search("deploy"))) == ["a", "b"]
    assert sorted(ids(s.search("deploys"))) == ["a", "b"]


def test_match_all_needs_every_word_but_not_adjacent(make_session):
    s = make_session()
    s.append_message(msg("a", "production deploy needs approval"))
    s.append_message(msg("b", "deploy to staging"))
    s.append_message(msg("c", "approval for production from the team"))
    assert ids(s.search("approval production", match="all")) in (["a", "c"], ["c", "a"])
    assert ids(s.search("deploy approval", match="all")) == ["a"]
    assert ids(s.search("production deploy", match="all")) == ["a"]
    assert s.search("deploy kubernetes", match="all") == []


def test_messages_with_every_word_rank_first_then_those_with_some(make_session):
    s = make_session()
    s.append_message(msg("a", "production deploy needs approval"))
    s.append_message(msg("b", "deploy to staging"))
    s.append_message(msg("c", "approval for production from the team"))
    s.append_message(msg("d", "lunch"))
    assert ids(s.search("deploy approval"))[0] == "a"
    assert sorted(ids(s.search("deploy approval"))) == ["a", "b", "c"]
    assert ids(s.search("production deploy"))[0] == "a"
    assert ids(s.search("deploy kubernetes")) in (["a", "b"], ["b", "a"])
    assert s.search("kubernetes helm") == []


def test_all_words_first_even_over_a_better_partial_match(make_session):
    s = make_session()
    s.append_message(msg("all", "a long note: the invoice was sent to the client after the meeting we had"))
    s.append_message(msg("partial", "invoice invoice invoice"))
    s.append_message(msg("rare", "zanzibar"))
    assert ids(s.search("invoice client")) == ["all", "partial"]


def test_a_question_with_filler_words_finds_its_message(make_session):
    s = make_session()
    s.append_message(msg("lease", "Good news: my new car lease starts on the first of March!"))
    s.append_message(msg("research", "I spent the weekend researching adoption agencies.", role="assistant"))
    s.append_message(msg("other", "What did you do with the dog? Did you walk it?"))
    assert ids(s.search("When does the car lease start?"))[0] == "lease"
    assert ids(s.search("What did she research?"))[0] == "research"
    assert s.search("what did the", limit=5) == []  # stop words alone weigh nothing
    assert ids(s.search("what did the", match="all")) == ["other"]  # match="all" as before


def test_rare_words_weigh_more(make_session):
    s = make_session()
    s.append_messages([msg(f"n{i}", f"meeting notes number {i}") for i in range(20)])
    s.append_message(msg("rare", "the meeting about the kestrel survey"))
    s.append_message(msg("common", "notes notes meeting"))
    assert ids(s.search("kestrel notes", limit=3))[0] == "rare"


def test_match_is_checked(make_session):
    s = make_session()
    with pytest.raises(ValueError, match="match must be one of"):
        s.search("x", match="some")


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
    assert ids(s.search("salt AND pepper", match="all")) == ["a"]
    assert ids(s.search('salt "pepper', match="all")) == ["a"]
    assert ids(s.search("salt AND pepper")) == ids(s.search('salt "pepper')) == ["a", "b"]
    # "*" is text; a word of three characters or more is a prefix anyway, a shorter one is not.
    assert ids(s.search("pepp*")) == ids(s.search("pepp")) == ["a"]
    assert s.search("pe*") == [] and s.search("pe*", match="all") == []


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


# -- every language, and code (sessions_core.fts says what matches what) ------------------------

MULTILINGUAL = {
    "zh": "我们周五部署新版本到生产环境",
    "zh2": "用户喜欢喝咖啡，不喜欢茶",
    "ja": "東京でラーメンを食べました",
    "ja2": "ｶﾀｶﾅのテストです",
    "ko": "금요일에 새 버전을 배포합니다",
    "mixed": "在Python中调用getUserById函数",
    "code": "call getUserById in user_service.py",
    "err": "the socket failed with ERR_CONN_RESET after v1.2.3",
    "http": "HTTPServer listens on /var/run/app.sock",
    "deploying": "deploying the new version",
    "deployment": "the deployment failed",
    "cafe": "we met at the café downtown",
    "category": "a category of its own",
    "cat": "the cat sat",
}

FOUND = [
    ("部署", ["zh"]),
    ("周五", ["zh"]),
    ("生产环境", ["zh"]),
    ("部署新版本", ["zh"]),
    ("咖啡", ["zh2"]),
    ("喜欢", ["zh2"]),
    ("境", ["zh"]),
    ("ラーメン", ["ja"]),
    ("東京", ["ja"]),
    ("カタカナ", ["ja2"]),
    ("배포", ["ko"]),
    ("금요일", ["ko"]),
    ("버전", ["ko"]),
    ("Python 调用", ["mixed"]),
    ("UserById", ["code", "mixed"]),
    ("getUser", ["code", "mixed"]),
    ("getuserbyid", ["code", "mixed"]),
    ("user_service.py", ["code"]),
    ("user_service", ["code"]),
    ("ERR_CONN_RESET", ["err"]),
    ("conn reset", ["err"]),
    ("1.2.3", ["err"]),
    ("HTTPServer", ["http"]),
    ("server", ["http"]),
    ("app.sock", ["http"]),
    ("deploy", ["deploying", "deployment"]),
    ("deployed", ["deploying", "deployment"]),
    ("depl", ["deploying", "deployment"]),
    ("cafe", ["cafe"]),
    ("CAFÉ", ["cafe"]),
    ("cat", ["cat", "category"]),
    ("部署 环境", ["zh"]),
    ("环境部署", []),
    ("ラーメン 東京 deploy", []),
]


@pytest.mark.parametrize(("query", "expected"), FOUND, ids=[q for q, _ in FOUND])
def test_every_language_and_code_is_found(make_session, query, expected):
    s = make_session()
    s.append_messages([msg(key, text) for key, text in MULTILINGUAL.items()])
    assert sorted(ids(s.search(query, limit=50, match="all"))) == sorted(expected)
    ranked = ids(s.search(query, limit=50))
    assert sorted(ranked[: len(expected)]) == sorted(expected)  # every word first, then some


def test_exact_words_rank_above_prefix_matches(make_session):
    s = make_session()
    s.append_messages([msg("prefix", "a category of things"), msg("exact", "a cat of things")])
    assert ids(s.search("cat")) == ["exact", "prefix"]


def test_identifier_parts_and_whole_rank_the_whole_first(make_session):
    s = make_session()
    s.append_messages([msg("parts", "get the user by the id"), msg("whole", "getUserById")])
    assert ids(s.search("getUserById")) == ["whole"]
    assert sorted(ids(s.search("user id"))) == ["parts", "whole"]


def test_updated_text_is_found_by_its_new_words(make_session):
    s = make_session()
    s.append_message(msg("a", "東京で会議"))
    s.update_message(msg("a", "大阪で会議"))
    assert s.search("東京") == []
    assert ids(s.search("大阪")) == ["a"]


def test_a_huge_text_is_stored_and_searchable_by_its_beginning(make_session):
    s = make_session()
    text = "beginning " + " ".join(f"w{i}" for i in range(200_000)) + " ending"
    s.append_message(msg("huge", text))
    assert s.get_message("huge").parts[0].text == text
    assert ids(s.search("beginning")) == ["huge"]
    assert s.search("ending") == []
    # Distinct long words: the index keeps as many as PostgreSQL's 1 MB tsvector holds.
    letters = str.maketrans("0123456789", "abcdefghij")
    distinct = " ".join(str(i).translate(letters) * 40 for i in range(20_000))
    s.append_message(msg("distinct", distinct))
    assert ids(s.search("a" * 40)) == ["distinct"]


def _megabytes_of_varied_text(megabytes: int) -> str:
    """Words, identifiers, CamelCase, CJK and emoji, most of them distinct: an index of all of
    it would be several times PostgreSQL's 1 MB ``tsvector``."""
    import random

    rnd = random.Random(19)
    words = ["deploy", "retry", "payload", "kubernetes", "latency", "review"]
    parts, size = ["opening zebrafish quokka"], 0
    while size < megabytes * 1_000_000:
        pick = rnd.random()
        if pick < 0.3:
            word = rnd.choice(words)
        elif pick < 0.6:
            word = f"ident_{rnd.getrandbits(40):x}"
        elif pick < 0.75:
            word = f"Camel{rnd.getrandbits(24)}Case"
        elif pick < 0.95:
            word = "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(rnd.randint(2, 6)))
        else:
            word = chr(rnd.randint(0x1F300, 0x1F5FF)) + f"e{rnd.getrandbits(16)}"
        parts.append(word)
        size += len(word.encode("utf-8")) + 1
    return " ".join(parts) + " closing"


def test_megabytes_of_varied_text_are_stored_whole_and_found_by_their_beginning(make_session):
    """A message and a searchable block entry of 3 MB (past PostgreSQL's 1 MB ``tsvector``):
    both are stored and read back equal, and found by their first words."""
    s = make_session("mb")
    text = _megabytes_of_varied_text(3)
    s.append_message(msg("big", text))
    assert s.get_message("big").parts[0].text == text
    assert ids(s.search("zebrafish quokka")) == ["big"]
    store = _store(s)
    store.set_search_entry("mb", "kb", "big", text)
    assert store.search_entries("mb", "kb", "opening zebrafish", 5) == [("big", text)]
    assert store.count_search_entries("mb", "kb") == 1


def test_search_context_says_when_an_entry_was_written(make_session):
    from .context import call_tool

    s = make_session("kbw").with_context("knowledge", description="Notes", provider=StoreSearchContext())
    call_tool(s, "set_context", {"label": "knowledge", "content": "Lisbon has trams", "metadata": {"title": "lisbon"}})
    [version] = s.get_context_history("knowledge", "lisbon")
    when = version.created_at.strftime("%Y-%m-%d %H:%M")
    found = call_tool(s, "search_context", {"label": "knowledge", "query": "what about the trams in Lisbon?"})
    assert found == f"[lisbon] ({when} UTC)\nLisbon has trams"


def test_searchable_blocks_find_every_language_and_code(make_session):
    from .context import call_tool

    s = make_session("kb").with_context("knowledge", description="Notes", provider=StoreSearchContext())
    for title, content in [
        ("tokyo", "東京の天気は晴れです"),
        ("deploy", "Run deploy_service.sh on Fridays"),
        ("seoul", "서울에서 회의가 있습니다"),
    ]:
        call_tool(s, "set_context", {"label": "knowledge", "content": content, "metadata": {"title": title}})
    search = lambda query: untimed(call_tool(s, "search_context", {"label": "knowledge", "query": query}))  # noqa: E731
    assert search("天気") == "[tokyo]\n東京の天気は晴れです"
    assert search("회의") == "[seoul]\n서울에서 회의가 있습니다"
    assert search("deploy_service") == "[deploy]\nRun deploy_service.sh on Fridays"
    assert search("friday") == "[deploy]\nRun deploy_service.sh on Fridays"
    assert search("大阪") == "No results found."


def test_a_hit_an_overlay_hides_says_it_was_compacted(make_session):
    s = make_session("hidden")
    for n in range(5):
        s.append_message(msg(f"m{n}", f"deploy step {n}"))
    other = make_session("open", store=_store(s))
    other.append_message(msg("o1", "deploy elsewhere"))
    s.add_compaction("Steps 1 to 3 done", "m1", "m3")
    hits = {hit.id: hit.compacted for hit in s.search("deploy")}
    assert hits == {"m0": False, "m1": True, "m2": True, "m3": True, "m4": False}
    assert not other.search("deploy")[0].compacted
    assert _store(s).with_overlays(["hidden", "open", "unknown"]) == {"hidden"}


skip_where_unsupported(globals())
