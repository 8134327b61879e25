"""How runs are timed (gquery.timing): by count and by time, bounded."""

import threading
import time

from gquery import timing


def counter(sleep_ms: float = 0.0):
    calls = []

    def run():
        if sleep_ms:
            time.sleep(sleep_ms / 1e3)
        calls.append(len(calls))
        return len(calls)

    return run, calls


def test_exactly_repeat_runs_without_a_minimum_time():
    run, calls = counter()
    assert timing.timed_runs(run, 7, min_ms=0.0) == [1, 2, 3, 4, 5, 6, 7]
    assert len(calls) == 7


def test_short_runs_go_on_until_the_minimum_time():
    run, calls = counter(sleep_ms=2.0)
    t0 = time.perf_counter()
    results = timing.timed_runs(run, 3, min_ms=40.0)
    assert (time.perf_counter() - t0) * 1e3 >= 40.0
    assert len(results) >= 3 and len(results) == len(calls) and len(results) < timing.MAX_RUNS
    assert results == list(range(1, len(results) + 1))  # every run's result, in order


def test_long_runs_stop_at_the_count():
    run, calls = counter(sleep_ms=30.0)
    assert len(timing.timed_runs(run, 2, min_ms=10.0)) == 2


def test_runs_of_no_time_are_bounded():
    run, calls = counter()
    assert len(timing.timed_runs(run, 1, min_ms=10_000.0)) == len(calls) == timing.MAX_RUNS  # long before 10 s


def test_warm_up_runs_once_at_least():
    run, calls = counter(sleep_ms=50.0)
    assert timing.warm_up(run, min_ms=25.0) == [1]


def test_a_benchmark_settles_after_what_calls_left_reading_in_the_background():
    from gquery import answer

    done = []
    reader = threading.Thread(target=lambda: (time.sleep(0.2), done.append(1)), name=answer.READ_AHEAD)
    reader.start()
    assert answer.settle(5.0) is True and done == [1]  # waited for the read to end
    assert answer.settle(5.0) is False  # nothing left running: no wait


def test_settling_is_bounded_by_its_timeout():
    from gquery import answer

    release = threading.Event()
    reader = threading.Thread(target=release.wait, name=answer.COMPILE_AHEAD)
    reader.start()
    t0 = time.perf_counter()
    try:
        assert answer.settle(0.05) is True
        assert time.perf_counter() - t0 < 2.0 and reader.is_alive()
    finally:
        release.set()
        reader.join()
