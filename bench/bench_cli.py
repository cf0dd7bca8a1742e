"""CLI benchmark: ``sessions import`` / re-import / ``export`` / ``show`` of one long session.

Run ``python bench/bench_cli.py`` (``--messages N``, default 60,000). Each command runs as a user
runs it, ``python -m sessions_core`` in a fresh process, timed from start to exit; the figures
include the interpreter's start-up (``python -c pass`` plus the package import, printed apart).
Results: ``bench/results/cli.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_core as core  # noqa: E402  (the same generated conversation)

TARGETS = {"import": 5.0, "re-import (nothing to store)": 3.0, "show": 1.0}


def run(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sessions_core", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "cli.json")
    args = parser.parse_args(argv)
    from sessions_core import Session

    with tempfile.TemporaryDirectory(prefix="bench_cli_") as name:
        tmp = Path(name)
        source, copy, file = tmp / "source.db", tmp / "copy.db", tmp / "session.jsonl"
        messages = core.take(core.ChatGenerator(core.SEED + 7), args.messages)
        with Session(source).for_session(core.SESSION) as session:
            for start in range(0, len(messages), 1000):
                session.append_messages(messages[start : start + 1000])
        startup = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sessions_core.cli"], check=True)
        startup = time.perf_counter() - startup
        figures = {
            "export": run("--store", str(source), "export", core.SESSION, "-o", str(file)),
            "import": run("--store", str(copy), "import", str(file)),
            "re-import (nothing to store)": run("--store", str(copy), "import", str(file)),
            "show": run("--store", str(copy), "show", core.SESSION),
        }
        size = file.stat().st_size
    print(
        f"sessions CLI over one {args.messages:,}-message session ({size / 1e6:.0f} MB file;"
        f" interpreter start-up with the package: {startup:.2f} s)"
    )
    for what, seconds in figures.items():
        target = TARGETS.get(what)
        verdict = "" if target is None else f"  (target <= {target:g} s: {'PASS' if seconds <= target else 'FAIL'})"
        print(f"  {what:30s} {seconds:6.2f} s{verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = {
        "messages": args.messages,
        "file_bytes": size,
        "startup_s": startup,
        "seconds": figures,
        "targets": TARGETS,
        "load_average": os.getloadavg(),
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(figures[k] <= v for k, v in TARGETS.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
