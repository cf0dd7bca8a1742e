"""History reads hold off the cycle collector without ever leaving it in a state the host did
not set: a disabled collector stays disabled, the host's thresholds come back exactly (also on
error), changes the host makes meanwhile are kept, and overlapping reads in threads end the
pause once. At the end, what the read built joins the oldest generation unscanned, unless
the host froze objects of its own, which stay frozen."""

import gc
import threading

import pytest

from sessions_core import Session
from sessions_core.reads import PAUSE_FROM_ROWS, gc_paused

HOST_THRESHOLDS = (613, 7, 9)


@pytest.fixture(autouse=True)
def host_collector():
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(*HOST_THRESHOLDS)
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def test_a_pause_holds_off_collection_and_restores_the_thresholds():
    with gc_paused():
        assert gc.isenabled()
        assert gc.get_threshold()[0] > 1_000_000
        assert gc.get_threshold()[1:] == HOST_THRESHOLDS[1:]
    assert gc.isenabled() and gc.get_threshold() == HOST_THRESHOLDS


def test_the_thresholds_come_back_on_error():
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("read failed")
    assert gc.isenabled() and gc.get_threshold() == HOST_THRESHOLDS


def test_a_disabled_collector_is_left_alone():
    gc.disable()
    with gc_paused():
        assert not gc.isenabled() and gc.get_threshold() == HOST_THRESHOLDS
    assert not gc.isenabled() and gc.get_threshold() == HOST_THRESHOLDS


def test_what_the_host_sets_during_a_pause_is_kept():
    with gc_paused():
        gc.disable()
    assert not gc.isenabled()
    gc.enable()
    with gc_paused():
        gc.set_threshold(500, 5, 5)
    assert gc.get_threshold() == (500, 5, 5)


def test_nested_pauses_restore_once_at_the_outermost_end():
    with gc_paused():
        with gc_paused():
            pass
        assert gc.get_threshold()[0] > 1_000_000
    assert gc.get_threshold() == HOST_THRESHOLDS


def test_overlapping_pauses_in_threads_end_with_the_read_that_started_them():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, tuple[int, ...]] = {}

    def first():
        with gc_paused():
            first_in.set()
            second_in.wait(5)
        seen["after first"] = gc.get_threshold()
        first_out.set()

    def second():
        first_in.wait(5)
        with gc_paused():
            second_in.set()
            first_out.wait(5)
            seen["second, after first"] = gc.get_threshold()
        seen["after second"] = gc.get_threshold()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {
        "after first": HOST_THRESHOLDS,
        "second, after first": HOST_THRESHOLDS,
        "after second": HOST_THRESHOLDS,
    }
    assert gc.isenabled()


def test_get_history_leaves_a_disabled_collector_disabled():
    session = Session().for_session("s")
    session.append_messages([{"id": f"m{i}", "role": "user", "parts": []} for i in range(50)])
    gc.disable()
    assert len(session.get_history()) == 50
    assert not gc.isenabled() and gc.get_threshold() == HOST_THRESHOLDS
    gc.enable()
    assert len(session.get_history()) == 50
    assert gc.isenabled() and gc.get_threshold() == HOST_THRESHOLDS


def test_what_a_read_built_joins_the_oldest_generation_unscanned():
    gc.unfreeze()  # anything left frozen by an earlier test would make the read skip the move
    session = Session().for_session("s")
    n = PAUSE_FROM_ROWS
    session.append_messages(
        [{"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": "x"}]} for i in range(n)]
    )
    history = session.get_history()
    assert len(history) == n
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert {id(history[0]), id(history[-1]), id(history[-1].parts[0])} <= oldest  # not scanned on the way
    assert gc.get_freeze_count() == 0


def test_a_cycle_made_during_a_pause_is_still_collected():
    import weakref

    class Node:
        """An object that refers to itself."""

    with gc_paused():
        node = Node()
        node.self = node
        alive = weakref.ref(node)
        del node
    assert alive() is not None  # no collection ran during the pause
    gc.collect()
    assert alive() is None


def test_objects_the_host_froze_stay_frozen():
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        session = Session().for_session("s")
        session.append_messages([{"id": f"m{i}", "role": "user", "parts": []} for i in range(50)])
        assert len(session.get_history()) == 50
        # Not released (gc.unfreeze() would empty it) nor added to; a frozen object may still be
        # freed meanwhile (another thread, a cache dropping an entry), one less each.
        assert frozen - 100 <= gc.get_freeze_count() <= frozen
        assert gc.get_threshold() == HOST_THRESHOLDS
    finally:
        gc.unfreeze()
