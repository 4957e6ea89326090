"""Exceptions of the right type with the engine's message; nothing on stdout; logging; the GIL."""
import logging
import threading

import numpy as np
import pytest

import fgm
from test_inputs import planted_data


def test_bad_config_is_a_value_error_naming_the_key():
    X, y = planted_data()
    with pytest.raises(ValueError, match="fgm.C"):
        fgm.FGMClassifier(C=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="fgm.loss"):
        fgm.FGMClassifier(loss="hinge").fit(X, y)
    with pytest.raises(ValueError, match="apg.no_such_key"):
        fgm.FGMClassifier(params={"apg.no_such_key": 1}).fit(X, y)
    with pytest.raises(ValueError, match="features.kind"):
        fgm.FGMClassifier(kind="rbf").fit(X, y)


def test_bad_data_is_a_value_error_naming_the_row():
    X, y = planted_data()
    X[17, 5] = 1e300  # finite in float64, beyond float32: the store cannot hold it
    with pytest.raises(ValueError, match=r"row 17 of X\b"):
        fgm.FGMClassifier().fit(X, y)
    with pytest.raises(ValueError, match="class"):
        fgm.FGMClassifier().fit(X, np.ones(len(y)))


def test_io_errors_are_os_errors(tmp_path):
    with pytest.raises(OSError):
        fgm.FGMClassifier().fit(str(tmp_path / "missing.svm"))
    with pytest.raises(OSError):
        fgm.load_model(tmp_path / "missing.fgm")


def test_a_file_that_is_not_a_model_is_a_value_error(tmp_path):
    path = tmp_path / "garbage.fgm"
    path.write_bytes(b"not a model" * 10)
    with pytest.raises(ValueError, match="model"):
        fgm.load_model(path)


def test_a_budget_too_small_is_a_memory_error(shared_data):
    with pytest.raises(MemoryError, match="engine.memory_budget"):
        fgm.FGMClassifier(memory_budget="64KB").fit(str(shared_data / "a9a" / "a9a"))


def test_nothing_on_stdout_unless_verbose(capfd, caplog):
    X, y = planted_data()
    with caplog.at_level(logging.INFO, logger="fgm"):
        fgm.FGMClassifier(B=3, max_iterations=2).fit(X, y)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert any("training on 300 rows" in r.getMessage() for r in caplog.records)  # the engine's lines, via logging
    fgm.FGMClassifier(B=3, max_iterations=2, verbose=True).fit(X, y)
    out, err = capfd.readouterr()
    assert "selected=" in out and "objective=" in out
    assert "training on 300 rows" in err


def test_the_gil_is_released_while_training(shared_data):
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        start = len(ticks)
        fgm.FGMClassifier(B=10, max_iterations=5).fit(str(shared_data / "a9a" / "a9a"))
        during = len(ticks) - start
    finally:
        done.set()
        thread.join()
    assert during > 10


def test_ctrl_c_interrupts_a_long_fit_cleanly(shared_data, tmp_path, monkeypatch, capfd):
    import _thread
    import tempfile
    import time

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the fit's temporaries go
    # 40 poly-2 iterations on a9a with no early stop: over 20 s on an idle 2-core machine.
    long_fit = fgm.FGMClassifier(kind="poly2", B=20, max_iterations=40, params={"fgm.eps_outer": 0.0})
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        long_fit.fit(str(shared_data / "a9a" / "a9a"))
    assert time.monotonic() - start < 5.0  # stopped at the next block or solver iteration
    timer.join()
    assert list(tmp_path.iterdir()) == []  # the temporary directory and the stdout capture are gone
    assert not hasattr(long_fit, "model_")
    print("stdout is back")
    assert capfd.readouterr().out == "stdout is back\n"
    X, y = planted_data()
    assert fgm.FGMClassifier(B=3).fit(X, y).score(X, y) > 0.9  # the next fit runs


def test_ctrl_c_interrupts_a_long_in_memory_solve():
    """The other solvers' in-memory loops (here the exclusive solver's FISTA on
    its working set, which reads no block) stop at the next iteration too."""
    import _thread
    import time

    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 1000)) * (rng.random((300, 1000)) < 0.5)
    y = np.where(X[:, :20] @ rng.standard_normal(20) > 0, 1, -1)  # separable: nearly hard-margin
    # Fista-pcp, logistic, on separable data with a small λ: the weights keep
    # growing, so the solve runs to its (large) cap. (licp, which this test
    # used, now finishes in well under a second by coordinate ascent.)
    long_fit = fgm.FGMClassifier(solver="exclusive", params={
        "exclusive.algorithm": "pcp", "exclusive.loss": "logistic", "exclusive.random_groups": 5,
        "exclusive.lambda": 1e-4, "exclusive.tolerance": 1e-12, "exclusive.max_iterations": 100000000})
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        long_fit.fit(X, y)
    assert time.monotonic() - start < 6.0
    timer.join()
    assert not hasattr(long_fit, "model_")
