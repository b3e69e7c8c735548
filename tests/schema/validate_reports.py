#!/usr/bin/python3
"""Validate scenarios and agtrace's JSON reports against the JSON Schemas in schema/.

Usage:
  /usr/bin/python3 tests/schema/validate_reports.py --agtrace build/agtrace scenarios/*.json

For each scenario file:
  - the file is valid JSON without duplicate keys and valid against
    schema/scenario.schema.json;
  - `agtrace run FILE --format json` and `... --format json --values --profile` each print a report
    (exit 0, 1 or 3) that is valid against schema/report.schema.json. Keys the schema
    does not describe are allowed (the spec: a report may hold much more) but listed as
    a note under the test; with --strict they fail it.
Then a self-check:
  - both schemas are valid JSON Schemas (draft 2020-12);
  - deliberately broken reports and broken scenarios must fail validation, and valid
    reference scenarios must pass; each reference scenario is also given to
    `agtrace validate`, which must agree with the schema.
One line per test ("PASS ..." / "FAIL ..." with the reasons); last, "N passed, M failed".
Exit status 1 when any test failed, 2 on a usage error.
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:  # pragma: no cover
    sys.stderr.write("validate_reports.py needs python3-jsonschema: run it with /usr/bin/python3\n")
    sys.exit(2)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIO_SCHEMA = os.path.join(ROOT, "schema", "scenario.schema.json")
REPORT_SCHEMA = os.path.join(ROOT, "schema", "report.schema.json")
REPORT_EXIT_CODES = (0, 1, 3)  # ok, an expect fact differs, the program raised


class DuplicateKey(ValueError):
    pass


def no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise DuplicateKey("duplicate key %r" % k)
        seen[k] = v
    return seen


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, object_pairs_hook=no_duplicates)


def closed_copy(schema, objecty=False):
    """The schema with every object that lists its properties closed to other keys: what
    it accepts is exactly what the schema documents."""
    if isinstance(schema, list):
        return [closed_copy(x, objecty) for x in schema]
    if not isinstance(schema, dict):
        return schema
    is_object = schema.get("type") == "object" or objecty
    out = {}
    for k, v in schema.items():
        # The branches of a oneOf/anyOf of an object schema describe that object too.
        out[k] = closed_copy(v, is_object and k in ("oneOf", "anyOf"))
    if is_object and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _extra_keys(err, keys):
    if err.validator == "additionalProperties":
        extra = set(err.instance) - set((err.schema.get("properties") or {}))
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        where = re.sub(r"/\d+(?=/|$)", "/*", where)
        keys.update("%s/%s" % (where.rstrip("/"), k) for k in extra)
    elif err.validator in ("oneOf", "anyOf") and err.context:
        # The branch that fails only for undocumented keys is the one the value takes.
        branches = {}
        for sub in err.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        for subs in branches.values():
            if all(x.validator == "additionalProperties" for x in subs):
                for x in subs:
                    _extra_keys(x, keys)
                break


def undocumented_keys(strict_validator, instance):
    keys = set()
    for e in strict_validator.iter_errors(instance):
        _extra_keys(e, keys)
    return sorted(keys)


def schema_errors(validator, instance, limit=5):
    errs = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    out = []
    for e in errs[:limit]:
        ptr = "/" + "/".join(str(p) for p in e.absolute_path)
        msg = e.message if len(e.message) <= 200 else e.message[:200] + "..."
        out.append("%s: %s" % (ptr, msg))
    if len(errs) > limit:
        out.append("... and %d more" % (len(errs) - limit))
    return out


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def record(self, label, problems, notes=()):
        if problems:
            self.failed += 1
            print("FAIL %s" % label)
            for p in problems:
                print("    - %s" % p)
        else:
            self.passed += 1
            print("PASS %s" % label)
        for n in notes:
            print("    note: %s" % n)
        sys.stdout.flush()


def run_report(binary, path, values):
    # The --values run also asks for --profile, so the schema's "profile" key is checked too.
    cmd = [binary, "run", path, "--format", "json"] + (["--values", "--profile"] if values else [])
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "agtrace could not run: %s" % e
    if p.returncode not in REPORT_EXIT_CODES:
        return None, "agtrace exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()[:400])
    try:
        return json.loads(p.stdout, object_pairs_hook=no_duplicates), None
    except ValueError as e:
        return None, "agtrace (exit %d) did not print one JSON report: %s" % (p.returncode, e)


# ---------------------------------------------------------------------------------------
# Self-check material

def valid_scenarios():
    """Scenarios the spec allows; each must pass the schema and `agtrace validate`."""
    spec_example = {
        "format": 1,
        "name": "seed-walk",
        "description": "y = (x @ W + b).relu().sum(): walk the graph, then backward",
        "device": "cpu",
        "dtype": "float32",
        "seed": 7,
        "tensors": {
            "x": {"shape": [2, 3], "requires_grad": True, "init": {"arange": [0, 0.1]}},
            "W": {"shape": [3, 4], "requires_grad": True, "init": {"uniform": [-1, 1]}},
            "b": {"shape": [4], "requires_grad": True, "init": {"values": [0.1, -0.2, 0.3, 0.0]}},
        },
        "program": [
            "y = (x @ W + b).relu().sum()",
            "print(y.grad_fn.name())",
            "y.backward()",
            {"try": ["y.backward()"]},
            "print(x.grad.shape)",
        ],
        "expect": {"walk": {"y": ["SumBackward0", "ReluBackward0", "AddBackward0", "MmBackward0",
                                  "AccumulateGrad", "AccumulateGrad", "AccumulateGrad"]}},
    }
    every_form = {
        "name": "every.form_1",
        "device": "meta",
        "dtype": "float64",
        "tensors": {
            "a": {"shape": []},
            "b": {"shape": [2, 2], "init": "ones", "dtype": "float16"},
            "c": {"shape": [2], "init": {"full": 2.5}, "dtype": "bfloat16"},
            "d": {"shape": [2, 2], "init": {"values": [[1, 2], [3, 4]]}},
            "e": {"shape": [], "init": {"values": 3.0}},
            "f": {"shape": [3], "init": {"linspace": [0, 1]}, "requires_grad": False},
            "g": {"shape": [0, 3], "init": {"normal": [0, 0]}},
            "h": {"shape": [4], "dtype": "int64", "init": {"randint": [-3, 3]}},
            "m": {"shape": [2], "dtype": "bool", "init": {"values": [True, False]}},
            "n": {"shape": [2], "dtype": "bool", "init": {"full": True}},
            "_p2": {"shape": [2], "init": "zeros"},
        },
        "program": [
            {"no_grad": ["y = a * 2"]},
            {"enable_grad": [{"try": ["z = d + 1"]}]},
            {"saved_tensor_hooks": "save_on_cpu", "body": ["u = d.exp()"]},
            {"saved_tensor_hooks": "count", "body": []},
            {"repeat": 3, "body": ["v = d.sum()"]},
            {"checkpoint": ["w = x.relu()"], "inputs": ["d"], "outputs": ["w"]},
            "del y",
        ],
        "expect": {
            "walk": {"statement 3": []},
            "printed": [],
            "errors": [{"statement": 1, "kind": "shape_mismatch", "phase": "forward",
                        "node": "MulBackward0", "expected_version": 0, "found_version": 1, "saved_at": 0}],
            "memory": {"peak_bytes": 100, "saved_bytes": {"max": 10}, "saved_unique_bytes": {"min": 0, "max": 1},
                       "graph_only_bytes": {"min": 0}},
        },
    }
    minimal = {"name": "m", "program": []}
    int_default = {"name": "int_default", "dtype": "int64",
                   "tensors": {"i": {"shape": [2]}, "x": {"shape": [2], "dtype": "float32", "requires_grad": True}},
                   "program": ["j = i + 1"]}
    broken_base = {"name": "b", "tensors": {"x": {"shape": [2], "requires_grad": True}}, "program": ["y = x * 2"]}
    return [("the spec's example", spec_example), ("every block and init form", every_form),
            ("the base of the broken scenarios", broken_base),
            ("a minimal scenario", minimal), ("an int64 default dtype", int_default)]


def broken_scenarios():
    """(why it is broken, scenario): each must fail the schema and `agtrace validate`."""
    base = {"name": "b", "tensors": {"x": {"shape": [2], "requires_grad": True}}, "program": ["y = x * 2"]}

    def mod(fn):
        s = copy.deepcopy(base)
        fn(s)
        return s

    def set_tensor(field, value):
        return lambda s: s["tensors"]["x"].__setitem__(field, value)

    return [
        ("an unknown top-level field", mod(lambda s: s.__setitem__("bogus", 1))),
        ("a missing name", mod(lambda s: s.pop("name"))),
        ("a missing program", mod(lambda s: s.pop("program"))),
        ("a name with a space", mod(lambda s: s.__setitem__("name", "seed walk"))),
        ("a name ending in a newline", mod(lambda s: s.__setitem__("name", "seed\n"))),
        ("an empty name", mod(lambda s: s.__setitem__("name", ""))),
        ("format 2", mod(lambda s: s.__setitem__("format", 2))),
        ("device tpu", mod(lambda s: s.__setitem__("device", "tpu"))),
        ("dtype float8", mod(lambda s: s.__setitem__("dtype", "float8"))),
        ("a negative seed", mod(lambda s: s.__setitem__("seed", -1))),
        ("a misspelt leaf field", mod(set_tensor("requires_gard", True))),
        ("a leaf without shape", mod(lambda s: s["tensors"]["x"].pop("shape"))),
        ("a negative dimension", mod(set_tensor("shape", [2, -1]))),
        ("a fractional dimension", mod(set_tensor("shape", [2.5]))),
        ("an unknown initialiser", mod(set_tensor("init", "random"))),
        ("an initialiser with two keys", mod(set_tensor("init", {"uniform": [0, 1], "normal": [0, 1]}))),
        ("uniform without arguments", mod(set_tensor("init", "uniform"))),
        ("arange with three numbers", mod(set_tensor("init", {"arange": [0, 1, 2]}))),
        ("linspace with a string", mod(set_tensor("init", {"linspace": [0, "1"]}))),
        ("normal with a negative std", mod(set_tensor("init", {"normal": [0, -1]}))),
        ("randint with fractional bounds", mod(lambda s: s["tensors"].__setitem__(
            "i", {"shape": [2], "dtype": "int64", "init": {"randint": [0.5, 3]}}))),
        ("requires_grad on an int64 leaf", mod(set_tensor("dtype", "int64"))),
        ("requires_grad under an int64 default dtype", mod(lambda s: s.__setitem__("dtype", "int64"))),
        ("uniform on a bool leaf", mod(lambda s: s["tensors"].__setitem__(
            "m", {"shape": [2], "dtype": "bool", "init": {"uniform": [0, 1]}}))),
        ("a tensor named torch", mod(lambda s: s["tensors"].__setitem__("torch", {"shape": [1]}))),
        ("a tensor named 1x", mod(lambda s: s["tensors"].__setitem__("1x", {"shape": [1]}))),
        ("a tensor named def", mod(lambda s: s["tensors"].__setitem__("def", {"shape": [1]}))),
        ("a block with two kinds", mod(lambda s: s["program"].append({"no_grad": [], "try": []}))),
        ("a misspelt block", mod(lambda s: s["program"].append({"no_gard": ["y = x"]}))),
        ("repeat 0", mod(lambda s: s["program"].append({"repeat": 0, "body": []}))),
        ("repeat without body", mod(lambda s: s["program"].append({"repeat": 2}))),
        ("body on a try block", mod(lambda s: s["program"].append({"try": [], "body": []}))),
        ("saved_tensor_hooks fp8", mod(lambda s: s["program"].append({"saved_tensor_hooks": "fp8", "body": []}))),
        ("checkpoint without outputs", mod(lambda s: s["program"].append({"checkpoint": [], "inputs": ["x"]}))),
        ("checkpoint with duplicate inputs", mod(lambda s: s["program"].append(
            {"checkpoint": [], "inputs": ["x", "x"], "outputs": []}))),
        ("a blank statement", mod(lambda s: s["program"].append("   "))),
        ("a statement with a newline", mod(lambda s: s["program"].append("a = 1\nb = 2"))),
        ("a number as a statement", mod(lambda s: s["program"].append(5))),
        ("program as a string", mod(lambda s: s.__setitem__("program", "y = x * 2"))),
        ("an unknown expect field", mod(lambda s: s.__setitem__("expect", {"walks": {}}))),
        ("an unknown expected error kind", mod(lambda s: s.__setitem__("expect", {"errors": [{"kind": "bogus"}]}))),
        ("an expected error without kind", mod(lambda s: s.__setitem__("expect", {"errors": [{"statement": 0}]}))),
        ("an unknown expected error field", mod(lambda s: s.__setitem__(
            "expect", {"errors": [{"kind": "leaf_inplace", "message": "x"}]}))),
        ("an expected phase sideways", mod(lambda s: s.__setitem__(
            "expect", {"errors": [{"kind": "leaf_inplace", "phase": "sideways"}]}))),
        ("an unknown expected memory fact", mod(lambda s: s.__setitem__("expect", {"memory": {"peak": 1}}))),
        ("an empty memory bound", mod(lambda s: s.__setitem__("expect", {"memory": {"peak_bytes": {}}}))),
        ("a memory bound with a stray key", mod(lambda s: s.__setitem__(
            "expect", {"memory": {"peak_bytes": {"max": 1, "exact": 1}}}))),
        ("an expected walk that is not a list", mod(lambda s: s.__setitem__("expect", {"walk": {"y": "SumBackward0"}}))),
        ("printed lines that are not strings", mod(lambda s: s.__setitem__("expect", {"printed": [1]}))),
    ]


def minimal_report():
    return {
        "format": 1, "scenario": "m", "device": "cpu",
        "statements": [{"index": 0, "source": "y = x * 2", "status": "ok"}],
        "printed": [], "walks": {"y": ["MulBackward0", "AccumulateGrad"]}, "errors": [],
        "grads": {}, "memory": {"peak_bytes": 0, "saved_bytes": 0, "saved_unique_bytes": 0, "graph_only_bytes": 0},
    }


def broken_reports(good):
    """(why it is broken, report) derived from a valid report."""
    out = []

    def variant(why, fn):
        r = copy.deepcopy(good)
        fn(r)
        out.append((why, r))

    def first_statement(r):
        if not r["statements"]:
            r["statements"].append({"index": 0, "source": "x", "status": "ok"})
        return r["statements"][0]

    variant("no memory.saved_bytes", lambda r: r["memory"].pop("saved_bytes"))
    variant("memory.saved_bytes negative", lambda r: r["memory"].__setitem__("saved_bytes", -8))
    variant("no walks", lambda r: r.pop("walks"))
    variant("a walk that is a string", lambda r: r["walks"].__setitem__("y", "SumBackward0"))
    variant("a walk holding a number", lambda r: r["walks"].__setitem__("y", [3]))
    variant("format 2", lambda r: r.__setitem__("format", 2))
    variant("a statement status 'done'", lambda r: first_statement(r).__setitem__("status", "done"))
    variant("a statement without source", lambda r: first_statement(r).pop("source"))
    variant("an error kind 'bogus'", lambda r: r["errors"].append(
        {"statement": 0, "phase": "forward", "kind": "bogus", "message": "m"}))
    variant("an error phase 'later'", lambda r: r["errors"].append(
        {"statement": 0, "phase": "later", "kind": "leaf_inplace", "message": "m"}))
    variant("saved_tensor_modified without versions", lambda r: r["errors"].append(
        {"statement": 0, "phase": "backward", "kind": "saved_tensor_modified", "message": "m", "node": "ExpBackward0"}))
    variant("a grad without shape", lambda r: r["grads"].__setitem__("x", {"values": [1.0]}))
    variant("grad values as a string", lambda r: r["grads"].__setitem__("x", {"shape": [1], "values": "1.0"}))
    variant("printed holding a number", lambda r: r["printed"].append(1))
    variant("device tpu", lambda r: r.__setitem__("device", "tpu"))
    return out


def write_temp(directory, name, obj):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return path


def agtrace_validate(binary, path):
    p = subprocess.run([binary, "validate", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, (p.stderr or p.stdout).decode(errors="replace").strip()


def self_check(binary, scen_v, report_v, good_reports, results):
    # A valid report: agtrace's own when there is one, plus a minimal hand-written one.
    bases = [("hand-written minimal report", minimal_report())]
    if good_reports:
        bases.insert(0, ("agtrace's report of %s" % good_reports[0][0], good_reports[0][1]))
    for label, rep in bases:
        results.record("self-check: %s is valid" % label, schema_errors(report_v, rep))
        for why, bad in broken_reports(rep):
            problems = [] if schema_errors(report_v, bad) else ["the report schema accepts it"]
            results.record("self-check: broken report rejected (%s; from %s)" % (why, label), problems)

    with tempfile.TemporaryDirectory(prefix="agtrace-schema-") as tmp:
        for i, (why, sc) in enumerate(valid_scenarios()):
            problems = schema_errors(scen_v, sc)
            path = write_temp(tmp, "valid%d.json" % i, sc)
            rc, msg = agtrace_validate(binary, path)
            if rc != 0:
                problems.append("agtrace validate rejects it (exit %d): %s" % (rc, msg))
            results.record("self-check: valid scenario accepted (%s)" % why, problems)
        for i, (why, sc) in enumerate(broken_scenarios()):
            problems = [] if schema_errors(scen_v, sc) else ["the scenario schema accepts it"]
            path = write_temp(tmp, "broken%d.json" % i, sc)
            rc, msg = agtrace_validate(binary, path)
            if rc != 2:
                problems.append("agtrace validate does not reject it as bad input (exit %d, want 2): %s" % (rc, msg))
            results.record("self-check: broken scenario rejected (%s)" % why, problems)
        # Duplicate keys: JSON Schema cannot see them; this script's loader must.
        path = os.path.join(tmp, "dup.json")
        with open(path, "w") as f:
            f.write('{"name": "a", "name": "b", "program": []}')
        try:
            load_json(path)
            problems = ["a duplicate key was not detected"]
        except DuplicateKey:
            problems = []
        results.record("self-check: broken scenario rejected (a duplicate key)", problems)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Validate scenarios and agtrace JSON reports against schema/.")
    ap.add_argument("--agtrace", required=True, help="path of the agtrace binary")
    ap.add_argument("--strict", action="store_true",
                    help="fail a report holding keys the report schema does not describe (default: a note)")
    ap.add_argument("scenarios", nargs="*", help="scenario files (JSON)")
    args = ap.parse_args(argv)
    if not os.access(args.agtrace, os.X_OK):
        ap.error("--agtrace %s is not an executable file" % args.agtrace)

    results = Results()
    validators = {}
    for label, path in (("scenario", SCENARIO_SCHEMA), ("report", REPORT_SCHEMA)):
        try:
            schema = load_json(path)
            jsonschema.Draft202012Validator.check_schema(schema)
            validators[label] = jsonschema.Draft202012Validator(schema)
            if label == "report":
                validators["report_closed"] = jsonschema.Draft202012Validator(closed_copy(schema))
            results.record("schema %s" % os.path.relpath(path, ROOT), [])
        except (OSError, ValueError, jsonschema.SchemaError) as e:
            results.record("schema %s" % os.path.relpath(path, ROOT), [str(e)[:400]])
    if len(validators) < 3:
        print("%d passed, %d failed" % (results.passed, results.failed))
        return 1
    scen_v, report_v = validators["scenario"], validators["report"]

    good_reports = []
    for path in args.scenarios:
        label = os.path.relpath(path) if not os.path.isabs(path) else path
        try:
            sc = load_json(path)
            problems = schema_errors(scen_v, sc)
        except (OSError, ValueError) as e:
            problems = ["not a readable JSON scenario: %s" % e]
        results.record("scenario %s" % label, problems)
        for values in (False, True):
            report, problem = run_report(args.agtrace, path, values)
            problems = [problem] if problem else schema_errors(report_v, report)
            notes = []
            if report is not None and not problems:
                extra = undocumented_keys(validators["report_closed"], report)
                if extra:
                    msg = "keys the report schema does not describe: %s" % ", ".join(extra)
                    (problems if args.strict else notes).append(msg)
            results.record("report %s%s" % (label, " --values" if values else ""), problems, notes)
            if report is not None and not problems and values:
                good_reports.append((label, report))

    self_check(args.agtrace, scen_v, report_v, good_reports, results)
    print("%d passed, %d failed" % (results.passed, results.failed))
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main())
