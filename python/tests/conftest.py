"""Shared fixtures: the fgm binary the CLI comparisons run, the shared data, CLI runs."""
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _binary():
    path = os.environ.get("FGM_BINARY", str(REPO / "build" / "fgm"))
    return path


@pytest.fixture(scope="session")
def fgm_binary():
    path = _binary()
    if not os.access(path, os.X_OK):
        pytest.fail(f"the fgm binary {path} is missing: build it (cmake --build build --target fgm) or set FGM_BINARY")
    return path


@pytest.fixture(scope="session")
def shared_data():
    path = Path(os.environ.get("FGM_SHARED_DATA_DIR", str(REPO.parent / "shared" / "data")))
    if not (path / "a9a" / "a9a").exists():
        pytest.fail(f"the shared data {path} is missing (a9a/a9a): set FGM_SHARED_DATA_DIR")
    return path


@pytest.fixture
def run_cli(fgm_binary):
    """Runs the fgm binary; returns its stdout (fails the test on a nonzero exit)."""

    def run(*args, cwd=None):
        result = subprocess.run([fgm_binary, *map(str, args)], capture_output=True, text=True, cwd=cwd)
        assert result.returncode == 0, f"fgm {' '.join(map(str, args))} failed:\n{result.stderr}"
        return result.stdout

    return run
