"""The pure statistics on constructed inputs with known answers."""

import math

import numpy as np
import pytest
import torch

from windtunnel import stats


def test_orthogonal_keys_give_zero_and_collinear_give_one():
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((16, 16)))
    assert stats.mean_offdiag_abs_cosine(q[:5] * np.arange(1, 6)[:, None]) == pytest.approx(0, abs=1e-12)
    v = np.random.default_rng(1).standard_normal(16)
    collinear = np.stack([v, -2 * v, 3 * v])
    assert stats.mean_offdiag_abs_cosine(collinear) == pytest.approx(1.0)
    # leading axes are kept: (heads, n, d) -> (heads,)
    both = np.stack([q[:4], collinear[[0, 1, 2, 0]]])
    assert np.allclose(stats.mean_offdiag_abs_cosine(both), [0.0, 1.0])


def test_known_pair_cosines():
    x = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    c = math.sqrt(0.5)
    assert stats.offdiag_abs_cosines(x).tolist() == pytest.approx([c, 0.0, c])
    assert stats.mean_offdiag_abs_cosine(x) == pytest.approx(2 * c / 3)
    with pytest.raises(ValueError):
        stats.mean_offdiag_abs_cosine(x[:1])


def test_gaussian_abs_cosine_matches_sampling():
    d = 32
    x = np.random.default_rng(0).standard_normal((4000, 2, d))
    cos = np.abs((x[:, 0] * x[:, 1]).sum(1) / np.linalg.norm(x[:, 0], axis=1) / np.linalg.norm(x[:, 1], axis=1))
    assert stats.gaussian_abs_cosine(d) == pytest.approx(cos.mean(), rel=0.03)
    assert stats.gaussian_abs_cosine(1000) == pytest.approx(math.sqrt(2 / (math.pi * 1000)), rel=0.01)


@pytest.mark.parametrize("m, d", [(32, 128), (128, 128), (192, 192), (32, 192), (8, 64), (64, 16), (512, 32)])
@pytest.mark.parametrize("centred", [False, True])
def test_random_key_abs_cosine_closed_form_matches_monte_carlo(m, d, centred):
    """The closed form of random keys' E|cos| (per head: m = d_head; whole layer: m = d_model)
    against sampled keys, within 2% plus four standard errors."""
    mc, se = stats.random_key_abs_cosine_mc(m, d, n=20, centred=centred, draws=300, seed=m + d)
    assert stats.random_key_abs_cosine(m, d, n=20, centred=centred) == pytest.approx(mc, abs=0.02 * mc + 4 * se)


def test_random_key_abs_cosine_is_not_the_gaussian_value_of_d_model():
    """The edge that must fail: the whole layer's keys (m = d = 128) are not isotropic Gaussian
    vectors of d_model dimensions (the reference the key-frame page used): their E|cos| is
    that of m d / (m + d + 1) dimensions."""
    mc, se = stats.random_key_abs_cosine_mc(128, 128, n=20, draws=300, seed=1)
    assert abs(stats.gaussian_abs_cosine(128) - mc) > 20 * se
    assert stats.random_key_abs_cosine(128, 128) == pytest.approx(math.sqrt(2 / (math.pi * 128 * 128 / 257)))
    # paper size, whole layer: the paper's random value 0.082
    assert stats.random_key_abs_cosine(192, 192) == pytest.approx(0.0815, abs=5e-4)


def test_key_effective_dim_is_the_sampled_trace_ratio():
    rng = np.random.default_rng(0)
    for m, d in [(32, 128), (96, 48)]:
        s = [w @ w.T for w in rng.standard_normal((400, m, d))]
        ratio = np.mean([np.trace(x) for x in s]) ** 2 / np.mean([np.trace(x @ x) for x in s])
        assert stats.key_effective_dim(m, d) == pytest.approx(ratio, rel=0.01)
    with pytest.raises(ValueError, match="positive"):
        stats.key_effective_dim(0, 4)
    assert stats.random_key_abs_cosine(4, 4, n=2, centred=True) == 1.0  # two centred keys: opposite
    assert stats.random_key_abs_cosine_mc(4, 4, n=2, centred=True, draws=5)[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n >= 2"):
        stats.random_key_abs_cosine(4, 4, n=1, centred=True)


def test_permutation_test():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 200), rng.normal(1, 1, 200)
    r = stats.permutation_test(a, b, n_perm=500, alternative="less")
    assert r["diff"] < 0 and r["p"] == pytest.approx(1 / 501)
    assert stats.permutation_test(a, b, n_perm=500, alternative="greater")["p"] > 0.99
    same = stats.permutation_test(rng.normal(0, 1, 100), rng.normal(0, 1, 100), n_perm=500)
    assert 0 < same["p"] <= 1 and same["p"] > 0.01
    # the same seed gives the same p
    p1, p2 = (stats.permutation_test(a, b, n_perm=200, seed=3)["p"] for _ in range(2))
    assert p1 == p2


def test_monte_carlo_test():
    null = np.linspace(0.0, 1.0, 99)
    r = stats.monte_carlo_test(-1.0, null, alternative="less")
    assert r["p"] == pytest.approx(1 / 100) and r["z"] < 0
    assert stats.monte_carlo_test(0.5, null, alternative="less")["p"] == pytest.approx(51 / 100)


def test_uniform_attention_has_entropy_log2_t_plus_1():
    T = 7
    p = torch.tril(torch.ones(T, T))
    p = (p / p.sum(-1, keepdim=True)).expand(3, 2, T, T)
    h = stats.attention_entropy(p)
    assert torch.allclose(h[0, 0], torch.log2(torch.arange(1, T + 1, dtype=torch.float64)))
    s = stats.attention_entropy_summary(p)
    assert s["normalised"] == pytest.approx(1.0)
    assert s["bits"] == pytest.approx(float(torch.log2(torch.arange(1.0, T + 1)).mean()))
    assert s["uniform_bits"] == pytest.approx(s["bits"])
    rows = [2, 4, 6]
    s = stats.attention_entropy_summary(p, rows)
    assert s["bits_per_head"] == pytest.approx([float(np.mean(np.log2([3, 5, 7])))] * 2)


def test_one_hot_attention_has_zero_entropy():
    T = 5
    p = torch.eye(T).expand(1, 1, T, T)  # every row attends to itself only
    s = stats.attention_entropy_summary(p)
    assert s["bits"] == 0 and s["normalised"] == 0


def test_entropy_is_taken_before_averaging():
    # two heads: one-hot on different positions; the average of their entropies is 0, the
    # entropy of their average row would be 1 bit
    p = torch.zeros(1, 2, 2, 2)
    p[0, :, 0, 0] = 1
    p[0, 0, 1, 0] = 1
    p[0, 1, 1, 1] = 1
    assert stats.attention_entropy_summary(p, [1])["bits"] == 0


def test_js_divergence():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])
    js = stats.js_divergence_bits(p, q)
    assert js[0] == pytest.approx(0.0) and js[1] == pytest.approx(1.0)
    r = torch.rand(4, 6).softmax(-1)
    s = torch.rand(4, 6).softmax(-1)
    assert torch.allclose(stats.js_divergence_bits(r, s), stats.js_divergence_bits(s, r))


def test_mass_by_group_on_a_constructed_pattern():
    p = torch.zeros(1, 1, 4, 4)
    p[0, 0, 3] = torch.tensor([0.1, 0.2, 0.3, 0.4])
    labels = torch.tensor([0, 1, 0, 2])
    m = stats.mass_by_group(p, labels, [3], 3)
    assert m[0, 0, 0].tolist() == pytest.approx([0.4, 0.2, 0.4])
    drop = stats.mass_by_group(p, torch.tensor([0, -1, 0, 1]), [3], 2)
    assert drop[0, 0, 0].tolist() == pytest.approx([0.4, 0.4])


def test_rank_one_cloud_has_pc1_one_hundred_percent():
    rng = np.random.default_rng(0)
    t = rng.standard_normal(300)
    v = rng.standard_normal(12)
    x = t[:, None] * v + 5.0
    for standardize in (False, True):
        s = stats.pca_summary(x, t, standardize=standardize)
        assert s["pc1"] == pytest.approx(1.0) and s["dims_90"] == 1 and s["dims_95"] == 1
        assert s["spearman_pc1"] == pytest.approx(1.0)
        assert s["participation_ratio"] == pytest.approx(1.0)


def test_isotropic_cloud_and_dims():
    x = stats.gaussian_cloud(4000, 10, seed=0)
    s = stats.pca_summary(x, x[:, 0], standardize=True)
    assert s["pc1"] == pytest.approx(0.1, abs=0.02) and s["dims_90"] == 9
    assert stats.dims_for([0.5, 0.3, 0.15, 0.05], 0.9) == 3
    assert stats.dims_for([0.5, 0.4, 0.1], 0.9) == 2
    assert stats.participation_ratio([0.5, 0.5]) == pytest.approx(2.0)


def test_spearman_and_sign():
    x = np.arange(50.0)
    assert stats.spearman(x, x**3) == pytest.approx((1.0, 0.0), abs=1e-12)
    assert stats.spearman(x, -x)[0] == pytest.approx(-1.0)
    assert math.isnan(stats.spearman(x, np.ones(50))[0])
    # PC1's sign is flipped so the reported correlation is >= 0
    y = np.linspace(0, 1, 200)
    s = stats.pca_summary(np.stack([-y, -2 * y], 1), y, standardize=False)
    assert s["spearman_pc1"] == pytest.approx(1.0)


def test_probe_r2_and_controls():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 5))
    y = x @ np.array([1.0, -2.0, 0.5, 0.0, 0.0]) + 3.0
    assert stats.probe_r2(x, y) == pytest.approx(1.0, abs=1e-4)
    assert stats.probe_r2(x, y, shuffle_labels=True) < 0.1
    assert stats.probe_r2(x, rng.standard_normal(600)) < 0.1
    groups = np.repeat(np.arange(60), 10)
    tr, te = stats.split_indices(600, 0.2, seed=1, groups=groups)
    assert not set(groups[tr]) & set(groups[te]) and len(te) == 120
    pos = np.tile(np.arange(10), 60)
    assert stats.category_mean_r2(np.log2(pos + 2.0), pos, groups=groups) == pytest.approx(1.0)
    s = stats.probe_summary(x, y, groups=groups, positions=pos)
    assert s["r2"] > 0.99 and s["r2_position_only"] < 0.2
    assert s["r2"] == stats.probe_r2(x, y, stats.Split(groups=groups))
    # compat.legacy_group: probe_r2(seed=, test_frac=, groups=) builds the Split
    with pytest.warns(DeprecationWarning, match=r"probe_r2\(seed=..., groups=...\) is deprecated; "
                                                r"use probe_r2\(..., Split\(...\)\)"):
        assert stats.probe_r2(x, y, seed=1, groups=groups) == stats.probe_r2(x, y, stats.Split(1, groups=groups))
    with pytest.raises(TypeError, match="not both"):
        stats.probe_r2(x, y, stats.Split(), test_frac=0.3)


def test_kmeans_clusters_and_purity():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    lab = np.repeat([0, 1, 2], 100)
    x = centres[lab] + 0.3 * rng.standard_normal((300, 2))
    s = stats.kmeans_summary(x, 3, lab, seed=0)
    assert s["purity"] == 1.0 and s["silhouette"] > 0.9 and sorted(s["sizes"]) == [100, 100, 100]
    assert s["purity_null"] < 0.5 and s["majority_fraction"] == pytest.approx(1 / 3)
    g = stats.kmeans_summary(stats.gaussian_cloud(300, 2, seed=1), 3, lab, seed=0)
    assert g["silhouette"] < 0.5
    assert stats.purity([0, 0, 1, 1], [5, 5, 5, 6]) == 0.75
    with pytest.raises(ValueError):
        stats.kmeans_summary(x[:3], 3)
    # compat.legacy_group: kmeans_summary(n_init=, silhouette_sample=) builds the KMeansFit
    with pytest.warns(DeprecationWarning, match=r"kmeans_summary\(n_init=..., silhouette_sample=...\) is deprecated"):
        old = stats.kmeans_summary(x, 3, lab, seed=0, n_init=2, silhouette_sample=50)
    assert old == stats.kmeans_summary(x, 3, lab, seed=0, fit=stats.KMeansFit(2, 50))


def test_permutation_test_subsamples_large_samples():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 20000), rng.normal(0.2, 1, 20000)
    r = stats.permutation_test(a, b, n_perm=200, max_n=2000, alternative="less")
    assert r["subsampled"] and r["n_a"] == 2000 and r["diff"] == pytest.approx(a.mean() - b.mean())
    assert r["p"] < 0.01
