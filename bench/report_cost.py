#!/usr/bin/env python3
"""What printing a report costs per op, in instructions (callgrind), which the load of a
shared machine does not move.

    python3 bench/report_cost.py --agtrace build/agtrace
    python3 bench/report_cost.py --agtrace build/agtrace --baseline OTHER/agtrace --ops 2000
    python3 bench/report_cost.py --agtrace build/agtrace --scenario bench/scenarios/resnet18_b8.json

The program is the chain of bench/scenarios/tiny_chain.json cut to --ops ops (x[16] requiring
grad; `* 1.0001`, `+ 0.001`, `.tanh()` in turn; then backward), or --scenario's program, whose
reports' share of the whole run is given too. Each binary runs it three times
under `valgrind --tool=callgrind`: with `-q` (the summary only), with the default text report
and with `--format json`, each report written to a file. A report's cost is its run's
instructions less the `-q` run's, counting the `-q` run's own summary printer
(write_report_text, from callgrind_annotate) as report, not run: what is left of the `-q` run
is parsing, leaf creation, the program with accounting and the teardown. Needs valgrind
(callgrind_annotate included) and a binary with symbols (RelWithDebInfo, the default build type).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chain_scenario(ops):
    """tiny_chain.json with `ops` ops: whole rounds of its three statements in the repeat
    block, the rest as plain statements."""
    with open(os.path.join(ROOT, "bench", "scenarios", "tiny_chain.json")) as f:
        scenario = json.load(f)
    body = ["h = h * 1.0001", "h = h + 0.001", "h = h.tanh()"]
    program = ["h = x", {"repeat": ops // 3, "body": body}] + body[: ops % 3] + ["h.sum().backward()"]
    scenario["program"] = program
    scenario["description"] = f"x[16] requiring grad, {ops} chained elementwise ops (mul 1.0001, add 0.001, tanh), sum, backward"
    return scenario


def instructions(agtrace, scenario_path, args, out_dir, tag):
    profile = os.path.join(out_dir, f"{tag}.callgrind")
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", agtrace, "run",
                           scenario_path] + args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"report_cost: {agtrace} run {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    collected = re.search(r"Collected : ([\d,]+)", done.stderr)
    if not collected:
        sys.exit(f"report_cost: no instruction count in callgrind's output for {tag}")
    return int(collected.group(1).replace(",", "")), profile


def summary_printer(profile):
    """Inclusive instructions of write_report_text in a -q run's profile (0 when absent)."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", profile], capture_output=True, text=True).stdout
    for line in text.splitlines():
        if re.search(r"text_report\.cpp:agtrace::write_report_text\(", line):
            return int(line.split()[0].replace(",", ""))
    return 0


def measure(agtrace, scenario_path, out_dir, tag):
    quiet, quiet_profile = instructions(agtrace, scenario_path, ["-q"], out_dir, f"{tag}-q")
    run = quiet - summary_printer(quiet_profile)
    text, _ = instructions(agtrace, scenario_path, ["-o", os.path.join(out_dir, f"{tag}.txt")], out_dir, f"{tag}-text")
    js, _ = instructions(agtrace, scenario_path, ["--format", "json", "-o", os.path.join(out_dir, f"{tag}.json")],
                         out_dir, f"{tag}-json")
    return {"run": run, "text": text - run, "json": js - run}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agtrace", required=True, help="the agtrace binary to measure")
    parser.add_argument("--baseline", help="another agtrace binary, measured the same way")
    parser.add_argument("--ops", type=int, default=2000, help="ops in the chain (default 2000)")
    parser.add_argument("--scenario", help="measure this scenario instead of the chain")
    opts = parser.parse_args()
    if opts.ops < 1:
        sys.exit("report_cost: --ops must be at least 1")
    if opts.scenario and not os.path.isfile(opts.scenario):
        sys.exit(f"report_cost: {opts.scenario}: no such file")
    binaries = [("agtrace", opts.agtrace)] + ([("baseline", opts.baseline)] if opts.baseline else [])
    with tempfile.TemporaryDirectory(prefix="agtrace-report-cost-") as out_dir:
        if opts.scenario:
            scenario_path = os.path.abspath(opts.scenario)
        else:
            scenario_path = os.path.join(out_dir, "chain.json")
            with open(scenario_path, "w") as f:
                json.dump(chain_scenario(opts.ops), f, indent=1)
        results = {tag: measure(binary, scenario_path, out_dir, tag) for tag, binary in binaries}
        same = {}
        if opts.baseline:
            for ext in ("txt", "json"):
                with open(os.path.join(out_dir, f"agtrace.{ext}"), "rb") as a, \
                        open(os.path.join(out_dir, f"baseline.{ext}"), "rb") as b:
                    same[ext] = a.read() == b.read()
    if opts.scenario:
        print(f"{opts.scenario}; instructions (callgrind), millions; a report's share of its whole run")
        print(f"{'binary':<10} {'run':>8} {'text report':>12} {'share':>6} {'JSON report':>12} {'share':>6}")
        for tag, r in results.items():
            print(f"{tag:<10} {r['run'] / 1e6:>8.1f} {r['text'] / 1e6:>12.1f} {100 * r['text'] / (r['run'] + r['text']):>5.1f}% "
                  f"{r['json'] / 1e6:>12.1f} {100 * r['json'] / (r['run'] + r['json']):>5.1f}%")
    else:
        print(f"chain of {opts.ops} ops; instructions (callgrind), millions; per op in thousands")
        print(f"{'binary':<10} {'run':>8} {'text report':>12} {'per op':>7} {'JSON report':>12} {'per op':>7}")
        for tag, r in results.items():
            print(f"{tag:<10} {r['run'] / 1e6:>8.1f} {r['text'] / 1e6:>12.1f} {r['text'] / opts.ops / 1e3:>7.1f} "
                  f"{r['json'] / 1e6:>12.1f} {r['json'] / opts.ops / 1e3:>7.1f}")
    if opts.baseline:
        a, b = results["agtrace"], results["baseline"]
        print(f"baseline / agtrace: text report {b['text'] / a['text']:.2f}x, JSON report {b['json'] / a['json']:.2f}x; "
              f"reports byte-identical: text {'yes' if same['txt'] else 'no'}, JSON {'yes' if same['json'] else 'no'}")


if __name__ == "__main__":
    main()
