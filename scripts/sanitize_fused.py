"""Every fused-kernel shape of the GPU tests (predicates, aggregates, groups, 64- and 128-bit arithmetic,
split sums), in every mode, on small odd-sized tables (one of them clustered, so chunks of frames that
pass whole and chunks that test), and the index scan over l_suppkey's bucket lists and the frames reading
it by its top byte in the modes that read in place, then the grouped shapes with their groups hashed,
hashed groups cut by ORDER BY ... LIMIT before the read-back, columns with NULLs, and keys past 62 bits,
each answer checked against the CPU reference: run under compute-sanitizer (memcheck, racecheck) on a GPU
host."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_gpu_sql import (DENSE_CUT, INDEXED, MODES, NULL_QUERIES, QUERIES, SCHEMA, TOP_CUT, WIDE_KEYS,  # noqa: E402
                          nulled_table, random_table, wide_table)

from gquery import answer, sql  # noqa: E402
from gquery.gpu.codegen import NotOnGpu  # noqa: E402
from gquery.gpu.executor import Engine  # noqa: E402

engine = Engine()
failures = checked = 0


def check(tables, texts, scan_modes, hashed=False) -> None:
    """Each (text, scan) on each table in every mode ("auto") or `scan_modes`, against the CPU reference; a
    refusal skipped, unless `hashed`: then every answer must come from the GPU with its groups hashed."""
    global failures, checked
    for table in tables:
        table.columns["l_suppkey"].get("indexed")  # its bucket lists: the index scan can run
        for text, scan in texts:
            query = sql.parse(text, SCHEMA)
            want = answer.cpu_answer(query, table).rows
            for mode in MODES if scan == "auto" else scan_modes:
                try:
                    got = answer.gpu_answer(query, table, engine, mode, repeat=1, warmup=False, chunk_frames=8, scan=scan)
                except NotOnGpu:
                    if hashed:
                        raise
                    continue
                checked += 1
                if got.rows != want or (hashed and not got.plan.spec.hashed):
                    failures += 1
                    print("MISMATCH" + (" (hashed)" if hashed else ""), table.rows, mode, text, got.rows, want)
        engine.memory.release_table(table)


tables = [random_table(1, 1), random_table(1025, 2), random_table(5003, 3, big=True),
          random_table(40_001, 4, sort_by="l_suppkey")]
check(tables, [(t, "auto") for t in QUERIES] + [(t.format(z=z), scan) for t in INDEXED for z in (-60, 3, 700, 2100)
                                               for scan in ("index", "sliced")], ("pinned", "registered"))
# the grouped shapes again, their groups in a hash table (the dense array's bound set to nothing)
from gquery.gpu import codegen  # noqa: E402

dense_bound, codegen.GLOBAL_ACC_BYTES = codegen.GLOBAL_ACC_BYTES, 0
check(tables[1:], [(t, "auto") for t in QUERIES if "GROUP BY" in t] +
      [(t.format(z=z), scan) for t in INDEXED if "GROUP BY" in t for z in (3, 700) for scan in ("index", "sliced")],
      ("pinned",), hashed=True)
# hashed groups cut to those ORDER BY ... LIMIT keeps (the partitions' best keys, then a gather by threshold)
check([tables[1], tables[3]], [(t, "auto") for t in TOP_CUT], (), hashed=True)
check([tables[2]], [(t, "auto") for t in TOP_CUT if t.startswith("SELECT l_suppkey")], (), hashed=True)
codegen.GLOBAL_ACC_BYTES = dense_bound  # and a dense array's
check(tables[1:], [(t, "auto") for t in DENSE_CUT] + [(t.split(" LIMIT")[0], "auto") for t in DENSE_CUT[1:]], ())
# columns with NULLs: each a bit a row read beside its frames, dense groups and then hashed
nulled = [nulled_table(1025, 5), nulled_table(40_001, 6, sort_by="l_tax")]
check(nulled, [(t, "auto") for t in NULL_QUERIES], ())
codegen.GLOBAL_ACC_BYTES = 0
check(nulled, [(t, "auto") for t in NULL_QUERIES if "GROUP BY" in t], (), hashed=True)
# keys past 62 bits: three words a hash slot (hash_slot_wide), a few keys on many rows, one a row, NULL keys
check([wide_table(5003, 7, few=True, nulls=True), wide_table(20_001, 8, few=False)], [(t, "auto") for t in WIDE_KEYS], (),
      hashed=True)
engine.close()
print(f"sanitize_fused: {checked} answers checked, failures {failures}")
sys.exit(1 if failures or not checked else 0)
