"""The mission query as a user waits for it: the public call from text (or Z) to the answer in hand,
timed with a host clock (median of 7 after --warm calls, 3 by default), beside DuckDB's execute(...).fetchall()
on the same text in the same process. Runs against whichever gquery is first on sys.path, so the
same script times two commits one after the other on one card (issue "One engine": no slower).

    python3 scripts/mission_wall.py STORE --z 1,30,1000,3000 --label after --commit C --json out.json
    python3 scripts/mission_wall.py --report reports before.json after.json   # one report: each after against the before ahead of it
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

MISSION = "SELECT SUM(l_quantity * l_extendedprice) FROM lineitem WHERE l_suppkey < {z}"


def wall(call, runs: int = 7, warm: int = 3, settle_s: float = 0.0) -> tuple[float, object, list[float]]:
    """The timed calls' median, the last answer, and every call's milliseconds in order (the warm-up calls
    first: the first call reads what is still on disk, and a road that reads more there answers its
    later calls sooner)."""
    def timed():
        t0 = time.perf_counter()
        out = call()
        return (time.perf_counter() - t0) * 1e3, out

    calls = [timed()[0] for _ in range(warm)]
    time.sleep(settle_s)  # what the warm-up calls started in the background (a key's lists) lands first
    times, out = [], None
    for _ in range(runs):
        ms, out = timed()
        times.append(ms)
    return statistics.median(times), out, calls + times


def value(answer):
    """The one value, from either API: Answer.rows (the one road) or the old mission road's Result.value."""
    return answer.rows[0][0] if hasattr(answer, "rows") else answer.value


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store", nargs="?")
    ap.add_argument("--report", nargs="+", metavar=("DIR", "JSON"), help="write reports/mission-wall-<gpu>.json/.md")
    ap.add_argument("--commit", default="", help="the commit measured (the lent host's .git may not be this checkout's)")
    ap.add_argument("--parquet", help="DuckDB's table is loaded from these files (a glob)")
    ap.add_argument("--z", default="1,30,1000,3000")
    ap.add_argument("--label", default="")
    ap.add_argument("--settle", type=float, default=0.0, help="seconds to wait after the warm-up calls, before the timed "
                                                                "ones (a kept table reads a key's lists in the background)")
    ap.add_argument("--warm", type=int, default=3, help="untimed calls before the 7 timed (a planner that rents before it "
                                                       "buys settles after some)")
    ap.add_argument("--runs", type=int, default=7, help="timed calls, their median reported (at least 7)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.runs < 7:
        ap.error("--runs must be at least 7")
    if args.report:
        return report(args.report[0], args.report[1:])
    import duckdb

    import gquery

    t = gquery.open(args.store)
    con = duckdb.connect()
    if args.parquet:
        con.execute(f"CREATE TABLE lineitem AS SELECT l_suppkey, l_quantity, l_extendedprice FROM read_parquet('{args.parquet}')")
    rows = []
    for z in (int(x) for x in args.z.split(",")):
        text = MISSION.format(z=z)
        lean = dict(mode="pinned", check=False, warmup=False, repeat=1)
        q_ms, q, q_calls = wall(lambda: t.query(z, **lean), args.runs, args.warm, args.settle)
        s_ms, s, s_calls = wall(lambda: t.sql(text, **lean), args.runs, args.warm, args.settle)
        d_ms, d, _ = wall(lambda: con.execute(text).fetchall(), args.runs) if args.parquet else (None, None, None)
        exact = value(q) == value(s) and (d is None or d[0][0] == value(q))
        profile = getattr(s, "profile", None)
        summary = profile.summary() if profile is not None else {}
        scan = _scan(getattr(s, "plan", None))
        rows.append({"z": z, "query_wall_ms": q_ms, "sql_wall_ms": s_ms, "duckdb_ms": d_ms, "exact": exact,
                     "query_calls_ms": q_calls, "sql_calls_ms": s_calls,
                     "value": str(value(q)), "scan": scan, "gpu_ms": getattr(profile, "total_ms", None),
                     "h2d_ms": summary.get("h2d_ms"), "kernel_ms": summary.get("kernel_ms"),
                     "pcie_bytes_per_row": getattr(profile, "pcie_bytes_per_row", None)})
        print(f"{args.label:7s} Z={z:<7d} table.query {q_ms:8.2f} ms (first {q_calls[0]:.1f}, all {sum(q_calls):.1f})  "
              f"table.sql {s_ms:8.2f} ms  "
              f"DuckDB {d_ms if d_ms is None else round(d_ms, 2)} ms  exact={exact}  sql: {scan}, "
              f"gpu {rows[-1]['gpu_ms']}, h2d {summary.get('h2d_ms')}, kernel {summary.get('kernel_ms')}", flush=True)
    t.close()
    from gquery.gpu.device import probe

    info = probe()[0]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "commit": args.commit, "store": args.store, "device": info and info.name,
                       "warm_calls": args.warm, "settle_s": args.settle, "timed_calls": args.runs,
                       "duckdb": duckdb.__version__, "runs": rows}, f, indent=2)


def _scan(plan) -> str | None:
    """What scanned the table: the fused kernel's frames (a column by its top byte: sliced) or a column's
    bucket lists (the one road), or the old road's key-scan encoding."""
    if plan is None:
        return None
    tables = getattr(plan, "tables", None)
    if tables and hasattr(tables[0], "index"):
        return "+".join(sorted({getattr(t, "scan", "index" if t.index is not None else "frames") for t in tables}))
    return getattr(plan, "encoding", "fused")


def _first(x: dict) -> str:
    return f"{x['query_calls_ms'][0]:.2f}" if x.get("query_calls_ms") else "-"


def _sum(x: dict) -> str:
    return f"{sum(x['query_calls_ms']):.1f}" if x.get("query_calls_ms") else "-"


def report(out_dir: str, paths: list[str]) -> None:
    """One report of several runs (before and after, each design): every figure, side by side by Z."""
    from gquery import reports

    runs = [json.load(open(p)) for p in paths]
    device = runs[0]["device"]
    lines = [f"# The mission query on the wall clock, {device}", "",
             "The public call from Z (`table.query(z)`) or text (`table.sql(text)`) to the answer in hand, host clock, "
             "median of the timed calls each run names (7 unless said) after its warm-up calls, `mode=\"pinned\", check=False, warmup=False, repeat=1`; DuckDB's "
             "`execute(text).fetchall()` over its own table of the parquet in the same process. `gpu ms`: CUDA events "
             "of the answer's run; `scan`: what the planner chose for `table.sql`.", ""]
    for r in runs:
        settle = f", then {r['settle_s']:g} s" if r.get("settle_s") else ""
        lines += [f"## {r['label']} ({r['commit']}), {r['store']}, {r.get('warm_calls', 3)} warm-up calls{settle}, "
                  f"median of {r.get('timed_calls', 7)}", "",
                  reports.md_table(["Z", "table.query ms", "its first call ms", "its calls' sum ms", "table.sql ms",
                                    "DuckDB ms", "scan", "gpu ms", "exact"],
                                   [[f"{x['z']:,}", f"{x['query_wall_ms']:.2f}", _first(x), _sum(x), f"{x['sql_wall_ms']:.2f}",
                                     f"{x['duckdb_ms']:.2f}", x.get("scan"), f"{x['gpu_ms']:.3f}", x["exact"]]
                                    for x in r["runs"]]), ""]
    compared, latest = [], {}
    for r in runs:  # an after run against the latest before run of its label given ahead of it (its store may differ)
        label, store, zs = r["label"], r["store"], {x["z"]: x for x in r["runs"]}
        if label.startswith("before"):
            latest[label] = zs
            continue
        base = latest.get(label.replace("after", "before"))  # "after, settled" against "before, settled"
        if base is None:
            continue
        for z, x in zs.items():
            b = base[z]
            compared.append([label, store, f"{z:,}", f"{b['query_wall_ms']:.2f}", f"{x['query_wall_ms']:.2f}",
                             f"{x['query_wall_ms'] / b['query_wall_ms']:.2f}", f"{b['sql_wall_ms']:.2f}",
                             f"{x['sql_wall_ms']:.2f}", f"{x['sql_wall_ms'] / b['sql_wall_ms']:.2f}",
                             f"{b.get('scan')} -> {x.get('scan')}", f"{b['gpu_ms']:.3f} -> {x['gpu_ms']:.3f}",
                             f"{_first(b)} -> {_first(x)}", f"{_sum(b)} -> {_sum(x)}"])
    if compared:
        lines += ["## After against before (ratio > 1: slower)", "",
                  "`first call` and `calls' sum`: table.query's first call at that Z (what it reads from disk first) and "
                  "the sum of its every call, warm-up and timed, by the host's clock.", "",
                  reports.md_table(["run", "store", "Z", "query before", "query after", "ratio", "sql before", "sql after",
                                    "ratio", "scan (sql)", "gpu ms (sql)", "first call ms", "calls' sum ms"], compared), ""]
    j, m = reports.write(out_dir, f"mission-wall-{reports.slug(device)}", {"device": device, **reports.stamp(), "runs": runs},
                         "\n".join(lines))
    print(j, m)


if __name__ == "__main__":
    main()
