"""The transport's scheme registry (`transport/registry.py`), the capabilities its channels declare
(`transport/channel.py`), and the mailbox's `transport_factory`. What every registered scheme
does end to end is test_transport_contract.py's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from monarch._src.runtime.mailbox import Mailbox
from monarch._src.supervision.errors import TransportError
from monarch._src.transport import dask_comm, registry, tcp
from monarch._src.transport.comm import BatchHandler, LostHandler, Transport

pytestmark = pytest.mark.timeout(60)

WAIT = 5.0


def test_registry_holds_each_supported_scheme_once() -> None:
    assert sorted(registry.schemes()) == ["inproc", "tcp", "tls", "unix"]
    assert registry.backend_for("tcp://127.0.0.1:1").connect is tcp.open_channel
    for scheme in ("tls", "unix", "inproc"):
        assert registry.backend_for(f"{scheme}://x").connect is dask_comm.open_channel


def test_registry_unknown_scheme_names_address_and_registered_schemes() -> None:
    with pytest.raises(ValueError) as info:
        registry.backend_for("ws://10.0.0.1:80")
    text = str(info.value)
    assert "'ws://10.0.0.1:80'" in text
    for scheme in registry.schemes():
        assert f"{scheme}://" in text


def test_registry_address_without_scheme_refused() -> None:
    with pytest.raises(ValueError, match="'127.0.0.1:80'"):
        registry.backend_for("127.0.0.1:80")


def test_registry_scheme_registered_twice_refused() -> None:
    tcp_backend = registry.backend_for("tcp://")
    with pytest.raises(ValueError, match="'tcp' is registered already"):
        registry.register("tcp", tcp_backend.connect, tcp_backend.listen, tcp_backend.preload,
                          tcp_backend.local_address)
    assert registry.backend_for("tcp://") is tcp_backend


def test_registry_local_address_has_its_scheme() -> None:
    for scheme in registry.schemes():
        assert registry.backend_for(f"{scheme}://").local_address().startswith(f"{scheme}://")


def test_channel_on_a_dask_comm_declares_awaited_writes_only() -> None:
    for cls in (dask_comm.StreamChannel, dask_comm.CommChannel):
        assert cls.direct is False
        assert cls.idle is False


async def test_transport_start_on_unknown_scheme_raises_naming_it() -> None:
    transport = Transport(lambda *args: None, lambda *args: None, {})
    with pytest.raises(ValueError, match="'bogus://x'"):
        await transport.start("bogus://x")
    await transport.close()


async def test_transport_send_to_unknown_scheme_reports_lost_envelope() -> None:
    lost: asyncio.Queue[tuple[str, list[Any], BaseException]] = asyncio.Queue()
    transport = Transport(lambda *args: None,
                          lambda peer, envs, err: lost.put_nowait((peer, envs, err)), {})
    await transport.start("tcp://127.0.0.1:0")
    try:
        transport.send("bogus://x", ("first",))
        transport.send("bogus://x", ("second",))
        peer, envs, err = await asyncio.wait_for(lost.get(), WAIT)
    finally:
        await transport.close()
    assert (peer, envs) == ("bogus://x", [("first",), ("second",)])
    assert isinstance(err, TransportError)
    assert "bogus://x" in str(err)
    assert "tcp://" in str(err)


async def test_mailbox_transport_factory_builds_its_transport() -> None:
    made: list[Transport] = []

    def factory(on_batch: BatchHandler, on_lost: LostHandler) -> Transport:
        transport = Transport(on_batch, on_lost, {})
        made.append(transport)
        return transport

    mailbox = Mailbox(asyncio.get_running_loop(), factory)
    assert made == [mailbox.transport]


async def test_mailbox_default_transport_is_comm_transport() -> None:
    mailbox = Mailbox(asyncio.get_running_loop())
    assert type(mailbox.transport) is Transport
