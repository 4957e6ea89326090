"""Every input type gives the same model; labels of any type; attributes."""
import numpy as np
import pytest
import scipy.sparse as sp

import fgm
from helpers import trained_content


def planted_data(n=300, m=40, seed=0):
    """Sparse rows whose values are exact in float32 (multiples of 1/64), labels from 3 planted features."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-128, 128, size=(n, m)) / 64.0
    X[rng.random((n, m)) < 0.6] = 0.0
    y = np.where(X[:, 3] - 2 * X[:, 7] + X[:, 11] > 0, 1, -1)
    return X, y


PARAMS = dict(B=3, max_iterations=3, C=5.0)


@pytest.fixture(scope="module")
def reference():
    X, y = planted_data()
    return trained_content(fgm.FGMClassifier(**PARAMS).fit(X, y).model_)


@pytest.mark.parametrize("convert", [
    lambda X: X.astype(np.float32),
    lambda X: np.asfortranarray(X),
    lambda X: sp.csr_matrix(X),
    lambda X: sp.csr_matrix(X, dtype=np.float32),
    lambda X: sp.csc_matrix(X),
    lambda X: sp.coo_matrix(X),
    lambda X: sp.coo_matrix(X, dtype=np.float32),
    lambda X: sp.lil_matrix(X),
    lambda X: X.tolist(),
], ids=["dense32", "fortran", "csr64", "csr32", "csc", "coo", "coo32", "lil", "list"])
def test_every_input_type_gives_the_same_model(reference, convert):
    X, y = planted_data()
    assert trained_content(fgm.FGMClassifier(**PARAMS).fit(convert(X), y).model_) == reference


def test_index_dtypes_and_explicit_zeros_give_the_same_model(reference):
    X, y = planted_data()
    csr = sp.csr_matrix(X)
    wide = csr.copy()
    wide.indices, wide.indptr = csr.indices.astype(np.int64), csr.indptr.astype(np.int64)  # scipy would downcast
    assert wide.indices.dtype == np.int64
    assert trained_content(fgm.FGMClassifier(**PARAMS).fit(wide, y).model_) == reference
    # Each row's entries reversed, its first entry split into two halves (a
    # duplicate index) and an explicit zero appended: the same matrix.
    indptr, indices, data = [0], [], []
    for r in range(csr.shape[0]):
        cols = list(csr.indices[csr.indptr[r]:csr.indptr[r + 1]])[::-1]
        vals = list(csr.data[csr.indptr[r]:csr.indptr[r + 1]])[::-1]
        if cols:
            cols.append(cols[0])
            vals[0] /= 2
            vals.append(vals[0])
        empty = [j for j in range(csr.shape[1]) if j not in cols]
        cols.append(empty[0])
        vals.append(0.0)
        indices += cols
        data += vals
        indptr.append(len(indices))
    messy = sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=csr.shape)
    assert not messy.has_canonical_format
    assert trained_content(fgm.FGMClassifier(**PARAMS).fit(messy, y).model_) == reference


@pytest.mark.parametrize("labels", [
    np.array(["no", "yes"]), np.array([0, 1]), np.array([False, True]), np.array([-3.0, 7.0]),
    np.array([2**60, 2**60 + 1], dtype=np.int64),
], ids=["strings", "0-1", "bool", "floats", "huge-ints"])
def test_binary_labels_of_any_type(reference, labels):
    X, y = planted_data()
    y_mapped = labels[(y > 0).astype(int)]
    clf = fgm.FGMClassifier(**PARAMS).fit(X, y_mapped)
    np.testing.assert_array_equal(clf.classes_, labels)
    content = trained_content(clf.model_)
    assert content["features"] == reference["features"] and content["bias"] == reference["bias"]
    assert set(clf.predict(X)) <= set(labels)
    assert clf.score(X, y_mapped) > 0.9


def test_multiclass_string_labels():
    X, y = planted_data(n=400)
    y3 = np.where(X[:, 3] > 0.5, "a", np.where(X[:, 7] > 0, "b", "c"))
    clf = fgm.FGMClassifier(B=4, max_iterations=3, bias=True).fit(X, y3)
    assert list(clf.classes_) == ["a", "b", "c"]
    d = clf.decision_function(X)
    assert d.shape == (400, 3)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(d, axis=1)])
    assert clf.score(X, y3) > 0.8


def test_coef_and_intercept_reproduce_the_decision_values():
    X, y = planted_data()
    clf = fgm.FGMClassifier(bias=True, **PARAMS).fit(X, y)
    assert sp.issparse(clf.coef_) and clf.coef_.shape == (1, X.shape[1])
    # The engine's decision values are over float32 rows (the store's values).
    expected = X.astype(np.float32).astype(np.float64) @ clf.coef_.toarray().ravel() + clf.intercept_[0]
    np.testing.assert_allclose(clf.decision_function(X), expected, rtol=1e-12, atol=1e-12)
    selected = {f["ids"][0] for f in clf.selected_features_}
    assert set(clf.coef_.indices) == selected
    assert {3, 7, 11} <= selected  # the planted features are found


def test_dataframe_feature_names():
    pd = pytest.importorskip("pandas")
    X, y = planted_data()
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    clf = fgm.FGMClassifier(**PARAMS).fit(frame, y)
    assert list(clf.feature_names_in_) == list(frame.columns)
    assert clf.n_features_in_ == X.shape[1]
    with pytest.warns(UserWarning, match="feature names"):
        np.testing.assert_array_equal(clf.predict(frame), clf.predict(X))
