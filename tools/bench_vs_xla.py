#!/usr/bin/env python3
"""hlosim's reference evaluator next to XLA:CPU on the benchmark workloads, in one command.

Run with the oracle's Python (see ../shared/tools/setup-oracle.sh):

    /root/.cache/xla-oracle-venv/bin/python tools/bench_vs_xla.py [--skip-xla] [--skip-criterion]

1. XLA:CPU: `tools/fixtures/bench_xla.py` times compile and execute (median of 5 after a
   warm-up) of models/hlo/bench_{elementwise_16m,dot_1024,reduce_16m}.hlo and the spelled-out
   BERT corpus module, and rewrites tests/fixtures/bench/xla_cpu_times.json.
2. hlosim in-process: `cargo bench --bench eval` (criterion, release), mean per iteration.
3. hlosim whole process: `target/release/hlosim run MODULE --args A.npz -o OUT.npz` wall time
   (median of 5: reading the arguments, evaluating, writing the outputs), on the same arguments
   XLA got (BERT: the original module with its AwsNeuron custom calls), twice: writing a new
   OUT.npz each time (removed between runs, outside the timing), and replacing an existing one
   (then hlosim syncs the new file before the rename, to keep the old one safe from a power
   loss, and the filesystem frees the old file's blocks). For BERT also `hlosim diff MODULE`
   (the main job: passes, both runs, comparison; its own random inputs).

Prints one table: each hlosim figure and its ratio to XLA:CPU's execute time and to its
compile + execute time (ratio < 1: hlosim is faster). All figures come from this one command,
so they share the machine's state; the load average is printed alongside.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixtures"))

import argsgen  # noqa: E402
import bench_xla  # noqa: E402
import common  # noqa: E402

REPO = common.REPO
BERT = bench_xla.BERT
BERT_HLO = os.path.join(common.SHARED, "corpus", "real", BERT + ".hlo")
# (workload key in xla_cpu_times.json, criterion bench id, module for `hlosim run`)
ROWS = [
    ("elementwise_16m", "elementwise_chain_16m_f32", "models/hlo/bench_elementwise_16m.hlo"),
    ("dot_1024", "dot_1024_f32", "models/hlo/bench_dot_1024.hlo"),
    ("reduce_16m", "reduce_sum_16m_f32", "models/hlo/bench_reduce_16m.hlo"),
    ("bert_fwd_bwd", "bert_fwd_bwd_corpus", BERT_HLO),
]


def arguments(key):
    """The arguments bench_xla.py gives XLA for this workload."""
    if key == "bert_fwd_bwd":
        d = os.path.join(REPO, "tests", "fixtures", "corpus", BERT)
        return [argsgen.generate(s) for s in json.load(open(os.path.join(d, "args.json")))]
    shapes = next(w[3] for w in bench_xla.WORKLOADS if w[0] == key)
    return [argsgen.generate({"dtype": "f32", "shape": s, "gen": "uniform", "seed": i + 1,
                              "lo": -1.0, "hi": 1.0}) for i, s in enumerate(shapes)]


def criterion_mean_s(bench_id):
    p = os.path.join(REPO, "target", "criterion", "eval", bench_id, "new", "estimates.json")
    with open(p) as f:
        return json.load(f)["mean"]["point_estimate"] * 1e-9


def median_wall_s(argv, reps=5, before=None):
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        t = time.perf_counter()
        subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


EXE = os.path.join(REPO, "target", "release", "hlosim")


def whole_process_s(module, npz, out, replace):
    """`hlosim run` writing `out` new each time, or (`replace`) over the last run's file."""
    argv = [EXE, "run", module, "--args", npz, "-o", out]

    def fresh():
        if os.path.exists(out):
            os.remove(out)

    if replace:
        subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return median_wall_s(argv)
    return median_wall_s(argv, before=fresh)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip-xla", action="store_true",
                    help="reuse tests/fixtures/bench/xla_cpu_times.json instead of re-timing XLA")
    ap.add_argument("--skip-criterion", action="store_true",
                    help="reuse the last criterion results in target/criterion")
    a = ap.parse_args(argv)
    if not a.skip_xla:
        bench_xla.main()
    xla = json.load(open(bench_xla.OUT))["workloads"]
    subprocess.run(["cargo", "build", "--release", "--bin", "hlosim"], check=True, cwd=REPO)
    if not a.skip_criterion:
        subprocess.run(["cargo", "bench", "--bench", "eval", "--", "--noplot"], check=True, cwd=REPO)
    load = os.getloadavg()[0]
    print(f"\nload average (1 min) at the end: {load:.2f}; cpus: {os.cpu_count()}")
    print("| workload | XLA:CPU compile | XLA:CPU execute | hlosim in-process | ratio to XLA execute "
          "| hlosim whole process, new output | ratio to XLA compile+execute "
          "| replacing the output | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for key, bench_id, module in ROWS:
            x = xla[key]
            npz = os.path.join(tmp, key + ".npz")
            common.save_npz(npz, "arg", arguments(key))
            # On disk before timing, as a user's argument file is: otherwise the kernel's
            # write-back of the file just written competes with the timed runs.
            os.sync()
            inproc = criterion_mean_s(bench_id)
            out = os.path.join(tmp, key + "_out.npz")
            whole = whole_process_s(module, npz, out, replace=False)
            again = whole_process_s(module, npz, out, replace=True)
            total = x["compile_s"] + x["execute_median_s"]
            print(f"| {key} | {x['compile_s'] * 1e3:.1f} ms | {x['execute_median_s'] * 1e3:.1f} ms "
                  f"| {inproc * 1e3:.1f} ms | {inproc / x['execute_median_s']:.2f} "
                  f"| {whole * 1e3:.1f} ms | {whole / total:.2f} "
                  f"| {again * 1e3:.1f} ms | {again / total:.2f} |", flush=True)
            if key == "bert_fwd_bwd":
                diff = median_wall_s([EXE, "diff", module])
                print(f"| {key}: `hlosim diff` | {x['compile_s'] * 1e3:.1f} ms "
                      f"| {x['execute_median_s'] * 1e3:.1f} ms | | "
                      f"| {diff * 1e3:.1f} ms | {diff / total:.2f} |", flush=True)
            os.remove(npz)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
