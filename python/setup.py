# Packages the fgm module the CMake build put in build/python/fgm (the C++
# extension _fgm and the Python files beside it): `make python` runs
#   .venv/bin/pip install --no-build-isolation --no-index --no-deps build/python
# Offline by design: Debian's setuptools and wheel, no download.
from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    """The package holds a compiled extension: a platform wheel, not a pure one."""

    def has_ext_modules(self):
        return True


setup(
    name="fgm",
    version=open("VERSION").read().strip(),
    description="Feature Generating Machine: scikit-learn estimators over fgm's C++ engine",
    packages=["fgm"],
    package_data={"fgm": ["_fgm*.so"]},
    include_package_data=True,
    python_requires=">=3.9",
    install_requires=["numpy", "scipy", "scikit-learn"],
    distclass=BinaryDistribution,
    zip_safe=False,
)
