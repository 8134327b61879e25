import json
from pathlib import Path

import pytest

from gquery.profile import Interval, Profile, busy_ms, fractions, overlap_ms, union


def iv(stage, a, b, lane="stream 0", chunk=0):
    return Interval(stage, lane, chunk, a, b)


def test_union_and_overlap():
    xs = [iv("h2d", 0, 2), iv("h2d", 1, 3), iv("h2d", 5, 6)]
    assert union(xs) == [(0, 3), (5, 6)]
    assert busy_ms(xs) == 4
    assert overlap_ms([iv("kernel", 2, 5.5)], xs) == pytest.approx(1.5)
    assert overlap_ms([], xs) == 0


def test_profile_summary_and_hidden():
    # two chunks: kernel 0 runs under copy 1; kernel 1 runs alone
    p = Profile("pinned", 1000, 20_000, 20_000, total_ms=4.0, intervals=[
        iv("h2d", 0, 1), iv("kernel", 1, 2), iv("h2d", 1, 2, "stream 1", 1), iv("kernel", 2, 3, "stream 1", 1),
        iv("d2h", 3, 4)])
    s = p.summary({"h2d_pinned_gbps": 0.01, "d2d_gbps": 1.0})
    assert s["h2d_ms"] == 2 and s["kernel_ms"] == 2 and s["d2h_ms"] == 1 and s["staging_ms"] == 0
    assert p.hidden("kernel") == pytest.approx(0.5)
    assert p.hidden("staging") is None
    assert s["effective_gbps"] == pytest.approx(20_000 / 4.0 / 1e6)
    assert s["fraction_of_limits"]["end_to_end_of_pinned_h2d"] == pytest.approx(s["effective_gbps"] / 0.01)


def test_resident_profile_has_no_transfer():
    p = Profile("resident", 10, 200, 0, 1.0, [iv("kernel", 0, 0.5), iv("d2h", 0.5, 0.6)])
    assert p.h2d_gbps is None and p.hidden("kernel") is None
    assert fractions(p.summary(), {})["h2d_of_pinned_h2d"] is None


def test_round_trip_of_recorded_profile():
    recorded = json.loads((Path(__file__).parent / "data" / "run-sf1-nvidia-h200.json").read_text())
    for run in recorded["runs"]:
        p = Profile.from_dict(run["profile"])
        assert p.summary()["total_ms"] == run["profile"]["total_ms"]
        assert p.stage_ms("kernel") == pytest.approx(run["profile"]["kernel_ms"])
