"""fgm.path: `fgm path` from Python, a fitted estimator per point."""

import csv
import json
import os
import tempfile

import numpy as np
from sklearn.base import clone

from . import _engine
from ._classifier import FGMClassifier, _is_path, _label_values


def _cell(text):
    if text == "":
        return np.nan
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def _write_labelled(path, X, y, classes, values):
    """Held-out rows with the training classes' label values (a label outside them is an error)."""
    y = np.asarray(y)
    positions = np.searchsorted(classes, y)
    if np.any(positions >= len(classes)) or np.any(classes[np.minimum(positions, len(classes) - 1)] != y):
        raise ValueError("the held-out labels include a class absent from the training labels")
    labels = values[positions] if values is not None else positions.astype(np.float64)
    _engine.write_libsvm(path, X, labels)


def path(X, y=None, *, features=None, B=None, C=None, folds=0, fold_seed=1, debias=True, validation=None,
         test=None, estimator=None):
    """Models along a path in one `fgm path` run (solver = fgm, two classes).

    X, y: arrays or sparse matrices, or X a LIBSVM file / store path (y None).
    features: feature counts (path.features), or B / C: lists of values
    (path.B, path.C); folds: k-fold cross-validation over the points
    (path.folds, path.fold_seed); validation, test: (X, y) pairs or LIBSVM
    paths (data.validation, data.test); estimator: an FGMClassifier whose
    parameters set the other keys.

    Returns one row per point (path.csv's columns, plus "estimator": a fitted
    FGMClassifier for the point and, with debias, "debiased_estimator"), as a
    pandas DataFrame when pandas is installed (path.json in .attrs["path"]),
    else a dict of lists (path.json under "path")."""
    base = clone(estimator) if estimator is not None else FGMClassifier()
    chosen = [name for name, v in (("features", features), ("B", B), ("C", C)) if v is not None]
    if len(chosen) != 1:
        raise ValueError("path: give exactly one of features=, B= or C= (a list of values)")
    with tempfile.TemporaryDirectory(prefix="fgm-path-") as work_dir:
        keys = base._config(work_dir)
        keys[{"features": "path.features", "B": "path.B", "C": "path.C"}[chosen[0]]] = [
            float(v) if chosen[0] == "C" else int(v) for v in {"features": features, "B": B, "C": C}[chosen[0]]]
        keys.update({"path.folds": int(folds), "path.debias": bool(debias)})
        if folds >= 2:
            keys["path.fold_seed"] = int(fold_seed)  # the engine refuses a seed without folds
        if _is_path(X):
            if y is not None:
                raise ValueError("path(path, y): the labels of a LIBSVM file or store are its own; pass y=None")
            train = os.path.abspath(os.fspath(X))
            keys["engine.cache_dir"] = os.path.abspath(base.cache_dir) if base.cache_dir else os.path.join(
                work_dir, "cache")
            classes = values = None
            n_features = None
        else:
            X, y = base._validate_data(X, y, accept_sparse=["csr", "csc", "coo"], dtype=[np.float64, np.float32],
                                       accept_large_sparse=True)
            classes, codes = np.unique(y, return_inverse=True)
            if len(classes) != 2:
                raise ValueError(f"path takes two classes (fgm path); y has {len(classes)}")
            values = _label_values(classes)
            train = os.path.join(work_dir, "train.svm")
            n_features = _engine.write_libsvm(train, X, values[codes] if values is not None else codes.astype(float))
            keys["data.features"] = n_features
            keys["engine.cache_dir"] = os.path.join(work_dir, "cache")
        for key, held_out in (("data.validation", validation), ("data.test", test)):
            if held_out is None:
                continue
            if _is_path(held_out):
                keys[key] = os.path.abspath(os.fspath(held_out))
            elif classes is None:
                raise ValueError(f"{key}: pass a LIBSVM path when the training data is a path")
            else:
                keys[key] = os.path.join(work_dir, key.split(".")[1] + ".svm")
                _write_labelled(keys[key], held_out[0], held_out[1], classes, values)
        out_dir = os.path.join(work_dir, "out")
        args = ["path", f"data.train={_engine.config_value(train)}", f"output.dir={_engine.config_value(out_dir)}"]
        args += [f"{k}={_engine.config_value(v)}" for k, v in keys.items()]
        try:
            _engine.run(args, verbose=base.verbose, work_dir=work_dir)
        except ValueError as e:
            raise _engine.rows_named(e, train) from None
        with open(os.path.join(out_dir, "path.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(out_dir, "path.json")) as f:
            path_json = json.load(f)
        columns = {name: [_cell(r[name]) for r in rows] for name in (rows[0].keys() if rows else [])}
        names = ["estimator"] + (["debiased_estimator"] if debias else [])
        for name, suffix in zip(names, ["", "-debiased"]):
            columns[name] = []
            for r in rows:
                with open(os.path.join(out_dir, f"point-{r['point']}{suffix}.fgm"), "rb") as f:
                    columns[name].append(_fitted(base, f.read(), classes, values, n_features, r))
    try:
        import pandas as pd
    except ImportError:
        columns["path"] = path_json
        return columns
    table = pd.DataFrame(columns)
    table.attrs["path"] = path_json
    return table


def _fitted(base, model_bytes, classes, values, n_features, row):
    clf = clone(base).set_params(B=int(row["B"]), C=float(row["C"]))
    clf._set_model(model_bytes)
    m = clf.model_description_
    if classes is None:
        classes = np.asarray([m["negative_label"], m["positive_label"]])
        values = classes.astype(np.float64)
        n_features = int(m["n_features"])
    clf.classes_ = classes
    clf._label_values = values
    clf.n_features_in_ = n_features
    return clf
