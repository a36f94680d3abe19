"""Validated options of ``windtunnel llm`` (Paper III on pretrained language models).

Every option is a field of :class:`LLMOptions` (a :class:`~windtunnel.config.StrictConfig`:
unknown names are rejected, bad values raise :class:`~windtunnel.config.ConfigError` naming the
field and its allowed range). Options arrive from Python or from the command line as strings,
so list fields also accept comma-separated text (``"0,1,2,4,8"``), and the intervention layer
sets accept ``"12;23;8,12,16,20,23"`` (``;`` between sets, ``,`` inside a set). The Paper III
pass criteria are the named, overridable :class:`Thresholds`.

Where the sources disagree (see ``docs/llm.md``) the choice is an option here, its default is
stated in the field's help, and every run records the options it used in ``llm.json``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from windtunnel.config import StrictConfig, forced_llm_options

SULA_CONTROLS = ("lexical_remap", "shuffled", "ablation_labels", "ablation_carriers")
INTERVENTION_CONDITIONS = (
    "true_cut", "random_cut", "true_only", "random_only",
    "true_shift_plus", "true_shift_minus", "random_shift_plus", "random_shift_minus",
)
DEFAULT_LABEL_CANDIDATES = ("dax", "lug", "mip", "zorb", "wug", "kep", "tuv", "gax")

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?|xpu(:\d+)?)$")


def _split(value: Any, sep: str = ",") -> Any:
    """'a, b' -> ['a', 'b']; anything that is not a string passes through."""
    if isinstance(value, str):
        return [p.strip() for p in value.split(sep) if p.strip()]
    return value


class Thresholds(StrictConfig):
    """Paper III's validation criteria (§4.4), each overridable by name."""

    manifold_pc: float = Field(
        0.30, gt=0, lt=1, description="value manifold passes when PC1 or PC1+PC2 exceeds this (paper: 0.30)")
    manifold_set: Literal["mixed", "math"] = Field("mixed", description="prompt set the value-manifold criterion is judged on")
    key_orth_max: float = Field(
        0.20, gt=0, le=1, description="a layer is orthogonal when its mean off-diagonal |cos| is below this (paper: 0.20)")
    key_orth_layer_frac: float = Field(0.5, gt=0, le=1, description="fraction of layers that must be orthogonal (paper: 0.5)")
    focusing_min: float = Field(
        0.30, gt=0, lt=1, description="attention focusing passes above this relative entropy drop (paper: 0.30)")
    dr_gain_min: float = Field(
        0.0, ge=-1, le=1,
        description="domain restriction passes when PC1+PC2(math) - PC1+PC2(mixed) exceeds this (derived, not in the paper)")
    control_share: float = Field(
        0.01, ge=0, lt=1, description="the smallest difference from the control that counts, for shares (PC1, PC1+PC2, "
                                      "the domain-restriction gain, the focusing drop): the interval's bound must pass it")
    control_cos: float = Field(
        0.005, ge=0, lt=1, description="the same for the key orthogonality's mean |cos| (below the control by at least this)")
    control_rho: float = Field(
        0.05, ge=0, lt=2, description="the same for SULA's within-k correlation and its separation of conditions (in SD)")


class LLMOptions(StrictConfig):
    """Options of one ``windtunnel llm`` run."""

    # --- loading -----------------------------------------------------------------------
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights dtype; auto = float32 on CPU, bfloat16 on a GPU (statistics are always float64)")
    device: str = Field("auto", description="auto, cpu, cuda, cuda:N or mps (ignored with device_map)")
    device_map: str | None = Field(None, description="accelerate device map (e.g. auto) for models larger than one GPU")
    trust_remote_code: bool = Field(False, description="run model code from the hub (off unless asked)")
    revision: str | None = Field(None, description="hub revision (branch, tag or commit) of the model")
    gguf_file: str | None = Field(None, description="GGUF file inside a hub repo or folder (a path ending in .gguf needs none)")
    batch_size: int = Field(16, ge=1, le=4096, description="prompts per forward pass (left padded)")
    max_prompt_tokens: int = Field(256, ge=4, le=131072, description="longer prompts keep their last tokens (BOS kept)")
    add_bos: Literal["auto", "always", "never"] = Field(
        "auto", description="auto = the tokenizer's default; the run records whether BOS was added")
    memory_check: bool = Field(
        True, description="estimate the memory the model needs from its config before loading it, and refuse when it "
                          "does not fit (naming the options that would)")
    memory_limit_gib: float | None = Field(
        None, gt=0, description="treat this many GiB as all the memory available (a shared machine); none = what the "
                                "machine reports")

    # --- general -----------------------------------------------------------------------
    layers: list[int] | Literal["last", "all"] = Field(
        "last", description="layers for the value-manifold PCA: last, all, or 0-based indices (e.g. 0,11,23)")
    seed: int = Field(42, ge=0, description="seed of prompt selection, SULA prompts, nulls and random axes (repo: 42)")
    n_bootstrap: int = Field(1000, ge=10, le=100000, description="bootstrap resamples for 95% intervals (repo: 1000)")
    bootstrap_seed: int = Field(
        42, ge=0, description="seed of every bootstrap (the repo used 42 for PCA and 0 for SULA trajectories)")
    n_null: int = Field(200, ge=10, le=100000, description="draws of each empirical null")
    plots: bool = Field(True, description="write PNG plots beside llm.json")

    # --- prompt sets (analyses 1, 3, 4) --------------------------------------------------
    mixed_pool: str | None = Field(None, description="JSON prompt pool replacing the shipped mixed-domain pool")
    math_pool: str | None = Field(None, description="JSON prompt pool replacing the shipped mathematics pool")
    n_quintiles: int = Field(5, ge=1, le=20, description="entropy strata for stratified selection (paper: 5)")
    n_per_quintile: int = Field(15, ge=1, le=1000, description="prompts drawn per stratum (paper: 15)")

    # --- value manifold / key orthogonality / attention ---------------------------------
    primary_pca: Literal["standardized", "raw"] = Field(
        "standardized", description="PCA judged by the criteria (both are always reported; paper text: standardized)")
    init_revision: str | None = Field(
        None, description="revision at initialisation for the key-orthogonality baseline (Pythia: step0)")
    init_from_config: bool = Field(True, description="also measure W_K drawn from the family's own initialiser")
    control: bool = Field(
        True, description="analyse the same architecture at initialisation beside the model (the init_revision "
                          "checkpoint where given, else the model re-initialised from its own config by its family's "
                          "initialiser, with the same tokenizer and prompts) and judge every Paper III claim against it; "
                          "off: the claims that need it are not testable")
    control_seeds: int = Field(
        1, ge=1, le=64, description="re-initialisations analysed as the control (their spread joins every interval); "
                                    "ignored with init_revision, which has one")
    control_seed: int = Field(
        1_000_003, ge=0, description="torch seed of the first re-initialisation (then +1, +2, ...): far from the "
                                     "seeds of tiny random models, so that a control never repeats its model")
    n_random_axes: int = Field(
        20, ge=0, le=1000, description="random axes cut at the entropy-axis claim's layer set, whose spread the true "
                                       "cut is read against (only for a model calibrated beyond the best constant)")
    attention_positions: Literal["final", "all"] = Field(
        "final",
        description="attention entropy at the final query (paper §4.2, default) or averaged over all query positions (§4.5)")

    # --- SULA ---------------------------------------------------------------------------
    sula_ks: list[int] = Field([0, 1, 2, 4, 8], description="numbers of in-context examples k")
    sula_n_per_k: int = Field(50, ge=2, le=100000, description="prompts per k (repo: 50, 250 in total)")
    sula_alpha: float = Field(0.9, gt=0.5, lt=1.0, description="probability that an example label equals the class")
    sula_labels: list[str] | None = Field(None, description="label pair L1,L2 (default: the first single-token candidates)")
    sula_label_candidates: list[str] = Field(
        list(DEFAULT_LABEL_CANDIDATES), description="candidates tried in order, then a CVC sweep")
    sula_controls: list[Literal[SULA_CONTROLS]] = Field(list(SULA_CONTROLS), description="control conditions to run")
    mask_token: str = Field("[MASK]", description="text that replaces masked evidence in the ablation controls")
    sula_pca: Literal["standardized", "raw"] = Field(
        "standardized", description="shared PCA basis for SULA alignment (paper: standardized; repo figures: raw)")

    # --- interventions ------------------------------------------------------------------
    intervention_layers: list[list[int]] | None = Field(
        None, description="layer sets hooked together, e.g. 12;23;8,12,16,20,23 (default: n//2; n-1; five spread layers)")
    intervention_conditions: list[Literal[INTERVENTION_CONDITIONS]] = Field(
        list(INTERVENTION_CONDITIONS), description="operators to apply (true/random axis; cut, only, shift)")
    axis_space: Literal["raw", "standardized"] = Field(
        "raw",
        description="PC1 of centred raw values (default: the cut removes PC1 exactly) or of standardized values mapped back")
    axis_sign: Literal["positive", "negative"] = Field(
        "positive", description="orient the axis so corr(v.u, H_model) is >= 0 (§4.5, default) or <= 0 (§4.6)")
    shift_sigma: float = Field(1.0, gt=0, le=100, description="size of the axis shift in standard deviations of v.u")
    random_axis_orthogonal: bool = Field(False, description="orthogonalise the random axis against the true one (§4.5; repo: no)")

    thresholds: Thresholds = Field(default_factory=Thresholds, description="Paper III pass criteria")

    # --- parsing of command-line strings --------------------------------------------------
    @field_validator("device_map", "revision", "gguf_file", "mixed_pool", "math_pool", "init_revision", "sula_labels",
                     "intervention_layers", "memory_limit_gib", mode="before")
    @classmethod
    def _none_words(cls, v):
        return None if isinstance(v, str) and v.strip().lower() in ("", "none", "null") else v

    @field_validator("sula_ks", "sula_labels", "sula_label_candidates", "sula_controls", "intervention_conditions",
                     mode="before")
    @classmethod
    def _comma_lists(cls, v):
        return _split(v)

    @field_validator("layers", mode="before")
    @classmethod
    def _layers(cls, v):
        if isinstance(v, str) and v.strip() not in ("last", "all"):
            return _split(v)
        if isinstance(v, str):
            return v.strip()
        return v

    @field_validator("intervention_layers", mode="before")
    @classmethod
    def _layer_sets(cls, v):
        if isinstance(v, str):
            return [_split(s) for s in v.split(";") if s.strip()]
        if isinstance(v, (list, tuple)):
            return [[x] if isinstance(x, int) else x for x in v]
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v: str):
        if not _DEVICE.match(v):
            raise ValueError("device must be auto, cpu, mps, cuda or cuda:N")
        return v

    @field_validator("layers")
    @classmethod
    def _layers_nonneg(cls, v):
        if isinstance(v, list):
            if not v:
                raise ValueError("give at least one layer, or last / all")
            if any(i < 0 for i in v):
                raise ValueError("layer indices are 0-based and non-negative (use 'last' for the final layer; "
                                 "-1 is rejected because it silently hooked nothing in the authors' code)")
        return v

    @field_validator("intervention_layers")
    @classmethod
    def _sets_nonneg(cls, v):
        if v is None:
            return v
        if not v or any(not s for s in v):
            raise ValueError("every layer set needs at least one layer")
        if any(i < 0 for s in v for i in s):
            raise ValueError("intervention layers must be explicit non-negative 0-based indices (-1 is rejected: in the "
                             "authors' code it matched no hook and made every intervention a silent no-op)")
        return [sorted(set(s)) for s in v]

    @field_validator("sula_ks")
    @classmethod
    def _ks(cls, v):
        if not v or any(k < 0 or k > 256 for k in v):
            raise ValueError("k values must lie in 0..256")
        if len(set(v)) != len(v):
            raise ValueError("k values must be distinct")
        return sorted(v)

    @field_validator("sula_labels")
    @classmethod
    def _labels(cls, v):
        if v is not None and (len(v) != 2 or v[0] == v[1]):
            raise ValueError("give exactly two different labels, e.g. dax,lug")
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.device_map is not None and self.device not in ("auto",):
            raise ValueError("give either device or device_map, not both (device_map places the model itself)")
        if len(self.sula_label_candidates) < 2:
            raise ValueError("sula_label_candidates needs at least two names")
        return self


def build_options(options: dict[str, Any] | None = None) -> LLMOptions:
    """Validate options given as keyword pairs. ``thresholds.key_orth_max`` (or
    ``thresholds_key_orth_max``) sets one threshold; dashes in names count as underscores."""
    flat: dict[str, Any] = {}
    thresholds: dict[str, Any] = {}
    forced = forced_llm_options()
    for key, value in {**(options or {}), **forced}.items():
        name = key.replace("-", "_")
        if name.startswith("thresholds.") or (name.startswith("thresholds_") and name != "thresholds"):
            thresholds[name[len("thresholds") + 1:]] = value
        elif name == "thresholds" and isinstance(value, dict):
            thresholds.update(value)
        else:
            flat[name] = value
    if thresholds:
        flat["thresholds"] = thresholds
    return LLMOptions.build(flat, where="llm")
