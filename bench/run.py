#!/usr/bin/env python3
"""agtrace against libtorch on the same programs, run alternately in one invocation.

    python3 bench/run.py                    # 5 rounds, 1 and 2 threads, prints the table
    python3 bench/run.py --update-readme    # also writes the table into bench/README.md

Workloads (bench/scenarios/*.json and bench/libtorch_bench.cpp hold the same programs):
tiny_chain, mlp_step, transformer_block, gemm, conv_block; cold_start compares `agtrace run` of
scenarios/seed_walk.json with bench/cold_start_torch.py under /usr/bin/python3.

Each round runs every workload once in agtrace (bench/agtrace_bench: load, run with
accounting, all events recorded; the report is timed apart) and once in libtorch
(bench/libtorch_bench: the workload only, parameters made before the clock starts), each
doing --reps timed repetitions after a warm-up. Figures are medians over all repetitions.
Both sides get OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to the thread count, libtorch
at::set_num_threads(N), agtrace --threads N.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
WORKLOADS = ["tiny_chain", "mlp_step", "transformer_block", "gemm", "conv_block"]
CHAIN_OPS = 10000
GEMM_FLOP = 2.0 * 1024 ** 3
TORCH_INCLUDES = ["/usr/include/torch/csrc/api/include", "/usr/include"]
TORCH_LIBS = ["-ltorch", "-ltorch_cpu", "-lc10"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def build(build_dir, skip):
    if skip:
        return (os.path.join(build_dir, "agtrace"), os.path.join(build_dir, "bench", "agtrace_bench"),
                os.path.join(build_dir, "libtorch_bench"))
    # Release with the profile-guided build (cmake/Pgo.cmake): the build the README's
    # Performance section tells users to make for speed. Configured every time, so an
    # existing build directory is switched over too.
    gen = [] if os.path.exists(os.path.join(build_dir, "build.ninja")) else ["-G", "Ninja"]
    sh(["cmake", "-S", ROOT, "-B", build_dir] + gen + ["-DCMAKE_BUILD_TYPE=Release", "-DAGTRACE_PGO=ON"],
       stdout=subprocess.DEVNULL)
    # Checked before the long PGO build, so that a machine without libtorch's headers is told
    # at once what to install.
    if not any(os.path.exists(os.path.join(p, "torch", "torch.h")) for p in TORCH_INCLUDES):
        sys.exit("bench: libtorch's headers are missing (torch/torch.h): apt-get install libtorch-dev")
    sh(["ninja", "-C", build_dir, "agtrace", "agtrace_bench"], stdout=subprocess.DEVNULL)
    src = os.path.join(BENCH, "libtorch_bench.cpp")
    exe = os.path.join(build_dir, "libtorch_bench")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        print("building libtorch_bench (libtorch-dev)...", file=sys.stderr)
        sh(["g++", "-O2", "-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=1", src, "-o", exe]
           + [f"-I{p}" for p in TORCH_INCLUDES] + TORCH_LIBS + ["-lpthread"])
    return os.path.join(build_dir, "agtrace"), os.path.join(build_dir, "bench", "agtrace_bench"), exe


def build_description(build_dir):
    """The build type and whether it is profile-guided, from the build's CMake cache (the
    table says which binary it measured: --no-build takes whatever is there)."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            cache = f.read()
    except OSError:
        return "unknown"
    kind = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache, re.M)
    pgo = re.search(r"^AGTRACE_PGO:BOOL=(.*)$", cache, re.M)
    pgo_on = bool(pgo) and pgo.group(1).upper() in ("ON", "1", "TRUE", "YES")
    return (kind.group(1) if kind else "unknown") + (", profile-guided (AGTRACE_PGO=ON)" if pgo_on else ", no PGO")


def machine_description():
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    try:
        with open("/proc/cpuinfo") as f:
            model = re.search(r"model name\s*:\s*(.*)", f.read())
            if model:
                machine = f"{model.group(1)}, {os.cpu_count()} cores, Linux {platform.release()}"
    except OSError:
        pass
    return machine


def replace_readme_block(marker, block):
    """Puts `block` between <!-- marker:begin --> and <!-- marker:end --> in bench/README.md."""
    path = os.path.join(BENCH, "README.md")
    with open(path) as f:
        readme = f.read()
    readme = re.sub(f"<!-- {marker}:begin -->.*<!-- {marker}:end -->",
                    lambda m: f"<!-- {marker}:begin -->\n{block}<!-- {marker}:end -->", readme, flags=re.S)
    with open(path, "w") as f:
        f.write(readme)


def ratio_text(r):
    """Two decimals, or three where two would print the 1.00 limit for a ratio on either side
    of it (a table once showed transformer_block at 2 threads as "1.00 ... no": 1.004)."""
    return f"{r:.3f}" if f"{r:.2f}" == "1.00" and r != 1.0 else f"{r:.2f}"


def env_for(threads):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    # Idle OpenMP threads sleep instead of spinning: on a 2-core machine shared with other
    # jobs, libtorch's spinning threads otherwise lose their core and its 2-thread times
    # swing by 10x (measured). agtrace does not use OpenMP.
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def json_lines(cmd, env):
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_agtrace(bench_exe, workload, threads, reps, warmup=1):
    cmd = [bench_exe, os.path.join(BENCH, "scenarios", workload + ".json"), "--threads", str(threads),
           "--reps", str(reps), "--warmup", str(warmup)]
    if workload == "gemm":
        cmd += ["--statement", "0"]
    return json_lines(cmd, env_for(threads))


def run_libtorch(exe, workload, threads, reps):
    return json_lines([exe, workload, "--threads", str(threads), "--reps", str(reps)], env_for(threads))


def timed_process(cmd, env=None):
    """Wall seconds and peak resident memory (bytes) of one process, start to exit.

    Two runs: the wall time of the command alone, and its peak from GNU time (%M) when
    installed (the rusage of a child that Python forked also counts the pages it shared
    with Python before exec, ~15 MiB here)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd} failed")
    peak_kib = usage.ru_maxrss
    if os.path.exists("/usr/bin/time"):
        with tempfile.NamedTemporaryFile("r") as out:
            subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out.name] + cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=env, check=True)
            peak_kib = int(out.read().strip().splitlines()[-1])
    return wall, peak_kib * 1024


def chain_scenario(ops):
    reps, extra = divmod(ops, 3)
    body = ["h = h * 1.0001", "h = h + 0.001", "h = h.tanh()"]
    return {"format": 1, "name": f"chain_{ops}",
            "tensors": {"x": {"shape": [16], "requires_grad": True, "init": {"linspace": [-1, 1]}}},
            "program": ["h = x", {"repeat": reps, "body": body}] + body[:extra] + ["h.sum().backward()"]}


def memory_per_event(agtrace, rounds):
    """Peak memory of `agtrace run` on chains of growing length: the slope per event."""
    points = []
    with tempfile.TemporaryDirectory() as d:
        for ops in (1000, 2000, 4000):
            path = os.path.join(d, f"chain_{ops}.json")
            with open(path, "w") as f:
                json.dump(chain_scenario(ops), f)
            run = [agtrace, "run", path, "--format", "json", "--detail", "full"]  # with the timeline
            rss = statistics.median(timed_process(run)[1] for _ in range(rounds))
            report = json.loads(subprocess.run(run, capture_output=True,
                                               text=True).stdout)
            # The report's event timeline (alloc, free, save, release, ...) when it has one.
            events = len(report["events"]) if isinstance(report.get("events"), list) else \
                len(report["lifetimes"]["storages"]) + len(report["lifetimes"]["saved"])
            points.append((ops, events, rss))
    (o0, e0, r0), (o1, e1, r1) = points[0], points[-1]
    return points, (r1 - r0) / (e1 - e0), (r1 - r0) / (o1 - o0)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_time(s):
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} µs"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per process")
    ap.add_argument("--chain-rounds", type=int, default=None,
                    help="rounds of tiny_chain (default: --rounds; each times --reps runs after a warm-up, as the others)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--workloads", default=",".join(WORKLOADS + ["cold_start"]))
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-bench"))
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--no-build", action="store_true", help="use the binaries already in --build-dir")
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args()
    agtrace, bench_exe, torch_exe = build(args.build_dir, args.no_build)
    workloads = args.workloads.split(",")
    thread_counts = [int(t) for t in args.threads.split(",")]

    raw = {}
    for threads in thread_counts:
        for w in [w for w in workloads if w in WORKLOADS]:
            raw[(w, threads)] = {"agtrace": [], "libtorch": [], "report": [], "agtrace_cpu": [], "libtorch_cpu": []}
        for rnd in range(args.rounds):
            for w in [w for w in workloads if w in WORKLOADS]:
                if w == "tiny_chain" and args.chain_rounds is not None and rnd >= args.chain_rounds:
                    continue
                a = run_agtrace(bench_exe, w, threads, args.reps, 1)
                t = run_libtorch(torch_exe, w, threads, args.reps)
                key = "statement_seconds" if w == "gemm" else "seconds"
                raw[(w, threads)]["agtrace"] += [x[key] for x in a]
                raw[(w, threads)]["report"] += [x["report_seconds"] for x in a]
                raw[(w, threads)]["libtorch"] += [x["seconds"] for x in t]
                if w != "gemm":  # agtrace's gemm figure is one statement's wall time only
                    raw[(w, threads)]["agtrace_cpu"] += [x["cpu_seconds"] for x in a]
                    raw[(w, threads)]["libtorch_cpu"] += [x["cpu_seconds"] for x in t]
                print(f"threads {threads} round {rnd} {w}: agtrace {fmt_time(median([x[key] for x in a]))}, "
                      f"libtorch {fmt_time(median([x['seconds'] for x in t]))}", file=sys.stderr)

    rows = []
    for (w, threads), r in raw.items():
        a, t = median(r["agtrace"]), median(r["libtorch"])
        ac, tc = median(r["agtrace_cpu"]), median(r["libtorch_cpu"])
        cpu = "–" if w == "gemm" else f"{ac / tc:.2f}"
        if w == "gemm":
            ga, gt = GEMM_FLOP / a / 1e9, GEMM_FLOP / t / 1e9
            rows.append((w, threads, f"{ga:.1f} GFLOP/s", f"{gt:.1f} GFLOP/s", f"{ga / gt:.2f}× libtorch's speed", cpu,
                         "≥ 0.90×", ga / gt >= 0.9))
        elif w == "tiny_chain":
            rows.append((w, threads, f"{a / CHAIN_OPS * 1e6:.2f} µs/op", f"{t / CHAIN_OPS * 1e6:.2f} µs/op",
                         f"{a / t:.2f}", cpu, "≤ 1 µs/op", a / CHAIN_OPS <= 1e-6))
        else:
            rows.append((w, threads, fmt_time(a), fmt_time(t), ratio_text(a / t), cpu, "≤ 1.00", a / t <= 1.0))

    cold = None
    if "cold_start" in workloads:
        seed = os.path.join(ROOT, "scenarios", "seed_walk.json")
        ag, py = [], []
        for _ in range(args.rounds * 2):
            ag.append(timed_process([agtrace, "run", seed]))
            py.append(timed_process(["/usr/bin/python3", os.path.join(BENCH, "cold_start_torch.py")]))
        cold = (median([w for w, _ in ag]), median([m for _, m in ag]), median([w for w, _ in py]),
                median([m for _, m in py]))
        ok = cold[0] < 0.010 and cold[1] < 10 * 2 ** 20
        rows.append(("cold_start", 1, f"{fmt_time(cold[0])}, {cold[1] / 2 ** 20:.1f} MiB",
                     f"{fmt_time(cold[2])}, {cold[3] / 2 ** 20:.0f} MiB (Python)", f"{cold[0] / cold[2]:.4f}",
                     "–", "< 10 ms, < 10 MiB", ok))

    mem = memory_per_event(agtrace, 1)
    table = ["| workload | threads | agtrace (median wall) | libtorch (median wall) | agtrace/libtorch wall | "
             "agtrace/libtorch CPU time | target | met |",
             "|---|---|---|---|---|---|---|---|"]
    for w, th, a, t, ratio, cpu, target, ok in rows:
        table.append(f"| {w} | {th} | {a} | {t} | {ratio} | {cpu} | {target} | {'yes' if ok else 'no'} |")
    report_s = {f"{w}/{th}": fmt_time(median(r["report"])) for (w, th), r in raw.items()}
    mem_lines = [f"| {ops} | {ev} | {rss / 2 ** 20:.1f} MiB |" for ops, ev, rss in mem[0]]
    text = "\n".join(table) + "\n\n" + \
        "Report printing (JSON, not included above): " + ", ".join(f"{k} {v}" for k, v in report_s.items()) + "\n\n" + \
        "Peak memory of `agtrace run --format json` on x[16] chains (mul/add/tanh, accounting on):\n\n" + \
        "| ops | events in the report's timeline | peak RSS |\n|---|---|---|\n" + "\n".join(mem_lines) + "\n\n" + \
        f"Slope: {mem[1]:.0f} bytes per event, {mem[2]:.0f} bytes per op (graph, values and accounting together).\n"
    machine = machine_description()
    cmd = "python3 bench/run.py " + " ".join(sys.argv[1:])
    build_kind = build_description(args.build_dir)
    load = os.getloadavg()[0]
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{w}/{th}": r for (w, th), r in raw.items()} | {"cold_start": cold, "memory": mem}, f, indent=1)
    if args.update_readme:
        replace_readme_block("table", f"Machine: {machine}. Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
                             f"Command: `{cmd.strip()}`. Build: {build_kind}. Load average at the end: {load:.1f}.\n\n{text}")


if __name__ == "__main__":
    main()
