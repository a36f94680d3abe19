"""Paper I's comparison on the quick profiles (`paper1-quick`), how its settings were found, and
the score ruler drawn with its measured transport scores."""

from _lib import Context, listed, number

TITLE = "Paper I's comparison (paper1-quick)"
NAV = ""
ORDER = 20
HMM = "hmm_entropy_error_kl_at_k_20_30_50_bits_score"
BIJECTION = "bijection_entropy_error_kl_bits_score"
RECALL = "recall_accuracy_95_ci_score"


def render(ctx: Context) -> str:
    import _plots

    ruler = ctx.figure("ruler", _plots.ruler, ruler_data(ctx.data("seed0")),
                       "The score ruler: 0 is the best baseline, 1 is Bayes; HMM transport scores of paper1-quick, seed 0")
    curves = ctx.curves("hmm-curves", "quick-settings", every=10, unit="% of the run's steps",
                        ylabel="probe KL(Bayes‖model) at K = 20 (bits)")
    return ctx.page(owns=("quick-settings",), figures={"ruler": ruler, "hmm-curves": curves},
                    tables={"findings": findings(ctx.data("seed0"))})


def findings(rec: dict) -> str:
    """The page's opening sentences, from seed 0's table: which architecture realises (✓) and
    partly realises (~) each primitive (the per-position MLP, a control, left out)."""
    from windtunnel.evaluate.record import PARTIAL, REALISED

    models = [r for r in rec["rows"] if isinstance(r[HMM], dict) and "per-position" not in r["model"]]
    said = []
    for primitive, col in (("accumulation (bijection)", BIJECTION), ("transport (HMM)", HMM), ("binding (recall)", RECALL)):
        realised = [r["model"].split(" (")[0] for r in models if number(r[col]["score"]) >= REALISED]
        partly = [r["model"].split(" (")[0] for r in models if PARTIAL <= number(r[col]["score"]) < REALISED]
        said.append(f"{primitive} by {listed(realised) or 'none'}" + (f" (partly by {listed(partly)})" if partly else ""))
    return (f"Paper I's {len(models)} architectures on its three tunnels, at the quick profiles on 2 CPU cores, one "
            f"seed. Realised: " + "; ".join(said) + ". The three-seed table, the score ruler and how the quick "
            "settings were found follow.")


def ruler_data(rec: dict) -> dict:
    """A few of seed 0's scores, spread over the ruler: HMM transport for the transformer, Mamba
    and the LSTM, bijection accumulation for the LSTM, recall binding for Mamba."""
    rows = {r["model"]: r for r in rec["rows"]}
    picks = [("transformer", HMM, "transformer, HMM"), ("mamba", HMM, "Mamba, HMM"), ("lstm", HMM, "LSTM, HMM"),
             ("lstm", BIJECTION, "LSTM, bijection"), ("mlp (flattened prefix)", RECALL, "MLP, recall")]
    return {"title": "The score ruler, with five of paper1-quick's seed-0 scores",
            "points": [[label, number(rows[m][col]["score"])] for m, col, label in picks]}
