"""A device's job thread (gpu.multi): jobs run in order on one thread, errors reach the caller, and
it still takes jobs while atexit handlers run, where engines are closed on their own thread."""

import subprocess
import sys
import threading

import pytest

from gquery.gpu.device import JobThread


def test_jobs_run_in_order_on_one_thread():
    worker = JobThread("test-jobs")
    seen = []
    futures = [worker.submit(lambda i=i: (seen.append(i), threading.current_thread().name)[1]) for i in range(50)]
    names = {f.result(timeout=10) for f in futures}
    worker.shutdown()
    assert seen == list(range(50))
    assert names == {"test-jobs"}


def test_an_error_reaches_the_caller_and_the_thread_goes_on():
    worker = JobThread("test-errors")
    with pytest.raises(ZeroDivisionError):
        worker.submit(lambda: 1 // 0).result(timeout=10)
    assert worker.submit(lambda a, b: a + b, 2, 3).result(timeout=10) == 5
    worker.shutdown()


def test_it_takes_jobs_inside_an_atexit_handler():
    script = ("import atexit\nfrom gquery.gpu.device import JobThread\nw = JobThread('exit')\n"
              "atexit.register(lambda: print('closed on', w.submit(lambda: __import__('threading')"
              ".current_thread().name).result(timeout=10)))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "closed on exit"
    assert out.stderr == ""


def test_a_call_runs_on_its_askers_thread_where_the_job_thread_is_idle():
    worker = JobThread("test-idle")
    worker.submit(lambda: None).result(timeout=10)  # started, nothing queued
    here = threading.current_thread().name
    assert worker.call(lambda: threading.current_thread().name, here_if_idle=True) == here
    assert worker.call(lambda: threading.current_thread().name) == "test-idle"  # not asked: on the thread
    # a job run in the thread's stead is on it: what it asks of the thread runs there at once, not queued behind it
    assert worker.call(lambda: worker.call(lambda: threading.current_thread().name), here_if_idle=True) == here
    worker.shutdown()


def test_a_call_waits_its_turn_behind_jobs_asked_before_it():
    worker = JobThread("test-busy")
    release, seen = threading.Event(), []
    first = worker.submit(lambda: (release.wait(10), seen.append("first")))
    waiting = worker.submit(lambda: seen.append("second"))
    out = []
    asker = threading.Thread(target=lambda: out.append(worker.call(lambda: (seen.append("asked"),
                                                                            threading.current_thread().name)[1],
                                                                   here_if_idle=True)))
    asker.start()
    asker.join(0.2)
    assert asker.is_alive() and seen == []  # neither ran ahead of the jobs before it
    release.set()
    asker.join(10)
    first.result(timeout=10), waiting.result(timeout=10)
    assert seen == ["first", "second", "asked"]
    assert out == ["test-busy"]  # queued behind them: run on the thread
    worker.shutdown()


def test_jobs_asked_from_many_threads_run_one_at_a_time():
    worker = JobThread("test-many")
    inside, most, lock = [0], [0], threading.Lock()

    def job():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        threading.Event().wait(0.001)
        with lock:
            inside[0] -= 1
        return threading.current_thread().name

    names = []
    threads = [threading.Thread(target=lambda: names.extend(worker.call(job, here_if_idle=True) for _ in range(40)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    worker.shutdown()
    assert len(names) == 320 and most[0] == 1
