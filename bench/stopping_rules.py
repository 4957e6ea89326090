#!/usr/bin/python3
"""Inner stopping rule: objective, accuracy and time of `fgm path` on news20.

    bench/stopping_rules.py OLD_FGM NEW_FGM [--repeats 3]
    bench/stopping_rules.py OLD_FGM NEW_FGM --train a9a,w8a,ijcnn1,madelon [--repeats 3]

OLD_FGM is a build of the previous rule (commit 755b674: relative objective
decrease (41), apg.eps_inner = 1e-3), NEW_FGM this branch (prox-gradient
mapping, default apg.eps_inner = 0.15). The split files come from
`bench/compare_liblinear.py --datasets news20` (configs/news20.toml: B = 20,
C = 10, bias). Path points 50,100,200,400 features, path.debias=false, test
file given. Timing runs of the old and new default are interleaved (same
machine load), --repeats rounds, medians reported; the tight reference
(new rule, eps 100x smaller) and old eps 1e-5 run once (deterministic).
--train: `fgm train` with configs/<ds>.toml (all T outer iterations,
fgm.eps_outer=0) on the same split files, old default / new default / tight.
"""
import csv, json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

def config_file(name):
    """configs/<name>.toml, or bench/configs/<name>.toml for the configs whose data a benchmark writes."""
    shipped = os.path.join(ROOT, "configs", name + ".toml")
    return shipped if os.path.exists(shipped) else os.path.join(ROOT, "bench", "configs", name + ".toml")

D = os.path.join(HERE, "work", "compare_liblinear", "news20")
OUT = os.path.join(HERE, "work", "stopping")


def run(fgm, tag, extra):
    out = os.path.join(OUT, tag)
    cmd = [fgm, "path", "--config", os.path.join(ROOT, "configs", "news20.toml"),
           f"data.train={D}/train.svm", f"data.test={D}/test.svm", f"output.dir={out}",
           f"engine.cache_dir={os.path.join(OUT, 'cache')}", "engine.progress=off",
           "path.features=[50,100,200,400]", "path.debias=false"] + extra
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t
    with open(os.path.join(out, "path.csv")) as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    last = rows[-1]
    return dict(wall=wall, objective=float(last["train_objective"]),
                accuracy=float(last["test_accuracy"]), apg=int(last["apg_iterations"]))


def train(fgm, ds, tag, extra):
    """`fgm train` with configs/<ds>.toml (T = its max_iterations) on the split files."""
    out = os.path.join(OUT, ds + "-" + tag)
    d = os.path.join(HERE, "work", "compare_liblinear", ds)
    config = "madelon-standardized" if ds == "madelon" else ds
    cmd = [fgm, "train", "--config", config_file(config),
           f"data.train={d}/train.svm", f"data.test={d}/test.svm", f"output.dir={out}",
           f"engine.cache_dir={os.path.join(OUT, 'cache')}", "engine.progress=off",
           "fgm.eps_outer=0"] + extra
    t = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t
    with open(os.path.join(out, "run.json")) as f:
        r = json.load(f)
    return dict(wall=wall, objective=r["iterations"][-1]["objective"],
                accuracy=r["test"]["accuracy"], apg=r["total_apg_iterations"],
                features=r["selected_features"] if isinstance(r["selected_features"], int)
                else len(r["selected_features"]))


def train_table(old, new, datasets, repeats):
    print("\n| data set | rule | objective | test accuracy | APG iterations | seconds (median of %d) |" % repeats)
    print("|---|---|---|---|---|---|")
    for ds in datasets:
        runs = [("old rule, eps_inner=1e-3 (old default)", old, ["apg.eps_inner=1e-3"], repeats),
                ("new rule, eps_inner=0.15 (new default)", new, [], repeats),
                ("new rule, eps_inner=1.5e-3 (tight reference)", new, ["apg.eps_inner=1.5e-3"], 1)]
        for name, fgm, extra, reps in runs:
            walls = []
            for _ in range(reps):
                r = train(fgm, ds, name.split(",")[0].replace(" ", "-") + name.split("=")[1][:4], extra)
                walls.append(r["wall"])
            print(f"| {ds} | {name} | {r['objective']:.2f} | {r['accuracy']:.4f} | {r['apg']} | "
                  f"{statistics.median(walls):.2f} |", flush=True)


def main():
    old, new = sys.argv[1], sys.argv[2]
    if "--train" in sys.argv:
        repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
        os.makedirs(OUT, exist_ok=True)
        train_table(old, new, sys.argv[sys.argv.index("--train") + 1].split(","), repeats)
        return
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
    os.makedirs(OUT, exist_ok=True)
    run(new, "warmup", [])  # builds the store cache
    variants = {"old rule, eps_inner=1e-3 (old default)": (old, ["apg.eps_inner=1e-3"]),
                "new rule, eps_inner=0.15 (new default)": (new, [])}
    times = {k: [] for k in variants}
    result = {}
    for _ in range(repeats):
        for name, (fgm, extra) in variants.items():
            r = run(fgm, name.split(",")[0].replace(" ", "-") + "-" + name.split("=")[1][:4], extra)
            times[name].append(r["wall"])
            result[name] = r
    once = {"old rule, eps_inner=1e-5": (old, ["apg.eps_inner=1e-5"]),
            "new rule, eps_inner=1.5e-3 (tight reference)": (new, ["apg.eps_inner=1.5e-3"])}
    for name, (fgm, extra) in once.items():
        r = run(fgm, "once-" + name.split("=")[1][:4], extra)
        times[name] = [r["wall"]]
        result[name] = r
    base = statistics.median(times["old rule, eps_inner=1e-3 (old default)"])
    print("| rule | objective at 400 | test accuracy at 400 | APG iterations | seconds (median of %d) | vs old default |" % repeats)
    print("|---|---|---|---|---|---|")
    for name, r in result.items():
        med = statistics.median(times[name])
        print(f"| {name} | {r['objective']:.1f} | {r['accuracy']:.4f} | {r['apg']} | "
              f"{med:.2f} ({', '.join('%.2f' % t for t in times[name])}) | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
