from types import SimpleNamespace as O

from sessions_core.overlays import Segment, plan_overlays

IDS = ["m0", "m1", "m2", "m3", "m4"]


def c(a, b, name=""):
    return O(from_message_id=a, to_message_id=b, name=name)


def test_no_overlay_is_one_raw_segment():
    assert plan_overlays(IDS, []) == [Segment(0, 5, None)]
    assert plan_overlays([], []) == []


def test_an_overlay_replaces_its_range():
    o = c("m1", "m2")
    assert plan_overlays(IDS, [o]) == [Segment(0, 1, None), Segment(1, 3, o), Segment(3, 5, None)]


def test_the_newest_overlay_with_a_given_start_wins_even_when_shorter():
    old, new = c("m1", "m3"), c("m1", "m2")
    assert plan_overlays(IDS, [old, new])[1] == Segment(1, 3, new)


def test_earliest_start_wins_and_nested_overlays_are_skipped():
    outer, inner = c("m0", "m2"), c("m1", "m3")
    assert plan_overlays(IDS, [outer, inner]) == [Segment(0, 3, outer), Segment(3, 5, None)]


def test_anchors_off_the_path_are_ignored():
    assert plan_overlays(IDS, [c("m1", "zz"), c("zz", "m3"), c("m3", "m1")]) == [Segment(0, 5, None)]
