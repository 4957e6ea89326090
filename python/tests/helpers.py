"""Helpers shared by the tests: the model's trained content, LIBSVM subsets."""
import bz2
import struct

from fgm import _fgm

# What training decides; the rest of a model file is provenance (paths, checksums, config text, time).
_TRAINED = ("solver", "loss", "C", "B", "iterations", "has_bias", "bias", "n_features", "positive_label",
            "negative_label", "feature_kind", "objective", "features", "classes", "transforms")


def _bits(value):
    """Floats as their IEEE bit patterns, so == means bit for bit."""
    if isinstance(value, float):
        return struct.pack("<d", value).hex()
    if isinstance(value, dict):
        return {k: _bits(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bits(v) for v in value]
    return value


def trained_content(model_bytes):
    described = _fgm.describe_model(model_bytes)
    return {key: _bits(described[key]) for key in _TRAINED}


def model_file_content(path):
    with open(path, "rb") as f:
        return trained_content(f.read())


def head_lines(source, out, n):
    """The first n lines of a LIBSVM file (plain or .bz2) copied to `out`."""
    opener = bz2.open if str(source).endswith(".bz2") else open
    with opener(source, "rt") as f, open(out, "w") as g:
        for i, line in enumerate(f):
            if i == n:
                break
            g.write(line)
    return out
