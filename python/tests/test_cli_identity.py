"""The estimator's model is the CLI's model, bit for bit, on the same rows and keys.

The CLI reads the LIBSVM text itself; the estimator gets the rows as arrays
parsed by scikit-learn's own reader (load_svmlight_file), an independent path.
"""
import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

import fgm
from helpers import head_lines, model_file_content, trained_content


def cli_model(run_cli, tmp_path, data, *keys):
    out = tmp_path / "cli-out"
    run_cli("train", f"data.train={data}", f"output.dir={out}", f"engine.cache_dir={tmp_path / 'cli-cache'}",
            "output.report=false", *keys)
    return model_file_content(out / "model.fgm")


def test_a9a_linear_equals_cli(run_cli, shared_data, tmp_path):
    a9a = shared_data / "a9a" / "a9a"
    expected = cli_model(run_cli, tmp_path, a9a, "data.features=123", "fgm.B=8", "fgm.C=2.0",
                         "fgm.max_iterations=4", "fgm.bias=true")
    X, y = load_svmlight_file(str(a9a), n_features=123)
    clf = fgm.FGMClassifier(B=8, C=2.0, max_iterations=4, bias=True).fit(X, y)
    assert trained_content(clf.model_) == expected
    assert len(clf.selected_features_) > 0


def test_poly2_equals_cli(run_cli, shared_data, tmp_path):
    subset = head_lines(shared_data / "a9a" / "a9a", tmp_path / "a9a-head.svm", 4000)
    keys = dict(B=6, C=1.0, max_iterations=3, kind="poly2", loss="logistic")
    expected = cli_model(run_cli, tmp_path, subset, "data.features=123", "fgm.B=6", "fgm.C=1.0",
                         "fgm.max_iterations=3", "features.kind=poly2", "fgm.loss=logistic")
    X, y = load_svmlight_file(str(subset), n_features=123)
    clf = fgm.FGMClassifier(**keys).fit(X, y)
    assert trained_content(clf.model_) == expected
    kinds = {f["kind"] for f in clf.selected_features_}
    assert kinds & {"cross", "square"}, kinds  # the generated features are there, not only linear ones
    with pytest.raises(AttributeError, match="linear models"):
        clf.coef_


def test_multiclass_equals_cli(run_cli, shared_data, tmp_path):
    subset = head_lines(shared_data / "news20" / "news20.bz2", tmp_path / "news20-head.svm", 1500)
    expected = cli_model(run_cli, tmp_path, subset, "data.features=62061", "fgm.B=5", "fgm.max_iterations=2")
    X, y = load_svmlight_file(str(subset), n_features=62061)
    clf = fgm.FGMClassifier(B=5, max_iterations=2).fit(X, y)
    assert trained_content(clf.model_) == expected
    assert len(clf.classes_) == len(np.unique(y)) > 2
    assert clf.coef_.shape == (len(clf.classes_), 62061)
    assert clf.decision_function(X[:7]).shape == (7, len(clf.classes_))
