"""The in-memory group-lasso twin shared by bench/groups_synth.py (disjoint
groups) and bench/overlap_groups.py (overlapping windows, the latent group
lasso of Jacob, Obozinski and Vert 2009: each group's columns duplicated).

FISTA on mean log(1 + exp(-y x'v)) + lam * sum_g ||v_g|| over the duplicated
columns, on a lam path from lam_max down by 0.9, each point warm-started and
stopped when a step moves v by at most 1e-6 (relative) or after `inner_cap`
iterations; the path stops at the first lam whose solution touches K groups.
"""
import time

import numpy as np


def logistic_group_lasso_path(x, y, groups, k, inner_cap):
    """Returns w (length x.shape[1]), lam / lam_max, the groups touched (set of
    indices into `groups`), FISTA iterations and CPU seconds."""
    start = time.process_time()
    index = np.concatenate([np.asarray(g) for g in groups])
    bounds = np.cumsum([0] + [len(g) for g in groups])
    xd = x[:, index]
    n, m = xd.shape
    lipschitz = np.linalg.norm(xd, 2) ** 2 / (4 * n)

    def grad(v):
        margin = y * (xd @ v)
        return -(xd.T @ (y / (1 + np.exp(margin)))) / n

    def block_norms(v):
        return np.sqrt(np.add.reduceat(v * v, bounds[:-1]))

    def prox(v, t):
        scale = np.maximum(0, 1 - t / np.maximum(block_norms(v), 1e-300))
        return v * np.repeat(scale, np.diff(bounds))

    lam_max = block_norms(grad(np.zeros(m))).max()
    lam = lam_max
    v = np.zeros(m)
    iterations = 0
    while True:
        lam *= 0.9
        z, v_prev, theta = v.copy(), v.copy(), 1.0
        for _ in range(inner_cap):
            v_new = prox(z - grad(z) / lipschitz, lam / lipschitz)
            theta_new = (1 + np.sqrt(1 + 4 * theta * theta)) / 2
            z = v_new + (theta - 1) / theta_new * (v_new - v_prev)
            step = np.linalg.norm(v_new - v_prev)
            v_prev, theta = v_new, theta_new
            iterations += 1
            if step <= 1e-6 * max(1.0, np.linalg.norm(v_new)):
                break
        v = v_prev
        touched = set(int(g) for g in np.flatnonzero(block_norms(v) > 0))
        if len(touched) >= k:
            break
    w = np.zeros(x.shape[1])
    np.add.at(w, index, v)
    return w, lam / lam_max, touched, iterations, time.process_time() - start
