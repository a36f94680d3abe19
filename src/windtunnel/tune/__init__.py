"""Tuning: the search of a training setting (the learning rate by default) of one architecture on
one wind tunnel, by successive halving over a grid (:mod:`windtunnel.tune.search`), the pure rules
of its comparisons (:mod:`windtunnel.tune.rules`) and its files (:mod:`windtunnel.tune.outputs`)."""
