#!/usr/bin/python3
"""Sparse synthetic binary data with a planted sparse linear model.

Used by bench/compare_liblinear.py (the `synth-sparse` dataset); the data is
written under bench/work and never committed.

Model (fixed seed, so the files are identical on every run):
  * Feature popularity is Zipf-like: feature ids are a random permutation of
    1..M and the feature at popularity rank r is drawn with probability
    proportional to 1 / (r + 10)^s  (s = 1.05).
  * Every row draws `nnz` ids from that distribution (duplicates are merged,
    so rows have slightly fewer than nnz distinct features); values are
    binary (1).
  * The planted model: `relevant` features chosen at random among the 1000
    most popular ones, weights N(0, 1); label y = sign(x·w + 0.5·N(0,1)).
    Rows without a relevant feature get a label from the noise alone, so the
    Bayes accuracy is below 100%.
Outputs in OUT: train.svm, test.svm (LIBSVM text, 1-based), truth.txt
(relevant ids and weights), train.npz / test.npz (the same rows as CSR
arrays, so the benchmark can hand them to LIBLINEAR without a slow Python
text parse).
"""
import argparse
import os

import numpy as np


def zipf_probabilities(m, s, offset=10.0):
    ranks = np.arange(1, m + 1, dtype=np.float64)
    p = 1.0 / (ranks + offset) ** s
    return p / p.sum()


def make_rows(rng, n, m, nnz, perm, cdf, w_full):
    """CSR rows (indptr, indices 0-based, sorted, unique) and labels."""
    draws = np.searchsorted(cdf, rng.random((n, nnz)), side="right")
    draws = np.minimum(draws, m - 1)
    ids = np.sort(perm[draws], axis=1)
    keep = np.ones_like(ids, dtype=bool)
    keep[:, 1:] = ids[:, 1:] != ids[:, :-1]
    counts = keep.sum(axis=1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = ids[keep].astype(np.int64)
    margin = np.add.reduceat(w_full[indices], indptr[:-1]) if indices.size else np.zeros(n)
    margin[counts == 0] = 0.0
    margin = margin + 0.5 * rng.standard_normal(n)
    y = np.where(margin > 0, 1, -1).astype(np.int8)
    return indptr, indices, y


def write_svm(path, indptr, indices, y):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        chunk = 20000
        n = len(y)
        for start in range(0, n, chunk):
            lines = []
            for i in range(start, min(n, start + chunk)):
                row = indices[indptr[i]:indptr[i + 1]] + 1
                lines.append(("+1 " if y[i] > 0 else "-1 ") + " ".join(f"{j}:1" for j in row.tolist()))
            f.write("\n".join(lines))
            f.write("\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--test-rows", type=int, default=50000)
    ap.add_argument("--features", type=int, default=1000000)
    ap.add_argument("--nnz", type=int, default=30)
    ap.add_argument("--relevant", type=int, default=100)
    ap.add_argument("--zipf", type=float, default=1.05)
    ap.add_argument("--seed", type=int, default=20240601)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    m = a.features
    perm = rng.permutation(m)                      # rank -> feature id (0-based)
    cdf = np.cumsum(zipf_probabilities(m, a.zipf))
    relevant_ranks = rng.choice(1000, size=a.relevant, replace=False)
    relevant = perm[relevant_ranks]
    w_full = np.zeros(m)
    w_full[relevant] = rng.standard_normal(a.relevant)
    with open(os.path.join(a.out, "truth.txt"), "w") as f:
        f.write("# feature (1-based) weight popularity_rank\n")
        for fid, r in sorted(zip(relevant.tolist(), relevant_ranks.tolist())):
            f.write(f"{fid + 1} {w_full[fid]:.6f} {r + 1}\n")
    for name, n in (("train", a.rows), ("test", a.test_rows)):
        indptr, indices, y = make_rows(rng, n, m, a.nnz, perm, cdf, w_full)
        np.savez(os.path.join(a.out, name + ".npz"), indptr=indptr, indices=indices.astype(np.int32),
                 y=y, n_features=np.int64(m))
        write_svm(os.path.join(a.out, name + ".svm"), indptr, indices, y)
        print(f"{name}: {n} rows, {indices.size} nnz, positives {int((y > 0).sum())}")


if __name__ == "__main__":
    main()
