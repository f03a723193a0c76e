"""Inline SVG charts: labelled for assistive technology, escaped, with round ticks and honest gaps."""

from __future__ import annotations

import re
from typing import Any
from xml.etree import ElementTree

from airflow_kueue_provider.plugins.svg_chart import (
    Point,
    Reference,
    Series,
    chart_view,
    duration_unit,
    nice_ticks,
    time_axis_label,
    time_chart,
    time_ticks,
)

SVG = "{http://www.w3.org/2000/svg}"
T = 1_800_000_000.0  # 2027-01-15 08:00 UTC


def draw(*args: Any, **kwargs: Any) -> str:
    """``time_chart`` of ``chart_view(*args, **kwargs)``."""
    return time_chart(chart_view(*args, **kwargs))


def test_a_chart_is_an_image_with_title_desc_axis_labels_and_a_title_per_point() -> None:
    series = [
        Series("run <time>", [Point(T, 5.0, "r1: <b>5</b>"), Point(T + 3600, 7.0, "r2")], 0),
        Series("wait", [Point(T, 1.0), Point(T + 3600, None)], 1, line="dotted", marker="square"),
    ]
    svg = draw("c-1", 'Title "<x>"', "Desc & more", series, "duration (minutes)")
    root = ElementTree.fromstring(svg)  # well-formed XML, so every string was escaped
    assert root.get("role") == "img" and root.get("aria-labelledby") == "c-1-t c-1-d"
    assert root.find(f"{SVG}title").text == 'Title "<x>"'  # type: ignore[union-attr]
    assert root.find(f"{SVG}desc").text == "Desc & more"  # type: ignore[union-attr]
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "duration (minutes)" in texts and "time (UTC), 2027-01-15" in texts
    assert "run <time>" in texts and "wait" in texts, "the legend names each series"
    tips = [t.text for t in root.iter(f"{SVG}title")][1:]
    assert tips == ["r1: <b>5</b>", "r2"], "points with a note, and only those"
    assert len(list(root.iter(f"{SVG}rect"))) == 1 + 1, "the wait's one value and its legend marker"
    assert "<b>" not in svg and "&lt;b&gt;" in svg


def test_a_step_series_holds_each_value_and_breaks_across_a_gap() -> None:
    points = [Point(T, 1.0), Point(T + 30, 3.0), Point(T + 1000, 2.0)]
    svg = draw(
        "q", "t", "d", [Series("pending", points, step=True, end_x=T + 1060, marker="none")], "n",
        gap_seconds=150,
    )  # fmt: skip
    root = ElementTree.fromstring(svg)
    lines = [p.get("points", "").split() for p in root.iter(f"{SVG}polyline")]
    assert [len(line) for line in lines] == [3, 2], "two runs: 1 -> 3 held, then 2 held to the last read"
    (_, y1), (_, y1b), (_, y3) = (map(float, pt.split(",")) for pt in lines[0])
    assert y1 == y1b and y3 < y1, "a corner: the old value up to the new sample's time"


def test_a_reference_line_and_its_label() -> None:
    svg = draw(
        "r", "t", "d", [Series("cpu", [Point(T, 50.0)])], "%", reference=Reference(100.0, "nominal"),
        y_max=100.0,
    )  # fmt: skip
    assert ">nominal</text>" in svg and re.search(r">100</text>", svg)


def test_ticks_are_round_and_cover_the_values() -> None:
    assert nice_ticks(0, 23) == [0, 5, 10, 15, 20, 25]
    assert nice_ticks(0, 125) == [0, 25, 50, 75, 100, 125]
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    hours = time_ticks(T, T + 3 * 3600)
    assert [label for _, label in hours] == ["08:00", "08:30", "09:00", "09:30", "10:00", "10:30", "11:00"]
    days = time_ticks(T, T + 29 * 86400)
    assert len(days) <= 7 and all(re.fullmatch(r"\d\d-\d\d", label) for _, label in days)
    assert time_axis_label(T, T + 29 * 86400) == "date (UTC), 2027-01-15 to 2027-02-13"


def test_durations_are_drawn_in_a_readable_unit() -> None:
    assert duration_unit(90) == (1.0, "seconds")
    assert duration_unit(900) == (60.0, "minutes")
    assert duration_unit(5 * 3600) == (3600.0, "hours")
