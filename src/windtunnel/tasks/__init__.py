"""Wind tunnels: sequence tasks whose exact posterior is known at every position."""

from windtunnel.tasks.base import (  # noqa: F401
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

# the built-in wind tunnels register themselves on import
from windtunnel.tasks import bijection, hmm, recall, regression, sula  # noqa: E402,F401
from windtunnel.tasks import dirichlet  # noqa: E402,F401
from windtunnel.tasks import changepoint  # noqa: E402,F401
from windtunnel.tasks import kalman  # noqa: E402,F401
