"""Tuning: the search of a training setting (the learning rate by default) of one architecture on
one wind tunnel, by successive halving over a grid (:mod:`windtunnel.tune.search`), what it is asked
to do (:mod:`windtunnel.tune.settings`: the spec and the settings a user chooses;
:mod:`windtunnel.tune.request`: a ``windtunnel tune`` call), its candidates and result
(:mod:`windtunnel.tune.candidates`), the pure rules of its comparisons (:mod:`windtunnel.tune.rules`)
and its files (:mod:`windtunnel.tune.outputs`)."""
