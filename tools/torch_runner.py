"""Runs an agtrace scenario's program in real PyTorch and reports the spec's stable core.

This module is the single PyTorch side of agtrace:

- tests/differential/compare_with_torch.py imports it (the differential test);
- `agtrace export --torch SCENARIO` embeds this file's text, verbatim, in the script it
  prints, followed by the scenario and the call `main(SCENARIO, LEAF_VALUES)`.

It depends on nothing but the Python standard library and PyTorch (written against
PyTorch 1.13, run it with /usr/bin/python3), never on agtrace.  Public entry points:

  run_scenario(scenario, leaf_values, device=None) -> dict
      scenario:    the scenario as a dict (the JSON file, format 1)
      leaf_values: {leaf name: flat row-major list of its initial values} (agtrace's own
                   initialiser output, so random initialisers match exactly; not needed on
                   the meta device)
      returns the stable core of agtrace's `run --format json` report (spec "The stable
      core of --format json"): format, scenario, device, statements (index, source,
      status, runs), printed, walks, errors (statement, phase, kind, expected_version /
      found_version when PyTorch's message has them, message, caught), grads (shape,
      dtype, values; NaN and infinities as "nan", "inf", "-inf", as agtrace writes them), memory
      (saved_bytes only), plus raised, torch_version and harness_problems.

  main(scenario, leaf_values, argv=None) -> exit status
      prints run_scenario's report as JSON on stdout.  0 when the program ran (whether or
      not a statement raised: see "raised"), 2 when the scenario cannot be run here
      (unsupported block, missing leaf values, CUDA not available).

How the program runs (see tests/differential/README.md for the details): each statement string
is exec()'d in one namespace holding torch, F, the leaves, shares_storage(a, b) and a
recording print; blocks map to `with torch.no_grad():`, `with torch.enable_grad():`,
`try: ... except Exception:` and `for _ in range(N):`; `autocast` blocks to
`with torch.autocast(device_type, dtype=...)` (device_type defaults to the run's device, cuda
on meta).  memory.saved_bytes comes from a
second pass over the whole program under torch.autograd.graph.saved_tensors_hooks, whose
pack hook adds numel * element_size of each saved tensor; PyTorch 1.13 skips its own
saved-version checks under saved-tensor hooks, so the unpack hook checks them itself, and
only the first pass's errors are reported.

`saved_tensor_hooks` blocks run under hooks defined here (block_hooks): "save_on_cpu" is
torch.autograd.graph.save_on_cpu(); "fp16" / "bf16" pack a floating tensor as
`t.to(torch.float16)` (bfloat16) and unpack it with `.to(original dtype)`, other dtypes
are kept as they are; "count" is the identity.  The innermost hooks win in PyTorch, so in
the counting pass a block's own pack function adds the bytes it is handed.  `checkpoint`
blocks run `def fn(*inputs): body; return outputs` through
torch.utils.checkpoint.checkpoint(fn, *inputs, use_reentrant=False); names bound in the
body live in a namespace of their own; the runs of the body that PyTorch makes during
backward (or at a `_saved_*` read) count as further runs of its statements, and their
errors propagate to the statement that caused them.  The body's saved tensors go to
checkpoint's own hooks, so the counting pass sees none of them (as any outer hooks).
"""

import argparse
import ast
import json
import math
import re
import sys
import warnings
import weakref

import torch
import torch.nn.functional as F
import torch.utils.checkpoint


# ---------------------------------------------------------------------------------------
# Constants

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "bool": torch.bool,
}

# Blocks PyTorch has, but whose saved-tensor hooks would hide the saved tensors from the
# counting pass (a pack hook sees only what the innermost hooks see).
UNSUPPORTED_BLOCKS = ()

# Error kinds, from PyTorch's exception message.  Order matters: the first pattern that
# matches wins ("a view of a leaf Variable" before "a leaf Variable").
ERROR_PATTERNS = [
    ("view_of_leaf_inplace", ["a view of a leaf Variable that requires grad"]),
    ("leaf_inplace", ["a leaf Variable that requires grad is being used in an in-place operation"]),
    ("saved_tensor_modified", ["modified by an inplace operation"]),
    ("saved_tensors_freed", ["Trying to backward through the graph a second time",
                             "after they have already been freed"]),
    ("no_grad_fn", ["does not require grad and does not have a grad_fn",
                    "One of the differentiated Tensors does not require grad"]),
    ("unused_input", ["appears to not have been used in the graph"]),
    ("view_inplace", ["This view is the output of a function that returns multiple views",
                      "A view was created in no_grad mode", "Can't detach views in-place"]),
    ("unsupported", ["more than one element of the written-to tensor refers to a single memory location",
                     "some elements of the input tensor and the written-to tensor refer to a single memory location",
                     "Cannot copy out of meta tensor", "with arguments from the 'Meta' backend"]),
    ("grad_not_scalar", ["grad can be implicitly created only for scalar outputs"]),
    # einsum's operands against its equation (shapes) and the equation itself (a malformed
    # argument); diagonal's dims.
    ("shape_mismatch", ["does not match the number of dimensions", "which does not broadcast with previously seen",
                        "is repeated for operand", "non-broadcast dimensions must match",
                        "expects split_sizes to sum exactly", "matrix or a vector expected"]),
    ("type_error", ["does not appear in the equation for any input operand", "appears more than once in the output",
                    "operands were provided than specified", "invalid subscript given", "must provide at least one operand", "must be greater or equal to 0, got",
                    "diagonal dimensions cannot be identical", "expects a non-empty TensorList"]),
    ("shape_mismatch", ["must match the size", "shapes cannot be multiplied", "is invalid for input of size",
                        "Mismatch in shape", "only one dimension can be inferred", "invalid shape dimension",
                        "view size is not compatible", "expects a tensor with <= 2 dimensions",
                        "must be a matrix", "need to be at least 1D", "negative dimension",
                        "expected sequence of length", "has data of a different size", "size mismatch",
                        "Sizes of tensors must match", "doesn't match the broadcast shape",
                        "The expanded size", "inconsistent tensor size", "must have the same shape",
                        "shape mismatch", "Expected input batch_size", "does not match the shape",
                        "Given groups=", "Given normalized_shape=", "should contain",
                        "Kernel size can't be greater", "Output size is too small",
                        "must be greater or equal to the number of dimensions",
                        "only supports 0-dimension value tensor",
                        "exceeds dimension size", "maximum size for tensor at dimension",
                        "is only supported on matrices or batches of matrices",
                        "should contain the same number of dims",
                        # index_add / index_copy / index_fill / scatter (measured messages)
                        "should be equal to source.size(dim)", "must have same slice shapes",
                        "Index has to be a vector/scalar", "only supports a 0-dimensional value tensor",
                        "Index tensor must have the same number of dimensions", "to be smaller than self",
                        "returned an invalid gradient at index",
                        "Expected 1-D argument",
                        "must have same number of batches", "Incompatible matrix sizes for bmm",
                        "Expected size for first two dimensions", "Bad in-place call",
                        # sizes whose product passes int64 (measured messages)
                        "numel: integer multiplication overflow", "Storage size calculation overflowed"]),
    ("dtype_mismatch", ["not implemented for", "expected scalar type", "can't be cast to the desired output type",
                        "could not infer output dtype", "to have same dtype", "Found dtype",
                        "expected both vectors to have same dtype", "must have the same dtype",
                        "result type Float can't be cast", "Expected object of scalar type",
                        "Expected tensor for argument #1", "mixed dtype (CPU)",
                        "Index put requires the source and destination dtypes match",
                        "assigned grad has data of a different type",
                        "data set to a tensor that requires gradients must be floating point",
                        "have incompatible tensor type",
                        "must have the same scalar type", "expected to have the same dtype",
                        "Expected self.dtype to be equal to src.dtype", "expected dtype",
                        # convolution's type checks (oneDNN's and at::_convolution's)
                        ") and weight type (", ") and bias type ("]),
    ("index_out_of_range", ["out of bounds", "Dimension out of range", "invalid index of a 0-dim tensor",
                            "cannot be applied to a 0-dim tensor", "too many indices", "index out of range",
                            "single ellipsis", "out of range"]),
    # PyTorch raises these as RuntimeError or ValueError; agtrace files them under type_error.
    ("type_error", ["can require gradients", "you can only change requires_grad flags",
                    "Boolean value of Tensor with more than one value is ambiguous",
                    "on a bool tensor is not supported", "cannot be converted to Scalar",
                    "only one element tensors can be converted", "appears multiple times in the list of dims",
                    "step must be greater than zero", "size should be greater than zero, but got",
                    "stride should be greater than zero, but got", "slice step must be positive",
                    "division by zero", "takes no arguments", "not enough values to unpack",
                    "too many values to unpack", "cannot unpack non-iterable",
                    "Integers to negative integer powers are not allowed",
                    "Please look up dimensions by name", "argument to backward() cannot be empty",
                    "can't retain_grad on Tensor that has requires_grad=False", "but must be > 0",
                    "step must be nonzero", "bound inconsistent with step sign", "movedim: repeated dim",
                    "expects 'from' to be less than 'to'", "can't assign Variable as its own grad",
                    " tensors and ",  # engine: "got 2 tensors and 1 gradients"
                    "Expected dtype int64 for index", "Expected dtype int32/int64 for index",
                    "Expected a long tensor for index",
                    "backward calculation is triggered with a negative slope", "alpha cannot be 0 for CELU",
                    "uniform_ expects to return a [from, to) range", "normal expects std >= 0.0",
                    "bernoulli_ expects p to be in [0, 1]", "Expected p_in >= 0 && p_in <= 1"]),
    # pooling, group_norm and upsample checks (measured messages)
    ("shape_mismatch", ["output_size must be 2", "output_size.size() must be 2", "elements of output_size must be greater than or equal to 0",
                        "Expected 3D or 4D tensor", "Expected input to have non-zero size for non-batch dimensions",
                        "Expected 3D or 4D (batch mode) tensor", "Expected 2 to 3 dimensions",
                        "divisible by num_groups", "to be a vector of size equal to the number of channels",
                        "Input and output sizes should be greater than 0",
                        "data tensor expected but got a tensor with sizes"]),
    ("type_error", ["kernel_size must either be a single int", "stride must either be omitted",
                    "padding must either be a single int", "divisor must be not zero", "stride should not be zero",
                    "pad should be at most half of kernel size", "pad must be non-negative",
                    "Expected num groups to be greater than 0"]),
]

EXCEPTION_TYPE_KINDS = [
    ((NameError, AttributeError), "name_error"),
    ((IndexError,), "index_out_of_range"),
    ((TypeError, ValueError, ZeroDivisionError), "type_error"),
    ((SyntaxError,), "syntax_error"),
]

VERSION_RE = re.compile(r"is at version (\d+); expected version (\d+)")


def readable_grad_fn(t):
    """t.grad_fn, or None where reading it raises: a multi-output view (unbind, split, chunk)
    whose base was edited in place raises from every grad_fn read; such a name has no walk
    (agtrace records none either)."""
    try:
        return t.grad_fn
    except RuntimeError:
        return None


def readable_is_leaf(t):
    """t.is_leaf, False where reading it raises (the same views: they have a grad_fn)."""
    try:
        return t.is_leaf
    except RuntimeError:
        return False


def classify_error(exc):
    """(kind, facts) for a PyTorch exception, in the spec's vocabulary."""
    msg = str(exc)
    kind = None
    for k, patterns in ERROR_PATTERNS:
        if any(p in msg for p in patterns):
            kind = k
            break
    if kind is None:
        for types, k in EXCEPTION_TYPE_KINDS:
            if isinstance(exc, types):
                kind = k
                break
    if kind is None:
        kind = "unclassified:" + type(exc).__name__
    facts = {}
    if kind == "saved_tensor_modified":
        m = VERSION_RE.search(msg)
        if m:
            facts["found_version"] = int(m.group(1))
            facts["expected_version"] = int(m.group(2))
    return kind, facts


# ---------------------------------------------------------------------------------------
# The program: statements numbered from 0, blocks flattened (spec "Statements")


def flatten_program(items, out=None):
    """List of statement strings in numbering order."""
    if out is None:
        out = []
    for it in items:
        if isinstance(it, str):
            out.append(it)
        elif isinstance(it, dict):
            for key in ("no_grad", "enable_grad", "try", "checkpoint"):
                if key in it:
                    flatten_program(it[key], out)
            if "body" in it:
                flatten_program(it["body"], out)
    return out


def unsupported_block(items):
    for it in items:
        if isinstance(it, dict):
            for b in UNSUPPORTED_BLOCKS:
                if b in it:
                    return b
            for key in ("no_grad", "enable_grad", "try", "body"):
                if key in it and isinstance(it[key], list):
                    inner = unsupported_block(it[key])
                    if inner:
                        return inner
    return None


def dotted(node):
    """'torch.autograd.grad' for an ast Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def root_labels(source):
    """Names of the roots of the backward calls in a statement, in source order.

    As agtrace names walks: `NAME.backward(...)` -> NAME, `torch.autograd.grad(NAME, ...)`
    -> NAME, any other root ("" here) -> "statement N"."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        label = None
        if isinstance(f, ast.Attribute) and f.attr == "backward" and dotted(f) != "torch.autograd.backward":
            label = f.value.id if isinstance(f.value, ast.Name) else ""
        elif dotted(f) == "torch.autograd.grad":
            label = node.args[0].id if node.args and isinstance(node.args[0], ast.Name) else ""
        elif dotted(f) == "torch.autograd.backward":
            label = ""
        if label is not None:
            calls.append((node.lineno, node.col_offset, label))
    calls.sort()
    return [c[2] for c in calls]


def storage_ptr(t):
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage().data_ptr()
    return t.storage().data_ptr()


def shares_storage(a, b):
    return storage_ptr(a) == storage_ptr(b)


def walk_names(fn):
    """Depth-first from a node, next_functions in order, each node once, None skipped."""
    order, seen = [], {}
    stack = [fn]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n  # keeps the wrapper alive, so ids are not reused during the walk
        order.append(type(n).__name__)
        for nxt, _ in reversed(n.next_functions):
            if nxt is not None and id(nxt) not in seen:
                stack.append(nxt)
    return order


def graph_leaves(fn):
    """The leaf tensors of the AccumulateGrad nodes reachable from a node."""
    out, seen, stack = [], {}, [fn] if fn is not None else []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen[id(n)] = n
        var = getattr(n, "variable", None)
        if isinstance(var, torch.Tensor):
            out.append(var)
        for nxt, _ in n.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return out


class TorchRun:
    """One run of a scenario's program under PyTorch."""

    INJECTED = ("torch", "F", "shares_storage", "print", "__builtins__")

    def __init__(self, scenario, leaves, device, count_saved=False):
        self.scenario = scenario
        self.leaf_specs = leaves
        self.device = device
        self.count_saved = count_saved
        self.sources = flatten_program(scenario.get("program", []))
        n = len(self.sources)
        self.status = ["not_run"] * n
        self.runs = [0] * n
        self.printed = []
        self.errors = []
        self.walks = {}
        self.grads = {}
        self.saved_bytes = 0
        self._stmt_saved = 0
        self._labels = {}      # id(tensor) -> (weakref, latest name bound)
        self._ever_bound = {}  # id(tensor) -> weakref, every tensor ever bound to a name
        self._label_queue = []
        self._current = -1
        self._in_backward = 0
        self.leaf_tensors = []

    # ---- setup

    def _make_leaf(self, spec):
        dtype = DTYPES[spec["dtype"]]
        shape = list(spec["shape"])
        if self.device == "meta":
            t = torch.empty(shape, dtype=dtype, device="meta")
        else:
            values = spec.get("values")
            if values is None:
                raise ValueError("leaf %s has no values in the report (run agtrace with --values)" % spec["name"])
            values = [json_to_number(v) for v in values]
            if dtype == torch.bool:
                values = [bool(v) for v in values]
            elif dtype == torch.int64:
                values = [int(v) for v in values]
            t = torch.tensor(values, dtype=torch.float64 if dtype.is_floating_point else dtype)
            t = t.to(dtype).reshape(shape).clone()
            if self.device == "cuda":
                t = t.to("cuda")
        if spec.get("requires_grad"):
            t.requires_grad_(True)
        return t

    def _print(self, *args, sep=" ", end="\n", file=None, flush=False):
        self.printed.append(sep.join(str(a) for a in args))

    # ---- autograd entry points: record the walk of each root before backward runs

    def _record_roots(self, roots):
        label = self._label_queue.pop(0) if self._label_queue else ""
        roots = [roots] if isinstance(roots, torch.Tensor) else list(roots)
        for i, r in enumerate(roots):
            if not isinstance(r, torch.Tensor) or r.grad_fn is None:
                continue
            if len(roots) == 1:
                key = label if label else "statement %d" % self._current
            else:
                key = "statement %d output %d" % (self._current, i)
            self.walks[key] = walk_names(r.grad_fn)

    def _wrap(self, original, roots_of):
        def wrapper(*args, **kwargs):
            self._record_roots(roots_of(args, kwargs))
            self._in_backward += 1
            try:
                return original(*args, **kwargs)
            except Exception as e:
                e._agtrace_phase = "backward"
                raise
            finally:
                self._in_backward -= 1
        return wrapper

    # ---- statements

    def _bind_labels(self, ns, before):
        for name, v in ns.items():
            if name in self.INJECTED or name.startswith("__"):
                continue
            if name in before and before[name] is v:
                continue
            if isinstance(v, torch.Tensor):
                self._labels[id(v)] = (weakref.ref(v), name)
                self._ever_bound[id(v)] = weakref.ref(v)

    def _rerun_statement(self, index, ns, local):
        # A checkpoint body run again by PyTorch (backward or a _saved_* read): another run
        # of the statement, inside the statement that caused it; errors propagate there.
        self.runs[index] += 1
        code = compile(self.sources[index], "<statement %d>" % index, "exec")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(code, ns, local)

    def _run_statement(self, index, ns, in_try, local=None):
        src = self.sources[index]
        self._current = index
        self.runs[index] += 1
        self._label_queue = root_labels(src)
        self._stmt_saved = 0
        names = ns if local is None else local
        before = dict(names)
        try:
            code = compile(src, "<statement %d>" % index, "exec")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if local is None:
                    exec(code, ns)
                else:
                    exec(code, ns, local)
        except Exception as e:
            self.status[index] = "error"
            kind, facts = classify_error(e)
            phase = getattr(e, "_agtrace_phase", None)
            if phase is None:
                # Spec: "backward (raised while a backward or a saved-value read ran)".
                phase = "backward" if kind in ("saved_tensors_freed", "saved_tensor_modified") else "forward"
            err = {"statement": index, "phase": phase, "kind": kind, "caught": in_try,
                   "message": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}
            err.update(facts)
            self.errors.append(err)
            self._bind_labels(names, before)
            return False
        self.status[index] = "ok"
        self.saved_bytes += self._stmt_saved
        self._bind_labels(names, before)
        return True

    # ---- saved_tensor_hooks and checkpoint blocks

    def autocast(self, block):
        """`with torch.autocast(device_type, dtype=...)`; device_type defaults to the run's
        device (cuda on meta)."""
        device_type = block[3] or ("cuda" if self.device == "meta" else self.device)
        return torch.autocast(device_type, dtype=DTYPES[block[2]])

    def block_hooks(self, kind):
        """The hooks of a saved_tensor_hooks block (see the module doc)."""
        def counted(t):
            if self.count_saved:
                self._stmt_saved += t.numel() * t.element_size()
        if kind == "save_on_cpu":
            soc = torch.autograd.graph.save_on_cpu()
            soc_pack, soc_unpack = soc.pack_hook, soc.unpack_hook

            def pack(t):
                counted(t)
                return soc_pack(t)
            return torch.autograd.graph.saved_tensors_hooks(pack, soc_unpack)
        if kind in ("fp16", "bf16"):
            target = torch.float16 if kind == "fp16" else torch.bfloat16

            def pack(t):
                counted(t)
                return (t.dtype, t.to(target) if t.is_floating_point() else t)

            def unpack(packed):
                dtype, t = packed
                return t.to(dtype)
            return torch.autograd.graph.saved_tensors_hooks(pack, unpack)
        if kind == "count":
            def pack(t):
                counted(t)
                return t
            return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        raise UnsupportedScenario("unknown saved_tensor_hooks kind %r" % kind)

    class _BodyFailed(Exception):
        pass

    class _MissingOutput(Exception):
        pass

    def _block_error(self, body, message, in_try):
        # As agtrace reports an error of the block itself (a missing input or output name):
        # a NameError at the block's first statement.
        first = first_statement(body)
        if first is None:
            return
        self.status[first] = "error"
        self.errors.append({"statement": first, "phase": "forward", "kind": "name_error", "caught": in_try,
                            "message": "NameError: %s" % message})

    def _run_checkpoint(self, body, inputs, outputs, ns, in_try, local):
        scope = ns if local is None else local
        missing = [n for n in inputs if n not in scope and n not in ns]
        if missing:
            self._block_error(body, "name '%s' is not defined" % missing[0], in_try)
            return False
        args = [scope[n] if n in scope else ns[n] for n in inputs]
        calls = [0]

        def fn(*a):
            calls[0] += 1
            inner = dict(zip(inputs, a))
            if calls[0] == 1:
                if not self._run_items(body, ns, in_try, inner):
                    raise TorchRun._BodyFailed()
            else:
                self._rerun_items(body, ns, inner)
            for n in outputs:
                if n not in inner and n not in ns:
                    raise TorchRun._MissingOutput(n)
            return tuple(inner[n] if n in inner else ns[n] for n in outputs)
        try:
            result = torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)
        except TorchRun._BodyFailed:
            return False
        except TorchRun._MissingOutput as e:
            self._block_error(body, "name '%s' is not defined" % e.args[0], in_try)
            return False
        before = dict(scope)
        for n, v in zip(outputs, result):
            scope[n] = v
        self._bind_labels(scope, before)
        return True

    def _rerun_items(self, items, ns, local):
        for it in items:
            kind = it[0]
            if kind == "stmt":
                self._rerun_statement(it[1], ns, local)
            elif kind == "try":
                try:
                    self._rerun_items(it[1], ns, local)
                except Exception:
                    pass
            elif kind == "no_grad":
                with torch.no_grad():
                    self._rerun_items(it[1], ns, local)
            elif kind == "enable_grad":
                with torch.enable_grad():
                    self._rerun_items(it[1], ns, local)
            elif kind == "set_grad_enabled":
                with torch.set_grad_enabled(it[2]):
                    self._rerun_items(it[1], ns, local)
            elif kind == "repeat":
                for _ in range(it[2]):
                    self._rerun_items(it[1], ns, local)
            elif kind == "saved_tensor_hooks":
                with self.block_hooks(it[2]):
                    self._rerun_items(it[1], ns, local)
            elif kind == "autocast":
                with self.autocast(it):
                    self._rerun_items(it[1], ns, local)
            else:
                raise UnsupportedScenario("block %s inside a recomputed checkpoint body" % kind)

    def _run_items(self, items, ns, in_try, local=None):
        for it in items:
            ok = True
            kind = it[0]
            if kind == "stmt":
                ok = self._run_statement(it[1], ns, in_try, local)
            elif kind == "no_grad":
                with torch.no_grad():
                    ok = self._run_items(it[1], ns, in_try, local)
            elif kind == "enable_grad":
                with torch.enable_grad():
                    ok = self._run_items(it[1], ns, in_try, local)
            elif kind == "set_grad_enabled":
                with torch.set_grad_enabled(it[2]):
                    ok = self._run_items(it[1], ns, in_try, local)
            elif kind == "try":
                self._run_items(it[1], ns, True, local)
            elif kind == "repeat":
                for _ in range(it[2]):
                    ok = self._run_items(it[1], ns, in_try, local)
                    if not ok:
                        break
            elif kind == "saved_tensor_hooks":
                with self.block_hooks(it[2]):
                    ok = self._run_items(it[1], ns, in_try, local)
            elif kind == "autocast":
                with self.autocast(it):
                    ok = self._run_items(it[1], ns, in_try, local)
            elif kind == "checkpoint":
                ok = self._run_checkpoint(it[1], it[2], it[3], ns, in_try, local)
            else:
                raise ValueError("block not supported by this translator: %s" % kind)
            if not ok:
                return False
        return True

    def run(self):
        # The names a scenario can use are agtrace's (torch, F, print, shares_storage, len, float,
        # int, bool, the leaves and what the program binds): Python's other builtins are left out,
        # so `eval(...)`, `open(...)` or `__import__(...)` raise NameError here as agtrace raises
        # name_error, instead of running in an exported script.
        ns = {"torch": torch, "F": F, "shares_storage": shares_storage, "print": self._print,
              "__builtins__": {"len": len, "float": float, "int": int, "bool": bool}}
        for spec in self.leaf_specs:
            t = self._make_leaf(spec)
            self.leaf_tensors.append(t)
            ns[spec["name"]] = t
            self._labels[id(t)] = (weakref.ref(t), spec["name"])
            self._ever_bound[id(t)] = weakref.ref(t)

        orig_backward, orig_grad = torch.autograd.backward, torch.autograd.grad
        torch.autograd.backward = self._wrap(
            orig_backward, lambda a, k: a[0] if a else k.get("tensors"))
        torch.autograd.grad = self._wrap(
            orig_grad, lambda a, k: a[0] if a else k.get("outputs"))
        prev_grad_mode = torch.is_grad_enabled()
        try:
            tree = program_tree(self.scenario.get("program", []))
            if self.count_saved:
                # Under hooks PyTorch 1.13 no longer checks saved versions itself, so the
                # hooks check them, with PyTorch's wording, to keep the run's course.
                def pack(t):
                    self._stmt_saved += t.numel() * t.element_size()
                    return (t, t._version)

                def unpack(packed):
                    t, version = packed
                    if t._version != version:
                        raise RuntimeError(
                            "one of the variables needed for gradient computation has been modified by an "
                            "inplace operation: is at version %d; expected version %d instead." % (t._version, version))
                    return t
                with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                    self._run_items(tree, ns, False)
            else:
                self._run_items(tree, ns, False)
        finally:
            torch.autograd.backward, torch.autograd.grad = orig_backward, orig_grad
            torch.set_grad_enabled(prev_grad_mode)

        # Walks of every name bound to a tensor with a grad_fn at the end.
        self._current = -2
        for name, v in ns.items():
            if name in self.INJECTED or name.startswith("__"):
                continue
            if not isinstance(v, torch.Tensor):
                continue
            fn = readable_grad_fn(v)
            if fn is not None:
                self.walks[name] = walk_names(fn)

        # Gradients of every leaf that requires grad and has one, keyed by the name a leaf
        # was declared with (the spec: never another name bound to the same object), else
        # by the latest name bound to that very tensor object.
        declared = {id(t): spec["name"] for t, spec in zip(self.leaf_tensors, self.leaf_specs)}
        candidates, seen = [], set()
        def add(t):
            if isinstance(t, torch.Tensor) and id(t) not in seen:
                seen.add(id(t))
                candidates.append(t)
        for t in self.leaf_tensors:
            add(t)
        for name, v in ns.items():
            if name in self.INJECTED or name.startswith("__"):
                continue
            if isinstance(v, (tuple, list)):
                for x in v:
                    add(x)
            else:
                add(v)
        for ref in self._ever_bound.values():
            add(ref())
        # Leaves no name ever held, alive because a graph holds them (AccumulateGrad).
        for t in list(candidates):
            for leaf in graph_leaves(readable_grad_fn(t)):
                add(leaf)
        for t in candidates:
            if readable_is_leaf(t) and t.requires_grad and t.grad is not None:
                entry = self._labels.get(id(t))
                if id(t) in declared:
                    name = declared[id(t)]
                else:
                    name = entry[1] if entry and entry[0]() is t else "#unnamed%d" % len(self.grads)
                g = t.grad
                self.grads[name] = {
                    "shape": list(g.shape),
                    "dtype": str(g.dtype).replace("torch.", ""),
                    "values": None if g.device.type == "meta" else g.detach().double().flatten().tolist(),
                }
        return self


def first_statement(tree):
    """The number of the first statement in a program_tree list, or None."""
    for it in tree:
        if it[0] == "stmt":
            return it[1]
        inner = first_statement(it[1])
        if inner is not None:
            return inner
    return None


def program_tree(items, counter=None):
    """The program with statement numbers: ("stmt", N), (block kind, children[, count])."""
    if counter is None:
        counter = [0]
    out = []
    for it in items:
        if isinstance(it, str):
            out.append(("stmt", counter[0]))
            counter[0] += 1
            continue
        for key in ("no_grad", "enable_grad", "try"):
            if key in it:
                out.append((key, program_tree(it[key], counter)))
                break
        else:
            if "repeat" in it:
                out.append(("repeat", program_tree(it["body"], counter), int(it["repeat"])))
            elif "set_grad_enabled" in it:
                out.append(("set_grad_enabled", program_tree(it["body"], counter), bool(it["set_grad_enabled"])))
            elif "saved_tensor_hooks" in it:
                out.append(("saved_tensor_hooks", program_tree(it["body"], counter), it["saved_tensor_hooks"]))
            elif "autocast" in it:
                out.append(("autocast", program_tree(it["body"], counter), it["autocast"], it.get("device_type")))
            elif "checkpoint" in it:
                out.append(("checkpoint", program_tree(it["checkpoint"], counter),
                            list(it.get("inputs", [])), list(it.get("outputs", []))))
            else:
                kind = next((b for b in UNSUPPORTED_BLOCKS if b in it), "unknown block")
                body = it.get("checkpoint") if kind == "checkpoint" else it.get("body")
                out.append((kind, program_tree(body if isinstance(body, list) else [], counter)))
    return out



# ---------------------------------------------------------------------------------------
# The stable-core report


class UnsupportedScenario(ValueError):
    """The scenario uses something this runner cannot express in PyTorch."""


def leaf_specs(scenario, leaf_values, device):
    """The leaves as TorchRun wants them: name, shape, dtype, requires_grad, values."""
    default_dtype = scenario.get("dtype", "float32")
    out = []
    for name, spec in (scenario.get("tensors") or {}).items():
        values = (leaf_values or {}).get(name)
        if values is None and device != "meta":
            raise UnsupportedScenario("no initial values given for leaf %s" % name)
        out.append({"name": name, "shape": list(spec.get("shape", [])),
                    "dtype": spec.get("dtype", default_dtype),
                    "requires_grad": bool(spec.get("requires_grad", False)),
                    "values": None if values is None else list(values)})
    return out


def run_twice(scenario, leaves, device):
    """(run, saved_bytes, harness problems): the program once as written, whose facts are
    reported, and once more under saved-tensor hooks, which only counts the saved bytes."""
    blk = unsupported_block(scenario.get("program", []))
    if blk:
        raise UnsupportedScenario("%s blocks are not supported by the PyTorch runner" % blk)
    run = TorchRun(scenario, leaves, device).run()
    counted = TorchRun(scenario, leaves, device, count_saved=True).run()
    problems = []
    if counted.status != run.status:
        problems.append("harness: the run under saved_tensors_hooks ended differently (%s vs %s)" % (
            counted.status, run.status))
    return run, counted.saved_bytes, problems


def number_to_json(v):
    """JSON has no infinities or NaN: agtrace's reports write them as "inf", "-inf", "nan"."""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def json_to_number(v):
    """The inverse of number_to_json (None, from older reports, reads as NaN)."""
    if v is None or v == "nan":
        return float("nan")
    if v == "inf":
        return float("inf")
    if v == "-inf":
        return float("-inf")
    return v


def report_of(scenario, device, run, saved_bytes, problems):
    """The stable-core report (a dict ready for json.dumps) of a TorchRun."""
    statements = []
    for i, src in enumerate(run.sources):
        s = {"index": i, "source": src, "status": run.status[i]}
        if run.runs[i] > 1:
            s["runs"] = run.runs[i]
        statements.append(s)
    grads = {}
    for name, g in run.grads.items():
        entry = {"shape": list(g["shape"]), "dtype": g["dtype"]}
        if g["values"] is not None:
            entry["values"] = [number_to_json(v) for v in g["values"]]
        grads[name] = entry
    errors = []
    for e in run.errors:
        err = {k: e[k] for k in ("statement", "phase", "kind")}
        for k in ("expected_version", "found_version"):
            if k in e:
                err[k] = e[k]
        err["message"] = e["message"]
        err["caught"] = e["caught"]
        errors.append(err)
    return {
        "format": 1,
        "scenario": scenario.get("name", ""),
        "device": device,
        "statements": statements,
        "printed": list(run.printed),
        "walks": {k: list(v) for k, v in run.walks.items()},
        "errors": errors,
        "grads": grads,
        "memory": {"saved_bytes": saved_bytes},
        "raised": any(not e["caught"] for e in run.errors),
        "torch_version": torch.__version__,
        "harness_problems": list(problems),
    }


def run_scenario(scenario, leaf_values, device=None):
    """Runs the scenario in PyTorch; returns the stable-core report (see the module doc).

    Raises UnsupportedScenario when the scenario cannot be run here."""
    device = device or scenario.get("device", "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise UnsupportedScenario("device cuda is not available to PyTorch here")
    leaves = leaf_specs(scenario, leaf_values, device)
    run, saved, problems = run_twice(scenario, leaves, device)
    return report_of(scenario, device, run, saved, problems)


def main(scenario, leaf_values, argv=None):
    """Entry point of an exported script: prints the report as JSON; returns the exit status."""
    ap = argparse.ArgumentParser(
        description="Run the scenario %r in PyTorch %s and print the stable core of agtrace's "
                    "JSON report." % (scenario.get("name", ""), torch.__version__))
    ap.add_argument("--device", choices=("cpu", "cuda", "meta"),
                    help="override the scenario's device (default: %s)" % scenario.get("device", "cpu"))
    ap.add_argument("--indent", type=int, default=2, help="JSON indentation (default 2; 0: one line)")
    args = ap.parse_args(argv)
    try:
        report = run_scenario(scenario, leaf_values, args.device)
    except UnsupportedScenario as e:
        sys.stderr.write("torch_runner: %s: %s\n" % (scenario.get("name", "scenario"), e))
        return 2
    indent = args.indent if args.indent > 0 else None
    sys.stdout.write(json.dumps(report, indent=indent, allow_nan=False) + "\n")
    sys.stdout.flush()
    return 0
