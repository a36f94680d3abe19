"""A briefly trained 2-layer transformer on the bijection: the diagnostics run end to end and
differ from their nulls in the directions measured on such models (about 10 s of training).

Measured on seeds 0-2 (600 steps, V = 10, 2 layers x 2 heads, d 64; entropy error ~0.08 bits):
layer-0 attention entropy drops ~0.7 bits below step 0; the last layer's attention output
has standardised PC1 0.50-0.59 (step 0: 0.17-0.25, Gaussian: ~0.02) and |Spearman(PC1, H)|
0.85-0.96 (step 0: 0.64-0.71); the logit-lens KL of the last layer is ~0.02 bits against
~0.91 at step 0; the layer-0 keys of the key tokens are far *less* orthogonal than random
(|cos| ~0.97 against ~0.17): these small models do not form the paper's orthogonal frame.
"""

import pytest

from windtunnel.geometry import run_diagnostics
from windtunnel.train.config import RunConfig
from windtunnel.train.trainer import train


@pytest.mark.slow
def test_trained_bijection_transformer_differs_from_nulls(tmp_path):
    cfg = RunConfig.build({
        "task": "bijection", "task_params": {"V": 10, "L": 9}, "model": "transformer",
        "model_params": {"n_layers": 2, "n_heads": 2, "d_model": 64},
        "train": {"steps": 600, "batch_size": 64, "lr": 2e-3, "schedule": "cosine", "warmup": 50, "checkpoints": 6},
        "eval": {"n_sequences": 256, "n_boot": 50},
    })
    res = train(cfg, tmp_path / "run", progress=False)
    assert res.eval["lengths"]["9"]["entropy_error_mean_abs"]["value"] < 0.2
    doc = run_diagnostics(res.run_dir, n_sequences=128, progress=False)
    r = doc["results"]
    assert doc["skipped"].keys() == {"recurrent", "filter_probe"}

    # attention focuses: layer-0 entropy at the scored rows well below step 0 (CI excludes 0)
    a0 = r["attention"]["layers"][0]
    assert a0["diff_vs_init"]["hi"] < -0.3
    assert a0["scored"]["bits"] < a0["init_scored"]["bits"] < a0["scored"]["uniform_bits"] + 1e-6

    # value manifold: the last attention output is nearly one-dimensional and entropy-ordered
    vm = r["value_manifold"]["representations"]["attn_out.1"]
    t, i, g = vm["trained"]["standardized"], vm["init"]["standardized"], vm["gaussian"]["standardized"]
    assert t["pc1"] > 0.4 and t["pc1"] > 1.5 * i["pc1"] and t["pc1"] > 10 * g["pc1"]
    assert t["spearman_pc1"] > 0.75 and t["spearman_pc1"] > i["spearman_pc1"]
    last = r["value_manifold"]["representations"]["blocks.1.resid_post"]
    assert last["trained"]["standardized"]["pc1"] > last["init"]["standardized"]["pc1"]

    # logit lens: each layer closer to Bayes than at step 0, the last one by far
    lens, lens0 = r["logit_lens"]["layers"], r["logit_lens"]["init_layers"]
    assert lens[-1]["kl_bayes_model"] < 0.1 < 0.5 < lens0[-1]["kl_bayes_model"]
    assert lens[-1]["kl_bayes_model"] < lens[1]["kl_bayes_model"] < lens[0]["kl_bayes_model"]
    assert r["logit_lens"]["baselines"]["uniform"]["kl_bayes_model"] > 10 * lens[-1]["kl_bayes_model"]

    # ablations: the frame head (a layer-0 head) does real damage; bypassing block 0 more
    ab = r["ablation"]
    fh = next(h for h in ab["heads"] if h["name"] == ab["frame_head"]["name"])
    assert fh["layer"] == 0 and fh["delta_lo"] > 0.05 and fh["significant"]
    l0 = next(b for b in ab["blocks"] if b["name"] == "L0.block")
    assert l0["ratio"] > 5

    # key frame: trained keys differ from step 0 (here: less orthogonal than random)
    k0 = r["key_frame"]["variants"]["tokens_raw"]["layers"][0]
    assert k0["test_vs_init"]["p"] < 0.01 and k0["mean"] > k0["random_mean"]

    # dynamics: attention converges to the final maps while the error falls
    dyn = r["dynamics"]["series"]
    assert dyn["attention_js"][0] > 0.05 and dyn["attention_js"][-1] == pytest.approx(0, abs=1e-9)
    assert dyn["entropy_error"][-1] < 0.2 * dyn["entropy_error"][0]
