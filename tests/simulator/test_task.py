"""The event-driven task vocabulary (`monarch.simulator.task`): state changes, collectives
ending together, waits, and cloning a worker's tasks with their links."""

from __future__ import annotations

import pytest

from monarch.simulator import set_meta
from monarch.simulator.task import EventTask, Task, TaskState, WorkerTaskManager

pytestmark = pytest.mark.timeout(30)


def task(start: int = 0, runtime: int = 10, **kw: object) -> Task:
    return Task([], [], 0, start, runtime, ["op"], **kw)  # type: ignore[arg-type]


def run(t: Task) -> bool:
    return t.maybe_set_ready() and t.maybe_execute() and t.maybe_finish()


def test_a_task_starts_after_its_dependencies_end() -> None:
    first, second = task(start=5), task(start=0)
    second.dependencies.append(first)
    assert not second.maybe_set_ready()  # first has not executed
    assert run(first) and first.end_time == 15
    assert run(second) and (second.start_time, second.end_time) == (15, 25)
    assert not second.maybe_execute()  # each change happens once


def test_collective_peers_end_together_after_the_straggler() -> None:
    peers: list[Task] = []
    early, late = task(start=0, collectives=peers), task(start=30, collectives=peers)
    assert early.maybe_set_ready() and early.maybe_execute()
    assert not early.maybe_finish()  # the other participant has not started
    assert late.maybe_set_ready() and late.maybe_execute()
    assert early.maybe_finish() and late.maybe_finish()
    assert early.end_time == late.end_time == 40


def test_an_event_wait_ends_no_earlier_than_what_it_waits_for() -> None:
    recorded = task(start=0, runtime=50)
    wait = EventTask(recorded, 1, "other", 0, "main", start_time=0, command_id=2)
    assert wait.maybe_set_ready() and wait.maybe_execute() and not wait.maybe_finish()
    assert run(recorded) and wait.maybe_finish() and wait.end_time == 50
    assert repr(wait) == "waiting for other"


def test_set_meta_tags_new_tasks() -> None:
    with set_meta("fwd"):
        assert task().meta == ["op", "fwd"]
    assert task().meta == ["op"]


def test_a_clone_relinks_held_tasks_and_joins_collectives() -> None:
    manager = WorkerTaskManager()
    done, pending = task(), task()
    assert run(done)
    peers: list[Task] = []
    manager.add(done)
    manager.remove(done)
    manager.add(pending)
    follower = task(collectives=peers)
    follower.dependencies = [pending, done]
    manager.add(follower)
    twin = manager.clone()
    copy = twin.tasks[follower.task_id]  # type: ignore[index]
    assert copy is not follower and copy.dependencies[0] is twin.tasks[pending.task_id]  # type: ignore[index]
    assert copy.dependencies[1] is not done and copy.dependencies[1].state is TaskState.EXECUTED
    assert peers == [follower, copy]
    assert manager.add(task()) == twin.add(task())  # both go on with the same ids
    with pytest.raises(ValueError, match="not held by this manager"):
        manager.remove(done)


def test_cloning_a_task_linked_to_an_unheld_pending_task_is_refused() -> None:
    manager = WorkerTaskManager()
    t = task()
    t.dependencies = [task()]
    manager.add(t)
    with pytest.raises(ValueError, match="neither held by this manager nor executed"):
        manager.clone()
