"""The scikit-learn contract: check_estimator, meta-estimators, pickling, probabilities."""
import pickle

import numpy as np
import scipy.sparse as sp
from sklearn.feature_selection import SelectFromModel
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler
from sklearn.utils.estimator_checks import check_estimator

import fgm
from helpers import trained_content
from test_inputs import planted_data


def test_check_estimator():
    check_estimator(fgm.FGMClassifier())


def test_check_estimator_logistic_with_bias():
    check_estimator(fgm.FGMClassifier(loss="logistic", bias=True))


def test_pipeline_grid_search_and_cross_validation():
    X, y = planted_data(n=400)
    pipe = make_pipeline(MaxAbsScaler(), fgm.FGMClassifier(B=2, max_iterations=3))
    scores = cross_val_score(pipe, sp.csr_matrix(X), y, cv=3)
    assert scores.shape == (3,) and scores.mean() > 0.85
    search = GridSearchCV(fgm.FGMClassifier(max_iterations=1), {"B": [1, 3], "C": [0.1, 10.0]}, cv=3)
    search.fit(X, y)
    assert search.best_params_["B"] == 3  # one feature per iteration cannot reach the three planted ones
    assert search.best_score_ > 0.85


def test_select_from_model_keeps_the_selected_features():
    X, y = planted_data()
    selector = SelectFromModel(fgm.FGMClassifier(B=3, max_iterations=1), threshold=1e-12).fit(X, y)
    selected = {f["ids"][0] for f in selector.estimator_.selected_features_}
    assert set(np.flatnonzero(selector.get_support())) == selected
    assert selector.transform(X).shape == (X.shape[0], 3)


def test_pickle_round_trip_keeps_the_model_bytes():
    X, y = planted_data()
    clf = fgm.FGMClassifier(B=3, max_iterations=3).fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    assert clone.model_ == clf.model_
    np.testing.assert_array_equal(clone.decision_function(X), clf.decision_function(X))
    assert clone.get_params() == clf.get_params()


def test_params_round_trip_and_reach_the_engine():
    clf = fgm.FGMClassifier()
    clf.set_params(B=4, C=0.5, loss="logistic", max_features=3, n_jobs=2, params={"apg.gap_tolerance": 1e-4})
    assert clf.get_params()["B"] == 4
    X, y = planted_data()
    clf.fit(X, y)
    config = clf.model_description_["config"]
    assert (config["fgm.B"], config["fgm.C"], config["fgm.loss"]) == ("4", "0.5", "logistic")
    assert config["engine.threads"] == "2" and config["apg.gap_tolerance"] == "0.0001"
    assert len(clf.selected_features_) == 3  # fgm.max_features cuts the first batch of 4 to land on 3
    one_thread = fgm.FGMClassifier(B=4, C=0.5, loss="logistic", max_features=3, n_jobs=1,
                                   params={"apg.gap_tolerance": 1e-4}).fit(X, y)
    assert trained_content(one_thread.model_) == trained_content(clf.model_)


def test_predict_proba_only_for_the_logistic_loss():
    X, y = planted_data()
    assert not hasattr(fgm.FGMClassifier(), "predict_proba")
    clf = fgm.FGMClassifier(loss="logistic", B=3, max_iterations=3).fit(X, y)
    p = clf.predict_proba(X)
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-clf.decision_function(X))), rtol=1e-12)
    np.testing.assert_array_equal(clf.classes_[np.argmax(p, axis=1)], clf.predict(X))
