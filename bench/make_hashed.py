#!/usr/bin/python3
"""Writes the hashed-id benchmark inputs of issue 9 (deterministic, numpy).

  make_hashed.py OUT_DIR [--rows 1000000] [--nnz-per-row 10] [--vocabulary 200000]
                 [--id-bits 40] [--zipf 1.0] [--seed 9]

A vocabulary of `--vocabulary` distinct ids is drawn uniformly from
[0, 2^id_bits) (as a hashing vectorizer maps tokens), token popularity is
Zipf(rank^-zipf). Each row draws `--nnz-per-row` tokens (duplicates inside a
row merged), value 1, label +1 or -1 by a fair coin. Two LIBSVM files (1-based)
with the same nonzeros are written:
  hashed.svm  feature id = the hashed id + 1 (ids up to 2^id_bits)
  dense.svm   feature id = the rank of the hashed id among the ids that occur + 1
              (order preserving, so rows stay sorted in both)
and two.svm, the 2-row file whose one feature index is 4,294,967,297.
Prints key=value lines: rows, nnz, vocabulary, max_hashed_id.
"""
import argparse
import os
import sys

import numpy as np


def write_rows(path, labels, row_ptr, ids):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        chunk = []
        for r in range(len(labels)):
            toks = ids[row_ptr[r]:row_ptr[r + 1]]
            chunk.append(("+1 " if labels[r] > 0 else "-1 ") + " ".join(f"{t}:1" for t in toks.tolist()))
            if len(chunk) >= 65536:
                f.write("\n".join(chunk) + "\n")
                chunk = []
        if chunk:
            f.write("\n".join(chunk) + "\n")
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--nnz-per-row", type=int, default=10)
    p.add_argument("--vocabulary", type=int, default=200_000)
    p.add_argument("--id-bits", type=int, default=40)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=9)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)

    vocab = np.unique(rng.integers(0, 2**a.id_bits, size=a.vocabulary, dtype=np.uint64))
    while len(vocab) < a.vocabulary:  # collisions are rare at 2^40; top up deterministically
        extra = rng.integers(0, 2**a.id_bits, size=a.vocabulary - len(vocab), dtype=np.uint64)
        vocab = np.unique(np.concatenate([vocab, extra]))
    popularity = 1.0 / np.arange(1, len(vocab) + 1, dtype=np.float64) ** a.zipf
    popularity /= popularity.sum()
    rank_of_token = rng.permutation(len(vocab))  # popular tokens spread over the id space

    draws = rng.choice(len(vocab), size=(a.rows, a.nnz_per_row), p=popularity)
    cols = np.sort(rank_of_token[draws], axis=1)  # vocabulary index, increasing = id order
    keep = np.ones_like(cols, dtype=bool)
    keep[:, 1:] = cols[:, 1:] != cols[:, :-1]
    row_ptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    flat = cols[keep]
    labels = rng.integers(0, 2, size=a.rows) * 2 - 1

    write_rows(os.path.join(a.out, "hashed.svm"), labels, row_ptr, vocab[flat] + np.uint64(1))
    used, dense = np.unique(flat, return_inverse=True)  # ranks among the ids that occur
    write_rows(os.path.join(a.out, "dense.svm"), labels, row_ptr, dense.astype(np.int64) + 1)
    with open(os.path.join(a.out, "two.svm"), "w") as f:
        f.write("+1 4294967297:1\n-1 1:1\n")
    print(f"rows={a.rows} nnz={len(flat)} vocabulary={len(vocab)} "
          f"distinct_used={len(used)} max_hashed_id={int(vocab[flat].max()) + 1}")


if __name__ == "__main__":
    sys.exit(main())
