"""Procs' output forwarded to the controller: streaming on and off, aggregation, flush on stop."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

from monarch.actor import this_host

pytestmark = pytest.mark.timeout(120)

_SCRIPT = textwrap.dedent(
    """
    import asyncio
    from monarch.actor import Actor, endpoint, this_host

    class Talker(Actor):
        @endpoint
        def talk(self, word, n):
            for _ in range(n):
                print(word)

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    talker = procs.spawn("talker", Talker)
    talker.talk.call("streamed-by-default", 1).get()
    asyncio.run(procs.logging_option(stream_to_client=False))
    talker.talk.call("muted", 1).get()
    asyncio.run(procs.logging_option(stream_to_client=True, aggregate_window_sec=30))
    talker.talk.call("repeated", 5).get()
    procs.stop().get()  # flushes: the 30 s window does not have to end
    print("END", flush=True)
    """
)


def _run(forwarding: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["MONARCH_ENABLE_LOG_FORWARDING"] = "1" if forwarding else "0"
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=100
    )


def test_logs_forwarded_stream_mute_and_aggregate() -> None:
    result = _run(forwarding=True)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines.count("streamed-by-default") == 2, result.stdout
    assert "muted" not in result.stdout, result.stdout
    assert any("[10 similar log lines]" in line and "repeated" in line for line in lines), (
        result.stdout
    )
    assert lines[-1] == "END", result.stdout


def test_logs_without_forwarding_streaming_only_warns() -> None:
    result = _run(forwarding=False)
    assert result.returncode == 0, result.stderr[-3000:]
    # Procs write to the inherited descriptors: every line arrives, nothing is collapsed.
    assert result.stdout.count("repeated") == 10
    assert "similar log lines" not in result.stdout
    assert "has no effect: log forwarding is off" in result.stderr


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"level": 300}, "level must be an int from 0 to 255"),
        ({"level": -1}, "level must be an int from 0 to 255"),
        ({"stream_to_client": False, "aggregate_window_sec": 3}, "needs stream_to_client=True"),
        ({"stream_to_client": True, "aggregate_window_sec": 0}, "must be positive"),
    ],
)
def test_logging_option_bad_arguments_raise_value_error(
    procs2: object, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        asyncio.run(procs2.logging_option(**kwargs))  # type: ignore[attr-defined]


def test_logging_option_on_a_slice_is_refused() -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        with pytest.raises(ValueError, match="set by the proc mesh's owner"):
            asyncio.run(procs.slice(gpus=0).logging_option(level=10))
    finally:
        procs.stop().get(timeout=60)


_PREFIX_SCRIPT = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    import monarch.actor
    from monarch.actor import Actor, endpoint, this_host

    class Chatty(Actor):
        @endpoint
        def log(self):
            logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s",
                                force=True)
            self.logger.info("inside")
            logging.getLogger("structured").info("")

    logging.getLogger("client").info("outside")
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    procs.spawn("chatty", Chatty).log.call_one().get()
    monarch.actor.config.prefix_python_logs_with_actor = False
    logging.getLogger("client").info("unprefixed")
    procs.stop().get()
    """
)


def test_log_records_get_actor_prefix_unless_switched_off() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PREFIX_SCRIPT], capture_output=True, text=True, timeout=100
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "[actor=<root>] outside" in lines
    assert any(
        line.startswith("[actor=<root>.<__main__.Chatty chatty{'gpus': 0/1}>] inside")
        for line in lines
    ), lines
    assert "" in lines  # an empty message stays empty
    assert "unprefixed" in lines
