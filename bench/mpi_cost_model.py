#!/usr/bin/python3
"""The time model of docs/distributed.md ("Cost model"): per scoring pass and
per APG iteration, for kddb and the 10^14-dimensional poly-2 case on 8-512
ranks of a 25 Gb/s network. Prints the markdown tables of the doc:

    /usr/bin/python3 bench/mpi_cost_model.py [--alpha 3e-6]

Every number below is an assumption stated in the doc; the compute rates are
this machine's measurements (bench/README.md, and the MPI section there).
"""
import argparse
import math

# ---------------------------------------------------------------- assumptions
BETA = 8 / 25e9            # s per byte: 25 Gb/s, payload at line rate (no protocol overhead)
MEM_BW = 12e9              # B/s, one rank's memory bandwidth (measured read bandwidth 10.7-15.8 GB/s)
R_RESIDENT = 1.0e9         # nnz/s, linear scoring pass on a resident tiled store, 2 threads (tall store)
R_STREAMED = 6.0e7 / 0.504  # nnz/s, the same store streamed from the page cache (0.50 s per pass)
SCAN = 1e-9                # s per feature: top-B offers over a dense score vector (assumed, ~1 ns)
APG_ROW = 65e-9            # s per own row per APG evaluation (distributed APG on main, measured here)
EVALS_PER_ITER = 2.014     # loss evaluations per APG iteration: gradient + 1 trial + failed trials
#                            (news20: (1,144 - 10 initial) evaluations in 563 iterations, 8 failed trials)
EXTRA_ROUNDS_PER_ITER = 70 / 261  # batched line search: rounds after an iteration's first (news20, 2-4 ranks,
#                                   bench/README.md: 645 collectives = 1 + 22 + sum(3 + 2 I_t + E_t), E = 70, I = 261)

KDDB = dict(n=19_264_097, m=29_890_095, nnz_per_row=29.4)
POLY2 = dict(n=1_000_000_000, m=15_000_000, nnz_per_row=29.0)
POLY2_PASS_PER_MROW = 1.57  # s per 10^6 rows: scoring pass inside the 1M-row training run (2 threads)
POLY2_M_FLOOR = 0.5        # s of that pass that scale with m, not rows (estimate: 2.1 s measured on a 20,000-row
#                            store with m = 15M under load average 12, ~3-4x the quiet-machine time)
POLY2_SEED_PAIRS = 256 * 255 // 2
POLY2_CANDIDATES = 21_219   # candidate pairs of the weak-signal benchmark (the larger of the two measured)
KS = [8, 16, 32, 64, 128, 256, 512]


def ring_allgather(K, total_bytes, alpha):
    """Each rank ends with total_bytes (K pieces): (K-1) steps."""
    return (K - 1) * alpha + (K - 1) / K * total_bytes * BETA


def log_allgather(K, total_bytes, alpha):
    """Recursive doubling / Bruck: ceil(log2 K) steps, same volume."""
    return math.ceil(math.log2(K)) * alpha + (K - 1) / K * total_bytes * BETA


def alltoall(K, send_bytes, alpha):
    """Pairwise exchange: each rank sends send_bytes in K-1 messages."""
    return (K - 1) * alpha + (K - 1) / K * send_bytes * BETA


def tree_reduce_bcast(K, bytes_, alpha):
    """Reduce along the partition tree, then broadcast: 2 ceil(log2 K) steps of bytes_."""
    return 2 * math.ceil(math.log2(K)) * (alpha + bytes_ * BETA)


def ms(x):
    return f"{x * 1e3:,.0f}" if x >= 0.0995 else f"{x * 1e3:.2f}" if x < 0.00995 else f"{x * 1e3:.1f}"


def gib(x):
    return f"{x / 2**30:,.1f}"


def kddb_scoring(alpha):
    n, m = KDDB["n"], KDDB["m"]
    nnz = n * KDDB["nnz_per_row"]
    print(f"kddb scoring pass (n = {n:,}, m = {m:,}, nnz = {nnz:.3g}; P = K partitions; alpha = {alpha * 1e6:g} us)\n")
    print("| K | compute, streamed (allgather design) ms | compute, resident ms | allgather design: allgather ms | "
          "allgather design: tree + top-B ms | allgather design: score memory per rank GiB | column ranges (built): "
          "all-to-all + tree + top-B ms | column ranges: exchange if every share went sparse ms (bound) | "
          "allgather design total (streamed) ms | column ranges total (resident) ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for K in KS:
        c_stream, c_res = nnz / K / R_STREAMED, nnz / K / R_RESIDENT
        zero = 8 * m / MEM_BW  # this rank's dense c per partition (P/K = 1)
        gather = ring_allgather(K, 8 * K * (m + 2), alpha)
        tree = (K - 1) * 24 * m / MEM_BW + m * SCAN
        mem = 8 * m * (1 + K + 2) + m
        distinct = min(m, nnz / K)  # columns a rank's rows can touch, at most
        # A share is dense (8 bytes per id of the range) when the node has half of the range's ids, else 16 per entry.
        a2a = alltoall(K, min(8 * m, 16 * distinct), alpha) + (K - 1) / K * 24 * m / MEM_BW + m / K * SCAN \
            + log_allgather(K, 16 * 100 * K, alpha)  # top-B (B = 100) of every range
        sparse = alltoall(K, 16 * distinct, alpha)
        print(f"| {K} | {ms(c_stream + zero)} | {ms(c_res + zero)} | {ms(gather)} | {ms(tree)} | {gib(mem)} | "
              f"{ms(a2a)} | {ms(sparse)} | {ms(c_stream + zero + gather + tree)} | "
              f"{ms(c_res + 16 * distinct / MEM_BW + a2a)} |")  # sparse partials: 16 bytes per touched column
    print()


def kddb_apg(alpha, S=1000):
    n = KDDB["n"]
    print(f"kddb APG iteration (S = {S} selected columns; {EVALS_PER_ITER} evaluations per iteration)\n")
    print("| K | compute ms | collectives per iteration (batched line search) | ring ms | log-step ms | "
          "option: tree reduce + bcast ms |")
    print("|---|---|---|---|---|---|")
    for K in KS:
        comp = EVALS_PER_ITER * APG_ROW * n / K
        # Per iteration: the gradient (S + 2 doubles with the node header), one round of 2 trials
        # (4 + 2) and EXTRA_ROUNDS_PER_ITER rounds of 4 trials (8 + 2).
        e = EXTRA_ROUNDS_PER_ITER
        ring = ring_allgather(K, 8 * K * (S + 2), alpha) + ring_allgather(K, 8 * K * 6, alpha) \
            + e * ring_allgather(K, 8 * K * 10, alpha)
        log = log_allgather(K, 8 * K * (S + 2), alpha) + log_allgather(K, 8 * K * 6, alpha) \
            + e * log_allgather(K, 8 * K * 10, alpha)
        tree = tree_reduce_bcast(K, 8 * S, alpha) + (1 + e) * tree_reduce_bcast(K, 8 * 4, alpha)
        print(f"| {K} | {ms(comp)} | {2 + e:.2f} | {ms(ring)} | {ms(log)} | {ms(tree)} |")
    print()


def poly2_scoring(alpha):
    n, m = POLY2["n"], POLY2["m"]
    print(f"poly-2 scoring pass (n = {n:.0e} rows, m = {m:,} base features, {m * (m + 3) / 2:.3g} dimensions)\n")
    print("| K | compute ms (rows) | replicated O(m) ms | stage 1 allgather of c, q, u², nnz ms | stage 1 by column "
          "ranges ms | seed pairs: allgather / tree ms | candidate pairs: allgather / tree ms | APG evaluation ms |")
    print("|---|---|---|---|---|---|---|---|")
    for K in KS:
        comp = (POLY2_PASS_PER_MROW - POLY2_M_FLOOR) * n / K / 1e6
        stage1 = ring_allgather(K, 28 * K * m, alpha) + (K - 1) * 3 * 28 * m / MEM_BW
        ranges = alltoall(K, 28 * m, alpha) + (K - 1) / K * 3 * 28 * m / MEM_BW
        seed_g = ring_allgather(K, 8 * K * POLY2_SEED_PAIRS, alpha)
        seed_t = tree_reduce_bcast(K, 8 * POLY2_SEED_PAIRS, alpha)
        cand_g = ring_allgather(K, 16 * K * POLY2_CANDIDATES, alpha)
        cand_t = tree_reduce_bcast(K, 16 * POLY2_CANDIDATES, alpha)
        apg = APG_ROW * n / K
        print(f"| {K} | {ms(comp)} | {ms(POLY2_M_FLOOR)} | {ms(stage1)} | {ms(ranges)} | {ms(seed_g)} / {ms(seed_t)} | "
              f"{ms(cand_g)} / {ms(cand_t)} | {ms(apg)} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=float, default=3e-6, help="latency per message, seconds (2e-6 .. 5e-6)")
    a = ap.parse_args()
    kddb_scoring(a.alpha)
    kddb_apg(a.alpha)
    poly2_scoring(a.alpha)


if __name__ == "__main__":
    main()
