"""Redaction at write (issue 32): what ``PIIRedactor`` costs a text, and a redacting session an
append, against the same append without a redactor.

Run ``python bench/bench_redaction.py`` (``--rounds 7``, ``--data`` the LoCoMo folder). Texts:
every turn of the LoCoMo conversations (``/work/shared/data/locomo``, read at run time:
conversational prose, almost none of it personal data) and 5,000 generated sentences that each
carry two values of the built-in kinds (``faker``, as the tests' corpus). Figures, median of
``--rounds`` rounds:

- ``PIIRedactor().redact`` per text, on each corpus;
- ``Session.append_message`` of the LoCoMo turns one by one on a SQLite file (WAL,
  ``synchronous=NORMAL``), with and without ``with_redaction(PIIRedactor())``, the two sessions
  taking turns every 50 messages; the ratio is redacting / plain.

Results: ``results/redaction.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_langgraph_store import sentences as locomo_turns  # every LoCoMo turn's text

from sessions_core import PIIRedactor, Session

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data/locomo")
CHUNK = 50


def generated_sentences(count: int) -> list[str]:
    from faker import Faker

    fake = Faker()
    Faker.seed(32)
    rng = random.Random(32)
    values = [fake.email, fake.phone_number, fake.credit_card_number, fake.iban, fake.ipv4, fake.ipv6]
    return [f"{fake.sentence()} {rng.choice(values)()} and {rng.choice(values)()}." for _ in range(count)]


def per_text_us(redactor: PIIRedactor, texts: list[str]) -> float:
    start = time.perf_counter()
    for text in texts:
        redactor.redact(text)
    return (time.perf_counter() - start) / len(texts) * 1e6


def appends_us(folder: Path, texts: list[str]) -> tuple[float, float]:
    """µs per append: (plain, redacting), the two sessions taking turns every ``CHUNK``."""
    plain = Session(str(folder / "plain.db")).for_session("s")
    redacting = Session(str(folder / "redacting.db")).for_session("s").with_redaction(PIIRedactor())
    spent = {"plain": 0.0, "redacting": 0.0}
    for start in range(0, len(texts), CHUNK):
        for name, session in (("plain", plain), ("redacting", redacting)):
            chunk = texts[start : start + CHUNK]
            began = time.perf_counter()
            for n, text in enumerate(chunk):
                session.append_message(
                    {"id": f"m{start + n}", "role": "user", "parts": [{"type": "text", "text": text}]}
                )
            spent[name] += time.perf_counter() - began
    plain.close()
    redacting.close()
    return spent["plain"] / len(texts) * 1e6, spent["redacting"] / len(texts) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "redaction.json")
    args = parser.parse_args()

    turns = locomo_turns(args.data)
    generated = generated_sentences(5000)
    redactor = PIIRedactor()
    figures: dict[str, list[float]] = {"locomo_us": [], "generated_us": [], "append_plain_us": [], "append_us": []}
    for round_number in range(args.rounds):
        figures["locomo_us"].append(per_text_us(redactor, turns))
        figures["generated_us"].append(per_text_us(redactor, generated))
        with tempfile.TemporaryDirectory() as folder:
            plain, redacting = appends_us(Path(folder), turns[:2000])
        figures["append_plain_us"].append(plain)
        figures["append_us"].append(redacting)
        print(f"round {round_number + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in figures.items()), flush=True)

    result: dict[str, Any] = {name: round(statistics.median(values), 2) for name, values in figures.items()}
    result["append_ratio"] = round(result["append_us"] / result["append_plain_us"], 3)
    result["texts"] = {"locomo": len(turns), "generated": len(generated)}
    result["rounds"] = args.rounds
    result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
