"""run_diagnostics end to end on tiny freshly trained runs, its files, and bad input."""

import json
import shutil

import pytest

from windtunnel.config import ConfigError
from windtunnel.geometry import ANALYSES, run_diagnostics
from windtunnel.geometry.diagnose import parse_analyses
from windtunnel.train.checkpoint import CheckpointError


def strict_json(path):
    def no_nan(x):
        raise ValueError(f"non-standard JSON number {x}")

    return json.loads(path.read_text(), parse_constant=no_nan)


def test_transformer_end_to_end(trained):
    run = trained("bij")
    doc = run_diagnostics(run, n_sequences=24, progress=False)
    assert doc["analyses_run"] == [a for a in ANALYSES if a not in ("recurrent", "filter_probe")]
    assert doc["skipped"].keys() == {"recurrent", "filter_probe"}
    assert doc["skipped"]["recurrent"] == "no recurrent state (model.has_recurrent_state is False)"
    assert strict_json(run / "diagnostics.json") == doc
    md = (run / "diagnostics.md").read_text()
    for title in ("Key frame", "Attention focusing", "Value manifold", "Ablations", "Logit lens",
                  "Frame-precision dissociation", "Skipped"):
        assert f"## {title}" in md
    for p in doc["plots"]:
        assert (run / p).is_file() and (run / p).stat().st_size > 1000
    names = {p.split("/")[-1] for p in doc["plots"]}
    assert {"key_frame.png", "attention_entropy.png", "value_manifold_pca.png", "ablation.png", "logit_lens.png",
            "dynamics.png"} <= names
    r = doc["results"]
    assert doc["init_weights"] == "checkpoint step 0"
    # key frame: per layer and head, with both nulls and both tests
    layer0 = r["key_frame"]["variants"]["tokens_raw"]["layers"][0]
    assert len(layer0["per_head"]) == 2 and 0 <= layer0["mean"] <= 1
    assert 0 < layer0["test_vs_random"]["p"] <= 1 and 0 < layer0["test_vs_init"]["p"] <= 1
    assert "value_tokens_raw" in r["key_frame"]["variants"]
    # attention: uniform reference is log2(t + 1) averaged over the scored rows t = 0, 2, .., 8
    import math

    assert r["attention"]["uniform_bits_scored"] == pytest.approx(sum(math.log2(t + 1) for t in (0, 2, 4, 6, 8)) / 5)
    assert len(r["attention"]["layers"]) == 2 and "bijection_mass" in r["attention"]
    # ablation: every head and every block, each with a CI
    assert len(r["ablation"]["heads"]) == 4 and len(r["ablation"]["blocks"]) == 6
    assert r["ablation"]["frame_head"]["name"] in {h["name"] for h in r["ablation"]["heads"]}
    # logit lens: the last layer through the final norm and head is the model's own output
    last = r["logit_lens"]["layers"][-1]
    assert last["kl_bayes_model"] == pytest.approx(r["logit_lens"]["model_output"]["kl_bayes_model"], rel=1e-5)
    # ablation baseline, lens and dynamics agree on the final model's error on the same batch
    assert r["ablation"]["baseline"]["entropy_error"] == pytest.approx(last["entropy_error"], rel=1e-5)
    assert r["dynamics"]["series"]["entropy_error"][-1] == pytest.approx(last["entropy_error"], rel=1e-5)
    assert r["dynamics"]["steps"][0] == 0 and r["dynamics"]["series"]["attention_js"][-1] == pytest.approx(0, abs=1e-9)
    vm = r["value_manifold"]["representations"]
    assert set(vm) >= {"embed", "blocks.0.resid_post", "blocks.1.resid_post", "final", "attn_out.0", "attn_out.1"}
    assert vm["final"]["trained"]["probe"]["r2_position_only"] == pytest.approx(1.0)  # H_Bayes is a function of k


def test_selected_analyses_only(trained):
    run = trained("bij")
    doc = run_diagnostics(run, analyses=["key_frame", "logit_lens"], n_sequences=8, progress=False)
    assert list(doc["results"]) == ["key_frame", "logit_lens"] and doc["skipped"] == {}
    assert parse_analyses("attention, ablation") == ["attention", "ablation"]


def test_lstm_gets_recurrent_geometry_and_skips_attention(trained):
    run = trained("lstm", model="lstm", model_params={"n_layers": 2, "d_model": 16})
    doc = run_diagnostics(run, n_sequences=24, progress=False)
    assert doc["analyses_run"] == ["value_manifold", "logit_lens", "dynamics", "recurrent"]
    assert set(doc["skipped"]) == {"key_frame", "attention", "ablation", "filter_probe"}
    rec = doc["results"]["recurrent"]
    assert rec["k"] == 6 and "clusters" in rec["trained"] and "probe_per_layer" in rec["trained"]
    assert (run / "plots" / "geometry" / "recurrent_pca.png").is_file()
    with pytest.raises(ConfigError, match="attention.*does not apply.*lstm"):
        run_diagnostics(run, analyses=["attention"], progress=False)


def test_hmm_mamba_clusters_by_hidden_state(trained):
    run = trained("hmm_mamba", task="hmm", task_params={"S": 3, "O": 3, "K": 6}, model="mamba",
                  model_params={"n_layers": 1, "d_model": 16})
    doc = run_diagnostics(run, analyses=["recurrent", "logit_lens"], n_sequences=24, progress=False)
    rec = doc["results"]["recurrent"]
    assert rec["k"] == 3 and "hidden state" in rec["labels"]
    c = rec["trained"]["clusters"]
    assert sum(c["sizes"]) == 24 * 6 and 0 < c["purity"] <= 1


def test_hmm_transformer_top_layer_attention_ablation(trained):
    run = trained("hmm_tf", task="hmm", task_params={"S": 3, "O": 3, "K": 6}, lengths=[50])
    doc = run_diagnostics(run, analyses=["ablation"], n_sequences=8, progress=False)
    h = doc["results"]["ablation"]["hmm_top_attention"]
    assert h["layers"] == [0, 1] and set(h["lengths"]) == {"6", "50"}
    assert all("entropy_error" in v for v in h["lengths"].values())


def test_bad_input(trained, tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        run_diagnostics(tmp_path / "missing", progress=False)
    with pytest.raises(ConfigError, match="no config.json"):
        run_diagnostics(tmp_path, progress=False)
    run = trained("bij")
    with pytest.raises(ConfigError, match="unknown analysis 'keyframe'.*key_frame"):
        run_diagnostics(run, analyses=["keyframe"], progress=False)
    with pytest.raises(ConfigError, match="recurrent.*does not apply"):
        run_diagnostics(run, analyses=["recurrent"], progress=False)
    with pytest.raises(ConfigError, match="n_sequences"):
        run_diagnostics(run, n_sequences=1, progress=False)
    with pytest.raises(ConfigError, match="empty"):
        run_diagnostics(run, analyses=[], progress=False)
    empty = tmp_path / "empty_run"
    empty.mkdir()
    shutil.copy(run / "config.json", empty / "config.json")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        run_diagnostics(empty, progress=False)


def test_dynamics_needs_two_checkpoints(trained, tmp_path):
    run = trained("bij")
    one = tmp_path / "one"
    shutil.copytree(run, one)
    for p in sorted((one / "checkpoints").iterdir())[:-1]:
        shutil.rmtree(p)
    doc = run_diagnostics(one, analyses=None, n_sequences=8, progress=False)
    assert "dynamics" in doc["skipped"] and "re-initialised" in doc["init_weights"]
    with pytest.raises(ConfigError, match="two checkpoints"):
        run_diagnostics(one, analyses=["dynamics"], progress=False)


@pytest.mark.parametrize("task, task_params, model, model_params, skipped", [
    ("regression", {"d": 2, "n_points": 4}, "transformer", None, {"key_frame", "recurrent", "filter_probe"}),
    ("sula", {"k": 4, "n_words": 8}, "transformer", {"n_layers": 1, "n_heads": 2, "d_model": 16},
     {"recurrent", "filter_probe"}),
    ("sula", {"k": 4, "n_words": 8}, "mlp", {"variant": "prefix", "n_layers": 2, "width": 16, "d_embed": 4},
     {"key_frame", "attention", "ablation", "recurrent", "filter_probe"}),
], ids=["regression-transformer", "sula-transformer", "sula-mlp-prefix"])
def test_other_tasks_and_architectures(trained, task, task_params, model, model_params, skipped):
    run = trained(f"{task}-{model}", task=task, task_params=task_params, model=model, model_params=model_params)
    doc = run_diagnostics(run, n_sequences=16, progress=False)
    assert set(doc["skipped"]) == skipped
    assert strict_json(run / "diagnostics.json") == doc


def test_a_new_analysis_is_one_record(trained):
    """Registering one Analysis record is enough: it is a known name, runs (with the captured
    activations it asked for), gets its markdown section under its title, and its plot is drawn."""
    from windtunnel.analysis import Analysis
    from windtunnel.figures import plt, save_figure
    from windtunnel.geometry.diagnose import REGISTRY

    def run(ctx):
        return {"n_points": int(ctx.acts("final").states["final"].shape[:2].numel()),
                "mean_h_bayes": float(ctx.h_bayes.mean())}

    def plot(res, doc, out):
        assert doc["results"]["toy"] is res and doc["task"] == "bijection"  # the whole document beside the result
        fig, ax = plt.subplots()
        ax.bar([0], [res["mean_h_bayes"]])
        return [save_figure(fig, out / "toy.png")]

    toy = Analysis(name="toy", title="A toy analysis", applies=lambda ctx: None, run=run,
                   markdown=lambda r, doc: [f"Toy: {r['n_points']} points, mean H_Bayes {r['mean_h_bayes']:.3f} bits."],
                   plot=plot, needs_activations=True)
    run_dir = trained("bij")
    REGISTRY.register(toy)
    try:
        assert REGISTRY.names()[-1] == "toy" and parse_analyses("toy,key_frame") == ["toy", "key_frame"]
        doc = run_diagnostics(run_dir, analyses=["toy"], n_sequences=8, progress=False)
    finally:
        REGISTRY.unregister("toy")
    assert "toy" not in REGISTRY.names() and tuple(REGISTRY.names()) == ANALYSES
    assert doc["analyses_run"] == ["toy"] and doc["results"]["toy"]["n_points"] > 0 and "capture" in doc["seconds"]
    assert doc["plots"] == ["plots/geometry/toy.png"] and (run_dir / "plots/geometry/toy.png").is_file()
    md = (run_dir / "diagnostics.md").read_text()
    assert "## A toy analysis\n\nToy: " in md
