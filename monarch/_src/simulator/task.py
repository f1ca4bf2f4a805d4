"""Tasks of an event-driven stream simulation: torchmonarch's `monarch.simulator.task`.

A `Task` is one piece of work queued on a worker's stream. It moves PENDING -> READY (every
dependency, the task before it on its stream or a producer elsewhere, has EXECUTED; its start
moves to the latest of their ends) -> EXECUTING (the stream started it) -> EXECUTED. A task that
is part of a collective finishes only once every participant (`collectives`, one list shared by
all of them) is at least executing: they all end together, `runtime` after the last one started.
A task that waits on events (`waits`) finishes no earlier than the last of them. An `EventTask`
is such a wait: a stream waiting for a task recorded on another stream. `WorkerTaskManager`
numbers the live tasks of one worker and clones them, with their links, so a group of workers
that behaved alike can be split into two that go on separately.

This is the scheduler's vocabulary for simulations driven one event at a time. The simulator of
`monarch.simulator.Simulator` does not need it: its workers see their commands in one order, so
`model.py` computes every start and end in a single pass instead.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import itertools
import traceback
from collections.abc import Iterator, Sequence

__all__ = ["Borrow", "EventTask", "Task", "TaskState", "WorkerTaskManager"]


class TaskState(enum.Enum):
    PENDING = enum.auto()
    READY = enum.auto()
    EXECUTING = enum.auto()
    EXECUTED = enum.auto()


def _tagged(meta: Sequence[str]) -> list[str]:
    """`meta` plus the active `set_meta()` value, as the simulator tags its tasks."""
    from monarch._src.simulator.backend import current_tag

    tag = current_tag()
    return [*meta, *([] if tag is None else [str(tag)])]


class Task:
    """One piece of work on a stream (times in the caller's unit, e.g. nanoseconds)."""

    def __init__(self, inputs: list[int], outputs: list[int], command_id: int,
                 start_time: int, runtime: int, meta: list[str],
                 collectives: list[Task] | None = None, waits: list[Task] | None = None,
                 traceback: Sequence[traceback.FrameSummary] = ()) -> None:
        self.inputs = inputs  # ids of the tensors read
        self.outputs = outputs  # ids of the tensors written
        self.command_id = command_id
        self.start_time = start_time  # earliest start; moved later by the dependencies
        self.end_time = 0  # set when the task finishes
        self.runtime = runtime
        self.meta = _tagged(meta)
        self.traceback = traceback
        self.dependencies: list[Task] = []  # tasks that must have EXECUTED before this starts
        # Every participant of this task's collective (this one included; shared by all).
        self.collectives = collectives
        self.waits = waits  # tasks whose end this one cannot finish before
        if collectives is not None:
            collectives.append(self)
        self._state = TaskState.PENDING
        self.task_id: int | None = None  # given by the worker's WorkerTaskManager

    def __repr__(self) -> str:
        return " ".join(self.meta)

    @property
    def state(self) -> TaskState:
        return self._state

    def maybe_set_ready(self) -> bool:
        """PENDING -> READY once every dependency executed; True when the state changed."""
        if self._state is not TaskState.PENDING:
            return False
        if any(d.state is not TaskState.EXECUTED for d in self.dependencies):
            return False
        self.start_time = max([self.start_time, *(d.end_time for d in self.dependencies)])
        self._state = TaskState.READY
        return True

    def maybe_execute(self) -> bool:
        """READY -> EXECUTING; True when the state changed."""
        if self._state is not TaskState.READY:
            return False
        self._state = TaskState.EXECUTING
        return True

    def maybe_finish(self) -> bool:
        """EXECUTING -> EXECUTED once every collective peer started and every wait ended;
        True when the state changed (`end_time` is then set)."""
        if self._state is not TaskState.EXECUTING:
            return False
        peers = self.collectives or []
        if any(p.state not in (TaskState.EXECUTING, TaskState.EXECUTED) for p in peers):
            return False
        waits = self.waits or []
        if any(w.state is not TaskState.EXECUTED for w in waits):
            return False
        end = self.start_time + self.runtime
        if peers:  # all participants end together, after the straggler
            end = max(end, max(p.start_time for p in peers) + self.runtime)
        if waits:
            end = max(end, max(w.end_time for w in waits))
        self.end_time = end
        self._state = TaskState.EXECUTED
        return True

    def clone(self) -> Task:
        """A shallow copy (the same lists of dependencies, peers and waits)."""
        return copy.copy(self)


@dataclasses.dataclass
class Borrow:
    """A tensor lent from one stream to another."""

    ident: int
    tensor_src_id: int
    tensor_dst_id: int
    from_stream: int
    to_stream: int


class EventTask(Task):
    """A stream waiting for `recorded_task` of another stream (a CUDA event wait)."""

    def __init__(self, recorded_task: Task, event_stream: int, event_stream_name: str,
                 wait_stream: int, wait_stream_name: str, start_time: int, command_id: int,
                 runtime: int = 1, borrow: Borrow | None = None,
                 traceback: Sequence[traceback.FrameSummary] = ()) -> None:
        super().__init__([], [], command_id, start_time, runtime,
                         ["waiting for", event_stream_name], waits=[recorded_task],
                         traceback=traceback)
        self.event_stream = event_stream
        self.event_stream_name = event_stream_name
        self.wait_stream = wait_stream
        self.wait_stream_name = wait_stream_name
        self.borrow = borrow


class WorkerTaskManager:
    """The live (not yet removed) tasks of one worker, by the id this manager gave them."""

    def __init__(self) -> None:
        self.tasks: dict[int, Task] = {}
        self.task_id: Iterator[int] = itertools.count()

    def add(self, task: Task) -> int:
        """Give `task` the next id and hold it; returns the id."""
        task_id = next(self.task_id)
        self.tasks[task_id] = task
        task.task_id = task_id
        return task_id

    def remove(self, task: Task) -> None:
        """Forget `task` (it executed)."""
        if task.task_id is None or task.task_id not in self.tasks:
            raise ValueError(
                f"WorkerTaskManager.remove: task {task!r} is not held by this manager (add it "
                "first; a task is removed once)."
            )
        del self.tasks[task.task_id]

    def clone(self) -> WorkerTaskManager:
        """A copy of every held task, linked to the copies of the tasks it depends on and waits
        for (tasks already removed, which must have executed, are copied unlinked). Each copy
        joins its original's collective, as one more participant. Both managers then hand out
        the same ids."""
        copies: dict[int, Task] = {}

        def relink(owner: Task, task: Task) -> Task:
            if task.task_id is not None and task.task_id in copies:
                return copies[task.task_id]
            if task.state is not TaskState.EXECUTED:
                raise ValueError(
                    f"WorkerTaskManager.clone: task {owner!r} is linked to task {task!r}, which "
                    "is neither held by this manager nor executed; add every pending task."
                )
            return task.clone()

        for task_id, task in self.tasks.items():  # in id order: links point to earlier ids
            twin = task.clone()
            copies[task_id] = twin
            twin.dependencies = [relink(task, d) for d in task.dependencies]
            if task.waits is not None:
                twin.waits = [relink(task, w) for w in task.waits]
            if twin.collectives is not None:
                twin.collectives.append(twin)
        other = WorkerTaskManager()
        next_id = next(self.task_id)
        self.task_id = itertools.count(next_id)
        other.task_id = itertools.count(next_id)
        other.tasks = copies
        return other
