"""Unit tests for the envelope records: still tuples, plain tuples on the wire, retyped on
receipt."""

from __future__ import annotations

import pickle

import pytest

from monarch._src.runtime.envelope import (
    CALL,
    CONTROL,
    PORT,
    PORT_VALUE,
    Call,
    Control,
    PortMsg,
    as_record,
    decode,
    encode,
)
from monarch._src.transport.comm import decode_batch, encode_batch

CALL_ENV = Call(CALL, "mesh.a", "ping", encode({"x": 1}), ("tcp://a:1", 7), (3, ("gpus",), (4,)),
                "sender.b")
PORT_ENV = PortMsg(PORT, 7, encode("v"), 3, PORT_VALUE)
CONTROL_ENV = Control(CONTROL, "ping", (1, "two"), ("tcp://a:1", 8))


@pytest.mark.parametrize("env", [CALL_ENV, PORT_ENV, CONTROL_ENV])
def test_envelope_record_is_a_tuple_starting_with_its_kind(env: Call | PortMsg | Control) -> None:
    assert isinstance(env, tuple)
    assert env[0] == env.kind


def test_envelope_call_fields_by_name_and_index() -> None:
    assert (CALL_ENV.actor_key, CALL_ENV.method) == ("mesh.a", "ping")
    assert CALL_ENV.reply == CALL_ENV[4]
    assert CALL_ENV.rank == 3 == CALL_ENV.cast_rank[0]
    assert CALL_ENV.sender == "sender.b"
    assert decode(CALL_ENV.payload) == {"x": 1}


def test_envelope_batch_carries_plain_tuples() -> None:
    frames = encode_batch([CALL_ENV, PORT_ENV, CONTROL_ENV])
    assert b"envelope" not in bytes(frames[0])  # no class reference: cheaper to pickle
    received = decode_batch(frames)
    assert [type(env) for env in received] == [tuple, tuple, tuple]
    assert received == [tuple(CALL_ENV), tuple(PORT_ENV), tuple(CONTROL_ENV)]


def test_envelope_as_record_restores_each_kind() -> None:
    received = decode_batch(encode_batch([CALL_ENV, PORT_ENV, CONTROL_ENV]))
    records = [as_record(env) for env in received]
    assert [type(env) for env in records] == [Call, PortMsg, Control]
    assert records == [CALL_ENV, PORT_ENV, CONTROL_ENV]
    assert decode(records[1].payload) == "v"


def test_envelope_record_pickles_as_itself_outside_the_transport() -> None:
    assert pickle.loads(pickle.dumps(CONTROL_ENV)) == CONTROL_ENV
    assert type(pickle.loads(pickle.dumps(CONTROL_ENV))) is Control
