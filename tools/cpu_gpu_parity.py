#!/usr/bin/env python3
"""CPU/GPU parity: every scenario run by agtrace on two devices must give the same report.

    cpu_gpu_parity.py --agtrace BIN [--device cuda] [--reference cpu] [--torch] SCENARIO...
    cpu_gpu_parity.py --reports A.json B.json         (two saved `run --format json --values` reports)
    cpu_gpu_parity.py --agtrace BIN --self-test       (the comparison must catch planted differences)

Each scenario is run as `agtrace run S --format json --values --device D` on the reference
device (cpu; a scenario written for meta keeps meta: its tensors are too big for the CPU)
and on the device under test (cuda), and the two reports are compared (issue #8: "the same
graph, saved values, errors and (within float tolerance) gradients"):

- statements (source, status, runs), walks and walk_nodes, errors (every fact but the
  message text), nodes (name, edges, what each saves: attribute, shape, dtype, bytes,
  relation to the named tensors, versions, when saved and released), saved-value bytes and
  the memory figures (peak, saved, saved_unique, graph_only, per statement live bytes):
  exactly, since they are properties of the program and its dtypes, not of the device;
- gradients and leaf values: within a dtype-aware tolerance (a GPU sums in another order);
- printed lines: numbers within the same tolerance, the rest exactly.

A scenario for which agtrace exits 2 on the device under test, or whose report stops at an
operation with no kernel on that device, is "unsupported" (listed with
agtrace's reason, never counted as passed). With --torch (needs PyTorch with that device),
the scenario's exported PyTorch script (`agtrace export --torch`) also runs on both devices,
and a difference PyTorch itself shows between them at the same place (e.g. F.dropout is
the fused native_dropout on CUDA only) is reported as expected rather than as a failure.

Exit status: 0 every scenario passed (unsupported ones aside), 1 a difference, 2 bad usage
or an agtrace failure other than exit 2 (a crash, no JSON). Standard library only; --torch
imports torch.
"""

import argparse
import copy
import json
import math
import os
import re
import subprocess
import sys
import tempfile

# Relative tolerance per dtype: float32 results on a GPU differ from the CPU's by the
# rounding of sums taken in another order (cuBLAS and tree reductions vs OpenBLAS and
# sequential loops); half types carry 11 and 8 significant bits.
RTOL = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}
# Elements near zero after cancellation are compared against a fraction of the tensor's
# largest magnitude instead of their own.
SCALE_FRACTION = 1e-2

# Report keys compared exactly, as (top-level key, sub-keys or None for the whole value).
EXACT_MEMORY_KEYS = ("peak_bytes", "saved_bytes", "saved_unique_bytes", "graph_only_bytes",
                     "peak_statement", "graph_only_statement", "hooks_saved_bytes",
                     "hooks_packed_bytes", "host_bytes", "checkpoint_avoided_bytes")

NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")
DEVICE_RE = re.compile(r", device='[a-z]+(?::\d+)?'")


class Diff:
    """One difference: where (a stable path, also used to match PyTorch's own) and what."""

    def __init__(self, path, message):
        self.path = path
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.path, self.message)


def close(a, b, rtol, scale):
    if a is None or b is None:  # NaN / infinities are written as null
        return a is None and b is None
    return abs(a - b) <= rtol * (max(abs(a), abs(b)) + SCALE_FRACTION * scale)


def compare_values(path, a, b, dtype, out):
    """Flat value lists: same length, elementwise within the dtype's tolerance."""
    if a is None or b is None:
        if (a is None) != (b is None):
            out.append(Diff(path, "values on one side only"))
        return
    if len(a) != len(b):
        out.append(Diff(path, "%d values vs %d" % (len(a), len(b))))
        return
    rtol = RTOL.get(dtype, 0.0)  # integers and bools: exact
    finite = [abs(v) for v in b if v is not None]
    scale = max(finite) if finite else 0.0
    bad = [i for i, (x, y) in enumerate(zip(a, b)) if not close(x, y, rtol, scale)]
    if bad:
        i = bad[0]
        out.append(Diff(path, "%d of %d values differ beyond rtol %g (first at [%d]: %r vs %r)" % (
            len(bad), len(a), rtol, i, a[i], b[i])))


def compare_exact(path, a, b, out):
    if a != b:
        out.append(Diff(path, "%s vs %s" % (json.dumps(a, sort_keys=True)[:200],
                                            json.dumps(b, sort_keys=True)[:200])))


def printed_matches(a, b, rtol):
    """Printed lines: the text between numbers exactly, the numbers within rtol; a tensor's
    `device='cuda:0'` is not a difference (the device is the point of the comparison)."""
    a, b = DEVICE_RE.sub("", a), DEVICE_RE.sub("", b)
    if a == b:
        return True
    if NUMBER_RE.split(a) != NUMBER_RE.split(b):
        return False
    na, nb = NUMBER_RE.findall(a), NUMBER_RE.findall(b)
    if len(na) != len(nb):
        return False
    for x, y in zip(na, nb):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if math.isnan(fx) or math.isnan(fy) or not close(fx, fy, rtol, 0.0):
            return False
    return True


def compare_reports(a, b):
    """The differences between two agtrace JSON reports (a: reference, b: under test)."""
    out = []
    compare_exact("scenario", a.get("scenario"), b.get("scenario"), out)

    sa, sb = a.get("statements", []), b.get("statements", [])
    if len(sa) != len(sb):
        out.append(Diff("statements", "%d statements vs %d" % (len(sa), len(sb))))
    for x, y in zip(sa, sb):
        for k in ("source", "status", "runs"):
            compare_exact("statements[%d].%s" % (x.get("index", -1), k), x.get(k), y.get(k), out)

    pa, pb = a.get("printed", []), b.get("printed", [])
    if len(pa) != len(pb):
        out.append(Diff("printed", "%d lines vs %d" % (len(pa), len(pb))))
    for i, (x, y) in enumerate(zip(pa, pb)):
        if not printed_matches(x, y, RTOL["float32"]):
            out.append(Diff("printed[%d]" % i, "%r vs %r" % (x, y)))

    wa, wb = a.get("walks", {}), b.get("walks", {})
    for k in sorted(set(wa) | set(wb)):
        compare_exact("walks.%s" % k, wa.get(k), wb.get(k), out)
    compare_exact("walk_nodes", a.get("walk_nodes"), b.get("walk_nodes"), out)

    ea, eb = a.get("errors", []), b.get("errors", [])
    if len(ea) != len(eb):
        out.append(Diff("errors", "%d errors vs %d" % (len(ea), len(eb))))
    for i, (x, y) in enumerate(zip(ea, eb)):
        for k in sorted((set(x) | set(y)) - {"message"}):
            compare_exact("errors[%d].%s" % (i, k), x.get(k), y.get(k), out)

    ga, gb = a.get("grads", {}), b.get("grads", {})
    for k in sorted(set(ga) | set(gb)):
        if k not in ga or k not in gb:
            out.append(Diff("grads.%s" % k, "on one side only"))
            continue
        compare_exact("grads.%s.shape" % k, ga[k].get("shape"), gb[k].get("shape"), out)
        compare_exact("grads.%s.dtype" % k, ga[k].get("dtype"), gb[k].get("dtype"), out)
        compare_values("grads.%s.values" % k, ga[k].get("values"), gb[k].get("values"),
                       ga[k].get("dtype"), out)

    la, lb = a.get("leaves", []), b.get("leaves", [])
    compare_exact("leaves", [{k: v for k, v in x.items() if k != "values"} for x in la],
                  [{k: v for k, v in y.items() if k != "values"} for y in lb], out)
    for x, y in zip(la, lb):
        compare_values("leaves.%s.values" % x.get("name"), x.get("values"), y.get("values"),
                       x.get("dtype"), out)

    na, nb = a.get("nodes", []), b.get("nodes", [])
    if len(na) != len(nb):
        out.append(Diff("nodes", "%d nodes vs %d" % (len(na), len(nb))))
    for x, y in zip(na, nb):
        label = "nodes[%s %s]" % (x.get("id"), x.get("name"))
        for k in sorted(set(x) | set(y)):
            if k == "saved":
                continue
            compare_exact("%s.%s" % (label, k), x.get(k), y.get(k), out)
        xs, ys = x.get("saved", []), y.get("saved", [])
        if [s.get("attr") for s in xs] != [s.get("attr") for s in ys]:
            compare_exact("%s.saved" % label, [s.get("attr") for s in xs], [s.get("attr") for s in ys], out)
            continue
        for s, t in zip(xs, ys):
            compare_exact("%s.%s" % (label, s.get("attr")), s, t, out)

    ma, mb = a.get("memory", {}), b.get("memory", {})
    for k in EXACT_MEMORY_KEYS:
        compare_exact("memory.%s" % k, ma.get(k), mb.get(k), out)
    ba, bb = ma.get("by_statement", []), mb.get("by_statement", [])
    if len(ba) != len(bb):
        out.append(Diff("memory.by_statement", "%d entries vs %d" % (len(ba), len(bb))))
    for x, y in zip(ba, bb):
        for k in ("live_after", "peak_inside", "categories"):
            compare_exact("memory.by_statement[%s].%s" % (x.get("statement"), k), x.get(k), y.get(k), out)
    compare_exact("raised", a.get("raised"), b.get("raised"), out)
    return out


def excused_by_torch(diffs, torch_diffs):
    """The subset of our differences that PyTorch shows too between the same two devices.

    The stable core PyTorch's side reports has walks, errors, gradients and saved_bytes but
    no nodes or byte timelines, so a walk or saved-bytes difference in PyTorch (a fused CUDA
    kernel with its own node and saved values, e.g. native_dropout) also excuses our
    differences in nodes, walk_nodes and memory figures; everything excused is printed."""
    theirs = {d.path for d in torch_diffs}
    graph_differs = any(p.startswith("walks.") or p == "memory.saved_bytes" for p in theirs)
    derived = ("nodes", "walk_nodes", "memory.")
    return [d for d in diffs if d.path in theirs or (graph_differs and d.path.startswith(derived))]


# ---------------------------------------------------------------------------------------
# Running agtrace


class AgtraceFailure(Exception):
    pass


def run_agtrace(binary, scenario, device, timeout):
    """('ok', report) or ('unsupported', reason); AgtraceFailure when agtrace misbehaves."""
    cmd = [binary, "run", scenario, "--format", "json", "--values", "--values-limit", "0", "--device", device,
           "--color", "never"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AgtraceFailure("%s on %s: no answer within %d s" % (os.path.basename(scenario), device, timeout))
    if p.returncode == 2:
        reason = (p.stderr.strip().splitlines() or ["exit 2"])[-1]
        return "unsupported", reason
    if p.returncode not in (0, 1, 3):
        raise AgtraceFailure("%s on %s: exit %d: %s" % (os.path.basename(scenario), device, p.returncode,
                                                         p.stderr.strip()[-300:]))
    try:
        report = json.loads(p.stdout)
    except ValueError as e:
        raise AgtraceFailure("%s on %s: the report is not JSON (%s)" % (os.path.basename(scenario), device, e))
    # An op with no route on this device stops the program with an `unsupported` error that
    # names it ("mse_loss has no cuda kernel in agtrace yet ..."): not a difference from the
    # reference, and not a pass either.
    for err in report.get("errors", []):
        if err.get("kind") == "unsupported" and "has no %s kernel" % device in err.get("message", ""):
            return "unsupported", "statement %s: %s" % (err.get("statement"), err["message"].split(";")[0])
    return "ok", report


def devices_for(scenario_path, reference, under_test):
    """(reference, under test): a scenario written for meta (GPT-3's layer: gigabytes) keeps
    meta as its reference, and stays on meta when the device under test is the CPU."""
    try:
        with open(scenario_path) as f:
            own = json.load(f).get("device", "cpu")
    except (OSError, ValueError):
        own = "cpu"
    if own != "meta":
        return reference, under_test
    return "meta", ("meta" if under_test == "cpu" else under_test)


class TorchSide:
    """The scenario's exported PyTorch script, run on two devices in this process."""

    def __init__(self, binary):
        import torch  # noqa: F401  (fails early when PyTorch is missing)
        self.binary = binary

    def core(self, scenario_path, device):
        import runpy
        p = subprocess.run([self.binary, "export", "--torch", scenario_path], capture_output=True, text=True)
        if p.returncode != 0:
            return None
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(p.stdout)
            path = f.name
        try:
            mod = runpy.run_path(path, run_name="agtrace_export")
            try:
                return mod["run_scenario"](mod["SCENARIO"], mod["LEAF_VALUES"], device)
            except mod["UnsupportedScenario"]:
                return None
        finally:
            os.unlink(path)


def parity(args):
    torch_side = TorchSide(args.agtrace) if args.torch else None
    passed, failed, unsupported, expected_only = [], [], [], []
    for path in args.scenarios:
        name = os.path.splitext(os.path.basename(path))[0]
        ref_dev, dev = devices_for(path, args.reference, args.device)
        try:
            st_b, b = run_agtrace(args.agtrace, path, dev, args.timeout)
            if st_b == "unsupported":
                unsupported.append((name, b))
                continue
            st_a, a = run_agtrace(args.agtrace, path, ref_dev, args.timeout)
            if st_a == "unsupported":
                failed.append((name, ["the reference device %s refused it: %s" % (ref_dev, a)]))
                continue
        except AgtraceFailure as e:
            failed.append((name, [str(e)]))
            continue
        diffs = compare_reports(a, b)
        excused = []
        if diffs and torch_side is not None:
            ta, tb = torch_side.core(path, ref_dev), torch_side.core(path, dev)
            if ta is not None and tb is not None:
                excused = excused_by_torch(diffs, compare_reports(ta, tb))
                diffs = [d for d in diffs if d not in excused]
        if diffs:
            failed.append((name, [str(d) for d in diffs]))
        else:
            passed.append(name)
            if excused:
                expected_only.append((name, [str(d) for d in excused]))
    label = "%s vs %s" % (args.device, args.reference)
    for name in passed:
        print("PASS %s (%s)" % (name, label))
    for name, lines in expected_only:
        print("     %s: %d difference(s) PyTorch shows too: %s" % (name, len(lines), "; ".join(lines[:3])))
    # One line per distinct reason (the scenario's path taken out), naming its scenarios.
    by_reason = {}
    for name, reason in unsupported:
        by_reason.setdefault(re.sub(r"\S+\.json: ", "", reason), []).append(name)
    for reason, names in sorted(by_reason.items()):
        print("UNSUPPORTED on %s (%d): %s\n     %s" % (args.device, len(names), ", ".join(sorted(names)), reason))
    for name, lines in failed:
        print("FAIL %s (%s)" % (name, label))
        for line in lines[:args.max_diffs]:
            print("     " + line)
        if len(lines) > args.max_diffs:
            print("     ... %d more" % (len(lines) - args.max_diffs))
    print("parity: %d passed, %d failed, %d unsupported on %s" % (len(passed), len(failed), len(unsupported),
                                                                   args.device))
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump({"device": args.device, "reference": args.reference, "passed": passed,
                       "failed": [n for n, _ in failed], "unsupported": [n for n, _ in unsupported]}, f, indent=1)
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------
# Self-test: planted differences must be caught, float noise within tolerance must not


def first_with(report, key):
    for k, v in report.get(key, {}).items():
        if v.get("values"):
            return k
    return None


def self_test(args):
    scenario = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scenarios",
                            "seed_saved_nonleaf_inplace.json")
    status, base = run_agtrace(args.agtrace, scenario, "cpu", args.timeout)
    if status != "ok" or not base.get("errors") or not base.get("nodes"):
        print("self-test: the seed scenario did not give a usable report (%s)" % status)
        return 2
    status, with_grads = run_agtrace(args.agtrace, os.path.join(os.path.dirname(scenario), "seed_walk.json"),
                                     "cpu", args.timeout)
    g = first_with(with_grads, "grads")
    problems = []
    checks = [0]

    def expect(label, report, mutate, should_differ, ref=None):
        checks[0] += 1
        ref = base if ref is None else ref
        other = copy.deepcopy(ref)
        mutate(other)
        diffs = compare_reports(ref, other)
        if bool(diffs) != should_differ:
            problems.append("%s: %s" % (label, "not caught" if should_differ else "flagged: %s" % diffs[0]))

    expect("identical", base, lambda r: None, False)
    expect("grad beyond tolerance", with_grads,
           lambda r: r["grads"][g]["values"].__setitem__(0, r["grads"][g]["values"][0] * 1.01 + 1e-3), True,
           with_grads)
    expect("grad within tolerance", with_grads,
           lambda r: r["grads"][g]["values"].__setitem__(0, r["grads"][g]["values"][0] * (1 + 1e-7)), False,
           with_grads)
    expect("grad NaN on one side", with_grads,
           lambda r: r["grads"][g]["values"].__setitem__(0, None), True, with_grads)
    expect("walk node renamed", with_grads,
           lambda r: r["walks"][next(iter(r["walks"]))].__setitem__(0, "SumBackward1"), True, with_grads)
    expect("saved bytes", base, lambda r: r["memory"].__setitem__("saved_bytes", r["memory"]["saved_bytes"] + 4),
           True)
    expect("error kind", base, lambda r: r["errors"][0].__setitem__("kind", "saved_tensors_freed"), True)
    expect("error message only", base, lambda r: r["errors"][0].__setitem__("message", "other words"), False)
    expect("error version", base,
           lambda r: r["errors"][0].__setitem__("found_version", r["errors"][0].get("found_version", 0) + 1), True)

    def saved_relation(r):
        for n in r["nodes"]:
            for s in n.get("saved", []):
                if s.get("kind") == "tensor":
                    s["relation"] = "other_relation"
                    return
    expect("saved value relation", with_grads, saved_relation, True, with_grads)
    expect("statement status", base, lambda r: r["statements"][0].__setitem__("status", "not_run"), True)
    expect("printed line added", base, lambda r: r["printed"].append("1.0"), True)

    def excuse(label, ours, theirs, n_expected):
        checks[0] += 1
        got = excused_by_torch([Diff(p, "") for p in ours], [Diff(p, "") for p in theirs])
        if len(got) != n_expected:
            problems.append("%s: %d excused, expected %d" % (label, len(got), n_expected))
    excuse("nothing in torch", ["walks.y", "nodes[1 MulBackward0].name"], [], 0)
    excuse("torch walk differs", ["walks.y", "nodes[1 MulBackward0].name", "grads.x.values"], ["walks.y"], 2)
    excuse("torch grads only", ["grads.x.values", "memory.peak_bytes"], ["grads.x.values"], 1)

    def printed_pair(x, y, should_match):
        checks[0] += 1
        if printed_matches(x, y, RTOL["float32"]) != should_match:
            problems.append("printed %r vs %r: %s" % (x, y, "matched" if not should_match else "not matched"))
    printed_pair("tensor([1.5, 2.25], device='cuda:0')", "tensor([1.5, 2.25])", True)
    printed_pair("0.30000001", "0.3", True)
    printed_pair("0.31", "0.3", False)
    printed_pair("SumBackward0", "SumBackward1", False)
    printed_pair("torch.Size([2, 3])", "torch.Size([3, 2])", False)

    for p in problems:
        print("self-test FAIL " + p)
    print("self-test: %d passed, %d failed" % (checks[0] - len(problems), len(problems)))
    return 1 if problems else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agtrace", help="the agtrace binary")
    ap.add_argument("--device", default="cuda", help="the device under test (default cuda)")
    ap.add_argument("--reference", default="cpu", help="the reference device (default cpu; meta scenarios keep meta)")
    ap.add_argument("--torch", action="store_true",
                    help="excuse differences PyTorch shows between the same two devices (needs torch)")
    ap.add_argument("--reports", nargs=2, metavar=("A", "B"), help="compare two saved JSON reports")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per agtrace run (default 120)")
    ap.add_argument("--max-diffs", type=int, default=8, help="differences printed per scenario (default 8)")
    ap.add_argument("--summary-json", help="write passed/failed/unsupported names here")
    ap.add_argument("scenarios", nargs="*")
    args = ap.parse_args(argv)
    if args.reports:
        reports = []
        for path in args.reports:
            try:
                with open(path) as f:
                    reports.append(json.load(f))
            except (OSError, ValueError) as e:
                print("parity: %s: %s" % (path, e), file=sys.stderr)
                return 2
        diffs = compare_reports(*reports)
        for d in diffs:
            print("DIFF " + str(d))
        print("parity: %d passed, %d failed" % (0 if diffs else 1, 1 if diffs else 0))
        return 1 if diffs else 0
    if not args.agtrace:
        ap.error("--agtrace is required (or --reports A B)")
    if args.self_test:
        return self_test(args)
    if not args.scenarios:
        ap.error("no scenario given")
    try:
        return parity(args)
    except ImportError as e:
        print("parity: --torch needs PyTorch: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
