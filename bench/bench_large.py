"""Large inputs: the memory one append of a 20 MB text takes, on SQLite and PostgreSQL.

Run ``python bench/bench_large.py`` (``--mb N``, default 20; ``--no-postgres``). Each case runs in
a fresh process: it builds the text, appends a first small message (so that the store is open
and its schema ready), then appends one message holding the text. Two figures, each against the
text's size in UTF-8:

- **allocated**: the peak of what Python allocates during the append (``tracemalloc``);
- **RSS**: how far the process's resident memory rises above where it was before the append
  (the kernel's peak, reset just before with ``/proc/self/clear_refs``): Python, SQLite or
  libpq together.

Target (issue 19): at most 3x the text's size. A text that is not ASCII is held by Python in 2
or 4 bytes a character, and with its UTF-8 form cached once a C library has read it: the
figures say how large the text itself is in memory beside them. Results: ``results/large.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POSTGRES_URL = os.environ.get("SESSIONS_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
TARGET = 3.0
WORDS = {
    "english and identifiers": ["alpha", "beta", "deploying", "getUserById", "ERR_CONN_RESET", "invoice.py"],
    "with CJK": ["alpha", "deploying", "getUserById", "部署服务器", "データベース", "검색엔진"],
}


def make_text(kind: str, size: int) -> str:
    rng = random.Random(7)
    words, out, length = WORDS[kind], [], 0
    while length < size:
        word = rng.choice(words) + str(rng.randint(0, 10**6))
        out.append(word)
        length += len(word.encode()) + 1
    return " ".join(out)


def rss_bytes() -> int:
    with open("/proc/self/statm") as stream:
        return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as stream:
        for line in stream:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure(backend: str, kind: str, size: int) -> dict[str, float]:
    """One case, in this process (``main`` runs each in a fresh one)."""
    import tracemalloc

    from sessions_core import Session

    text = make_text(kind, size)
    utf8 = len(text.encode("utf-8"))
    if backend == "sqlite":
        path = Path(os.environ["BENCH_TMP"]) / f"large-{os.getpid()}.db"
        store: object = str(path)
    else:
        from sessions_core.stores.postgres import PostgresStore

        store = PostgresStore(POSTGRES_URL, schema=f"bench_large_{os.getpid()}")
    session = Session(store).for_session("large")
    session.append_message({"id": "first", "role": "user", "parts": [{"type": "text", "text": "hello"}]})
    big = {"id": "big", "role": "user", "parts": [{"type": "text", "text": text}]}
    with open("/proc/self/clear_refs", "w") as stream:
        stream.write("5")  # resets VmHWM to the current RSS
    before = rss_bytes()
    tracemalloc.start()
    started = time.perf_counter()
    session.append_message(big)
    seconds = time.perf_counter() - started
    _, allocated = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    risen = peak_rss_bytes() - before
    assert session.get_message("big").parts[0].text == text
    if backend == "postgres":
        with store._pool.connection() as conn:  # type: ignore[attr-defined]
            conn.execute(f'DROP SCHEMA "bench_large_{os.getpid()}" CASCADE')
        store.close()  # type: ignore[attr-defined]
    return {
        "text_utf8_bytes": utf8,
        "text_in_memory_bytes": sys.getsizeof(text),
        "seconds": seconds,
        "allocated_x": allocated / utf8,
        "rss_x": risen / utf8,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "large.json")
    parser.add_argument("--case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    size = int(args.mb * 1_000_000)
    if args.case:
        print(json.dumps(measure(args.case[0], args.case[1], size)))
        return 0
    import tempfile

    backends = ["sqlite"] if args.no_postgres else ["sqlite", "postgres"]
    results = []
    print(f"one append of a {args.mb:g} MB text: peak memory against the text's UTF-8 size (target <= {TARGET:g}x)")
    with tempfile.TemporaryDirectory(prefix="bench_large_") as tmp:
        for backend in backends:
            for kind in WORDS:
                out = subprocess.run(
                    [sys.executable, __file__, "--mb", str(args.mb), "--case", backend, kind],
                    check=True,
                    capture_output=True,
                    text=True,
                    env={**os.environ, "BENCH_TMP": tmp},
                )
                figures = json.loads(out.stdout)
                results.append({"backend": backend, "text": kind, **figures})
                worst = max(figures["allocated_x"], figures["rss_x"])
                print(
                    f"  {backend:8s} {kind:24s} allocated {figures['allocated_x']:4.2f}x  RSS {figures['rss_x']:4.2f}x"
                    f"  ({figures['seconds']:.2f} s; the text itself is"
                    f" {figures['text_in_memory_bytes'] / figures['text_utf8_bytes']:.2f}x in memory)"
                    f"  {'PASS' if worst <= TARGET else 'FAIL'}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"mb": args.mb, "target_x": TARGET, "results": results}, indent=2) + "\n")
    return 0 if all(max(r["allocated_x"], r["rss_x"]) <= TARGET for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
