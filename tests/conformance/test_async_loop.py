"""The async face never blocks the event loop."""

import asyncio
import time

from sessions_core import Session, SqliteStore


def test_an_async_read_of_a_long_path_lets_other_coroutines_run(tmp_path):
    store = SqliteStore(tmp_path / "deep.db")
    session = Session(store).for_session("deep")
    previous = None
    for i in range(10_000):
        session.import_message(
            {
                "id": f"m{i}",
                "role": "user" if i % 2 else "assistant",
                "parts": [{"type": "text", "text": f"turn {i} " * 20}],
            },
            parent_id=previous,
            created_at=__import__("datetime").datetime(2025, 1, 1),
        )
        previous = f"m{i}"

    async def main():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        started = time.perf_counter()
        history = await session.aget_history()
        streamed = [m.id async for m in session.ahistory(newest_first=True)]
        elapsed = time.perf_counter() - started
        done.set()
        await task
        return history, streamed, ticks, elapsed

    history, streamed, ticks, elapsed = asyncio.run(main())
    assert len(history) == 10_000 and history[-1].id == "m9999"
    assert streamed[0] == "m9999" and len(streamed) == 10_000
    # The ticker ran throughout the read: far more turns than chunks fetched.
    assert ticks > 100, (ticks, elapsed)
    store.close()
