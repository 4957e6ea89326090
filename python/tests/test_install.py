"""`make python`'s install, offline: a virtual environment over Debian's packages gets fgm from build/python."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_offline_install_into_a_virtual_environment(tmp_path):
    package = Path(os.environ.get("FGM_PYTHON_PACKAGE_DIR", str(REPO / "build" / "python")))
    assert (package / "setup.py").exists(), f"{package} holds no built package (cmake --build build --target fgm_python)"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)  # the installed copy, not the build tree's
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-build-isolation",
                              "--no-index", "--no-deps", str(package)], env=env, capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    check = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import fgm, numpy as np; X = np.eye(6); y = [0, 1] * 3; "
                            "print(fgm.__file__); print(fgm.FGMClassifier(B=2).fit(X, y).n_features_in_)"],
                           env=env, capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    location, n_features = check.stdout.split()
    assert location.startswith(str(venv)) and n_features == "6"
