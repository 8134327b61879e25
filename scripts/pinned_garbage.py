"""On a host of 2 or more GPUs: which objects hold page-locked host memory in cyclic garbage after a
table is released from the many-GPU engine (test_more_than_2_to_the_32_rows's steps). PyCUDA frees
page-locked memory only on the thread of the context that made it; such garbage is collected on
whichever thread next collects, and PyCUDA then warns of an out-of-thread free (seen on 2 H200s at
0a6fe10: 4 warnings from that test alone). Prints each such array and the garbage that refers to it.

    python scripts/pinned_garbage.py
"""
import gc, sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "tests"))
import numpy as np
from test_gpu_scale import synthetic, run
from gquery.encodings import FRAME_ROWS
from gquery.gpu.multi import MultiEngine
from gquery.gpu.executor import Engine, close_last

multi = MultiEngine("all")
rows = 2**32 + 3 * FRAME_ROWS + 5
table, parts = synthetic(rows)
engine = Engine()
for mode in ("resident", "pinned"):
    run(engine, table, 100, mode, "sliced")
r = run(multi, table, 100, "pinned", "sliced")
engine.memory.release_table(table)
multi.memory.release_table(table)
del r
gc.set_debug(gc.DEBUG_SAVEALL)
gc.collect()
gc.set_debug(0)
seen = 0
def describe(o):
    return type(o).__module__ + "." + type(o).__qualname__
for o in gc.garbage:
    if isinstance(o, np.ndarray) and o.base is not None and "pycuda" in type(o.base).__module__:
        seen += 1
        print("pinned array in garbage:", o.shape, o.dtype)
        chain, cur = [], o
        for _ in range(8):
            refs = [x for x in gc.get_referrers(cur) if x is not gc.garbage and any(x is g for g in gc.garbage)]
            if not refs: break
            cur = refs[0]
            chain.append(describe(cur) + (" keys=" + str(list(cur.keys())[:6]) if isinstance(cur, dict) else ""))
        print("   referrers:", " <- ".join(chain))
print("pinned arrays in cyclic garbage:", seen, "garbage objects:", len(gc.garbage))
kinds = {}
for o in gc.garbage:
    kinds[describe(o)] = kinds.get(describe(o), 0) + 1
print(sorted(kinds.items(), key=lambda kv: -kv[1])[:25])
gc.garbage.clear()
close_last(engine)
multi.close()
