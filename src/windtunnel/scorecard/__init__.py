"""The primitive scorecard of one architecture: its request and run (:mod:`windtunnel.scorecard.score`),
the pre-flight that sizes the model on every tunnel (:mod:`windtunnel.scorecard.preflight`), the
reference transformer's results (:mod:`windtunnel.scorecard.reference`) and the scorecard's
document (:mod:`windtunnel.scorecard.document`). The tunnels, the primitives and the budgets the
scorecard shares with the searches are :mod:`windtunnel.sweep.primitives`'."""
