"""Meshes against real worker processes: slicing, ValueMesh, multi-dimensional proc meshes,
spawning on slices, passing meshes to actors, process placement and controllers.

Tests share the session meshes and this module's `{hosts: 2, gpus: 3}` mesh; stopping meshes
is covered in test_mesh_stop.py.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from monarch.actor import (
    Actor,
    ActorError,
    Extent,
    ProcMesh,
    ValueMesh,
    context,
    current_actor_name,
    current_rank,
    endpoint,
    get_or_spawn_controller,
    this_host,
    this_proc,
)

# Generous bound on any single remote wait: a bug fails the test instead of hanging it.
TIMEOUT = 30.0


class Where(Actor):
    """Reports the process and coordinates each message landed on; all endpoints are sync."""

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    @endpoint
    def flat_rank(self) -> int:
        return current_rank().rank

    @endpoint
    def coords(self) -> tuple[int, dict[str, int], int, dict[str, int]]:
        own = context().actor_instance.rank
        message = current_rank()
        return own.rank, dict(own), message.rank, dict(message)

    @endpoint
    def actor_name(self) -> str:
        return current_actor_name()

    @endpoint
    def rank_str(self) -> str:
        return str(current_rank())


class Asker(Actor):
    """Receives meshes and value meshes as arguments and uses them from inside an actor."""

    @endpoint
    async def names_of(self, targets: Where) -> list[str]:
        return [await f for f in targets.actor_name.stream()]

    @endpoint
    async def items_of(self, values: ValueMesh[int]) -> list[tuple[int, dict[str, int], int]]:
        return [(point.rank, dict(point), value) for point, value in values]

    @endpoint
    async def call_and_items(
        self, targets: Where
    ) -> tuple[list[tuple[int, dict[str, int], int]], ValueMesh[int]]:
        values = await targets.flat_rank.call()
        return [(point.rank, dict(point), value) for point, value in values], values


class Holder(Actor):
    def __init__(self, value: int) -> None:
        self.value_ = value

    @endpoint
    def value(self) -> int:
        return self.value_

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class ControllerMaker(Actor):
    @endpoint
    async def make(self, name: str, value: int) -> int:
        controller = await get_or_spawn_controller(name, Holder, value)
        return await controller.value.call_one()


@pytest.fixture(scope="module")
def procs23() -> Iterator[ProcMesh]:
    procs = this_host().spawn_procs(per_host={"hosts": 2, "gpus": 3})
    try:
        yield procs
    finally:
        procs.stop().get(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def where23(procs23: ProcMesh) -> Where:
    return procs23.spawn("mesh_where23", Where)


def _item_list(values: ValueMesh[Any]) -> list[tuple[int, dict[str, int], Any]]:
    return [(point.rank, dict(point), value) for point, value in values]


# --- multi-dimensional proc meshes (§4.22, adapted: both dims come from per_host) -------------


def test_proc_mesh_per_host_dims_extent_has_labels_and_sizes(procs23: ProcMesh) -> None:
    assert procs23.extent == Extent(["hosts", "gpus"], [2, 3])
    assert list(procs23.extent.labels) == ["hosts", "gpus"]
    assert list(procs23.extent.sizes) == [2, 3]
    assert procs23.sizes == {"hosts": 2, "gpus": 3}
    assert repr(procs23.extent) == "{hosts: 2, gpus: 3}"


def test_call_on_two_dim_mesh_items_are_row_major(where23: Where) -> None:
    values = where23.flat_rank.call().get(timeout=TIMEOUT)
    assert list(values.extent.labels) == ["hosts", "gpus"]
    assert list(values.extent.sizes) == [2, 3]
    expected = [(i, {"hosts": i // 3, "gpus": i % 3}, i) for i in range(6)]
    assert _item_list(values) == expected


def test_len_counts_all_points_of_proc_and_actor_meshes(procs23: ProcMesh, procs4: Any) -> None:
    assert len(procs23) == 6
    assert len(procs23.slice(hosts=0)) == 3
    actors = procs4.spawn("mesh_len", Where)
    assert len(actors) == 4
    assert len(actors.slice(gpus=slice(0, 2))) == 2
    assert len(actors.slice(gpus=1)) == 1


# --- ValueMesh (§4.9) --------------------------------------------------------------------------


def test_value_mesh_item_and_slice_select_one_value(where23: Where) -> None:
    values = where23.flat_rank.call().get(timeout=TIMEOUT)
    assert values.item(hosts=0, gpus=1) == 1
    assert values.item(hosts=1, gpus=2) == 5
    assert values.slice(hosts=0, gpus=1).item() == 1
    assert list(values.slice(hosts=1).values()) == [3, 4, 5]
    assert values.get(4) == 4
    assert values.size() == 6
    assert values.size("gpus") == 3
    assert values.sizes == {"hosts": 2, "gpus": 3}


def test_value_mesh_item_missing_or_extra_dimension_raises_key_error(where23: Where) -> None:
    values = where23.flat_rank.call().get(timeout=TIMEOUT)
    with pytest.raises(KeyError):
        values.item(hosts=0)
    with pytest.raises(KeyError, match="item has extra dimensions"):
        values.item(hosts=0, gpus=0, nodes=0)


def test_value_mesh_flatten_then_slice_picks_flat_rank(where23: Where) -> None:
    reprs = where23.rank_str.call().get(timeout=TIMEOUT)
    assert reprs.flatten("r").slice(r=1).item() == "{'hosts': 0/2, 'gpus': 1/3}"
    assert reprs.flatten("r").slice(r=0).item() == "{'hosts': 0/2, 'gpus': 0/3}"


def test_value_mesh_passed_to_actor_iterates_same_items(where23: Where, procs2: Any) -> None:
    asker = procs2.spawn("mesh_vm_asker", Asker).slice(gpus=0)
    values = where23.flat_rank.call().get(timeout=TIMEOUT)
    assert asker.items_of.call_one(values).get(timeout=TIMEOUT) == _item_list(values)


def test_value_mesh_computed_by_actor_matches_client_and_pickles_back(
    where23: Where, procs2: Any
) -> None:
    asker = procs2.spawn("mesh_vm_remote_call", Asker).slice(gpus=0)
    client_items = _item_list(where23.flat_rank.call().get(timeout=TIMEOUT))
    remote_items, returned = asker.call_and_items.call_one(where23).get(timeout=TIMEOUT)
    assert remote_items == client_items
    assert isinstance(returned, ValueMesh)
    assert _item_list(returned) == client_items


# --- rank strings (§4.7) -----------------------------------------------------------------------


def test_current_rank_str_within_slice_shows_coord_and_size(where23: Where) -> None:
    sliced = where23.slice(hosts=slice(0, 1), gpus=slice(0, 2))
    reprs = sliced.rank_str.call().get(timeout=TIMEOUT)
    assert reprs.item(hosts=0, gpus=1) == "{'hosts': 0/1, 'gpus': 1/2}"
    assert reprs.item(hosts=0, gpus=0) == "{'hosts': 0/1, 'gpus': 0/2}"


# --- slicing actor meshes (§4.4, §2.5) -----------------------------------------------------------


def test_actor_mesh_integer_slices_are_different_actors(procs2: Any) -> None:
    mesh = procs2.spawn("mesh_int_slices", Where)
    first = mesh.slice(gpus=0)
    second = mesh.slice(gpus=1)
    assert first.actor_name.call_one().get(timeout=TIMEOUT) != second.actor_name.call_one().get(
        timeout=TIMEOUT
    )
    assert first.pid.call_one().get(timeout=TIMEOUT) != second.pid.call_one().get(timeout=TIMEOUT)


def test_actor_mesh_range_slice_message_rank_is_local_spawn_rank_is_global(
    procs4: Any,
) -> None:
    mesh = procs4.spawn("mesh_range_slice", Where)
    replies = mesh.slice(gpus=slice(1, 3)).coords.call().get(timeout=TIMEOUT)
    assert list(replies.values()) == [
        (1, {"gpus": 1}, 0, {"gpus": 0}),
        (2, {"gpus": 2}, 1, {"gpus": 1}),
    ]


def test_actor_mesh_step_slice_selects_every_other_actor(procs4: Any) -> None:
    mesh = procs4.spawn("mesh_step_slice", Where)
    replies = mesh.slice(gpus=slice(0, 4, 2)).coords.call().get(timeout=TIMEOUT)
    assert [own for own, _, _, _ in replies.values()] == [0, 2]
    assert replies.extent == Extent(["gpus"], [2])


def test_actor_mesh_two_dim_slice_keeps_global_spawn_ranks(where23: Where) -> None:
    replies = where23.slice(hosts=1, gpus=slice(1, 3)).coords.call().get(timeout=TIMEOUT)
    assert replies.extent == Extent(["gpus"], [2])
    assert [(own, message) for own, _, message, _ in replies.values()] == [(4, 0), (5, 1)]


def test_actor_mesh_slice_unknown_label_raises_type_error(procs2: Any) -> None:
    mesh = procs2.spawn("mesh_bad_label", Where)
    with pytest.raises(TypeError, match="Shape does not have dimension labeled 'x'"):
        mesh.slice(x=0)


@pytest.mark.parametrize("index", [2, -1])
def test_actor_mesh_slice_bad_index_raises_index_error(procs2: Any, index: int) -> None:
    mesh = procs2.spawn(f"mesh_bad_index_{index + 1}", Where)
    with pytest.raises(IndexError, match="index out of range"):
        mesh.slice(gpus=index)


# --- spawning on a proc-mesh slice (§4.23, adapted) ----------------------------------------------


def test_spawn_on_proc_mesh_slice_places_actors_on_sliced_procs(
    procs23: ProcMesh, where23: Where
) -> None:
    full_pids = list(where23.pid.call().get(timeout=TIMEOUT).values())
    sub_procs = procs23.slice(gpus=slice(1, 3))
    sub = sub_procs.spawn("mesh_on_proc_slice", Where)
    assert len(sub) == 4
    assert sub.extent == Extent(["hosts", "gpus"], [2, 2])
    assert list(sub.pid.call().get(timeout=TIMEOUT).values()) == [
        full_pids[i] for i in (1, 2, 4, 5)
    ]
    replies = list(sub.coords.call().get(timeout=TIMEOUT).values())
    assert [message for _, _, message, _ in replies] == [0, 1, 2, 3]
    # Called on the whole mesh, the spawn coordinates and the message coordinates agree.
    assert [(own, own_point) for own, own_point, _, _ in replies] == [
        (message, message_point) for _, _, message, message_point in replies
    ]


# --- meshes passed to actors (§4.3, §4.4) --------------------------------------------------------


@pytest.mark.parametrize(
    ("targets_fixture", "count"), [("procs2", 2), ("procs4", 4)], ids=["same", "different"]
)
def test_actor_mesh_passed_to_actors_streams_to_every_target(
    procs2: Any, request: pytest.FixtureRequest, targets_fixture: str, count: int
) -> None:
    target_procs = request.getfixturevalue(targets_fixture)
    targets = target_procs.spawn(f"mesh_targets_{targets_fixture}", Where)
    # Another sender may race ahead of __init__; the first call from the spawner settles it.
    expected = sorted(targets.actor_name.call().get(timeout=TIMEOUT).values())
    senders = procs2.spawn(f"mesh_senders_{targets_fixture}", Asker)
    per_sender = list(senders.names_of.call(targets).get(timeout=TIMEOUT).values())
    assert len(per_sender) == 2
    assert sum(len(names) for names in per_sender) == 2 * count
    assert len(set(expected)) == count
    for names in per_sender:
        assert sorted(names) == expected


def test_one_rank_slice_passed_to_actors_reaches_only_that_actor(procs2: Any) -> None:
    targets = procs2.spawn("mesh_one_rank_targets", Where)
    expected = targets.slice(gpus=1).actor_name.call_one().get(timeout=TIMEOUT)
    senders = procs2.spawn("mesh_one_rank_senders", Asker)
    per_sender = list(senders.names_of.call(targets.slice(gpus=1)).get(timeout=TIMEOUT).values())
    assert per_sender == [[expected], [expected]]


# --- process placement (§4.10, §4.15, §4.16) -----------------------------------------------------


def test_this_host_procs_have_distinct_pids_other_than_client(procs4: Any) -> None:
    pids = list(procs4.spawn("mesh_pids", Where).pid.call().get(timeout=TIMEOUT).values())
    assert len(set(pids)) == 4
    assert os.getpid() not in pids


def test_this_proc_actor_runs_in_client_process() -> None:
    mesh = this_proc().spawn("mesh_this_proc", Where)
    assert mesh.pid.call_one().get(timeout=TIMEOUT) == os.getpid()


def test_controller_runs_in_client_process() -> None:
    controller = get_or_spawn_controller("mesh_pid_controller", Holder, 1).get(timeout=TIMEOUT)
    assert controller.pid.call_one().get(timeout=TIMEOUT) == os.getpid()


@pytest.mark.slow
def test_proc_mesh_deleted_reference_keeps_actors_alive() -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 1})
    mesh = procs.spawn("mesh_liveness", Where)
    pid = mesh.pid.call_one().get(timeout=TIMEOUT)
    del procs
    gc.collect()
    # Ownership is the client actor's, not Python's: the proc lives until the client stops it.
    assert mesh.pid.call_one().get(timeout=TIMEOUT) == pid
    os.kill(pid, 0)


# --- controllers (§4.17) -----------------------------------------------------------------------


def test_controller_created_in_controller_endpoint_is_singleton_for_client() -> None:
    maker = get_or_spawn_controller("mesh_maker", ControllerMaker).get(timeout=TIMEOUT)
    assert maker.make.call_one("mesh_inner_controller", 42).get(timeout=TIMEOUT) == 42
    inner = get_or_spawn_controller("mesh_inner_controller", Holder, 7).get(timeout=TIMEOUT)
    # The second lookup found the first controller: its init args are the original ones.
    assert inner.value.call_one().get(timeout=TIMEOUT) == 42
    assert inner.pid.call_one().get(timeout=TIMEOUT) == os.getpid()


def test_controller_created_in_worker_actor_is_singleton_everywhere(procs2: Any) -> None:
    makers = procs2.spawn("mesh_worker_makers", ControllerMaker)
    assert makers.slice(gpus=0).make.call_one("mesh_worker_controller", 5).get(timeout=TIMEOUT) == 5
    assert list(makers.make.call("mesh_worker_controller", 99).get(timeout=TIMEOUT).values()) == [
        5,
        5,
    ]
    controller = get_or_spawn_controller("mesh_worker_controller", Holder, 1).get(timeout=TIMEOUT)
    assert controller.value.call_one().get(timeout=TIMEOUT) == 5
    assert controller.pid.call_one().get(timeout=TIMEOUT) == os.getpid()


@pytest.mark.parametrize(
    ("name", "cls", "args", "error"),
    [
        ("mesh_bad_class", dict, (), ValueError),
        (3, None, (), TypeError),
        ("mesh_bad_args", None, (1, 2, 3), TypeError),
    ],
)
def test_controller_failed_spawn_raises_actor_error_wrapping_the_spawn_error(
    name: Any, cls: Any, args: tuple[Any, ...], error: type[Exception]
) -> None:
    # As torchmonarch's controller-controller call: the spawn's error arrives as an ActorError.
    with pytest.raises(ActorError) as info:
        get_or_spawn_controller(name, cls or Holder, *args).get(timeout=TIMEOUT)
    assert info.value.message == "Actor call controller_controller.get_or_spawn failed."
    assert isinstance(info.value.exception, error)
    # The failed name is not taken: a later lookup with good arguments spawns it.
    if isinstance(name, str):
        controller = get_or_spawn_controller(name, Holder, 4).get(timeout=TIMEOUT)
        assert controller.value.call_one().get(timeout=TIMEOUT) == 4


# -- proc-mesh spawn callbacks, and where the client's context comes from -------------------


def test_spawn_callbacks_see_each_new_proc_mesh_until_unregistered() -> None:
    from monarch._src.actor.proc_mesh import (
        register_proc_mesh_spawn_callback,
        unregister_proc_mesh_spawn_callback,
    )
    from monarch.actor import this_host

    first: list[Any] = []
    second: list[Any] = []
    register_proc_mesh_spawn_callback(first.append)
    register_proc_mesh_spawn_callback(second.append)
    try:
        pm = this_host().spawn_procs(per_host={"procs": 1}, name="watched")
        assert first == [pm] and second == [pm]
    finally:
        unregister_proc_mesh_spawn_callback(first.append)
        unregister_proc_mesh_spawn_callback(second.append)
    later = this_host().spawn_procs(per_host={"procs": 1})
    assert first == [pm]
    with pytest.raises(ValueError, match="is not registered"):
        unregister_proc_mesh_spawn_callback(first.append)
    with pytest.raises(TypeError, match="a callable of one ProcMesh"):
        register_proc_mesh_spawn_callback(42)  # type: ignore[arg-type]
    for mesh in (pm, later):
        mesh.stop().get(timeout=60)


def test_client_context_outside_actors_comes_from_the_client_context_maker() -> None:
    from unittest import mock

    from monarch._src.actor.actor_mesh import _client_context, context

    with mock.patch.object(_client_context, "get", wraps=_client_context.get) as get:
        threads = [threading.Thread(target=context) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert get.call_count == 8
    assert context().actor_instance.name == "root"


class ClientContextProbe(Actor):
    @endpoint
    def client_context_made(self, port: Any) -> bool:
        from monarch._src.actor.actor_mesh import _client_context

        port.send(1)  # a port received and used here binds to this actor, not a client
        return _client_context._val is not None


def test_actors_never_make_a_client_context_in_their_proc() -> None:
    from monarch._src.actor.actor_mesh import _client_context
    from monarch.actor import Channel, this_host

    pm = this_host().spawn_procs(per_host={"procs": 1})
    try:
        probe = pm.spawn("probe", ClientContextProbe)
        send, recv = Channel[int].open()
        assert probe.client_context_made.call_one(send).get(timeout=60) is False
        assert recv.recv().get(timeout=60) == 1
        assert _client_context._val is not None  # the client's own, made by now
    finally:
        pm.stop().get(timeout=60)


def test_native_views_resolve_to_the_meshes_regions_once_up() -> None:
    # torchmonarch's ProcMesh._proc_mesh / HostMesh._hy_host_mesh: tasks resolving to the
    # Rust-side mesh, whose region code reads; here views of the Python meshes.
    from monarch._rust_bindings.monarch_hyperactor.proc_mesh import ProcMesh as HyProcMesh
    from monarch._src.shape import Slice

    host = this_host()
    pm = host.spawn_procs(per_host={"gpus": 2, "x": 3}, name="viewed")
    try:
        assert pm._host_mesh is host
        assert pm._labels == ["gpus", "x"] and host._labels == tuple(host.region.labels)
        native = pm._proc_mesh.block_on()
        assert isinstance(native, HyProcMesh) and native.mesh is pm
        assert native.region.labels == ["gpus", "x"]
        assert native.region.slice() == Slice(offset=0, sizes=[2, 3], strides=[3, 1])
        assert host._hy_host_mesh.block_on().region.slice() == host.region.slice()
    finally:
        pm.stop().get(timeout=60)
