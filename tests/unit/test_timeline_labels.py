"""The timeline's labels: above the plot, each starting at its line, never on top of another."""

from __future__ import annotations

from hypothesis import given, strategies as st

from lab.views.plots import LABEL_CHAR_PX, LABEL_LINE_PX, MAX_LABEL_LINES, PLOT_PX, stack_labels, timeline


def _boxes(labels, placed, span, plot_px=PLOT_PX):
    per_px = span / plot_px
    return [(x, x + len(text) * LABEL_CHAR_PX * per_px, line) if side == "left" else
            (x - len(text) * LABEL_CHAR_PX * per_px, x, line) for (x, text), (line, side) in zip(labels, placed)]


def _overlaps(labels, placed, span):
    boxes = _boxes(labels, placed, span)
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[2] == b[2] and a[0] < b[1] and b[0] < a[1]]


@given(st.lists(st.tuples(st.floats(0, 60), st.sampled_from(["driver-crash", "restart #1 · back in 0.7 s",
                                                                "producer done", "executor-kill @mid-output"])),
                max_size=12))
def test_stacked_labels_never_overlap(labels):
    span = max([x for x, _ in labels] or [1.0]) + 1
    placed = stack_labels(labels, span)
    if placed is None:  # more lines than allowed: the caller names them in the legend instead
        return
    assert all(line < MAX_LABEL_LINES for line, _ in placed)
    assert _overlaps(labels, placed, span) == []
    # none leaves the axis where it fits on one side of its line
    assert all(b[1] <= span or b[0] < 0 or x - (b[1] - b[0]) < 0
               for b, (x, _) in zip(_boxes(labels, placed, span), labels))


def test_a_crash_and_its_quick_restart_sit_on_two_lines():
    # the walk that found it: driver-crash at 3.1 s, restart #1 0.2 s later on a 9 s axis
    placed = stack_labels([(3.1, "driver-crash"), (3.3, "restart #1 · back in 0.5 s"), (8.1, "producer done")], 9)
    assert placed == [(0, "left"), (1, "left"), (0, "right")]  # the last one ends at its line: the axis ends at 9


def test_too_many_labels_go_to_the_legend():
    crowded = [(i * 0.1, f"driver-crash #{i}") for i in range(8)]
    assert stack_labels(crowded, 10) is None
    events = [{"t": 0.0, "type": "run-start"}] + [
        {"t": 1.0 + 0.1 * i, "type": "fault", "kind": "driver-crash"} for i in range(8)] + [
        {"t": 10.0, "type": "batch-done", "batch": 1, "rows": 5, "attempt": 1}]
    fig = timeline(events)
    assert not [a for a in fig.layout.annotations if a.text.startswith("driver-crash")]
    named = [t.name for t in fig.data if t.name.startswith("driver-crash")]
    assert named == [f"driver-crash (at {1.0 + 0.1 * i:.1f} s)" for i in range(8)]


def test_labels_sit_above_the_plot_and_the_margin_makes_room():
    events = [{"t": 0.0, "type": "run-start"}, {"t": 3.1, "type": "fault", "kind": "driver-crash"},
              {"t": 3.2, "type": "driver-start", "attempt": 2}, {"t": 9.0, "type": "producer-done"},
              {"t": 9.0, "type": "batch-done", "batch": 1, "rows": 5, "attempt": 2}]
    fig = timeline(events)
    labels = [a for a in fig.layout.annotations if a.yref == "paper"]
    assert [a.text.split(" · ")[0] for a in labels] == ["driver-crash", "restart #1", "producer done"]
    assert all(a.y == 1 and a.yanchor == "bottom" for a in labels)
    assert [a.xanchor for a in labels] == ["left", "left", "right"]
    assert sorted(a.yshift for a in labels) == [2, 2, 2 + LABEL_LINE_PX]
    assert fig.layout.margin.t >= 56 + 2 * LABEL_LINE_PX
