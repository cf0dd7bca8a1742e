"""Core benchmark: the SQLite store through ``Session`` against a hand-written ``sqlite3`` floor.

Run ``python bench/bench_core.py`` (full, a few minutes the first time while the 1M-message search
database is built and cached under ``bench/.cache/``) or ``--quick`` for a sanity run.

Every figure compares ``Session(SqliteStore(path))`` with raw ``sqlite3`` code over exactly the
same schema (``sessions_core.stores.sqlite.MIGRATIONS``) and the same durability (file database,
WAL, ``synchronous=NORMAL``). Timings use ``time.perf_counter``; each figure is the median over
repetitions, ours and the floor interleaved so that noise from the machine hits both alike.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import io
import itertools
import json
import os
import platform
import pstats
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sessions_core
from sessions_core import Session, SqliteStore
from sessions_core.fts import exact_units, fts5_expression, index_text, parse_query
from sessions_core.stores.sqlite import MIGRATIONS

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results"

# Bump when the generator or the way databases are built changes; the schema is keyed separately.
DATA_VERSION = "core-data-v2"  # v2: CJK sentences and code identifiers in the mix
# Whitespace is not schema: the key holds the migrations' SQL tokens only.
SCHEMA_KEY = hashlib.sha256("\x00".join(" ".join(m.split()) for m in MIGRATIONS).encode()).hexdigest()[:12]

SESSION = "bench"
SEED = 20240611
BASE_TIME_US = 1_700_000_000_000_000  # Nov 2023: every bulk-built row is older than a live append

# ------------------------------------------------------------------------------------------------
# Deterministic chat text with Zipf-like term frequencies.
#
# Ranks 1..len(HEAD) are real words, most frequent first (function words, then chat and
# engineering vocabulary); the long tail is made of deterministic pseudo-words (identifiers,
# names, typos in real logs). A token of rank r is drawn with probability proportional to r**-s;
# with s ~ 1.1 and ~400k ranks, a word near rank 30 occurs in several percent of
# messages and words deep in the tail in a handful out of a million.
# ------------------------------------------------------------------------------------------------

HEAD = """
the to and a of is i you it that in for this be with on not can have are do as if but we
what so your my will database error or at there an from use was just would should by how me
one need about
all they like get more when which its then also make here some know out up no file want code
other way any see could time only these them has run data new now first work check try value
database error function query user set call model test line return list server change problem
system example type table version output input result case memory request response config
update create session message search index api client token context key string number path
default option log build service version thanks help look issue read write start
help think going sure right good well still yes back because into over after before where
why does did than very much many each both same different current without between using
open close local remote field method class object module package import install upgrade
bug fix patch commit branch merge review deploy release cluster node worker thread process
queue cache store storage disk network latency timeout retry limit size page row column
schema migration transaction lock connection pool driver port host proxy header body json
yaml text format parse encode decode stream buffer batch job task schedule cron event hook
handler route endpoint auth password secret permission role account email name date hour
minute second day week month year today tomorrow yesterday morning evening plan idea note
question answer reply summary detail step reason cause effect test unit integration mock
fixture assert expect failure success warning info debug trace metric alert dashboard graph
chart report document docs guide tutorial readme changelog license link url image video
audio upload download sync async await promise future callback loop array map filter sort
reduce join split trim replace match regex pattern template render view component state
prop store reducer action dispatch selector hook effect layout style theme color font size
width height margin padding border shadow button input form label select checkbox modal
dialog menu tab panel card grid flex container wrapper header footer sidebar navbar search
filter result item entry record document collection bucket object blob binary image vector
embedding tokenizer prompt completion chat agent tool call argument parameter schema field
python javascript typescript rust golang java sql postgres sqlite redis kafka docker linux
macos windows shell bash terminal editor vim emacs vscode git github gitlab ci pipeline
action runner artifact container image registry kubernetes helm chart terraform ansible aws
gcp azure bucket lambda function region zone instance volume snapshot backup restore replica
primary secondary leader follower shard partition offset consumer producer topic broker
latency throughput bandwidth cpu ram gpu core benchmark profile flame hotspot bottleneck
regression slowdown speedup optimize refactor rename delete remove add insert append prepend
fetch load save flush commit rollback savepoint checkpoint vacuum analyze explain plan
""".split()  # noqa: SIM905 - a word list reads better as text

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aiou"]


def _pseudo_word(k: int) -> str:
    n = (k * 2_654_435_761 + 97) % len(SYLLABLES) ** 4
    parts = []
    for _ in range(4):
        n, r = divmod(n, len(SYLLABLES))
        parts.append(SYLLABLES[r])
    return "".join(parts)


def _vocabulary(size: int) -> list[str]:
    words = list(dict.fromkeys(HEAD))
    seen = set(words)
    k = 0
    while len(words) < size:
        word = _pseudo_word(k)
        k += 1
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


VOCAB_SIZE = 400_000
VOCAB = _vocabulary(VOCAB_SIZE)
ZIPF_EXPONENT = 1.1  # the head (real words) then carries about two thirds of the tokens
CUM_WEIGHTS = list(itertools.accumulate(r**-ZIPF_EXPONENT for r in range(1, VOCAB_SIZE + 1)))
TOOLS = ["search_docs", "run_sql", "read_file", "http_get", "list_directory", "get_weather"]

# Chinese, Japanese and Korean: Zipf-distributed words made of common characters, written without
# spaces (zh, ja) or as space-separated words with particles (ko); about 8% of sentences.
HAN = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么"
    "心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现"
    "分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位"
    "因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师"
)
KANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほ"
    "まみむめもやゆよらりるれろわんがぎぐげござじずぜぞだでどばびぶべぼ"
)
KATAKANA = (
    "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホ"
    "マミムメモヤユヨラリルレロワンガギグゲゴザジズゼゾダデドバビブベボー"
)
JA_PARTICLES = ["の", "を", "に", "は", "で", "が", "と"]
KO_PARTICLES = ["에", "을", "를", "은", "는", "이", "가", "에서"]
CJK_VOCAB_SIZE = 20_000
CJK_CUM_WEIGHTS = list(itertools.accumulate(r**-ZIPF_EXPONENT for r in range(1, CJK_VOCAB_SIZE + 1)))


def _cjk_vocabulary(language: str) -> list[str]:
    rng = random.Random(f"{SEED}-{language}")
    words: dict[str, None] = {}
    while len(words) < CJK_VOCAB_SIZE:
        if language == "zh":
            word = "".join(rng.choices(HAN, k=rng.choice([2, 2, 2, 3, 4])))
        elif language == "ja":
            word = (
                "".join(rng.choices(KATAKANA, k=rng.randint(3, 5)))
                if rng.random() < 0.4
                else "".join(rng.choices(HAN, k=2)) + rng.choice(KANA)
            )
        else:
            word = "".join(chr(0xAC00 + rng.randrange(11_172)) for _ in range(rng.randint(2, 3)))
        words[word] = None
    return list(words)


CJK_VOCAB = {language: _cjk_vocabulary(language) for language in ("zh", "ja", "ko")}

# Code identifiers (camelCase, snake_case file names, error codes), built from the head words.
_VERBS = ["get", "set", "load", "save", "parse", "build", "fetch", "update", "delete", "create", "find", "run"]
_NOUNS = [w for w in HEAD if w.isalpha() and len(w) > 3][:120]


def _identifiers(size: int) -> list[str]:
    rng = random.Random(f"{SEED}-identifiers")
    found: dict[str, None] = {}
    while len(found) < size:
        a, b = rng.sample(_NOUNS, 2)
        form = rng.random()
        if form < 0.4:
            name = f"{rng.choice(_VERBS)}{a.capitalize()}By{b.capitalize()}"
        elif form < 0.7:
            name = f"{a}_{b}.{rng.choice(['py', 'ts', 'rs', 'go', 'sql'])}"
        else:
            name = f"ERR_{a.upper()}_{b.upper()}"
        found[name] = None
    return list(found)


IDENTIFIERS = _identifiers(20_000)


class ChatGenerator:
    """An endless, deterministic conversation: user turns, assistant replies, and tool rounds
    (an assistant message with a tool-call part, then a tool message with its result)."""

    def __init__(self, seed: int, prefix: str = "m") -> None:
        self.rng = random.Random(seed)
        self.prefix = prefix
        self.count = 0

    def _words(self, n: int) -> list[str]:
        return self.rng.choices(VOCAB, cum_weights=CUM_WEIGHTS, k=n)

    def _cjk_sentence(self) -> str:
        rng = self.rng
        language = rng.choice(["zh", "zh", "ja", "ko"])
        words = rng.choices(CJK_VOCAB[language], cum_weights=CJK_CUM_WEIGHTS, k=rng.randint(4, 10))
        if language == "zh":
            return "".join(words) + "。"
        if language == "ja":
            return "".join(w + rng.choice(JA_PARTICLES) for w in words) + "。"
        return " ".join(w + rng.choice(KO_PARTICLES) for w in words) + "."

    def _text(self, sentences: int) -> str:
        rng = self.rng
        out = []
        for _ in range(sentences):
            if rng.random() < 0.08:
                out.append(self._cjk_sentence())
                continue
            words = self._words(rng.randint(5, 16))
            words[0] = words[0].capitalize()
            if rng.random() < 0.2:
                identifier = rng.choices(IDENTIFIERS, cum_weights=CUM_WEIGHTS[: len(IDENTIFIERS)])[0]
                words[rng.randrange(len(words))] = identifier
            out.append(" ".join(words) + rng.choice(".....?!"))
        return " ".join(out)

    def _id(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count:08d}"

    def __iter__(self) -> Iterator[dict[str, Any]]:
        rng = self.rng
        while True:
            yield {"id": self._id(), "role": "user", "parts": [{"type": "text", "text": self._text(rng.randint(1, 3))}]}
            while rng.random() < 0.35:
                call_id = f"call_{rng.getrandbits(48):012x}"
                tool = rng.choice(TOOLS)
                yield {
                    "id": self._id(),
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "text": self._text(1)},
                        {
                            "type": "tool-call",
                            "toolCallId": call_id,
                            "toolName": tool,
                            "input": {
                                "query": " ".join(self._words(rng.randint(2, 6))),
                                "limit": rng.choice([5, 10, 20]),
                            },
                        },
                    ],
                }
                yield {
                    "id": self._id(),
                    "role": "tool",
                    "parts": [
                        {
                            "type": "tool-result",
                            "toolCallId": call_id,
                            "toolName": tool,
                            "output": {"rows": rng.randint(0, 50), "text": " ".join(self._words(rng.randint(10, 60)))},
                        }
                    ],
                }
            yield {
                "id": self._id(),
                "role": "assistant",
                "parts": [{"type": "text", "text": self._text(rng.randint(2, 6))}],
            }


def take(gen: ChatGenerator, n: int) -> list[dict[str, Any]]:
    return list(itertools.islice(iter(gen), n))


# ------------------------------------------------------------------------------------------------
# The floor: raw sqlite3 over the same schema.
# ------------------------------------------------------------------------------------------------


def floor_connect(path: Path | str) -> sqlite3.Connection:
    """A connection with the store's durability: WAL, synchronous=NORMAL, autocommit."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def apply_schema(conn: sqlite3.Connection) -> None:
    """Apply the store's own migrations and mark them applied, so ``SqliteStore`` accepts the file."""
    for script in MIGRATIONS:
        conn.executescript(script)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")


def text_of(message: dict[str, Any]) -> str:
    return " ".join(p["text"] for p in message["parts"] if p["type"] == "text")


def cheap_tokens(content: str) -> int:
    return 4 + (len(content) + 3) // 4


def dumps(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def now_us() -> int:
    return time.time_ns() // 1000


# The schema stores each message's search terms beside its text (sessions_core.fts, the one
# analysis both stores share): the floor computes them with the same function.
FLOOR_INSERT = """
    INSERT INTO session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, search_terms, content
    )
    SELECT ?1, ?2, p.id, ?3, ?4, ?5, ?6,
           coalesce(p.depth, 0) + 1, coalesce(p.path_tokens, 0) + ?5, coalesce(p.path_bytes, 0) + ?6, ?7, ?10, ?8
    FROM (SELECT 1) LEFT JOIN session_messages p ON p.session_id = ?1 AND p.id = ?9
"""


class FloorAppender:
    """The minimal hand-written append: one INSERT per message, autocommit, parent in a variable."""

    def __init__(self, conn: sqlite3.Connection, session_id: str = SESSION, parent: str | None = None) -> None:
        self.conn = conn
        self.session_id = session_id
        self.parent = parent

    def append(self, message: dict[str, Any]) -> None:
        content = dumps(message)
        size = len(content.encode("utf-8"))
        text = text_of(message)
        self.conn.execute(
            FLOOR_INSERT,
            (
                self.session_id,
                message["id"],
                message["role"],
                now_us(),
                cheap_tokens(content),
                size,
                text,
                content,
                self.parent,
                index_text(text),
            ),
        )
        self.parent = message["id"]


BULK_INSERT = """
    INSERT INTO session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, search_terms, content
    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


def bulk_build(path: Path, n: int, *, seed: int = SEED, batch: int = 50_000, label: str = "") -> dict[str, Any]:
    """A database holding one linear chain of ``n`` generated messages in session ``SESSION``,
    written with executemany in big transactions (FTS kept by the schema's own triggers)."""
    started = time.perf_counter()
    tmp = path.with_name(path.name + ".building")
    for suffix in ("", "-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    conn = sqlite3.connect(str(tmp), isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -524288")  # 512 MiB
    apply_schema(conn)
    gen = iter(ChatGenerator(seed))
    parent = None
    depth = path_tokens = path_bytes = 0
    done = 0
    while done < n:
        rows = []
        for message in itertools.islice(gen, min(batch, n - done)):
            content = dumps(message)
            size = len(content.encode("utf-8"))
            tokens = cheap_tokens(content)
            depth += 1
            path_tokens += tokens
            path_bytes += size
            text = text_of(message)
            rows.append(
                (
                    SESSION,
                    message["id"],
                    parent,
                    message["role"],
                    BASE_TIME_US + (done + len(rows)) * 1_000_000,
                    tokens,
                    size,
                    depth,
                    path_tokens,
                    path_bytes,
                    text,
                    index_text(text),
                    content,
                )
            )
            parent = message["id"]
        conn.execute("BEGIN")
        conn.executemany(BULK_INSERT, rows)
        conn.execute("COMMIT")
        done += len(rows)
        if label and n >= 200_000:
            rate = done / (time.perf_counter() - started)
            print(f"    {label}: {done:,}/{n:,} messages ({rate:,.0f}/s)", flush=True)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    tmp.replace(path)
    return {"messages": n, "leaf": parent, "build_s": round(time.perf_counter() - started, 1)}


def cached_db(n: int, *, rebuild: bool = False, label: str = "") -> tuple[Path, dict[str, Any]]:
    """The bulk-built database of ``n`` messages, built once and kept under ``bench/.cache/``."""
    CACHE.mkdir(parents=True, exist_ok=True)
    key = f"{DATA_VERSION}-{SCHEMA_KEY}-seed{SEED}-n{n}"
    path = CACHE / f"{key}.db"
    meta_path = CACHE / f"{key}.json"
    if rebuild or not path.exists() or not meta_path.exists():
        for old in CACHE.glob(f"*-n{n}.*"):  # older versions of the same size
            old.unlink()
        if label:
            print(f"  building {label}: {n:,} messages -> {path.relative_to(HERE.parent)}", flush=True)
        meta = bulk_build(path, n, label=label)
        meta_path.write_text(json.dumps(meta))
        if label:
            print(f"  built in {meta['build_s']} s", flush=True)
    return path, json.loads(meta_path.read_text())


def copy_db(source: Path, target: Path) -> Path:
    """A private copy of a cached database, flushed to disk before it is measured (otherwise the
    first WAL checkpoint's fsync would also write back the whole freshly copied file)."""
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


# ------------------------------------------------------------------------------------------------
# Timing helpers
# ------------------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def per_item_us(fn: Callable[[Any], Any], items: list[Any]) -> float:
    """Mean microseconds per call of ``fn`` over ``items`` (amortised costs such as FTS merges
    included)."""
    gc.collect()
    started = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - started) / len(items) * 1e6


def profile(fn: Callable[[], Any], title: str, top: int = 18) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    text = f"--- profile: {title} (sorted by own time) ---\n" + out.getvalue()
    print(text)
    return text


def figure(
    name: str,
    ours: float,
    base: float,
    unit: str,
    target: float,
    extra: dict[str, Any] | None = None,
    *,
    baseline: str = "raw sqlite3 floor",
    absolute: tuple[str, float] | None = None,
) -> dict[str, Any]:
    ratio = ours / base
    ok = ratio <= target
    row = {
        "figure": name,
        "ours": ours,
        "baseline": base,
        "baseline_is": baseline,
        "unit": unit,
        "ratio": ratio,
        "target_ratio": target,
        "pass": ok,
    }
    if absolute is not None:
        label, limit = absolute
        row["absolute_target"] = {"what": label, "limit": limit, "pass": ours <= limit}
        row["pass"] = ok and ours <= limit
    if extra:
        row.update(extra)
    return row


# ------------------------------------------------------------------------------------------------
# 1. Append, one commit per message
# ------------------------------------------------------------------------------------------------


class ExplicitParentAppender:
    """Ours, with the parent id passed explicitly (no latest-leaf lookup): a breakdown figure."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.parent: str | None = None

    def append(self, message: dict[str, Any]) -> None:
        self.session.append_message(message, self.parent)
        self.parent = message["id"]


def floor_prepare(message: dict[str, Any]) -> tuple[Any, ...]:
    content = dumps(message)
    text = text_of(message)
    return content, len(content.encode("utf-8")), cheap_tokens(content), text, index_text(text)


def ours_prepare(session: Session) -> Callable[[dict[str, Any]], Any] | None:
    """What ``append_message`` computes before it reaches SQL (validation, JSON, text, tokens);
    uses private helpers, so it is skipped if they moved."""
    try:
        from sessions_core.messages import parse_message

        record = session._record
        record(parse_message({"id": "probe", "role": "user", "parts": []}), 0)
    except Exception:  # noqa: BLE001 - a private helper: any change means skip
        return None
    return lambda message: record(parse_message(message), 0)


def bench_append(tmp: Path, rounds: int, per_round: int, do_profile: bool) -> dict[str, Any]:
    messages = take(ChatGenerator(SEED + 1, prefix="a"), (rounds + 1) * per_round)
    ours_session = Session(SqliteStore(tmp / "append_ours.db")).for_session(SESSION)
    explicit_session = Session(SqliteStore(tmp / "append_explicit.db")).for_session(SESSION)
    explicit = ExplicitParentAppender(explicit_session)
    floor_conn = floor_connect(tmp / "append_floor.db")
    apply_schema(floor_conn)
    floor = FloorAppender(floor_conn)
    contenders = {"ours": ours_session.append_message, "explicit": explicit.append, "floor": floor.append}
    # Breakdown: the store's INSERT alone (records prepared beforehand), where the private helper allows.
    prepare = ours_prepare(ours_session)
    store_session = None
    if prepare is not None:
        from sessions_core import LATEST

        store_session = Session(SqliteStore(tmp / "append_store.db")).for_session(SESSION)
        records = {m["id"]: prepare(m) for m in messages}
        store = store_session.store
        contenders["store"] = lambda m: store.insert_message(SESSION, records[m["id"]], LATEST)

    warm, rest = messages[:per_round], messages[per_round:]
    for m in warm:  # compile statements, create the tables' first pages
        for fn in contenders.values():
            fn(m)
    timings: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for r in range(rounds):
        batch = rest[r * per_round : (r + 1) * per_round]
        for name in order[r % len(order) :] + order[: r % len(order)]:  # rotate who goes first
            timings[name].append(per_item_us(contenders[name], batch))
    stored = floor_conn.execute("SELECT count(*) FROM session_messages").fetchone()[0]
    assert stored == len(messages), stored
    assert ours_session.get_path_length() == len(messages)
    assert explicit_session.get_path_length() == len(messages)
    extra: dict[str, Any] = {
        "rounds_ours_us": timings["ours"],
        "rounds_floor_us": timings["floor"],
        "appends_per_round": per_round,
        "rounds": rounds,
        "ours_explicit_parent_us": statistics.median(timings["explicit"]),
    }
    if "store" in timings:
        extra["ours_store_insert_only_us"] = statistics.median(timings["store"])
        store_session.close()
    # Breakdown: the Python work before SQL, ours vs the floor's, on the same messages.
    sample = messages[:2000]
    extra["floor_prepare_us"] = statistics.median(per_item_us(floor_prepare, sample) for _ in range(5))
    if prepare is not None:
        extra["ours_prepare_us"] = statistics.median(per_item_us(prepare, sample) for _ in range(5))
    if do_profile:
        more = take(ChatGenerator(SEED + 11, prefix="p"), 2000)
        extra["profile"] = profile(lambda: [ours_session.append_message(m) for m in more], "append_message x2000")
    ours_session.close()
    explicit_session.close()
    floor_conn.close()
    return figure(
        "append (commit per message, FTS on)",
        statistics.median(timings["ours"]),
        statistics.median(timings["floor"]),
        "us/append",
        1.5,
        extra,
    )


# ------------------------------------------------------------------------------------------------
# 2. Append cost flatness: 1k vs large stored session
# ------------------------------------------------------------------------------------------------


def bench_flatness(tmp: Path, small: int, large: int, rounds: int, window: int) -> dict[str, Any]:
    small_db, _ = cached_db(small, label=f"{small:,}-message session")
    large_db, _ = cached_db(large, label=f"{large:,}-message session")
    messages = take(ChatGenerator(SEED + 2, prefix="w"), window + 20)
    warm, measured = messages[:20], messages[20:]
    results: dict[int, list[float]] = {small: [], large: []}
    floor_results: dict[int, list[float]] = {small: [], large: []}
    for r in range(rounds):
        order = [(small, small_db), (large, large_db)] if r % 2 == 0 else [(large, large_db), (small, small_db)]
        for size, source in order:
            for kind in ("ours", "floor"):
                target = tmp / f"flat_{kind}_{size}_{r}.db"
                copy_db(source, target)
                if kind == "ours":
                    session = Session(SqliteStore(target)).for_session(SESSION)
                    for m in warm:
                        session.append_message(m)
                    results[size].append(per_item_us(session.append_message, measured))
                    assert session.get_path_length() == size + len(messages)
                    session.close()
                else:
                    conn = floor_connect(target)
                    leaf = conn.execute(
                        "SELECT id FROM session_messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (SESSION,)
                    ).fetchone()[0]
                    appender = FloorAppender(conn, parent=leaf)
                    for m in warm:
                        appender.append(m)
                    floor_results[size].append(per_item_us(appender.append, measured))
                    conn.close()
                for suffix in ("", "-wal", "-shm"):
                    Path(str(target) + suffix).unlink(missing_ok=True)
    ours_small = statistics.median(results[small])
    ours_large = statistics.median(results[large])
    return figure(
        f"append flatness ({large // 1000:,}k vs 1k stored)",
        ours_large,
        ours_small,
        "us/append",
        1.2,
        {
            "stored_small": small,
            "stored_large": large,
            "window": window,
            "rounds": rounds,
            "rounds_ours_small_us": results[small],
            "rounds_ours_large_us": results[large],
            "floor_small_us": statistics.median(floor_results[small]),
            "floor_large_us": statistics.median(floor_results[large]),
            "floor_ratio": statistics.median(floor_results[large]) / statistics.median(floor_results[small]),
        },
        baseline=f"ours with {small:,} stored",
    )


# ------------------------------------------------------------------------------------------------
# 3. get_history at depth 10,000
# ------------------------------------------------------------------------------------------------

FLOOR_PATH = """
    WITH RECURSIVE path(seq, id, parent_id, role, size, n) AS (
        SELECT seq, id, parent_id, role, bytes, 0 FROM session_messages
        WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
    SELECT seq, id, role, size FROM path ORDER BY n DESC
"""


def floor_history(conn: sqlite3.Connection, leaf: str, chunk: int = 200) -> list[dict[str, Any]]:
    seqs = [row[0] for row in conn.execute(FLOOR_PATH, {"s": SESSION, "leaf": leaf})]
    out: list[dict[str, Any]] = []
    for i in range(0, len(seqs), chunk):
        part = seqs[i : i + chunk]
        rows = dict(
            conn.execute(
                f"SELECT seq, content FROM session_messages WHERE seq IN ({','.join('?' * len(part))})", part
            ).fetchall()
        )
        out.extend(json.loads(rows[s]) for s in part)
    return out


def bench_history(tmp: Path, depth: int, reps: int, do_profile: bool) -> dict[str, Any]:
    source, meta = cached_db(depth, label=f"{depth:,}-deep chain")
    path = copy_db(source, tmp / "history.db")
    session = Session(SqliteStore(path)).for_session(SESSION)
    conn = floor_connect(path)
    leaf = meta["leaf"]
    assert len(session.get_history()) == depth
    assert len(floor_history(conn, leaf)) == depth
    ours, floor = [], []
    for r in range(reps):
        pair = [(ours, lambda: session.get_history()), (floor, lambda: floor_history(conn, leaf))]
        for bucket, fn in pair if r % 2 == 0 else pair[::-1]:
            gc.collect()
            bucket.append(timed(fn) * 1000)
    extra: dict[str, Any] = {"depth": depth, "reps": reps, "reps_ours_ms": ours, "reps_floor_ms": floor}
    # A breakdown of ours: the id walk (SQL only) and the parse of stored JSON alone.
    store = session.store
    extra["ours_path_walk_ms"] = statistics.median(timed(lambda: store.path(SESSION, leaf)) * 1000 for _ in range(reps))
    contents = [row[0] for row in conn.execute("SELECT content FROM session_messages")]
    from sessions_core.messages import message_from_storage

    moment_us = int(datetime.now(timezone.utc).timestamp() * 1_000_000)
    extra["parse_only_pydantic_ms"] = statistics.median(
        timed(lambda: [message_from_storage(c, moment_us) for c in contents]) * 1000 for _ in range(3)
    )
    extra["parse_only_json_loads_ms"] = statistics.median(
        timed(lambda: [json.loads(c) for c in contents]) * 1000 for _ in range(3)
    )
    if do_profile:
        extra["profile"] = profile(lambda: [session.get_history() for _ in range(3)], f"get_history() depth {depth} x3")
    session.close()
    conn.close()
    return figure(
        f"get_history() at depth {depth:,}", statistics.median(ours), statistics.median(floor), "ms", 2.0, extra
    )


# ------------------------------------------------------------------------------------------------
# 4. Search over a large session
# ------------------------------------------------------------------------------------------------

# The straightforward hand-written search: rank every match, keep the best 20.
FLOOR_SEARCH = """
    SELECT m.session_id, m.id, m.role, m.text_content, m.created_at
    FROM session_messages_fts f JOIN session_messages m ON m.seq = f.rowid
    WHERE session_messages_fts MATCH ? AND m.session_id = ? ORDER BY f.rank LIMIT 20
"""

# The same two steps ``SqliteStore.search_messages`` takes since it ranks only a window of the
# most recent matches: find the oldest rowid of the window inside the index (session token AND
# words, no scoring), then rank the matches from there on.
FLOOR_WINDOW_START = """
    SELECT rowid FROM session_messages_fts WHERE session_messages_fts MATCH ?
    ORDER BY rowid DESC LIMIT 1 OFFSET ?
"""
FLOOR_MATCH_COUNT_PROBE = """
    SELECT rowid FROM session_messages_fts WHERE session_messages_fts MATCH ? LIMIT 1 OFFSET ?
"""
FLOOR_WINDOW_SEARCH = """
    SELECT m.session_id, m.id, m.role, m.text_content, m.created_at
    FROM session_messages_fts f JOIN session_messages m ON m.seq = f.rowid
    WHERE session_messages_fts MATCH ? AND f.rowid >= ? AND m.session_id = ? ORDER BY f.rank LIMIT 20
"""


class FloorSearch:
    """Hand-written searches over one connection; ``window`` mirrors the store's candidate
    window when the schema has a session token column and the store declares a window size."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        columns = [row[1] for row in conn.execute("PRAGMA table_xinfo(session_messages_fts)")]
        self.column = "search_terms : " if "session_token" in columns else ""
        from sessions_core.stores import sqlite as store_module

        size = getattr(store_module, "SEARCH_CANDIDATES", None)
        self.window_size = size if (size and "session_token" in columns) else None
        self.token = "s" + SESSION.encode("utf-8").hex()

    def _expression(self, units: tuple[Any, ...]) -> str:
        words = fts5_expression(units)
        return f"{self.column}({words})" if self.column else words

    def expression(self, query: str) -> str:
        """The store's whole match plan (``sessions_core.fts``): exact and prefix matches."""
        return self._expression(parse_query(query))

    def run(self, query: str, search: Callable[[str], list[tuple[Any, ...]]], limit: int = 20) -> list[tuple[Any, ...]]:
        """``search`` by hand as the store plans it: the exact matches, then (when fewer than
        ``limit``) the matches the prefixes add."""
        units = parse_query(query)
        exact = exact_units(units)
        rows = search(self._expression(exact))
        if len(rows) < limit and exact != units:
            seen = {row[1] for row in rows}
            rows += [row for row in search(self._expression(units)) if row[1] not in seen][: limit - len(rows)]
        return rows

    def full(self, expression: str) -> list[tuple[Any, ...]]:
        return self.conn.execute(FLOOR_SEARCH, (expression, SESSION)).fetchall()

    def window(self, expression: str) -> list[tuple[Any, ...]]:
        oldest = self.conn.execute(FLOOR_MATCH_COUNT_PROBE, (expression, self.window_size - 1)).fetchone()
        if oldest is not None:  # more matches than the window holds: find the window's start
            oldest = self.conn.execute(
                FLOOR_WINDOW_START, (f'session_token : "{self.token}" AND {expression}', self.window_size - 1)
            ).fetchone()
        return self.conn.execute(FLOOR_WINDOW_SEARCH, (expression, oldest[0] if oldest else 0, SESSION)).fetchall()


def rare_term(conn: sqlite3.Connection, n: int) -> str:
    """A tail word with a handful (3-10) of matches: start where the Zipf law puts ~5 matches at
    this size and walk down the tail until one qualifies (deterministic for a given database)."""
    expected_rank = int(170_000 * (n / 1_000_000) ** (1 / ZIPF_EXPONENT))
    for rank in range(max(len(HEAD), expected_rank), VOCAB_SIZE):
        word = VOCAB[rank]
        count = conn.execute(
            "SELECT count(*) FROM session_messages_fts WHERE session_messages_fts MATCH ?", (f'"{word}"',)
        ).fetchone()[0]
        if 3 <= count <= 10:
            return word
    raise RuntimeError("no rare term found")


def search_queries(conn: sqlite3.Connection, n: int) -> dict[str, str]:
    # Four characters from the middle of a Chinese sentence of the stored conversation.
    texts = (text_of(m) for m in itertools.islice(iter(ChatGenerator(SEED)), 5_000))
    chinese = next(t for t in texts if "。" in t and not any(c in t for c in KANA + KATAKANA))
    phrase = chinese[chinese.index("。") - 7 : chinese.index("。") - 3]
    camel = next(i for i in IDENTIFIERS[:50] if "By" in i)
    return {
        "frequent term": "database",
        "rare term": rare_term(conn, n),
        "two terms": "database error",
        "prefix": "migra",
        "CJK word (zh)": CJK_VOCAB["zh"][3],
        "CJK phrase (zh, 4 chars)": phrase,
        "CJK word (ja)": CJK_VOCAB["ja"][3],
        "CJK word (ko)": CJK_VOCAB["ko"][3],
        "identifier part": camel.lstrip("abcdefghijklmnopqrstuvwxyz"),  # getUserById -> UserById
        "identifier whole": next(i for i in IDENTIFIERS[:50] if i.endswith(".py") or "." in i),
    }


def bench_search(tmp: Path, n: int, reps: int, do_profile: bool) -> list[dict[str, Any]]:
    path, _ = cached_db(n, label=f"{n:,}-message search database")
    session = Session(SqliteStore(path)).for_session(SESSION)
    conn = floor_connect(path)
    conn.execute("PRAGMA query_only = ON")
    floor = FloorSearch(conn)
    # The floor is the same query written by hand: the store's candidate window when it has one
    # (identical results), else the plain ranked MATCH. The plain full ranking is always timed too.
    floor_fn = floor.window if floor.window_size else floor.full
    figures = []
    for kind, query in search_queries(conn, n).items():
        expression = floor.expression(query)
        matches = conn.execute(
            "SELECT count(*) FROM session_messages_fts WHERE session_messages_fts MATCH ?", (expression,)
        ).fetchone()[0]
        ours_ids = [r.id for r in session.search(query, limit=20)]
        floor_ids = [r[1] for r in floor.run(query, floor_fn)]
        exact_ids = [r[1] for r in floor.full(expression)]
        if ours_ids != floor_ids:
            print(
                f"  WARNING: {kind}: ours and the floor return different results; the floor no longer"
                " mirrors the store's search",
                flush=True,
            )
        ours, base, full = [], [], []
        contenders = [
            (ours, lambda q=query: session.search(q, limit=20)),
            (base, lambda q=query: floor.run(q, floor_fn)),
            (full, lambda e=expression: floor.full(e)),
        ]
        for r in range(reps):
            for bucket, fn in contenders[r % 3 :] + contenders[: r % 3]:
                bucket.append(timed(fn) * 1000)
        extra: dict[str, Any] = {
            "query": query,
            "fts_matches": matches,
            "returned": len(ours_ids),
            "messages": n,
            "reps": reps,
            "floor_kind": "candidate window" if floor.window_size else "full ranking",
            "candidate_window": floor.window_size,
            "same_results_as_floor": ours_ids == floor_ids,
            "reps_ours_ms": ours,
            "reps_floor_ms": base,
            "full_ranking_floor_ms": statistics.median(full),
            "overlap_with_full_ranking_top20": len(set(ours_ids) & set(exact_ids)),
        }
        if do_profile:
            extra["profile"] = profile(
                lambda q=query: [session.search(q, limit=20) for _ in range(5)], f"search {kind} x5"
            )
        figures.append(
            figure(
                f"search {n // 1000:,}k msgs: {kind}",
                statistics.median(ours),
                statistics.median(base),
                "ms",
                1.2,
                extra,
                absolute=("p50 under 20 ms", 20.0),
            )
        )
    session.close()
    conn.close()
    return figures


def _fts_bytes(conn: sqlite3.Connection, table: str) -> int:
    return conn.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE ?", (f"{table}_%",)).fetchone()[0]


def bench_index_size(tmp: Path, n: int) -> dict[str, Any]:
    """The search index's bytes against the word index it replaced (FTS5 ``porter unicode61``
    over the text, as schema version 5 had it), on a copy of the same database."""
    path = copy_db(cached_db(n, label=f"{n:,}-message database")[0], tmp / "index_size.db")
    conn = sqlite3.connect(str(path), isolation_level=None)
    terms = conn.execute(
        "SELECT coalesce(sum(length(CAST(search_terms AS BLOB))), 0) FROM session_messages"
    ).fetchone()[0]
    text = conn.execute("SELECT coalesce(sum(length(CAST(text_content AS BLOB))), 0) FROM session_messages").fetchone()[
        0
    ]
    ours = _fts_bytes(conn, "session_messages_fts")
    database = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    started = time.perf_counter()
    conn.execute(
        "CREATE VIRTUAL TABLE previous_fts USING fts5(text_content, session_token,"
        " content='session_messages', content_rowid='seq', tokenize='porter unicode61')"
    )
    conn.execute("INSERT INTO previous_fts (previous_fts) VALUES ('rebuild')")
    rebuild_s = time.perf_counter() - started
    previous = _fts_bytes(conn, "previous_fts")
    conn.close()
    return {
        "messages": n,
        "text_bytes": text,
        "index_bytes": ours,
        "search_terms_column_bytes": terms,
        "previous_index_bytes": previous,
        "previous_rebuild_s": round(rebuild_s, 1),
        "growth_index_only": ours / previous,
        "growth_with_terms_column": (ours + terms) / previous,
        "database_bytes": database,
        "previous_database_bytes": database - ours - terms + previous,
        "growth_database": database / (database - ours - terms + previous),
    }


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------


def format_bytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def fmt(value: float) -> str:
    if value >= 10:
        return f"{value:,.1f}"
    return f"{value:,.2f}" if value >= 1 else f"{value:,.3f}"


def table(figures: list[dict[str, Any]]) -> str:
    header = ("figure", "ours", "baseline", "unit", "ratio", "target", "result")
    rows = []
    for f in figures:
        target = f"<= {f['target_ratio']}x"
        if "absolute_target" in f:
            target += f", < {f['absolute_target']['limit']:g} ms"
        rows.append(
            (
                f["figure"],
                fmt(f["ours"]),
                fmt(f["baseline"]),
                f["unit"],
                f"{f['ratio']:.2f}x",
                target,
                "PASS" if f["pass"] else "FAIL",
            )
        )
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(header, widths)), "-+-".join("-" * w for w in widths)]
    lines += [
        " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions: a sanity run")
    parser.add_argument("--profile", action="store_true", help="also cProfile ours and print the hot functions")
    parser.add_argument(
        "--only",
        choices=["append", "flatness", "history", "search"],
        action="append",
        help="run only these figures (repeatable)",
    )
    parser.add_argument(
        "--out", type=Path, help="results file (default bench/results/core.json, core-quick.json with --quick)"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    sizes = {
        "append_rounds": 3 if quick else 9,
        "append_per_round": 300 if quick else 1000,
        "flat_small": 1_000,
        "flat_large": 20_000 if quick else 100_000,
        "flat_rounds": 2 if quick else 9,
        "flat_window": 500,
        "history_depth": 10_000,
        "history_reps": 3 if quick else 15,
        "search_messages": 100_000 if quick else 1_000_000,
        "search_reps": 5 if quick else 21,
        "index_size_messages": 100_000,
    }
    index_size: dict[str, Any] | None = None
    only = set(args.only or ["append", "flatness", "history", "search"])
    print(
        f"session-memory core benchmark ({'quick' if quick else 'full'}): sessions_core {sessions_core.__version__}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} cores",
        flush=True,
    )
    load_start = os.getloadavg()
    if load_start[0] > 0.5:
        print(f"  note: load average {load_start[0]:.2f} at start; other work on the machine skews the figures")
    figures: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_core_") as name:
        tmp = Path(name)
        if "append" in only:
            print("[1/4] append, one commit per message ...", flush=True)
            figures.append(bench_append(tmp, sizes["append_rounds"], sizes["append_per_round"], args.profile))
        if "flatness" in only:
            print("[2/4] append flatness ...", flush=True)
            figures.append(
                bench_flatness(
                    tmp, sizes["flat_small"], sizes["flat_large"], sizes["flat_rounds"], sizes["flat_window"]
                )
            )
        if "history" in only:
            print("[3/4] get_history ...", flush=True)
            figures.append(bench_history(tmp, sizes["history_depth"], sizes["history_reps"], args.profile))
        if "search" in only:
            print("[4/4] search ...", flush=True)
            figures.extend(bench_search(tmp, sizes["search_messages"], sizes["search_reps"], args.profile))
            index_size = bench_index_size(tmp, sizes["index_size_messages"])
    print()
    print(table(figures))
    for f in figures:
        if "floor_ratio" in f:
            print(
                f"  (flatness of the raw floor itself: {fmt(f['floor_large_us'])}"
                f" vs {fmt(f['floor_small_us'])} us/append,"
                f" {f['floor_ratio']:.2f}x)"
            )
        if "ours_explicit_parent_us" in f:
            prep = f.get("ours_prepare_us")
            store = f.get("ours_store_insert_only_us")
            print(
                f"  (append parts: ours with an explicit parent {fmt(f['ours_explicit_parent_us'])} us; the store's"
                f" insert_message alone (record prepared) {fmt(store) if store else '?'} us; Python before SQL:"
                f" ours {fmt(prep) if prep else '?'} us vs floor {fmt(f['floor_prepare_us'])} us)"
            )
        if "fts_matches" in f:
            print(
                f"  ({f['figure']}: query {f['query']!r}, {f['fts_matches']:,} FTS matches;"
                f" ours - floor = {(f['ours'] - f['baseline']) * 1000:+,.0f} us; ranking every match by hand:"
                f" {fmt(f['full_ranking_floor_ms'])} ms, whose top 20 share {f['overlap_with_full_ranking_top20']}"
                f" ids with ours)"
            )
        if "parse_only_pydantic_ms" in f:
            print(
                f"  (get_history parts: id walk {fmt(f['ours_path_walk_ms'])} ms; parsing {f['depth']:,} stored rows: "
                f"pydantic {fmt(f['parse_only_pydantic_ms'])} ms vs json.loads {fmt(f['parse_only_json_loads_ms'])} ms)"
            )
    if index_size:
        print(
            f"  (search index over {index_size['messages']:,} messages ({format_bytes(index_size['text_bytes'])}"
            f" of text): {format_bytes(index_size['index_bytes'])} of FTS index plus"
            f" {format_bytes(index_size['search_terms_column_bytes'])} of stored terms, against"
            f" {format_bytes(index_size['previous_index_bytes'])} for the previous porter unicode61 index:"
            f" {index_size['growth_index_only']:.2f}x the index alone,"
            f" {index_size['growth_with_terms_column']:.2f}x with the terms; the whole database"
            f" {format_bytes(index_size['database_bytes'])}, {index_size['growth_database']:.2f}x)"
        )
    out = args.out or RESULTS / ("core-quick.json" if quick else "core.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "bench/bench_core.py",
        "mode": "quick" if quick else "full",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
        },
        "durability": "file database, WAL, synchronous=NORMAL",
        "data_version": DATA_VERSION,
        "schema_key": SCHEMA_KEY,
        "sizes": sizes,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "figures": [{k: v for k, v in f.items() if k != "profile"} for f in figures],
        "index_size": index_size,
    }
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"\nresults written to {out.relative_to(HERE.parent) if out.is_relative_to(HERE.parent) else out}"
        f" ({report['elapsed_s']} s)"
    )
    return 0 if all(f["pass"] for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
