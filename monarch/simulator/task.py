"""torchmonarch's `monarch.simulator.task`: tasks of an event-driven stream simulation and a
worker's task manager. See `monarch._src.simulator.task`."""

from monarch._src.simulator.task import Borrow, EventTask, Task, TaskState, WorkerTaskManager

__all__ = ["Borrow", "EventTask", "Task", "TaskState", "WorkerTaskManager"]
