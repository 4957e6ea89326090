#!/usr/bin/env python3
"""An independent check of E-SVM(R)'s squared-hinge licp: the engine's model against a proximal-gradient twin.

  /usr/bin/python3 bench/esvm_twin.py --fgm build/fgm --data bench/work/esvm_prior/uniform/data/train.svm
      [--rows 200] [--features 2000] [--groups 20] [--lambdas 1,10,100] [--work bench/work/esvm_twin]

Takes the first ROWS rows and FEATURES columns of a LIBSVM file, fits
`fgm train solver=exclusive exclusive.algorithm=licp exclusive.loss=squared_hinge
exclusive.bias=true exclusive.random_groups=M exclusive.ridge=1 exclusive.tolerance=1e-9`
and solves the same objective
  P(w, b) = sum_i max(0, 1 - y_i(x_i'w + b))^2 + (alpha/2)|w|^2 + (lambda/2) sum_g |w_g|_1^2
in Python by FISTA with gradient restart (the smooth part: squared hinge + ridge;
the prox of (t lambda/2)|.|_1^2 per group in closed form by sorting), with the
engine's random groups recomputed (bench/esvm_planted.random_groups). Prints both
objectives (the engine's weights evaluated here too), the weights' distance and
the supports' agreement.
"""
import argparse
import json
import os
import subprocess

import numpy as np

import esvm_planted as ep


def prox_sq_l1(v, tau):
    """argmin_x 1/2|x - v|^2 + (tau/2)|x|_1^2 (closed form: a soft threshold tau*|x|_1)."""
    a = np.sort(np.abs(v))[::-1]
    if a.size == 0 or a[0] == 0:
        return np.zeros_like(v)
    k = np.arange(1, a.size + 1)
    s = np.cumsum(a)
    theta = tau * s / (1 + k * tau)
    j = np.flatnonzero(a > theta)[-1]  # the largest k with a_k above its threshold
    return np.sign(v) * np.maximum(np.abs(v) - theta[j], 0)


def objective(X, y, w, b, alpha, lam, members):
    slack = np.maximum(0, 1 - y * (X @ w + b))
    return float(slack @ slack + 0.5 * alpha * w @ w + 0.5 * lam * sum(np.abs(w[g]).sum() ** 2 for g in members))


def twin(X, y, alpha, lam, members, iters=200000, tol=1e-12):
    n, p = X.shape
    Z = np.hstack([X, np.ones((n, 1))])
    lip = 2 * np.linalg.norm(Z, 2) ** 2 + alpha
    t = 1.0 / lip
    x = np.zeros(p + 1)
    v, theta, prev = x.copy(), 1.0, np.inf

    def grad(u):
        slack = np.maximum(0, 1 - y * (Z @ u))
        g = -2 * Z.T @ (y * slack)
        g[:p] += alpha * u[:p]
        return g

    for it in range(iters):
        z = v - t * grad(v)
        new = z.copy()
        for g in members:
            new[g] = prox_sq_l1(z[g], t * lam)
        if (v - new) @ (new - x) > 0:  # gradient restart
            theta, v = 1.0, x.copy()
            continue
        theta_new = 0.5 + 0.5 * np.sqrt(1 + 4 * theta * theta)
        v = new + ((theta - 1) / theta_new) * (new - x)
        x, theta = new, theta_new
        if it % 200 == 0:
            f = objective(X, y, x[:p], x[p], alpha, lam, members)
            if prev - f < tol * max(1, f):
                break
            prev = f
    return x[:p], x[p]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fgm", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--features", type=int, default=2000)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--lambdas", default="1,10,100")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--work", default="bench/work/esvm_twin")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    X = np.zeros((args.rows, args.features))
    y = np.zeros(args.rows)
    sub = os.path.join(args.work, "sub.svm")
    with open(args.data) as f, open(sub, "w") as out:
        for i in range(args.rows):
            parts = f.readline().split()
            y[i] = float(parts[0])
            kept = [parts[0]]
            for tok in parts[1:]:
                j, v = tok.split(":")
                if int(j) <= args.features:
                    X[i, int(j) - 1] = float(v)
                    kept.append(tok)
            out.write(" ".join(kept) + "\n")
    group = ep.random_groups(args.features, args.groups, 1)
    members = [np.flatnonzero(group == g) for g in range(args.groups)]
    for lam in (float(x) for x in args.lambdas.split(",")):
        out = os.path.join(args.work, f"lambda{lam:g}")
        subprocess.run([args.fgm, "train", f"data.train={sub}", "solver=exclusive", "exclusive.algorithm=licp",
                        "exclusive.loss=squared_hinge", "exclusive.bias=true", f"exclusive.random_groups={args.groups}",
                        f"exclusive.ridge={args.alpha}", f"exclusive.lambda={lam}", "exclusive.tolerance=1e-9",
                        "engine.threads=1", "output.report=false", f"output.dir={out}"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        m = json.loads(subprocess.check_output([args.fgm, "inspect", os.path.join(out, "model.fgm")]))
        we = np.zeros(args.features)
        for feat in m["features"]:
            we[int(feat["id"]) - 1] = feat["weight"]
        be = -m["bias"] if m.get("has_bias") else 0.0
        run = json.load(open(os.path.join(out, "run.json")))
        reported = run.get("exclusive", {}).get("objective")
        wt, bt = twin(X, y, args.alpha, lam, members)
        pe, pt = objective(X, y, we, be, args.alpha, lam, members), objective(X, y, wt, bt, args.alpha, lam, members)
        same = np.array_equal(we != 0, np.abs(wt) > 1e-9)
        print(f"lambda {lam:g}: engine P {pe:.10g} (run.json {reported}), twin P {pt:.10g}, "
              f"rel diff {(pe - pt) / max(1, abs(pt)):+.2e}; |w_e - w_t| {np.linalg.norm(we - wt):.2e}, "
              f"b {be:.6f} / {bt:.6f}; nnz {np.count_nonzero(we)} / {np.count_nonzero(np.abs(wt) > 1e-9)}, "
              f"same support {same}", flush=True)


if __name__ == "__main__":
    main()
