"""Paper I's geometric claims: each rule on hand-built analysis results, at and around its thresholds."""

import pytest

from windtunnel.geometry import claims


def manifold(pc1, rho, pc1_0=0.2):
    return {"most_one_dimensional": {"name": "final", "pc1": pc1, "spearman_pc1": rho, "init_pc1": pc1_0}}


@pytest.mark.parametrize("pc1,rho,verdict", [(0.85, -0.9, claims.HOLDS), (0.79, 0.9, claims.PARTLY),
                                             (0.85, 0.6, claims.PARTLY), (0.15, 0.9, claims.NO),
                                             (0.5, 0.3, claims.NO)])
def test_value_manifold(pc1, rho, verdict):
    measured, got = claims.value_manifold(manifold(pc1, rho))
    assert got == verdict and f"PC1 {100 * pc1:.1f}%" in measured


def attention(bits, his, uniform=4.0):
    return {"layers": [{"scored": {"bits": b}, "diff_vs_init": {"hi": h}} for b, h in zip(bits, his)],
            "reduction_first_to_last": 1 - bits[-1] / bits[0], "uniform_bits_scored": uniform}


def test_attention_focusing():
    assert claims.attention_focusing(attention([3.0, 2.0, 1.0], [-0.1, -0.5, -1.0]))[1] == claims.HOLDS
    # sharper than step 0 in the middle only, and the last layer not lower than the first
    assert claims.attention_focusing(attention([3.0, 2.0, 3.0], [0.1, -0.5, 0.2]))[1] == claims.PARTLY
    assert claims.attention_focusing(attention([3.0, 2.8], [0.1, 0.2]))[1] == claims.NO
    assert "3.00 → 2.00 → 1.00 bits" in claims.attention_focusing(attention([3.0, 2.0, 1.0], [-0.1, -0.5, -1.0]))[0]


def recurrent(purity, null):
    return {"k": 5, "trained": {"clusters": {"purity": purity, "purity_null": null}, "probe": {"r2": 0.3}},
            "init": {"clusters": {"purity": 0.25}}}


@pytest.mark.parametrize("purity,null,verdict", [(0.9, 0.22, claims.HOLDS), (0.4, 0.22, claims.PARTLY),
                                                 (0.3, 0.22, claims.NO)])
def test_mamba_clusters(purity, null, verdict):
    assert claims.mamba_clusters(recurrent(purity, null))[1] == verdict


def ablation(r20, r50):
    return {"hmm_top_attention": {"layers": [2, 3], "lengths": {"20": {"ratio": r20}, "50": {"ratio": r50}}}}


def test_top_attention_length():
    assert claims.top_attention_length(ablation(2.0, 62.0))[1] == claims.HOLDS
    assert claims.top_attention_length(ablation(2.0, 3.0))[1] == claims.PARTLY
    assert claims.top_attention_length(ablation(3.0, 2.0))[1] == claims.NO
    assert claims.top_attention_length({})[1] == claims.NO


def keys(mean, random=0.16, p=0.01, centred=0.2):
    layer = lambda m: {"mean": m, "random_mean": random, "init_mean": 0.16, "test_vs_random": {"p": p}}
    return {"tokens": "the 20 key tokens", "variants": {"tokens_raw": {"layers": [layer(mean)]},
                                                       "tokens_centred": {"layers": [layer(centred)]}}}


@pytest.mark.parametrize("mean,p,verdict", [(0.09, 0.005, claims.HOLDS), (0.12, 0.005, claims.PARTLY),
                                            (0.09, 0.2, claims.NO), (0.98, 1.0, claims.NO)])
def test_key_frame(mean, p, verdict):
    measured, got = claims.key_frame(keys(mean, p=p))  # the paper's level: 0.052 / 0.082 * 0.16 = 0.101
    assert got == verdict and f"mean |cos| {mean:.3f} (random 0.160" in measured and "docs/results/keyframe.md" in measured


@pytest.mark.parametrize("mean,centred,shared", [(0.98, 0.19, True), (0.98, 0.60, False), (0.20, 0.16, False)])
def test_key_frame_names_a_shared_direction(mean, centred, shared):
    measured, _ = claims.key_frame(keys(mean, p=1.0, centred=centred))  # random 0.16 for both variants
    assert ("a direction all the keys share" in measured) == shared and f"centred {centred:.3f}, random 0.160" in measured


def heads(top_ratio, runner_ratio):
    return {"frame_head": {"name": "L0H2", "ratio_to_second": runner_ratio, "n_heads_at_least_half": 1},
            "heads": [{"name": "L0H1", "ratio": 1.1}, {"name": "L0H2", "ratio": top_ratio}]}


@pytest.mark.parametrize("top,runner,verdict", [(3.0, 2.5, claims.HOLDS), (1.2, 2.74, claims.PARTLY),
                                                (3.0, 1.15, claims.NO)])
def test_frame_head(top, runner, verdict):
    measured, got = claims.frame_head(heads(top, runner))
    assert got == verdict and measured.startswith(f"top head L0H2: error ×{top:.2f}")


def test_check_reads_only_the_diagnosed_runs():
    rows = claims.check({("hmm", "mamba"): {"recurrent": recurrent(0.9, 0.2)},
                         ("hmm", "transformer"): {"value_manifold": manifold(0.9, 0.9)}})
    assert [(r["claim"], r["verdict"]) for r in rows] == [("HMM value manifold", claims.HOLDS),
                                                          ("Mamba's five clusters on HMM", claims.HOLDS)]
