"""The tiny sweep the sweep and report tests share: every run trains in well under a second."""

#: every run trains in well under a second
TINY_OVERRIDES = ["train.steps=12", "train.batch_size=8", "train.checkpoints=2", "train.threads=1",
                  "eval.n_sequences=48", "eval.batch_size=48", "eval.n_boot=20"]


def tiny_sweep_doc(**changes):
    doc = {
        "name": "tiny",
        "profile": "quick",
        "overrides": TINY_OVERRIDES,
        "grid": {"train.seed": [0, 1]},
        "paper": "paper1",
        "experiments": [
            {"task": "bijection", "models": ["transformer", "lstm"],
             "overrides": ["task_params.V=6", "task_params.L=5", "model_params.n_layers=1", "model_params.d_model=32"]},
            {"task": "hmm", "models": ["transformer", "mlp"], "grid": {"train.seed": [0]},
             "overrides": ["model_params.n_layers=1", "model_params.d_model=32", "eval.lengths=[30]"]},
        ],
        "primitives": {"rules": {"accumulation": {"experiment": "bijection", "metric": "kl_bayes_model"},
                                 "transport": {"experiment": "hmm", "metric": "kl_bayes_model"}}},
    }
    doc.update(changes)
    return doc


