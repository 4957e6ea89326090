"""Fits on a store or a LIBSVM path within a memory budget; model files shared with the CLI."""
import numpy as np
from sklearn.datasets import load_svmlight_file

import fgm
from helpers import model_file_content, trained_content

PARAMS = dict(B=6, C=2.0, max_iterations=3)


def test_store_path_fit_within_a_budget_equals_the_array_fit(shared_data, tmp_path):
    a9a = shared_data / "a9a" / "a9a"
    summary = fgm.ingest(a9a, tmp_path / "store", memory_budget="8MB", features=123)
    assert summary["rows"] == "32561"
    from_store = fgm.FGMClassifier(memory_budget="12MB", **PARAMS).fit(tmp_path / "store")
    X, y = load_svmlight_file(str(a9a), n_features=123)
    from_arrays = fgm.FGMClassifier(**PARAMS).fit(X, y)
    from_text = fgm.FGMClassifier(memory_budget="12MB", **PARAMS).fit(str(a9a))
    assert trained_content(from_store.model_) == trained_content(from_arrays.model_)
    assert trained_content(from_text.model_) == trained_content(from_arrays.model_)
    assert from_store.run_["memory"]["budget_bytes"] == 12 << 20 if "memory" in from_store.run_ else True
    np.testing.assert_array_equal(from_store.classes_, [-1.0, 1.0])
    assert from_store.n_features_in_ == 123


def test_ingest_from_arrays_gives_the_cli_store(shared_data, tmp_path, run_cli):
    a9a = shared_data / "a9a" / "a9a"
    X, y = load_svmlight_file(str(a9a), n_features=123)
    fgm.ingest(X, tmp_path / "py-store", y=y)
    run_cli("ingest", a9a, "--out", tmp_path / "cli-store", "--features", "123")
    a = fgm.FGMClassifier(**PARAMS).fit(tmp_path / "py-store")
    b = fgm.FGMClassifier(**PARAMS).fit(tmp_path / "cli-store")
    assert trained_content(a.model_) == trained_content(b.model_)


def test_python_model_predicts_with_the_cli(shared_data, tmp_path, run_cli):
    X, y = load_svmlight_file(str(shared_data / "a9a" / "a9a"), n_features=123)
    Xt, yt = load_svmlight_file(str(shared_data / "a9a" / "a9a.t"), n_features=123)
    clf = fgm.FGMClassifier(bias=True, **PARAMS).fit(X, y)
    clf.save_model(tmp_path / "py.fgm")
    assert model_file_content(tmp_path / "py.fgm") == trained_content(clf.model_)
    out = run_cli("predict", "--model", tmp_path / "py.fgm", shared_data / "a9a" / "a9a.t",
                  "--out", tmp_path / "scores.txt")
    cli_scores = np.loadtxt(tmp_path / "scores.txt")
    np.testing.assert_allclose(cli_scores, clf.decision_function(Xt), rtol=1e-8, atol=1e-9)  # printed with 9 digits
    accuracy = float(out.split("accuracy=")[1].split()[0])
    assert abs(accuracy - clf.score(Xt, yt)) < 1e-4  # printed with 4 decimals


def test_cli_model_predicts_in_python(shared_data, tmp_path, run_cli):
    run_cli("train", f"data.train={shared_data / 'a9a' / 'a9a'}", f"output.dir={tmp_path / 'out'}",
            f"engine.cache_dir={tmp_path / 'cache'}", "output.report=false", "fgm.B=6", "fgm.max_iterations=3",
            "features.kind=poly2")
    run_cli("predict", "--model", tmp_path / "out" / "model.fgm", shared_data / "a9a" / "a9a.t",
            "--out", tmp_path / "scores.txt")
    clf = fgm.load_model(tmp_path / "out" / "model.fgm")
    Xt, _ = load_svmlight_file(str(shared_data / "a9a" / "a9a.t"), n_features=123)
    np.testing.assert_allclose(clf.decision_function(Xt), np.loadtxt(tmp_path / "scores.txt"), rtol=1e-8,
                               atol=1e-9)
    assert clf.kind == "poly2" and clf.n_features_in_ == 123
    clf.save_model(tmp_path / "again.fgm")
    assert (tmp_path / "again.fgm").read_bytes() == (tmp_path / "out" / "model.fgm").read_bytes()


def test_predict_and_score_on_a_libsvm_path(shared_data, tmp_path, run_cli):
    a9a_t = shared_data / "a9a" / "a9a.t"
    clf = fgm.FGMClassifier(bias=True, **PARAMS).fit(str(shared_data / "a9a" / "a9a"))
    Xt, yt = load_svmlight_file(str(a9a_t), n_features=123)
    np.testing.assert_array_equal(clf.decision_function(str(a9a_t)), clf.decision_function(Xt))
    np.testing.assert_array_equal(clf.predict(str(a9a_t)), clf.predict(Xt))
    assert clf.score(str(a9a_t)) == clf.score(Xt, yt)
    news20 = shared_data / "news20" / "news20.bz2"
    from helpers import head_lines
    subset = head_lines(news20, tmp_path / "news20.svm", 600)
    multi = fgm.FGMClassifier(B=4, max_iterations=2).fit(str(subset))
    X, y = load_svmlight_file(str(subset), n_features=multi.n_features_in_)
    assert multi.decision_function(str(subset)).shape == (600, 20)
    np.testing.assert_array_equal(multi.predict(str(subset)), multi.predict(X))
    assert multi.score(str(subset)) == multi.score(X, y)
