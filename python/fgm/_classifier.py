"""FGMClassifier: scikit-learn's classifier interface over `fgm train`."""

import json
import os
import tempfile
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import _engine, _fgm

_KINDS = ("linear", "poly2", "hik", "additive")
_SPARSE_FORMATS = ["csr", "csc", "coo"]


def _is_path(X):
    return isinstance(X, (str, os.PathLike))


def _budget_bytes(budget):
    """memory_budget as bytes ("256MB", "1GB": powers of 1024, as the config reads them)."""
    if isinstance(budget, (int, np.integer)):
        return int(budget)
    text = str(budget).strip().upper()
    for suffix, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10), ("B", 1)):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * scale)
    return int(text)


def _label_values(classes):
    """Numeric label values to write for classes_, or None when a class
    cannot be a LIBSVM label as it is (strings, objects, integers beyond
    2^53); the class index is written instead."""
    if classes.dtype.kind not in "iuf" or classes.dtype.kind == "b":
        return None
    values = classes.astype(np.float64)
    if not np.all(np.isfinite(values)) or np.any(values.astype(classes.dtype) != classes):
        return None
    return values


class FGMWarning(UserWarning):
    """A warning the engine recorded in run.json (its code is in the message)."""


class _SparseCoef(sp.csr_matrix):
    """coef_: a scipy.sparse CSR matrix that numpy functions read as its dense
    array (np.asarray, np.linalg.norm), as SelectFromModel does with coef_."""

    def __array__(self, dtype=None):
        return self.toarray() if dtype is None else self.toarray().astype(dtype)


class FGMClassifier(ClassifierMixin, BaseEstimator):
    """Feature Generating Machine (Tan, Tsang & Wang, JMLR 2014) as a
    scikit-learn classifier; each fit runs the engine of `fgm train`.

    Parameters mirror the config keys (docs/configuration.md):

    C : float, fgm.C            B : int, fgm.B
    max_iterations : fgm.max_iterations
    max_features : fgm.max_features (None or 0: no cap)
    loss : "squared_hinge" or "logistic", fgm.loss
    bias : bool, fgm.bias (an unregularised intercept)
    kind : "linear", "poly2", "hik" or "additive", features.kind
    groups : features.groups: a group file's path, or a list of groups,
        each a list of 0-based column indices
    feature_transform : features.transform, a name or a list of names (not
        `transform`: scikit-learn takes an estimator with a `transform`
        attribute for a transformer)
    memory_budget : engine.memory_budget ("1GB", or bytes as an int)
    n_jobs : engine.threads (None: 1; -1: every core); the model is the
        same bits for any value
    solver : the config key `solver` (fgm, sifs, exclusive, mslr,
        pnorm_kta); keys of another solver's section are passed in `params`
    params : dict of further config keys, e.g. {"apg.gap_tolerance": 1e-4}
    random_state : int or None: exclusive.group_seed with solver="exclusive"
        (the seed of its random groups); the other solvers are deterministic
        and do not use it
    cache_dir : engine.cache_dir for fits on a LIBSVM file path (None: a
        temporary directory, removed after the fit)
    verbose : the engine's log lines at INFO on stderr and its summary
        line on stdout (otherwise nothing is printed; the lines always go to
        the "fgm" logger)
    """

    def __init__(self, C=10.0, B=10, max_iterations=10, max_features=None, loss="squared_hinge", bias=False,
                 kind="linear", groups=None, feature_transform=None, memory_budget="1GB", n_jobs=None, solver="fgm",
                 params=None, random_state=None, cache_dir=None, verbose=False):
        self.C = C
        self.B = B
        self.max_iterations = max_iterations
        self.max_features = max_features
        self.loss = loss
        self.bias = bias
        self.kind = kind
        self.groups = groups
        self.feature_transform = feature_transform
        self.memory_budget = memory_budget
        self.n_jobs = n_jobs
        self.solver = solver
        self.params = params
        self.random_state = random_state
        self.cache_dir = cache_dir
        self.verbose = verbose

    # ---- configuration

    def _threads(self):
        if self.n_jobs is None:
            return 1
        if self.n_jobs < 0:
            return max(1, (os.cpu_count() or 1) + 1 + self.n_jobs)
        return int(self.n_jobs)

    def _config(self, work_dir):
        """The key=value arguments of `fgm train` for these parameters."""
        if self.kind not in _KINDS:
            raise ValueError(f"kind={self.kind!r}: features.kind must be one of {', '.join(_KINDS)}")
        keys = {"solver": self.solver}
        if self.solver == "fgm":
            keys.update({"fgm.C": float(self.C), "fgm.B": self.B, "fgm.max_iterations": self.max_iterations,
                         "fgm.max_features": self.max_features or 0, "fgm.loss": self.loss,
                         "fgm.bias": bool(self.bias)})
        if self.kind != "linear":
            keys["features.kind"] = self.kind
        if self.groups is not None:
            keys["features.groups"] = self._groups_file(work_dir)
        if self.feature_transform:
            stages = self.feature_transform
            keys["features.transform"] = [stages] if isinstance(stages, str) else list(stages)
        budget = self.memory_budget
        keys["engine.memory_budget"] = f"{int(budget)}B" if isinstance(budget, (int, np.integer)) else budget
        keys["engine.threads"] = self._threads()
        keys["engine.progress"] = "off"
        keys["output.report"] = False
        if self.solver == "exclusive" and self.random_state is not None:
            keys["exclusive.group_seed"] = int(self.random_state)
        for key, value in (self.params or {}).items():
            keys[key] = value
        return keys

    def _groups_file(self, work_dir):
        if _is_path(self.groups):
            return os.path.abspath(os.fspath(self.groups))
        path = os.path.join(work_dir, "groups.txt")
        with open(path, "w") as f:
            for group in self.groups:
                f.write(" ".join(str(int(j) + 1) for j in group) + "\n")  # the data's ids start at 1
        return path

    # ---- fitting

    def fit(self, X, y=None):
        """Fits on X (numpy array or scipy.sparse CSR/CSC/COO matrix) and
        labels y, or on a LIBSVM file or a store directory given as a path
        (then y is None: the labels are the file's)."""
        with tempfile.TemporaryDirectory(prefix="fgm-fit-") as work_dir:
            if _is_path(X):
                if y is not None:
                    raise ValueError("fit(path, y): the labels of a LIBSVM file or store are its own; pass y=None")
                self._fit_path(os.path.abspath(os.fspath(X)), work_dir)
            else:
                self._fit_arrays(X, y, work_dir)
        return self

    def _fit_arrays(self, X, y, work_dir):
        X, y = self._validate_data(X, y, accept_sparse=_SPARSE_FORMATS, dtype=[np.float64, np.float32],
                                   accept_large_sparse=True)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(f"FGMClassifier needs samples of at least 2 classes; y has one class: {classes[0]!r}")
        values = _label_values(classes)
        self._label_values = values
        labels = values[codes] if values is not None else codes.astype(np.float64)
        text_path = os.path.join(work_dir, "train.svm")
        n_features = _engine.write_libsvm(text_path, X, labels)
        keys = self._config(work_dir)
        keys["data.features"] = n_features
        keys["engine.cache_dir"] = os.path.join(work_dir, "cache")
        try:
            self._train(text_path, keys, work_dir)
        except ValueError as e:
            raise _engine.rows_named(e, text_path) from None
        self.classes_ = classes

    def _fit_path(self, path, work_dir):
        keys = self._config(work_dir)
        keys["engine.cache_dir"] = os.path.abspath(self.cache_dir) if self.cache_dir else os.path.join(
            work_dir, "cache")
        self._train(path, keys, work_dir)
        described = self.model_description_
        labels = ([c["label"] for c in described["classes"]] if described["classes"] else
                  [described["negative_label"], described["positive_label"]])
        self.classes_ = np.asarray(labels)
        self._label_values = self.classes_.astype(np.float64)
        self.n_features_in_ = int(described["n_features"])
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _train(self, data_path, keys, work_dir):
        out_dir = os.path.join(work_dir, "out")
        args = ["train", f"data.train={_engine.config_value(data_path)}",
                f"output.dir={_engine.config_value(out_dir)}"]
        args += [f"{key}={_engine.config_value(value)}" for key, value in keys.items()]
        self.summary_ = _engine.run(args, verbose=self.verbose, work_dir=work_dir).strip()
        with open(os.path.join(out_dir, "model.fgm"), "rb") as f:
            self._set_model(f.read())
        with open(os.path.join(out_dir, "run.json")) as f:
            self.run_ = json.load(f)
        for warning in self.run_.get("warnings", []):
            code, message = warning.get("code", ""), warning.get("message", str(warning))
            # A solve stopped above its tolerance: scikit-learn's ConvergenceWarning; the rest: FGMWarning.
            unconverged = "not_converged" in code or "above_tolerance" in code
            warnings.warn(f"{message} ({code})", ConvergenceWarning if unconverged else FGMWarning, stacklevel=3)

    def _set_model(self, model_bytes):
        self.model_ = bytes(model_bytes)
        self.model_description_ = _fgm.describe_model(self.model_)

    # ---- prediction

    def _check_X(self, X):
        check_is_fitted(self, "model_")
        return self._validate_data(X, accept_sparse=_SPARSE_FORMATS, dtype=[np.float64, np.float32],
                                   accept_large_sparse=True, reset=False)

    def decision_function(self, X):
        """w'φ(x) − b per row: shape (n,) for two classes (positive: classes_[1]),
        (n, n_classes) for one-vs-rest. X may also be a LIBSVM file's path
        (read row by row, its labels ignored, as `fgm predict` reads it)."""
        if _is_path(X):
            check_is_fitted(self, "model_")
            values, _ = _fgm.file_decision_values(self.model_, os.fspath(X), _budget_bytes(self.memory_budget))
        else:
            X = self._check_X(X)  # NotFittedError before anything reads model_
            values = _engine.decision_values(self.model_, X)
        return values[:, 0] if values.shape[1] == 1 else values

    def score(self, X, y=None, sample_weight=None):
        """Mean accuracy on X and y, or on a LIBSVM file's rows and labels (X a path, y None)."""
        if not _is_path(X):
            return super().score(X, y, sample_weight=sample_weight)
        check_is_fitted(self, "model_")
        values, labels = _fgm.file_decision_values(self.model_, os.fspath(X), _budget_bytes(self.memory_budget))
        index = (values[:, 0] > 0).astype(int) if values.shape[1] == 1 else np.argmax(values, axis=1)
        # The file's labels are label values; string classes were written as their index.
        written = self._label_values if self._label_values is not None else np.arange(len(self.classes_), dtype=float)
        return float(np.mean(written[index] == labels))

    def predict(self, X):
        d = self.decision_function(X)
        if d.ndim == 1:
            return self.classes_[(d > 0).astype(int)]
        return self.classes_[np.argmax(d, axis=1)]  # ties: the smaller class index, as `fgm predict`

    def _logistic(self):
        """Whether the decision value is a log-odds: the model's loss once
        fitted, else what the parameters will train."""
        described = getattr(self, "model_description_", None)
        if described is not None:
            return described["loss"] == "logistic" and not described["has_kernel_svm"]
        params = self.params or {}
        if self.solver == "fgm":
            return params.get("fgm.loss", self.loss) == "logistic"
        if self.solver == "exclusive":
            return params.get("exclusive.loss", "logistic") == "logistic"
        return self.solver == "mslr"

    @available_if(_logistic)
    def predict_proba(self, X):
        """Models trained with the logistic loss (fgm with loss="logistic",
        mslr, exclusive with its default loss): σ(decision) for two classes;
        one-vs-rest probabilities normalised over the classes."""
        d = self.decision_function(X)
        if d.ndim == 1:
            p = expit(d)
            return np.column_stack([1 - p, p])
        p = expit(d)
        return p / p.sum(axis=1, keepdims=True)

    @available_if(_logistic)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    # ---- fitted attributes

    def _class_parts(self):
        m = self.model_description_
        if m["classes"]:
            return [(c["features"], c["bias"]) for c in m["classes"]]
        return [(m["features"], m["bias"])]

    @property
    def coef_(self):
        """Weights over the input features (scipy.sparse CSR, one row per
        one-vs-rest class, one row for two classes); linear models only."""
        check_is_fitted(self, "model_")
        m = self.model_description_
        if m["feature_kind"] != "linear" or m["has_kernel_svm"]:
            raise AttributeError(f"coef_ is defined for linear models; this model's features are "
                                 f"{m['feature_kind']!r}: see selected_features_")
        rows, cols, vals = [], [], []
        for k, (features, _) in enumerate(self._class_parts()):
            for f in features:
                rows.append(k)
                cols.append(f["ids"][0])
                vals.append(f["weight"])
        shape = (len(self._class_parts()), int(m["n_features"]))
        return _SparseCoef((vals, (rows, cols)), shape=shape)

    @property
    def intercept_(self):
        """−b per class (the decision value is w'x − b = coef_·x + intercept_)."""
        check_is_fitted(self, "model_")
        return np.array([-bias for _, bias in self._class_parts()])

    @property
    def selected_features_(self):
        """Every selected feature: a list of dicts with the class (None for
        two classes), kind (linear, square, cross, hik, additive; rbf for
        the kernel SVM of pnorm_kta with kta.kernel = "rbf", whose weight is
        the kernel weight), ids (0-based columns; two for a cross), level,
        group, weight and batch."""
        check_is_fitted(self, "model_")
        m = self.model_description_
        out = []
        for k, (features, _) in enumerate(self._class_parts()):
            for f in features:
                entry = dict(f)
                entry["class"] = self.classes_[k] if m["classes"] else None
                out.append(entry)
        kernel = m["kernel_svm"]
        for j, weight, bandwidth in zip(kernel.get("feature_ids", []), kernel.get("kernel_weights", []),
                                        kernel.get("bandwidths", [])):
            out.append({"kind": kernel["kernel"], "ids": [j], "level": None, "group": None, "weight": weight,
                        "bandwidth": bandwidth, "batch": 0, "class": None})
        return out

    # ---- model files

    def save_model(self, path):
        """Writes the model file `fgm predict` and `fgm inspect` read."""
        check_is_fitted(self, "model_")
        _fgm.write_model(os.fspath(path), self.model_)

    def _more_tags(self):
        # mslr and pnorm_kta train two-class models only (the engine refuses more labels).
        return {"binary_only": self.solver in ("mslr", "pnorm_kta"), "requires_y": True}
