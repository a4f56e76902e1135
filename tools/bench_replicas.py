#!/usr/bin/env python3
"""hlosim on 8 simulated devices next to XLA:CPU on 8 host devices, in one command.

Run with the oracle's Python (see ../shared/tools/setup-oracle.sh):

    /root/.cache/xla-oracle-venv/bin/python tools/bench_replicas.py [--reps 5]

Workload: the BERT tensor-parallel 2 x data-parallel 4 training step
(`../shared/corpus/real/wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd.hlo`), arguments per
device from tests/fixtures/corpus_replicas/<stem>/args.json.

1. XLA:CPU, in a child process with 8 host devices: parse + compile of the spelled-out module
   (tests/fixtures/corpus_replicas/<stem>/module.hlo), then one warm-up and `--reps` timed
   executes on all 8 devices (median), each blocking until every output is ready.
2. hlosim, whole process: `target/release/hlosim run MODULE --replicas 8 --args A.npz`
   (the original module, AwsNeuron custom-calls included), wall time, median of `--reps`.

Prints the figures and hlosim's ratio to XLA's compile + execute and to its execute alone
(< 1: hlosim is faster), with the load average, since all come from this one command.
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
REPO = os.path.abspath(os.path.join(HERE, ".."))
SHARED = os.environ.get("HLOSIM_SHARED", os.path.abspath(os.path.join(REPO, "..", "shared")))
STEM = "wenboqian__bert_pretrain_tp=2_dp=4_pp=1_fwd+bwd"
N = 8

XLA_CHILD = r'''
import sys, time, json, statistics
sys.path.insert(0, sys.argv[1])
import numpy as np
import xla_oracle as xo
import jax
from jax.sharding import NamedSharding, Mesh, PartitionSpec as P
txt, npz, n, reps = open(sys.argv[2]).read(), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
args = xo._load_device_args(npz, n)
t = time.perf_counter()
exe, devs = xo._compile(txt, n)
compile_s = time.perf_counter() - t
mesh = Mesh(np.array(devs), ("d",))
def once():
    glob = []
    for j in range(len(args[0])):
        shards = [jax.device_put(args[d][j], dv) for d, dv in enumerate(devs)]
        glob.append(jax.make_array_from_single_device_arrays(np.shape(args[0][j]), NamedSharding(mesh, P()), shards))
    for g in glob:
        g.block_until_ready()
    t = time.perf_counter()
    res = exe.execute_sharded(glob)
    for per in res.disassemble_into_single_device_arrays():
        for a in per:
            a.block_until_ready()
    return time.perf_counter() - t
once()
times = [once() for _ in range(reps)]
print(json.dumps({"compile_s": compile_s, "execute_median_s": statistics.median(times)}))
'''


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(HERE, "fixtures"))
    import argsgen  # noqa: E402
    import common  # noqa: E402

    fixture = os.path.join(REPO, "tests", "fixtures", "corpus_replicas", STEM)
    spec = json.load(open(os.path.join(fixture, "args.json")))
    subprocess.run(["cargo", "build", "--release", "--bin", "hlosim"], check=True, cwd=REPO)
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "args.npz")
        import numpy as np
        np.savez(npz, **{f"d{d}/arg{j}": common.to_store(argsgen.generate(s))
                         for d, dev in enumerate(spec["devices"]) for j, s in enumerate(dev)})
        env = dict(os.environ)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={N}").strip()
        out = subprocess.run([sys.executable, "-c", XLA_CHILD, os.path.join(SHARED, "tools"),
                              os.path.join(fixture, "module.hlo"), npz, str(N), str(a.reps)],
                             check=True, capture_output=True, text=True, env=env)
        xla = json.loads(out.stdout.strip().splitlines()[-1])
        exe = os.path.join(REPO, "target", "release", "hlosim")
        module = os.path.join(SHARED, "corpus", "real", STEM + ".hlo")
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            subprocess.run([exe, "run", module, "--replicas", str(N), "--args", npz], check=True,
                           stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
        whole = statistics.median(times)
    total = xla["compile_s"] + xla["execute_median_s"]
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}; cpus: {os.cpu_count()}")
    print("| workload | XLA:CPU compile | XLA:CPU execute (8 devices) | hlosim run --replicas 8 "
          "(whole process) | ratio to XLA compile+execute | ratio to XLA execute |")
    print("|---|---|---|---|---|---|")
    print(f"| BERT tp=2 dp=4 fwd+bwd | {xla['compile_s'] * 1e3:.1f} ms "
          f"| {xla['execute_median_s'] * 1e3:.1f} ms | {whole * 1e3:.1f} ms "
          f"| {whole / total:.2f} | {whole / xla['execute_median_s']:.2f} |")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
