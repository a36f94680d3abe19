"""SULA: in-context Bayesian updating on synthetic labelled prompts, calibration and its value axis."""

from __future__ import annotations

import numpy as np

from windtunnel.analysis import Analysis
from windtunnel.config import ConfigError
from windtunnel.llm import plots, report
from windtunnel.llm import sula_prompts as S
from windtunnel.llm.capture import Keep, PromptCapture
from windtunnel.llm.session import Session, min_mean_max
from windtunnel.llm.stats import pearson, single_threaded_blas
from windtunnel.stats import pca_components, spearman
from windtunnel.tasks.sula import CARRIER_WORDS


def _sula_sets(sess: Session) -> dict:
    o = sess.opts
    tok = sess.lm.tokenizer
    if o.sula_labels is not None:
        for w in o.sula_labels:
            if len(tok(" " + w, add_special_tokens=False)["input_ids"]) != 1:
                raise ConfigError(f"field 'sula_labels': ' {w}' is not a single token in this tokenizer")
        main = tuple(o.sula_labels)
        remap = tuple(S.single_token_labels(tok, o.sula_label_candidates, 2, exclude={*main, *CARRIER_WORDS}))
    else:
        # labels must not be carrier words (the CVC sweep would otherwise offer e.g. 'bad')
        four = S.single_token_labels(tok, o.sula_label_candidates, 4, exclude=set(CARRIER_WORDS))
        main, remap = tuple(four[:2]), tuple(four[2:])
    return S.generate(S.Draws(o.sula_ks, o.sula_n_per_k, o.sula_alpha, o.seed), S.Wording(main, remap, o.mask_token),
                      o.sula_controls)


def label_ids(sess: Session, names) -> list[int]:
    return [sess.lm.tokenizer(" " + w, add_special_tokens=False)["input_ids"][0] for w in names]


def sula_capture(sess: Session) -> tuple[dict, dict[str, PromptCapture]]:
    if "sula" not in sess.captures:
        sets = _sula_sets(sess)
        caps = {}
        all_layers = "interventions" in sess.analyses
        if "sula" not in sess.analyses:  # the interventions need only the main prompts
            sets = {"main": sets["main"]}
        for name, s in sets.items():
            layers = list(range(sess.L)) if (all_layers and name == "main") else [sess.L - 1]
            caps[name] = sess.run(s.texts, Keep(value_layers=layers, label_ids=label_ids(sess, s.labels),
                                                residual=all_layers and name == "main"))
        sess.captures["sula"] = caps  # type: ignore[assignment]
        sess.pools["sula_sets"] = sets
    return sess.pools["sula_sets"], sess.captures["sula"]  # type: ignore[return-value]


def sula(sess: Session) -> dict:
    sets, caps = sula_capture(sess)  # forward passes with the model's own threads
    with single_threaded_blas():
        return _sula_stats(sess, sets, caps)


def _sula_stats(sess: Session, sets, caps) -> dict:
    o = sess.opts
    L1 = sess.L - 1
    main, cm = sets["main"], caps["main"]
    p1, hm, mass = S.model_posterior(cm.label_probs)
    std = o.sula_pca == "standardized"
    x = cm.values[L1]
    ratios, sc, _ = pca_components(x, standardize=std, n=2)
    pc1 = sc[:, 0]
    if spearman(main.k, pc1)[0] < 0:  # the paper's orientation: PC1 rises with k (so falls with H_Bayes)
        pc1 = -pc1
    align = {"pca": o.sula_pca, "layer": L1, "pc1": float(ratios[0]), "pc1_pc2": float(ratios[:2].sum()),
             "pearson_pc1_h_bayes": pearson(pc1, main.h_bayes), "spearman_pc1_h_bayes": spearman(pc1, main.h_bayes)[0],
             "spearman_pc1_h_bayes_p": spearman(pc1, main.h_bayes)[1],
             "pearson_pc1_h_model": pearson(pc1, hm), "spearman_pc1_h_model": spearman(pc1, hm)[0],
             "orientation": "PC1 sign chosen so that Spearman(k, PC1) >= 0 (the paper's)"}
    res = {
        "labels": list(main.labels), "alpha": o.sula_alpha, "ks": list(o.sula_ks), "n_per_k": o.sula_n_per_k,
        "n_prompts": len(main.texts), "seed": o.seed, "example_prompts": {str(k): main.texts[int(np.flatnonzero(main.k == k)[0])]
                                                                         for k in o.sula_ks},
        "posterior": main.meta["posterior"],
        "h_model": "binary entropy (bits) of p(L1), p(L2) renormalised from the full-vocabulary softmax",
        "label_mass": min_mean_max(mass),
        "calibration": S.calibration(hm, main.h_bayes, main.k, p1, main.y),
        "alignment": align,
        "trajectory": S.trajectory(pc1, main.k, o.n_bootstrap, o.bootstrap_seed),
        "prompt_tokens": min_mean_max(cm.lengths), "bos_added_fraction": float(cm.bos_added.mean()),
        "per_prompt": {"k": main.k.tolist(), "h_bayes": main.h_bayes.tolist(), "h_model": hm.tolist(),
                       "pc1": pc1.tolist()},
    }
    # controls: one shared basis fitted on the union of all conditions' final-layer values
    if len(sets) > 1:
        names = list(sets)
        union = np.concatenate([caps[n].values[L1] for n in names])
        _, usc, _ = pca_components(union, standardize=std, n=1)
        upc = usc[:, 0]
        if spearman(main.k, upc[: len(main.texts)])[0] < 0:  # as PC1 above: rising with k on the main prompts
            upc = -upc
        controls, shared = {}, {}
        start = 0
        for n in names:
            s, c = sets[n], caps[n]
            cp1, ch, cmass = S.model_posterior(c.label_probs)
            seg = upc[start:start + len(s.texts)]
            start += len(s.texts)
            shared[n] = {"k": s.k.tolist(), "pc1": [round(float(v), 6) for v in seg]}
            controls[n] = {"labels": list(s.labels), "posterior": s.meta["posterior"],
                           "example_prompt": s.texts[int(np.argmax(s.k))],
                           "label_mass": min_mean_max(cmass), "calibration": S.calibration(ch, s.h_bayes, s.k, cp1, s.y),
                           "shared_pc1": S.trajectory(seg, s.k, o.n_bootstrap, o.bootstrap_seed)}
        res["controls"] = controls
        res["controls_basis"] = (f"PC1 ({o.sula_pca}) of the union of all conditions' layer-{L1} values, oriented so "
                                 "that Spearman(k, PC1) >= 0 on the main prompts")
        res["shared_per_prompt"] = shared
    return res


ANALYSIS = Analysis(name="sula", title="SULA", run=sula,
                    markdown=report.sula, plot=plots.sula)
