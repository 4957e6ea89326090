"""Running the C++ engine's commands in this process (fgm._fgm) from Python.

Every fit, ingest and prediction here goes through the CLI's own code: data
held in Python is written as LIBSVM text into a temporary directory and
handed to `fgm train` exactly as a user's file would be, so a model trained
here is the model `fgm train` makes from the same rows and keys.
"""

import logging
import os
import re
import tempfile

import numpy as np
import scipy.sparse as sp

from . import _fgm

logger = logging.getLogger("fgm")
# A library's logger: silent until the application configures logging (or verbose=True).
logger.addHandler(logging.NullHandler())


def _forward_log(level, message):
    logger.log(level, message)


_fgm.set_log_callback(_forward_log)


class _Verbosity:
    """With verbose set, the engine's log lines (INFO and up) are printed on
    stderr through a handler on the "fgm" logger, unless the caller gave that
    logger a handler of its own."""

    def __init__(self, verbose):
        self.verbose = bool(verbose)
        self.handler = None
        self.level = None

    def __enter__(self):
        if self.verbose:
            self.level = logger.level
            if logger.level == logging.NOTSET or logger.level > logging.INFO:
                logger.setLevel(logging.INFO)
            if all(isinstance(h, logging.NullHandler) for h in logger.handlers):
                self.handler = logging.StreamHandler()
                self.handler.setFormatter(logging.Formatter("fgm %(levelname)s: %(message)s"))
                logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        if self.handler is not None:
            logger.removeHandler(self.handler)
        if self.level is not None:
            logger.setLevel(self.level)
        return False


def run(args, verbose=False, work_dir=None):
    """Runs `fgm <args>` in this process; returns what it printed on stdout.

    The GIL is released while the engine runs; engine errors arrive as
    ValueError (configuration, data), OSError, MemoryError (memory budget).
    """
    args = [str(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="fgm-stdout-", dir=work_dir) as tmp:
        with _Verbosity(verbose):
            code, text = _fgm.run_command(args, os.path.join(tmp, "stdout.txt"))
    if code != 0:
        raise RuntimeError(f"fgm {args[0]} ended with exit code {code}: {text.strip()}")
    if verbose and text:
        print(text, end="")
    return text


def config_value(value):
    """A Python value as the TOML text a `key=value` argument takes."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # inf and nan are TOML too: the engine's range check names the key
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(config_value(v) for v in value) + "]"
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot pass {type(value).__name__} {value!r} as a config value")


def canonical_csr(X):
    """X (numpy array or scipy.sparse, float32/float64) as CSR arrays with
    sorted, unique column indices; int32/int64 index arrays. Sparse input is
    never densified; it is copied only when its format or order requires it."""
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
    else:
        X = sp.csr_matrix(np.asarray(X))
    data = X.data
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    indptr, indices = X.indptr, X.indices
    if indptr.dtype not in (np.int32, np.int64):
        indptr = indptr.astype(np.int64)
    if indices.dtype not in (np.int32, np.int64):
        indices = indices.astype(np.int64)
    return (np.ascontiguousarray(indptr), np.ascontiguousarray(indices), np.ascontiguousarray(data),
            X.shape[0], X.shape[1])


def rows_named(error, text_path):
    """An engine message about the temporary LIBSVM file, with its
    `file:line:column` rewritten as the row of X (0-based) it came from."""
    message = str(error)
    pattern = re.escape(text_path) + r":(\d+):(\d+)"

    def as_row(match):
        return f"row {int(match.group(1)) - 1} of X"

    rewritten = re.sub(pattern, as_row, message)
    if rewritten == message:
        return error
    return type(error)(rewritten)


def write_libsvm(path, X, labels):
    """Writes X's rows with the given numeric labels as LIBSVM text (ids 1-based)."""
    indptr, indices, data, n_rows, n_features = canonical_csr(X)
    _fgm.write_libsvm(os.fspath(path), indptr, indices, data, np.asarray(labels, dtype=np.float64), n_features)
    return n_features


def decision_values(model_bytes, X):
    """Decision values of X's rows under the model: shape (n_rows, K)."""
    indptr, indices, data, n_rows, _ = canonical_csr(X)
    return _fgm.decision_values(model_bytes, indptr, indices, data, n_rows)
