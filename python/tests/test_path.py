"""fgm.path: the CLI's path points, a fitted estimator per point."""
import numpy as np
from sklearn.datasets import load_svmlight_file

import fgm
from helpers import model_file_content, trained_content


def test_path_points_equal_the_cli_path(shared_data, tmp_path, run_cli):
    a9a, a9a_t = shared_data / "a9a" / "a9a", shared_data / "a9a" / "a9a.t"
    out = tmp_path / "cli"
    run_cli("path", f"data.train={a9a}", f"data.test={a9a_t}", "data.features=123", f"output.dir={out}",
            f"engine.cache_dir={tmp_path / 'cache'}", "output.report=false", "path.features=[4,9]", "path.folds=3",
            "fgm.B=5")
    X, y = load_svmlight_file(str(a9a), n_features=123)
    Xt, yt = load_svmlight_file(str(a9a_t), n_features=123)
    table = fgm.path(X, y, features=[4, 9], folds=3, test=(Xt, yt), estimator=fgm.FGMClassifier(B=5))
    assert list(table["point"]) == [1, 2] and list(table["selected"]) == [4, 9]
    for k, row in table.iterrows():
        point = row["point"]
        assert trained_content(row["estimator"].model_) == model_file_content(out / f"point-{point}.fgm")
        assert trained_content(row["debiased_estimator"].model_) == model_file_content(
            out / f"point-{point}-debiased.fgm")
        assert abs(row["estimator"].score(Xt, yt) - row["test_accuracy"]) < 1e-6  # path.csv prints 6 digits
    assert table.attrs["path"]["selection"]["criterion"] == "cv"
    assert np.all(table["cv_accuracy"] > 0.7)


def test_path_over_C_from_a_file(shared_data):
    table = fgm.path(str(shared_data / "a9a" / "a9a"), C=[0.1, 1.0], debias=False,
                     estimator=fgm.FGMClassifier(B=5, max_iterations=2))
    assert list(table["C"]) == [0.1, 1.0]
    assert [e.C for e in table["estimator"]] == [0.1, 1.0]
    single = fgm.FGMClassifier(B=5, max_iterations=2, C=1.0).fit(str(shared_data / "a9a" / "a9a"))
    assert trained_content(table["estimator"][1].model_) == trained_content(single.model_)
