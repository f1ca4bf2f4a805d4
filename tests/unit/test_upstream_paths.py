"""torchmonarch's import paths that its own test suite and user code import (issue 27).

Each path imports, and the key objects behave: pytokio tasks run and share results, buffers
read back what was written, addresses and port ids round-trip through their text, message
records compare by value, `BindSpec` equals the `default_transport` value it names, flatten and
unflatten put values back, and names with no counterpart raise saying what to use. No process
is started and no socket opened (the pytokio loop is a thread).
"""

from __future__ import annotations

import asyncio
import importlib
import pickle
import threading

import pytest

pytestmark = pytest.mark.timeout(60)

PATHS = [
    "monarch._rust_bindings.monarch_hyperactor.actor",
    "monarch._rust_bindings.monarch_hyperactor.actor_mesh",
    "monarch._rust_bindings.monarch_hyperactor.buffers",
    "monarch._rust_bindings.monarch_hyperactor.channel",
    "monarch._rust_bindings.monarch_hyperactor.config",
    "monarch._rust_bindings.monarch_hyperactor.handle",
    "monarch._rust_bindings.monarch_hyperactor.mailbox",
    "monarch._rust_bindings.monarch_hyperactor.pickle",
    "monarch._rust_bindings.monarch_hyperactor.proc",
    "monarch._rust_bindings.monarch_hyperactor.proc_mesh",
    "monarch._rust_bindings.monarch_hyperactor.pympsc",
    "monarch._rust_bindings.monarch_hyperactor.pytokio",
    "monarch._rust_bindings.monarch_hyperactor.runtime",
    "monarch._rust_bindings.monarch_hyperactor.testing",
    "monarch._rust_bindings.monarch_hyperactor.value_mesh",
    "monarch._rust_bindings.monarch_extension.panic",
    "monarch._rust_bindings.monarch_extension.blocking",
    "monarch._src.actor.bootstrap",
    "monarch._src.actor.concurrent",
    "monarch._src.actor.logging",
    "monarch._src.actor.mpsc",
    "monarch._src.actor.pickle",
    "monarch._testing",
    "monarch.common.opaque_ref",
    "monarch.common.stream",
    "monarch.common.tensor",
    "monarch.fetch",
    "monarch.simulator.config",
    "monarch.simulator.interface",
]


def test_public_module_paths_give_the_top_level_objects() -> None:
    # torchmonarch's `monarch` resolves these names from these modules: the same objects.
    import monarch
    import monarch.common.stream
    import monarch.common.tensor
    import monarch.fetch
    import monarch.simulator.interface

    assert monarch.fetch.inspect is monarch.inspect
    assert monarch.fetch.call_on_shard_and_fetch is monarch.call_on_shard_and_fetch
    assert monarch.common.tensor.reduce is monarch.reduce
    assert monarch.common.stream.Stream is monarch.Stream
    assert monarch.simulator.interface.Simulator is monarch.Simulator


@pytest.mark.parametrize("path", PATHS)
def test_upstream_path_imported_has_its_all(path: str) -> None:
    module = importlib.import_module(path)
    for name in getattr(module, "__all__", ()):
        assert hasattr(module, name), f"{path} lists {name} in __all__ but lacks it"


def test_has_tensor_engine_torch_installed_true() -> None:
    from monarch._rust_bindings import has_tensor_engine

    assert has_tensor_engine() is (importlib.util.find_spec("torch") is not None)


def test_python_task_awaited_inside_task_runs_inline_on_runtime_thread() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask, is_tokio_thread

    async def inner() -> bool:
        await PythonTask.sleep(0)
        return is_tokio_thread()

    async def outer() -> tuple[bool, bool]:
        return await PythonTask.from_coroutine(inner()), is_tokio_thread()

    assert PythonTask.from_coroutine(outer()).block_on() == (True, True)
    assert not is_tokio_thread()


def test_python_task_awaited_on_another_loop_raises_and_future_from_coro_runs_it() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask
    from monarch._src.actor.future import Future

    async def on_a_plain_loop() -> None:
        await PythonTask.sleep(0)

    with pytest.raises(RuntimeError, match="only be awaited in coroutines passed to"):
        asyncio.run(on_a_plain_loop())

    async def five() -> int:
        return 5

    async def via_future() -> int:
        return await Future._from_coro(PythonTask.from_coroutine(five()))

    assert asyncio.run(via_future()) == 5
    assert Future._from_coro(five()).get(timeout=10) == 5  # a coroutine: on the runtime loop
    with pytest.raises(TypeError, match="a coroutine or a PythonTask, got int"):
        Future._from_coro(5)


def test_python_task_used_twice_raises_value_error() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask

    async def one() -> int:
        return 1

    task = PythonTask.from_coroutine(one())
    assert task.block_on() == 1
    with pytest.raises(ValueError, match="runs once"):
        task.block_on()


def test_shared_read_many_times_same_value() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask, Shared

    async def seven() -> int:
        return 7

    shared = PythonTask.from_coroutine(seven()).spawn()
    assert shared.block_on() == 7
    assert shared.poll() == 7

    async def twice() -> list[int]:
        return [await shared, await shared]

    assert asyncio.run(twice()) == [7, 7]
    assert Shared.from_value("x").poll() == "x"


def test_block_on_inside_runtime_thread_raises_would_block() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask, WouldBlockRuntime

    async def nested() -> None:
        PythonTask.sleep(0).block_on()

    with pytest.raises(WouldBlockRuntime, match="runtime thread"):
        PythonTask.from_coroutine(nested()).block_on()


def test_select_one_first_finished_wins_with_index() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask

    release = threading.Event()
    slow = PythonTask.spawn_blocking(lambda: release.wait(30) and "slow")
    fast = PythonTask.spawn_blocking(lambda: "fast")
    try:
        assert PythonTask.select_one([slow.task(), fast.task()]).block_on() == ("fast", 1)
    finally:
        release.set()


def test_with_timeout_unfinished_raises_timeout_error() -> None:
    from monarch._rust_bindings.monarch_hyperactor.pytokio import PythonTask

    never = asyncio.Event()

    async def wait_forever() -> None:
        await never.wait()

    with pytest.raises(TimeoutError):
        PythonTask.from_coroutine(wait_forever()).with_timeout(0.01).block_on()


def test_handle_probe_released_resolves_to_success_value() -> None:
    from monarch._rust_bindings.monarch_hyperactor.testing import (
        _PROBE_SUCCESS_VALUE,
        _make_handle_probe,
    )

    probe = _make_handle_probe("success")
    handle = probe._handle()
    assert probe._started() and handle.poll() is None
    probe._release()
    assert handle.get(timeout=30) == _PROBE_SUCCESS_VALUE
    assert handle.poll() == _PROBE_SUCCESS_VALUE  # observing consumes nothing


def test_handle_get_timeout_raises_timeout_error_and_stays_pending() -> None:
    from monarch._rust_bindings.monarch_hyperactor.testing import _make_handle_probe

    probe = _make_handle_probe("exception")
    with pytest.raises(TimeoutError):
        probe._handle().get(timeout=0.01)
    probe._release()
    probe._wait_completed()
    with pytest.raises(ValueError, match="probe failed"):
        probe._handle().get(timeout=30)


def test_buffer_frozen_reads_back_written_bytes() -> None:
    from monarch._rust_bindings.monarch_hyperactor.buffers import Buffer

    buf = Buffer()
    assert buf.write(b"ab\ncd") == 5 and buf.write(memoryview(b"e")) == 1
    frozen = buf.freeze()
    assert len(frozen) == 6 and bytes(memoryview(frozen)) == b"ab\ncde"
    assert frozen.readline() == b"ab\n" and frozen.read(1) == b"c"
    out = bytearray(4)
    assert frozen.readinto(out) == 2 and out[:2] == b"de"
    assert pickle.loads(_pickled_frozen()) == {"k": 1}


def _pickled_frozen() -> bytes:
    from monarch._rust_bindings.monarch_hyperactor.buffers import Buffer

    buf = Buffer()
    buf.write(pickle.dumps({"k": 1}))
    return buf.freeze()


def test_actor_addr_and_port_id_text_round_trip_equal() -> None:
    from monarch._rust_bindings.monarch_hyperactor.mailbox import PortId, PortRef
    from monarch._rust_bindings.monarch_hyperactor.proc import ActorAddr

    addr = ActorAddr(addr="tcp://127.0.0.1:5", proc_name="p", actor_name="a")
    assert str(addr) == "a.p@tcp://127.0.0.1:5"  # Monarch's actor id text
    assert ActorAddr(addr="tcp:127.0.0.1:5", proc_name="p", actor_name="a") == addr
    assert str(ActorAddr(addr="unix:/tmp/s", proc_name="p", actor_name="a")) == "a.p@ipc:///tmp/s"
    assert ActorAddr.from_string("a.p@inproc://0").addr == "local:0"
    assert ActorAddr.from_string(str(addr)) == addr
    assert hash(addr) == hash(ActorAddr.from_string(str(addr)))
    port = PortId(actor_id=addr, port=3)
    assert repr(port) == "a.p:3@tcp://127.0.0.1:5"
    assert PortId.from_string(repr(port)) == port and port.index == 3
    assert pickle.loads(pickle.dumps(port)) == port
    with pytest.raises(NotImplementedError, match="monarch.actor.Port"):
        PortRef(port).send(None, None)
    with pytest.raises(ValueError, match="actor.proc@scheme://address"):
        ActorAddr.from_string("nonsense")
    with pytest.raises(ValueError, match="must be non-empty, without '.'"):
        ActorAddr.from_string("a.b.c@tcp://1.2.3.4:5")


def test_python_message_kinds_compare_by_value() -> None:
    from monarch._rust_bindings.monarch_hyperactor.actor import (
        MethodSpecifier,
        PythonMessage,
        PythonMessageKind,
    )

    assert PythonMessageKind.Result(1) == PythonMessageKind.Result(1)
    assert PythonMessageKind.Result(1) != PythonMessageKind.Exception(1)
    call = PythonMessageKind.CallMethod(MethodSpecifier.ReturnsResponse("f"), None)
    assert call.name.name == "f" and call.response_port is None
    msg = PythonMessage(PythonMessageKind.Result(None), pickle.dumps("xy"), [])
    # As on Monarch: no raw payload attribute; decode() is the way in.
    assert msg.decode() == "xy" and msg.kind.rank is None and not hasattr(msg, "message")
    with pytest.raises(ValueError, match="refs must be empty here"):
        PythonMessage(PythonMessageKind.Result(None), b"", ["a mesh"])
    with pytest.raises(TypeError, match="abstract"):
        PythonMessageKind()


def test_bind_spec_equals_default_transport_value() -> None:
    from monarch._rust_bindings.monarch_hyperactor.channel import BindSpec, ChannelTransport

    assert BindSpec(ChannelTransport.Unix) == ChannelTransport.Unix
    assert BindSpec("tcp") == BindSpec(ChannelTransport.TcpWithHostname)
    assert BindSpec("tcp://127.0.0.1:8080") == "tcp://127.0.0.1:8080"
    assert BindSpec(ChannelTransport.Unix) != ChannelTransport.Tls
    with pytest.raises(TypeError):
        BindSpec(42)  # type: ignore[arg-type]


def test_flatten_filtered_values_put_back_by_unflatten() -> None:
    from monarch._src.actor.pickle import flatten, unflatten

    marker = object()
    values, buf = flatten({"a": [marker, 2], "b": marker}, lambda x: x is marker)
    assert values == [marker, marker]
    restored = unflatten(buf.freeze(), ["X", "X"])
    assert restored == {"a": ["X", 2], "b": "X"}


def test_rust_pickle_state_unpickles_to_equal_object() -> None:
    from monarch._rust_bindings.monarch_hyperactor.actor import PythonMessageKind
    from monarch._rust_bindings.monarch_hyperactor.pickle import PendingMessage, pickle as mpickle

    state = mpickle({"n": [1, 2]})
    assert state.unpickle() == {"n": [1, 2]}
    assert pickle.loads(state.buffer()) == {"n": [1, 2]}
    message = PendingMessage(PythonMessageKind.Result(0), state).resolve().get(timeout=30)
    assert message.decode() == {"n": [1, 2]}


def test_panicking_function_raises_base_exception_not_exception() -> None:
    from monarch._rust_bindings.monarch_extension.panic import panicking_function

    with pytest.raises(BaseException) as info:
        panicking_function()
    assert not isinstance(info.value, Exception)


def test_shape_ext_slice_named_dims_selects() -> None:
    from monarch._rust_bindings.monarch_hyperactor.shape import Shape, Slice
    from monarch._src.actor.shape import ShapeExt

    shape = Shape(["host", "gpu"], Slice.new_row_major([2, 4]))
    sub = ShapeExt.slice(shape, host=1, gpu=slice(1, 3))
    assert sub.labels == ["gpu"] and list(sub.ndslice) == [5, 6]
    with pytest.raises(IndexError):
        ShapeExt.slice(shape, host=2)


def test_rust_side_meshes_constructed_raise_type_error_naming_spawn() -> None:
    from monarch._rust_bindings.monarch_hyperactor.actor_mesh import PythonActorMesh
    from monarch._rust_bindings.monarch_hyperactor.proc_mesh import ProcMesh

    with pytest.raises(TypeError, match="spawn_procs"):
        ProcMesh()
    with pytest.raises(TypeError, match=r"proc_mesh\.spawn"):
        PythonActorMesh()


def test_job_job_monarch_names_resolve_to_job_classes() -> None:
    import monarch._src.job.job as job_mod
    from monarch._src.job.local import LocalJob

    assert job_mod.LocalJob is LocalJob
    state = job_mod.ProcessState(12, "tcp://h:1")
    assert state.pid == 12 and state.channel == "tcp://h:1"
    assert issubclass(job_mod.LoginJob, job_mod.JobTrait)
    with pytest.raises(AttributeError):
        job_mod.NoSuchJob  # noqa: B018


def test_tools_config_config_holds_workspace() -> None:
    from monarch.tools.config import Config, Workspace

    ws = Workspace(dirs={"/tmp/src": ""})
    config = Config(scheduler="slurm", workspace=ws)
    assert config.workspace is ws and config.scheduler_args == {} and not config.dryrun
