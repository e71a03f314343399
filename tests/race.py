"""Race harness: many threads or processes acquire the same fresh key, round after round."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from records import NOW_MS, lock
from stores import StoreFactory


def _contend(store: Any, barrier: Any, rounds: int, run_id: str) -> list[int]:
    """Acquire ``{run_id}-{round}`` after every contender reached the barrier; return the rounds won."""
    won = []
    try:
        for n in range(rounds):
            barrier.wait(timeout=60)
            if store.acquire(lock(f"{run_id}-{n}"), NOW_MS) is None:
                won.append(n)
    except BaseException:
        barrier.abort()  # let the other contenders fail fast instead of waiting out the timeout
        raise
    return won


def race_threads(factory: StoreFactory, contenders: int, rounds: int, run_id: str) -> list[list[int]]:
    """Contend with ``contenders`` threads sharing one store object."""
    store = factory()
    barrier = threading.Barrier(contenders)
    with ThreadPoolExecutor(contenders) as pool:
        futures = [pool.submit(_contend, store, barrier, rounds, run_id) for _ in range(contenders)]
        return [f.result(timeout=600) for f in futures]


def _process_main(factory: StoreFactory, barrier: Any, rounds: int, run_id: str, results: Any) -> None:
    try:
        results.put(_contend(factory(), barrier, rounds, run_id))
    except BaseException as e:
        barrier.abort()
        results.put(e)
        raise


def race_processes(factory: StoreFactory, contenders: int, rounds: int, run_id: str) -> list[list[int]]:
    """Contend with ``contenders`` processes, each building its own store from ``factory``."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(contenders), ctx.Queue()
    procs = [
        ctx.Process(target=_process_main, args=(factory, barrier, rounds, run_id, results)) for _ in range(contenders)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes
