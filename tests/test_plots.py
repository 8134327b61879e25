"""Plots drawn from timings recorded on a GPU host (tests/data), so CI runs the plotting code."""

import json
from pathlib import Path

from gquery.ladder import STEPS, LadderRow, findings, markdown, table_rows
from gquery.plots import plot_ladder, plot_run
from gquery.profile import Profile

DATA = Path(__file__).parent / "data"
PNG = b"\x89PNG\r\n\x1a\n"


def recorded_ladder():
    d = json.loads((DATA / "ladder-nvidia-h100-80gb-hbm3.json").read_text())
    return d, [LadderRow.from_dict(s) for s in d["steps"]]


def test_ladder_plot(tmp_path):
    d, rows = recorded_ladder()
    names = [r.step.name for r in rows]  # recorded before two scan steps were retired with the key-scan engine
    assert [n for n in names if n in {s.name for s in STEPS}] == [s.name for s in STEPS]
    out = tmp_path / "ladder.png"
    plot_ladder(rows, out, d["device"])
    assert out.read_bytes().startswith(PNG) and out.stat().st_size > 20_000
    assert not list(tmp_path.glob(".*.tmp"))


def test_run_plot_timeline_and_bandwidth(tmp_path):
    d = json.loads((DATA / "run-sf1-nvidia-h200.json").read_text())
    profiles = [Profile.from_dict(r["profile"]) for r in d["runs"]]
    assert {p.mode for p in profiles} == {"resident", "pinned", "pageable"}
    assert any(i.lane == "host" for p in profiles for i in p.intervals)  # pageable staging is drawn
    out = tmp_path / "run.png"
    plot_run(profiles, d["limits"], out)
    assert out.read_bytes().startswith(PNG) and out.stat().st_size > 20_000


def test_ladder_table_and_findings_from_recorded_rows():
    d, rows = recorded_ladder()
    table = table_rows(rows)
    assert len(table) == len(rows) and all(row[-1] == "MATCH" for row in table)
    notes = findings(rows, d["duckdb_ms"], d["numpy_ms"])
    assert any("data transfer" in n for n in notes) and any("DuckDB" in n for n in notes)
    meta = {k: d[k] for k in ("device", "commit", "date", "sf", "z", "rows", "repeat", "result", "duckdb_ms",
                              "numpy_ms", "limits")} | {"command": "gquery ladder", "duckdb_threads": 16}
    md = markdown(rows, meta, notes, ["ladder.png"])
    assert "| simpleselect |" in md and "![ladder](ladder.png)" in md and "59.45" in md


def test_skipped_step_is_shown_not_plotted(tmp_path):
    _, rows = recorded_ladder()
    rows[0] = LadderRow(rows[0].step, None, None, 0, 0, 0, 0, 0, 0, 18, 1.0, skipped="an int64 partial could overflow")
    assert table_rows(rows)[0][-1].startswith("skipped")
    plot_ladder(rows, tmp_path / "l.png")
    assert (tmp_path / "l.png").exists()
