"""Auto-compaction over a long scripted conversation: summariser calls, the estimate against the
threshold, and the cost of an append as the history grows.

    python bench/bench_compaction.py [--messages 2000] [--threshold 4000]

Writes bench/results/compaction.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from sessions_core import Session, create_compact_function


def conversation(count: int):
    """User and assistant turns, one tool round every fifth turn."""
    for i in range(count):
        if i % 5 == 3:
            yield {
                "id": f"m{i}",
                "role": "assistant",
                "parts": [
                    {"type": "text", "text": f"Let me look that up ({i})."},
                    {
                        "type": "tool-call",
                        "toolCallId": f"c{i}",
                        "toolName": "lookup",
                        "input": {"query": f"topic {i}"},
                    },
                ],
            }
            continue
        if i % 5 == 4:
            yield {
                "id": f"m{i}",
                "role": "tool",
                "parts": [
                    {"type": "tool-result", "toolCallId": f"c{i - 1}", "toolName": "lookup", "output": "result " * 40}
                ],
            }
            continue
        role = "user" if i % 2 == 0 else "assistant"
        yield {
            "id": f"m{i}",
            "role": role,
            "parts": [{"type": "text", "text": f"turn {i}: " + "words of the conversation " * 12}],
        }


def run(messages: int, threshold: int, keep_recent_tokens: int) -> dict:
    calls = 0

    def summarize(prompt: str) -> str:
        nonlocal calls
        calls += 1
        return f"## Topic\nSummary {calls} of a long chat ({len(prompt)} characters summarised)."

    with tempfile.TemporaryDirectory() as folder:
        session = Session(Path(folder) / "bench.db").for_session("bench")
        session.on_compaction(create_compact_function(summarize=summarize, keep_recent_tokens=keep_recent_tokens))
        session.compact_after(threshold)
        append_us: list[float] = []
        estimates: list[int] = []
        compacting_appends: list[float] = []
        for message in conversation(messages):
            before = calls
            started = time.perf_counter()
            session.append_message(message)
            elapsed = (time.perf_counter() - started) * 1e6
            (compacting_appends if calls > before else append_us).append(elapsed)
            estimates.append(session.get_token_estimate())
        history = session.get_history()
        session.close()
    window = max(50, messages // 10)
    early = statistics.median(append_us[:window])
    late = statistics.median(append_us[-window:])
    return {
        "messages": messages,
        "threshold": threshold,
        "keep_recent_tokens": keep_recent_tokens,
        "summariser_calls": calls,
        "max_estimate": max(estimates),
        "final_estimate": estimates[-1],
        "visible_messages_at_end": len(history),
        "append_us_median_first_window": round(early, 1),
        "append_us_median_last_window": round(late, 1),
        "append_flatness_ratio": round(late / early, 3),
        "compacting_append_ms_median": (
            round(statistics.median(compacting_appends) / 1000, 2) if compacting_appends else None
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--threshold", type=int, default=4000)
    parser.add_argument("--keep-recent-tokens", type=int, default=1500)
    args = parser.parse_args()
    result = run(args.messages, args.threshold, args.keep_recent_tokens)
    for key, value in result.items():
        print(f"{key:32} {value}")
    ok = result["max_estimate"] <= result["threshold"]
    print("estimate stays under the threshold:", "pass" if ok else "FAIL")
    out = Path(__file__).parent / "results" / "compaction.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
