"""Unit tests for the port-table entries behind futures and channels.

Entries are driven directly, the way the mailbox's loop drives them: `deliver(payload, rank,
status)` with payloads built by `envelope.encode`, and `fail(exc)` when a peer dies.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import pytest

from monarch._src.runtime.envelope import PORT_CLOSED, PORT_ERROR, PORT_VALUE, encode
from monarch._src.runtime.ports import (
    CountPort,
    GatherPort,
    OncePort,
    QueuePort,
    StreamPort,
    ValuePort,
    decode_ranked,
    decode_reply,
)
from monarch._src.supervision.errors import SupervisionError

WAIT = 5.0


def _values(replies: list[Any]) -> list[Any]:
    return [decode_reply(r) for r in replies]


# ---- decode_reply --------------------------------------------------------------------------------


def test_decode_reply_value_returns_it() -> None:
    assert decode_reply((PORT_VALUE, encode({"k": [1, 2]}))) == {"k": [1, 2]}


def test_decode_reply_error_payload_raises_it() -> None:
    with pytest.raises(KeyError, match="missing"):
        decode_reply((PORT_ERROR, encode(KeyError("missing"))))


def test_decode_reply_supervision_error_payload_raises_it() -> None:
    with pytest.raises(SupervisionError, match="proc died"):
        decode_reply((PORT_ERROR, encode(SupervisionError("proc died"))))


def test_decode_reply_large_buffer_value_roundtrips() -> None:
    data = bytearray(range(256)) * 1024  # above the in-band limit: an out-of-band buffer
    payload = encode(data)
    assert payload[1], "expected an out-of-band buffer"
    assert decode_reply((PORT_VALUE, payload)) == data


def test_decode_ranked_ranked_returns_rank_and_value() -> None:
    assert decode_ranked(True)((PORT_VALUE, encode("v"), 3)) == (3, "v")
    assert decode_ranked(False)((PORT_VALUE, encode("v"), 3)) == "v"
    with pytest.raises(ValueError, match="bad"):
        decode_ranked(True)((PORT_ERROR, encode(ValueError("bad")), 0))


# ---- OncePort ------------------------------------------------------------------------------------


def test_once_port_first_reply_completes_and_later_ignored() -> None:
    port = OncePort()
    assert not port.closed
    port.deliver(encode("first"), None, PORT_VALUE)
    assert port.closed
    port.deliver(encode("second"), None, PORT_VALUE)
    port.fail(SupervisionError("late"))
    assert decode_reply(port.cf.result(timeout=0)) == "first"


def test_once_port_error_reply_completes_with_error_status() -> None:
    port = OncePort()
    port.deliver(encode(ValueError("remote")), 0, PORT_ERROR)
    status, payload = port.cf.result(timeout=0)
    assert status == PORT_ERROR
    with pytest.raises(ValueError, match="remote"):
        decode_reply((status, payload))


def test_once_port_fail_before_reply_fails_future() -> None:
    port = OncePort()
    err = SupervisionError("peer gone")
    port.fail(err)
    assert port.closed
    port.deliver(encode("too late"), None, PORT_VALUE)
    assert port.cf.exception(timeout=0) is err


# ---- ValuePort -----------------------------------------------------------------------------------


def test_value_port_plain_value_completes_with_its_pickle_bytes() -> None:
    port = ValuePort()
    port.deliver(encode({"k": 1}), 0, PORT_VALUE)
    raw = port.cf.result(timeout=0)
    assert type(raw) is bytes
    assert decode_reply((PORT_VALUE, (raw, ()))) == {"k": 1}
    port.deliver(encode("second"), 0, PORT_VALUE)  # a later reply is ignored, as by OncePort
    assert port.cf.result(timeout=0) is raw


@pytest.mark.parametrize(
    ("status", "value"),
    [(PORT_ERROR, ValueError("remote")), (PORT_CLOSED, None),
     (PORT_VALUE, bytearray(b"x" * 200_000))],  # the last has an out-of-band buffer
)
def test_value_port_other_replies_complete_with_the_raw_reply(status: int, value: Any) -> None:
    port = ValuePort()
    payload = encode(value)
    assert status != PORT_VALUE or payload[1]
    port.deliver(payload, 0, status)
    assert port.cf.result(timeout=0) == (status, payload)


# ---- GatherPort ----------------------------------------------------------------------------------


def test_gather_port_replies_out_of_order_ordered_by_rank() -> None:
    port = GatherPort(4)
    for rank in (2, 0, 3):
        port.deliver(encode(f"r{rank}"), rank, PORT_VALUE)
        assert not port.cf.done()
    port.deliver(encode("r1"), 1, PORT_VALUE)
    assert port.closed
    assert _values(port.cf.result(timeout=0)) == ["r0", "r1", "r2", "r3"]


def test_gather_port_duplicate_rank_ignored() -> None:
    port = GatherPort(2)
    port.deliver(encode("first"), 0, PORT_VALUE)
    port.deliver(encode("duplicate"), 0, PORT_VALUE)
    assert not port.cf.done()
    assert port.missing == 1
    port.deliver(encode("one"), 1, PORT_VALUE)
    assert _values(port.cf.result(timeout=0)) == ["first", "one"]


def test_gather_port_reply_without_rank_ignored() -> None:
    port = GatherPort(1)
    port.deliver(encode("no rank"), None, PORT_VALUE)
    assert not port.cf.done()
    port.deliver(encode("ranked"), 0, PORT_VALUE)
    assert _values(port.cf.result(timeout=0)) == ["ranked"]


def test_gather_port_zero_ranks_completes_at_once() -> None:
    port = GatherPort(0)
    assert port.closed
    assert port.cf.result(timeout=0) == []


def test_gather_port_error_reply_kept_in_its_rank() -> None:
    port = GatherPort(2)
    port.deliver(encode(RuntimeError("rank 1 failed")), 1, PORT_ERROR)
    port.deliver(encode("ok"), 0, PORT_VALUE)
    replies = port.cf.result(timeout=0)
    assert decode_reply(replies[0]) == "ok"
    assert replies[1][0] == PORT_ERROR


def test_gather_port_fail_fails_future_and_ignores_later_replies() -> None:
    port = GatherPort(2)
    port.deliver(encode("a"), 0, PORT_VALUE)
    err = SupervisionError("rank 1 died")
    port.fail(err)
    assert port.closed
    port.deliver(encode("b"), 1, PORT_VALUE)
    assert port.cf.exception(timeout=0) is err


# ---- CountPort -----------------------------------------------------------------------------------


def test_count_port_acks_complete_with_none() -> None:
    port = CountPort(3)
    port.deliver(encode(None), 0, PORT_VALUE)
    port.deliver(encode(None), 0, PORT_VALUE)  # ranks do not matter, only the count
    assert not port.cf.done()
    port.deliver(encode(None), None, PORT_VALUE)
    assert port.closed
    assert port.cf.result(timeout=0) is None


def test_count_port_error_reply_fails_future_with_decoded_error() -> None:
    port = CountPort(3)
    port.deliver(encode(None), 0, PORT_VALUE)
    port.deliver(encode(OSError("cleanup failed")), 1, PORT_ERROR)
    assert port.closed
    with pytest.raises(OSError, match="cleanup failed"):
        port.cf.result(timeout=0)
    port.deliver(encode(None), 2, PORT_VALUE)
    assert isinstance(port.cf.exception(timeout=0), OSError)


def test_count_port_undecodable_error_reply_fails_future() -> None:
    port = CountPort(1)
    port.deliver((b"not a pickle", []), 0, PORT_ERROR)
    assert port.closed
    assert port.cf.exception(timeout=0) is not None


def test_count_port_fail_counts_as_answered() -> None:
    port = CountPort(2)
    port.fail(SupervisionError("peer gone"))
    assert not port.cf.done()
    port.deliver(encode(None), 0, PORT_VALUE)
    assert port.cf.result(timeout=0) is None


def test_count_port_fail_for_every_sender_completes_with_none() -> None:
    port = CountPort(2)
    port.fail(SupervisionError("a gone"))
    port.fail(SupervisionError("b gone"))
    assert port.closed
    assert port.cf.result(timeout=0) is None


def test_count_port_zero_completes_with_none() -> None:
    port = CountPort(0)
    assert port.closed
    assert port.cf.result(timeout=0) is None


# ---- StreamPort ----------------------------------------------------------------------------------


def test_stream_port_replies_complete_futures_in_arrival_order() -> None:
    port = StreamPort(3)
    for rank in (2, 0, 1):
        port.deliver(encode(f"from {rank}"), rank, PORT_VALUE)
    assert port.closed
    assert [decode_reply(cf.result(timeout=0)) for cf in port.cfs] == ["from 2", "from 0", "from 1"]


def test_stream_port_extra_reply_ignored() -> None:
    port = StreamPort(1)
    port.deliver(encode("only"), 0, PORT_VALUE)
    port.deliver(encode("extra"), 1, PORT_VALUE)
    assert decode_reply(port.cfs[0].result(timeout=0)) == "only"


def test_stream_port_fail_fails_only_the_remaining_futures() -> None:
    port = StreamPort(3)
    port.deliver(encode("got"), 1, PORT_VALUE)
    err = SupervisionError("the rest died")
    port.fail(err)
    assert port.closed
    assert decode_reply(port.cfs[0].result(timeout=0)) == "got"
    assert port.cfs[1].exception(timeout=0) is err
    assert port.cfs[2].exception(timeout=0) is err
    port.fail(SupervisionError("again"))  # nothing left to fail
    port.deliver(encode("late"), 0, PORT_VALUE)
    assert port.cfs[2].exception(timeout=0) is err


def test_stream_port_zero_is_closed_with_no_futures() -> None:
    port = StreamPort(0)
    assert port.closed
    assert port.cfs == []


# ---- QueuePort -----------------------------------------------------------------------------------


def _take_value(port: QueuePort) -> Any:
    return decode_ranked(port.ranked)(port.take().result(timeout=WAIT))


def test_queue_port_deliver_before_take_queues_in_order() -> None:
    port = QueuePort()
    for i in range(5):
        port.deliver(encode(i), None, PORT_VALUE)
    assert [_take_value(port) for _ in range(5)] == [0, 1, 2, 3, 4]
    assert not port.closed


def test_queue_port_take_before_deliver_completes_waiters_in_order() -> None:
    port = QueuePort()
    first, second = port.take(), port.take()
    assert not first.done()
    port.deliver(encode("a"), None, PORT_VALUE)
    assert first.done()
    assert not second.done()
    port.deliver(encode("b"), None, PORT_VALUE)
    assert decode_ranked(False)(first.result(timeout=0)) == "a"
    assert decode_ranked(False)(second.result(timeout=0)) == "b"


def test_queue_port_ranked_take_returns_rank_and_value() -> None:
    port = QueuePort(ranked=True)
    port.deliver(encode("v"), 4, PORT_VALUE)
    assert _take_value(port) == (4, "v")


def test_queue_port_take_from_other_thread_gets_value() -> None:
    port = QueuePort()
    taken = threading.Event()
    out: list[Any] = []

    def receiver() -> None:
        cf = port.take()
        taken.set()
        out.append(decode_ranked(False)(cf.result(timeout=WAIT)))

    t = threading.Thread(target=receiver)
    t.start()
    assert taken.wait(WAIT)
    port.deliver(encode("hello"), None, PORT_VALUE)
    t.join(WAIT)
    assert out == ["hello"]


def test_queue_port_once_closes_after_one_value() -> None:
    port = QueuePort(once=True)
    port.deliver(encode("only"), None, PORT_VALUE)
    assert port.closed
    port.deliver(encode("ignored"), None, PORT_VALUE)
    assert _take_value(port) == "only"


def test_queue_port_once_waiting_take_gets_the_value() -> None:
    port = QueuePort(once=True)
    cf = port.take()
    port.deliver(encode("v"), None, PORT_VALUE)
    assert port.closed
    assert decode_ranked(False)(cf.result(timeout=0)) == "v"


def test_queue_port_once_second_take_raises_eof_error() -> None:
    port = QueuePort(once=True)
    port.deliver(encode("only"), None, PORT_VALUE)
    assert _take_value(port) == "only"
    second = port.take()
    assert second.done()
    with pytest.raises(EOFError):
        second.result(timeout=0)


def test_queue_port_closed_status_raises_eof_error_after_queued_values() -> None:
    port = QueuePort()
    port.deliver(encode("before"), None, PORT_VALUE)
    port.deliver(encode(None), None, PORT_CLOSED)
    assert port.closed
    port.deliver(encode("after"), None, PORT_VALUE)
    assert _take_value(port) == "before"
    with pytest.raises(EOFError, match="closed"):
        port.take().result(timeout=0)
    with pytest.raises(EOFError):
        port.take().result(timeout=0)


def test_queue_port_closed_status_wakes_waiting_takers() -> None:
    port = QueuePort()
    waiters = [port.take(), port.take()]
    port.deliver(encode(None), None, PORT_CLOSED)
    for cf in waiters:
        with pytest.raises(EOFError):
            cf.result(timeout=0)


def test_queue_port_fail_wakes_waiters_and_later_takes() -> None:
    port = QueuePort()
    waiters = [port.take() for _ in range(3)]
    err = SupervisionError("sender died")
    port.fail(err)
    for cf in waiters:
        assert cf.exception(timeout=0) is err
    assert port.take().exception(timeout=0) is err


def test_queue_port_fail_waiter_on_other_thread_wakes() -> None:
    port = QueuePort()
    taken = threading.Event()
    out: list[BaseException | None] = []

    def receiver() -> None:
        cf = port.take()
        taken.set()
        try:
            cf.result(timeout=WAIT)
        except BaseException as exc:  # the test inspects what woke the receiver
            out.append(exc)

    t = threading.Thread(target=receiver)
    t.start()
    assert taken.wait(WAIT)
    port.fail(SupervisionError("gone"))
    t.join(WAIT)
    assert len(out) == 1
    assert isinstance(out[0], SupervisionError)


def test_queue_port_fail_keeps_first_error() -> None:
    port = QueuePort()
    first = SupervisionError("first")
    port.fail(first)
    port.fail(SupervisionError("second"))
    assert port.take().exception(timeout=0) is first


def test_queue_port_error_value_raised_on_decode() -> None:
    port = QueuePort()
    port.deliver(encode(ValueError("remote send_error")), None, PORT_ERROR)
    raw = port.take().result(timeout=0)
    with pytest.raises(ValueError, match="remote send_error"):
        decode_ranked(False)(raw)


def test_queue_port_concurrent_takes_and_delivers_lose_nothing() -> None:
    port = QueuePort()
    n = 500
    futures: list[concurrent.futures.Future[Any]] = []
    lock = threading.Lock()

    def taker() -> None:
        for _ in range(n // 2):
            cf = port.take()
            with lock:
                futures.append(cf)

    takers = [threading.Thread(target=taker) for _ in range(2)]
    for t in takers:
        t.start()
    for i in range(n):
        port.deliver(encode(i), None, PORT_VALUE)
    for t in takers:
        t.join(WAIT)
    got = sorted(decode_ranked(False)(cf.result(timeout=WAIT)) for cf in futures)
    assert got == list(range(n))
