"""fgm from Python: scikit-learn estimators over fgm's C++ engine (docs/python.md).

    import fgm
    clf = fgm.FGMClassifier(B=10, C=10.0).fit(X, y)   # X: numpy or scipy.sparse
    clf.selected_features_, clf.coef_, clf.predict(X_test)
    clf = fgm.FGMClassifier().fit("data.svm")         # out of core: a LIBSVM file or a store
    clf.save_model("model.fgm")                         # `fgm predict --model model.fgm ...`
"""

import os

import numpy as np

from . import _engine, _fgm
from ._classifier import FGMClassifier, FGMWarning
from ._path import path

__version__ = _fgm.__version__
__all__ = ["FGMClassifier", "FGMWarning", "path", "ingest", "load_model", "save_model", "__version__"]


def load_model(path):
    """A fitted FGMClassifier from a model file written by `fgm train` (or save_model)."""
    clf = FGMClassifier()
    clf._set_model(_fgm.read_model(os.fspath(path)))
    m = clf.model_description_
    labels = [c["label"] for c in m["classes"]] if m["classes"] else [m["negative_label"], m["positive_label"]]
    clf.classes_ = np.asarray(labels)
    clf._label_values = clf.classes_.astype(np.float64)
    clf.n_features_in_ = int(m["n_features"])
    params = m["config"]
    # The parameters the model was trained with, where they are this estimator's.
    for name, key, cast in (("C", "fgm.C", float), ("B", "fgm.B", int), ("loss", "fgm.loss", str),
                            ("kind", "features.kind", str), ("solver", "solver", str)):
        if key in params:
            setattr(clf, name, cast(params[key].strip('"')))
    return clf


def save_model(estimator, path):
    """Writes a fitted FGMClassifier's model file (what `fgm predict` reads)."""
    estimator.save_model(path)


def ingest(source, out, y=None, memory_budget="256MB", threads=1, verbose=False, **options):
    """Writes a store directory `out` with `fgm ingest`: from a LIBSVM file
    (`source` a path), or from X and y held in memory (written as LIBSVM text
    first, in a temporary directory beside `out`). Further `fgm ingest`
    options by name: features=, tile_rows=, block_bytes=, max_store_bytes=,
    partitions=. Returns the summary line's fields as a dict."""
    import tempfile

    out = os.path.abspath(os.fspath(out))
    with tempfile.TemporaryDirectory(prefix="fgm-ingest-", dir=os.path.dirname(out)) as tmp:
        if isinstance(source, (str, os.PathLike)):
            if y is not None:
                raise ValueError("ingest(path, y=...): the labels of a LIBSVM file are its own")
            input_path = os.path.abspath(os.fspath(source))
        else:
            if y is None:
                raise ValueError("ingest(X, y): labels are required for data held in memory")
            y = np.asarray(y)
            classes, codes = np.unique(y, return_inverse=True)
            from ._classifier import _label_values
            values = _label_values(classes)
            labels = values[codes] if values is not None else codes.astype(np.float64)
            input_path = os.path.join(tmp, "data.svm")
            n_features = _engine.write_libsvm(input_path, source, labels)
            options.setdefault("features", n_features)
        args = ["ingest", input_path, "--out", out, "--memory-budget", str(memory_budget),
                "--threads", str(threads), "--progress", "off"]
        for name, value in options.items():
            args += ["--" + name.replace("_", "-"), str(value)]
        text = _engine.run(args, verbose=verbose, work_dir=tmp)
    return dict(field.split("=", 1) for field in text.split() if "=" in field)
