"""Users' own tasks for tests/tasks/test_task_contract.py, loaded as ``user_tunnels:Class``
(this folder is on sys.path when pytest runs the tests here): one that keeps the contract,
and one per rule broken."""

import torch

from windtunnel.tasks import Task, TaskConfig
from windtunnel.tasks.hmm import HMMTask


class CoinHMM(HMMTask):
    """A built-in tunnel under another name: keeps the contract, and takes hmm's profile."""

    name = "coin_hmm"


class NotATask:
    pass


class NoSample(Task):
    Config = TaskConfig


class NoConfig(HMMTask):
    Config = dict


class Unnormalised(HMMTask):
    def sample(self, n, generator):
        batch = super().sample(n, generator)
        batch.probs = batch.probs * 0.5
        return batch


class NatsEntropy(HMMTask):
    def sample(self, n, generator):
        batch = super().sample(n, generator)
        batch.entropy = batch.entropy * 0.6931471805599453
        return batch


class ShortTarget(HMMTask):
    def sample(self, n, generator):
        batch = super().sample(n, generator)
        batch.target = batch.target[:, :-1]
        return batch


class GlobalRandom(HMMTask):
    """Draws from the global RNG, not the generator it is given."""

    def sample(self, n, generator):
        return super().sample(n, torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()))))


class NotABatch(HMMTask):
    def sample(self, n, generator):
        return {"inputs": super().sample(n, generator).inputs}


class Cached(HMMTask):
    """Loaded by one test only, which counts the checks."""
