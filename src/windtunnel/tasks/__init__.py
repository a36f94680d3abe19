"""Wind tunnels: sequence tasks whose exact posterior is known at every position."""

from windtunnel.tasks.base import (  # noqa: F401
    TASKS,
    Batch,
    HypothesisSpace,
    Prediction,
    Task,
    TaskConfig,
    TaskSpec,
    make_generator,
    make_task,
    register_task,
    stream_seed,
    task_class,
    task_names,
)
from windtunnel.tasks.contract import check_task

# a user's own wind tunnel, named package.module:Class wherever a task name goes, is loaded by
# the registry and checked against the Task contract once (the contract samples from a task, so
# it sits above base.py, which holds the registry: the two meet here)
TASKS.base, TASKS.check, TASKS.guide = Task, check_task, "see docs/tasks.md, 'Your own task'"

# the built-in wind tunnels register themselves on import
from windtunnel.tasks import (  # noqa: E402,F401
    bijection,
    changepoint,  # noqa: E402,F401
    dirichlet,  # noqa: E402,F401
    hmm,
    kalman,  # noqa: E402,F401
    recall,
    regression,
    sula,
)
