"""The other solvers through solver= and params=: the same contract, the CLI's models."""
import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

import fgm
from helpers import model_file_content, trained_content
from test_inputs import planted_data

GROUPS = [[0, 1, 2, 3], [4, 5, 6, 7], list(range(8, 20)), list(range(20, 40))]
CASES = {
    "sifs": ({}, None),
    "exclusive": ({"exclusive.lambda": 0.5}, GROUPS),
    "mslr": ({"mslr.r": 4, "mslr.max_iterations": 3}, None),
    "pnorm_kta": ({}, None),
    "pnorm_kta_rbf": ({"kta.kernel": "rbf"}, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_solver_equals_the_cli(case, tmp_path, run_cli):
    params, groups = CASES[case]
    solver = case.replace("_rbf", "")
    X, y = planted_data()
    clf = fgm.FGMClassifier(solver=solver, params=params, groups=groups).fit(X, y)
    text = tmp_path / "train.svm"
    with open(text, "w") as f:  # the same rows, written independently of the binding
        for row, label in zip(X, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{v!r}" for j, v in enumerate(row) if v != 0) + "\n")
    keys = [f"{k}={v}" for k, v in params.items()]
    if groups:
        with open(tmp_path / "groups.txt", "w") as f:
            f.writelines(" ".join(str(j + 1) for j in g) + "\n" for g in groups)
        keys.append(f"features.groups={tmp_path / 'groups.txt'}")
    run_cli("train", f"data.train={text}", "data.features=40", f"output.dir={tmp_path / 'out'}",
            f"engine.cache_dir={tmp_path / 'cache'}", "output.report=false", f"solver={solver}", *keys)
    assert trained_content(clf.model_) == model_file_content(tmp_path / "out" / "model.fgm")
    assert clf.score(X, y) > 0.85
    assert len(clf.selected_features_) > 0
    assert hasattr(clf, "predict_proba") == (solver in ("exclusive", "mslr"))
    if hasattr(clf, "predict_proba"):
        np.testing.assert_allclose(clf.predict_proba(X).sum(axis=1), 1.0)


def test_keys_of_another_solver_are_refused():
    X, y = planted_data()
    with pytest.raises(ValueError, match="mslr.r"):
        fgm.FGMClassifier(params={"mslr.r": 3}).fit(X, y)


@pytest.mark.parametrize("solver, params", [("sifs", None), ("exclusive", {"exclusive.random_groups": 2}),
                                            ("mslr", None), ("pnorm_kta", {"kta.kernel": "rbf"})],
                         ids=["sifs", "exclusive", "mslr", "pnorm_kta_rbf"])
def test_check_estimator_for_each_solver(solver, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny check data: unconverged and chance-level warnings
        check_estimator(fgm.FGMClassifier(solver=solver, params=params))


def test_random_state_seeds_the_exclusive_random_groups():
    X, y = planted_data()
    params = {"exclusive.random_groups": 6}
    a = fgm.FGMClassifier(solver="exclusive", params=params, random_state=3).fit(X, y)
    b = fgm.FGMClassifier(solver="exclusive", params={**params, "exclusive.group_seed": 3}).fit(X, y)
    c = fgm.FGMClassifier(solver="exclusive", params=params, random_state=4).fit(X, y)
    assert a.model_description_["config"]["exclusive.group_seed"] == "3"
    assert trained_content(a.model_) == trained_content(b.model_)
    assert trained_content(a.model_) != trained_content(c.model_)  # other groups, another model
