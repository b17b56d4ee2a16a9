"""The executors' pool of reader clients (kafka_group.read.reader_pool), driven with fake clients."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Dict, Generator, Iterator, List, Optional

import pytest

from kafka_group.read.reader_pool import ReaderPool

CONFIG = {"bootstrap.servers": "b:9092", "group.id": "g", "sasl.password": "s3cret"}
OTHER = {"bootstrap.servers": "b:9092", "group.id": "other"}


class FakeClient:
    def __init__(self, config: Dict[str, str]) -> None:
        self.config = config
        self.calls: List[str] = []
        self.fail_unassign = False
        self.queued = 0  # messages left in the client's queue (a real client's prefetch)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> List[int]:
        taken = min(self.queued, num_messages)
        self.queued -= taken
        return list(range(taken))

    def unassign(self) -> None:
        self.calls.append("unassign")
        if self.fail_unassign:
            raise RuntimeError("broken client")

    def close(self) -> None:
        self.calls.append("close")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pid:
    def __init__(self) -> None:
        self.pid = 100

    def __call__(self) -> int:
        return self.pid


class Fixture:
    def __init__(self, **kwargs: int) -> None:
        self.made: List[FakeClient] = []
        self.clock = Clock()
        self.pid = Pid()
        self.pool = ReaderPool(self.make, clock=self.clock, getpid=self.pid, start_reaper=False, **kwargs)

    def make(self, config: Dict[str, str]) -> FakeClient:
        client = FakeClient(config)
        self.made.append(client)
        return client


@pytest.fixture
def fx() -> Fixture:
    return Fixture()


def test_a_returned_client_is_unassigned_and_reused_by_the_next_checkout_of_the_same_config(fx: Fixture) -> None:
    with fx.pool.client(CONFIG) as first:
        assert fx.pool.stats().in_use == 1
    assert first.calls == ["unassign"]
    with fx.pool.client(dict(reversed(list(CONFIG.items())))) as second:  # same settings, another order
        pass
    assert second is first
    assert fx.pool.stats()._asdict() == {"created": 1, "reused": 1, "closed": 0, "idle": 1, "in_use": 0}


def test_another_config_gets_its_own_client(fx: Fixture) -> None:
    with fx.pool.client(CONFIG) as a:
        pass
    with fx.pool.client(OTHER) as b:
        pass
    assert a is not b and b.config == OTHER
    assert fx.pool.stats().created == 2


def test_a_client_is_held_by_one_caller_at_a_time_across_threads(fx: Fixture) -> None:
    inside = threading.Event()
    release = threading.Event()
    held: List[object] = []

    def hold() -> None:
        with fx.pool.client(CONFIG) as client:
            held.append(client)
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(10)
    with fx.pool.client(CONFIG) as mine:
        assert mine is not held[0]  # the other thread's client is not handed out while it is held
        assert fx.pool.stats().in_use == 2
    release.set()
    thread.join(10)
    stats = fx.pool.stats()
    assert (stats.created, stats.in_use, stats.idle) == (2, 0, 2)


def test_a_client_that_saw_an_error_is_closed_not_returned(fx: Fixture) -> None:
    with pytest.raises(ValueError):
        with fx.pool.client(CONFIG):
            raise ValueError("read failed")
    assert fx.made[0].calls == ["close"]
    with fx.pool.client(CONFIG) as again:
        pass
    assert again is not fx.made[0]
    assert fx.pool.stats()._asdict() == {"created": 2, "reused": 0, "closed": 1, "idle": 1, "in_use": 0}


def test_a_generator_closed_early_returns_its_client(fx: Fixture) -> None:
    def read() -> Generator[int, None, None]:
        with fx.pool.client(CONFIG):
            yield 1
            yield 2

    records = read()
    assert next(records) == 1
    records.close()  # Spark stopped consuming the task's iterator
    assert fx.made[0].calls == ["unassign"]
    assert fx.pool.stats().idle == 1


def test_a_client_that_cannot_unassign_is_closed(fx: Fixture) -> None:
    with fx.pool.client(CONFIG) as client:
        client.fail_unassign = True
    assert client.calls == ["unassign", "close"]
    assert fx.pool.stats().idle == 0


def test_idle_clients_are_closed_after_their_timeout(fx: Fixture) -> None:
    with fx.pool.client(CONFIG, idle_timeout_ms=60_000):
        pass
    with fx.pool.client(OTHER, idle_timeout_ms=1_000):
        pass
    fx.clock.now += 30
    assert fx.pool.close_expired() == 1
    assert fx.made[1].calls[-1] == "close" and "close" not in fx.made[0].calls
    fx.clock.now += 30
    assert fx.pool.close_expired() == 1
    assert fx.made[0].calls[-1] == "close"
    assert fx.pool.stats().idle == 0


def test_the_reaper_thread_closes_idle_clients_without_another_checkout() -> None:
    made: List[FakeClient] = []
    closed = threading.Event()

    class Recording(FakeClient):
        def close(self) -> None:
            super().close()
            closed.set()

    def make(config: Dict[str, str]) -> FakeClient:
        made.append(Recording(config))
        return made[-1]

    pool = ReaderPool(make)
    with pool.client(CONFIG, idle_timeout_ms=1):
        pass
    assert closed.wait(10), "the reaper closed no client"
    assert made[0].calls == ["unassign", "close"]
    assert pool.stats().idle == 0


def test_idle_clients_are_capped_per_config_and_in_all_the_least_recently_returned_closed_first() -> None:
    fx = Fixture(max_idle_per_key=2, max_idle=3)
    with fx.pool.client(CONFIG), fx.pool.client(CONFIG), fx.pool.client(CONFIG):
        pass  # returned innermost first: made[2], made[1], made[0]
    assert [c.calls for c in fx.made] == [["unassign"], ["unassign"], ["unassign", "close"]]
    with fx.pool.client(OTHER), fx.pool.client({"bootstrap.servers": "c:9092"}):
        pass
    assert fx.made[1].calls == ["unassign", "close"]  # the oldest idle one, over the cap of 3 in all
    stats = fx.pool.stats()
    assert (stats.idle, stats.closed) == (3, 2)
    with fx.pool.client(CONFIG) as kept:
        pass
    assert kept is fx.made[0]


def test_a_returned_client_drops_what_it_had_prefetched(fx: Fixture) -> None:
    # unassign() stops fetching but leaves fetched messages (and stale error events) in the
    # client's queue until the next consume(): up to queued.max.messages.kbytes per parked client,
    # and a stale error the next task would see first.
    with fx.pool.client(CONFIG) as client:
        client.queued = 25_000
    assert client.queued == 0
    assert client.calls[0] == "unassign"


def test_a_generator_finalized_by_the_garbage_collector_under_the_pool_lock_does_not_deadlock(fx: Fixture) -> None:
    def reader() -> Iterator[int]:
        with fx.pool.client(CONFIG):
            yield 1
            yield 2

    abandoned = reader()
    next(abandoned)
    cycle: List[object] = [abandoned]
    cycle.append(cycle)  # only the cyclic collector frees it
    del abandoned, cycle
    finished = threading.Event()

    def collect_under_the_lock() -> None:
        with fx.pool._locked():  # any allocation the pool makes under its lock may run the collector
            gc.collect()
        finished.set()

    worker = threading.Thread(target=collect_under_the_lock, daemon=True)
    worker.start()
    assert finished.wait(5), "the pool deadlocked on its own lock"
    assert fx.pool.stats().idle == 1 and fx.pool.stats().in_use == 0


def test_a_huge_idle_timeout_does_not_kill_the_reaper() -> None:
    errors: List[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value or Exception())
    try:
        pool = ReaderPool(FakeClient)
        waits: List[float] = []
        waited = threading.Condition()
        wait = pool._wake.wait

        def counted_wait(timeout: Optional[float] = None) -> bool:
            with waited:
                waits.append(-1.0 if timeout is None else timeout)
                waited.notify_all()
            return wait(timeout)

        pool._wake.wait = counted_wait  # type: ignore[method-assign]
        with pool.client(CONFIG, idle_timeout_ms=10**16):
            pass
        reaper = pool._reaper
        assert reaper is not None
        with waited:  # the reaper's first wait, with the huge timeout
            assert waited.wait_for(lambda: waits, 30), "the reaper never waited"
        with pool._locked():
            pool._wake.notify_all()
        with waited:  # it came back from that wait alive and waits again
            assert waited.wait_for(lambda: len(waits) >= 2 or not reaper.is_alive(), 30), "the reaper hung"
        assert errors == [] and reaper.is_alive()
    finally:
        threading.excepthook = previous
        pool.close_all()


def test_an_interrupt_while_parking_a_client_still_releases_it(fx: Fixture) -> None:
    class Interrupted(FakeClient):
        def unassign(self) -> None:
            raise KeyboardInterrupt

    pool = ReaderPool(Interrupted, start_reaper=False)
    with pytest.raises(KeyboardInterrupt):
        with pool.client(CONFIG):
            pass
    assert pool.stats().in_use == 0


def test_after_a_fork_inherited_clients_are_kept_alive_never_destroyed(fx: Fixture) -> None:
    # Dropping the last reference would run confluent-kafka's destructor, which joins librdkafka
    # threads that do not exist in the child and takes locks a parent thread may have held.
    with fx.pool.client(CONFIG) as parent_client:
        pass
    alive = weakref.ref(parent_client)
    fx.pid.pid = 101
    fx.pool.stats()
    del parent_client
    fx.made.clear()
    gc.collect()
    assert alive() is not None


def test_after_a_fork_inherited_clients_are_forgotten_not_closed(fx: Fixture) -> None:
    with fx.pool.client(CONFIG) as parent_client:
        pass
    fx.pid.pid = 101  # now in a forked child
    assert fx.pool.stats()._asdict() == {"created": 0, "reused": 0, "closed": 0, "idle": 0, "in_use": 0}
    with fx.pool.client(CONFIG) as child_client:
        pass
    assert child_client is not parent_client
    assert parent_client.calls == ["unassign"]  # never closed in the child


def test_a_client_checked_out_before_a_fork_is_left_alone_in_the_child(fx: Fixture) -> None:
    with fx.pool.client(CONFIG) as client:
        fx.pid.pid = 101
    assert client.calls == []
    assert fx.pool.stats().idle == 0


def test_the_pool_repr_shows_no_config_value(fx: Fixture) -> None:
    with fx.pool.client(CONFIG):
        pass
    assert "s3cret" not in repr(fx.pool) and "s3cret" not in repr(fx.pool._idle)


def test_reader_clients_do_not_hold_fetches_open_unless_the_user_says_so() -> None:
    # A pooled client re-assigned after a range that reached the partition's end waits for the
    # fetch in flight: the broker's long poll must be short (fetch.wait.max.ms, default 500 ms).
    from kafka_group.config.client_config import reader_config

    assert reader_config({"bootstrap.servers": "b:9092"}, None)["fetch.wait.max.ms"] == "5"
    assert reader_config({"bootstrap.servers": "b:9092", "fetch.wait.max.ms": "100"}, None)["fetch.wait.max.ms"] == "100"
