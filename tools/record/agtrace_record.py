#!/usr/bin/python3
"""agtrace record: run a PyTorch model once and write what it did as an agtrace scenario.

Usage (through `agtrace record`, or directly with /usr/bin/python3):
  agtrace_record.py MODEL [--arg ...] --input 2x3x64x64:float32 [--input ...]
                    [--loss cross_entropy|mse|sum|path.py:fn] [--classes N]
                    [--train|--eval] [--values] [--device cpu|meta] [--seed N]
                    [--no-dropout] [--agtrace PATH] -o out.json

MODEL is a torchvision.models name, optionally with constructor arguments
(`resnet18`, `vit_b_16(image_size=32, patch_size=8, num_layers=2)`), or
`path/file.py:factory(args)`: a function in that file returning an nn.Module.

What is recorded, and how (PyTorch 1.13 facts measured with this interpreter):

* Forward, loss and backward run once in PyTorch under a
  torch.overrides.TorchFunctionMode. Every call the mode sees becomes one statement in
  PyTorch's spelling: `torch.*` and `F.*` functions by the public name that is the very
  same function object, Tensor methods as methods, the arithmetic and comparison methods
  with one tensor and one other operand as operators (the mode reports `x + 1` and
  `x.add(1)` alike as Tensor.add: both build the same graph), `number - tensor`,
  `number / tensor`, `number ** tensor` from __rsub__ / __rdiv__ / __rpow__, tensor
  properties (`x.T`) as attributes, in-place calls as written, several tensor results
  unpacked (`a, b = h.split(2, dim=1)`).
* The 1.13 mode misses Tensor.__getitem__ for every non-tuple key (an int, a slice,
  None, ..., a tensor) and Tensor.__setitem__ for some (an int key with a tensor value),
  so both are wrapped for the run and recorded as `x[key]` and `x[key] = v`; the wrapped
  call runs with torch functions disabled, so a tuple key is never recorded twice.
* Python-level functions: an F.* function written in Python (F.relu, F.layer_norm,
  F.multi_head_attention_forward, Tensor.split, ...) dispatches to the mode once, with
  its own inner calls unseen. It is recorded at that level when agtrace has the op
  (`agtrace ops`), or when its body reaches a call with no public spelling (such as
  torch._C._nn.adaptive_avg_pool2d: recorded as F.adaptive_avg_pool2d, which agtrace then
  reports `unsupported` by that name until it has it). Otherwise it is decomposed: its
  body runs with the mode re-entered and only its own has_torch_function dispatch
  skipped, so the calls PyTorch makes inside it are recorded one by one, exactly the
  calls (and so the autograd nodes) PyTorch makes. Whether the body is expressible is
  found by a dry run of it on clones of its arguments (aliasing kept, RNG state restored).
* Calls that return no tensor (x.size(0), x.dim(), x.shape, .item()) are not statements:
  the numbers they give become literals, so Python control flow and size arithmetic are
  unrolled as this run took them. A value read from tensor data (.item(), .tolist(),
  bool(t)) that steers control flow is named in the description.
* Parameters and buffers are leaves named by module path (`layer1.0.conv1.weight` is
  `layer1_0_conv1_weight`); a parameter shared by two modules has the first path
  named_parameters() gives. Buffers are leaves too, so BatchNorm's in-place updates of
  running_mean / running_var / num_batches_tracked are statements as PyTorch does them.
  With --values every leaf holds its exact values. Without it a leaf whose elements are
  all equal is `zeros` / `ones` / `full`, a buffer holds its exact values, and any other
  parameter is `normal` with that parameter's own mean and standard deviation (its shape
  and scale, not its values). Inputs are `normal(0, 1)` / `randint` unless --values.
  On meta, leaves are shapes only (`zeros`): nothing is computed there.
* A Python name is freed when its tensor's Python object is (a weakref callback), and a
  `del` statement drops it at that point, so names hold tensors as long as the model did.
* Grad mode: the mode sees no torch.no_grad() itself, only the calls under it, so each
  statement keeps the grad mode it ran in and a run of them made with grad off is written
  as a {"no_grad": [...]} block. A call under torch.autocast is refused (not recorded).
* Iterating a tensor (Tensor.__iter__, Python over unbind) is decomposed: `a, b = h.unbind(0)`.
* Tensors created inside forward (torch.arange, torch.empty, torch.ones, ...) are
  creation statements; a `device=` argument equal to the run's device is dropped (the
  scenario's device says it).
* A call that cannot be expressed (no public spelling and not decomposable, an argument
  with no literal form, a result mixing tensors and other values, a tensor of unknown
  origin) is an error naming the call and the module path it was made in, with exit
  status 3: never a silently different program.
"""
import argparse
import ast
import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys
import types
import weakref

EXIT_USAGE = 2
EXIT_INEXPRESSIBLE = 3


class Inexpressible(Exception):
    """A call the scenario format cannot state as PyTorch made it."""


def fail(message, status=EXIT_USAGE):
    sys.stderr.write("agtrace record: error: %s\n" % message)
    sys.exit(status)


try:
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
except ImportError as exc:
    fail("PyTorch is needed for /usr/bin/python3 (Debian: apt-get install python3-torch): %s" % exc)

# ----------------------------------------------------------------------------------
# Public spellings of the function objects the mode reports.

OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "matmul": "@", "pow": "**",
             "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
REVERSED = {"__rsub__": ("-", "number - tensor"), "__rdiv__": ("/", "number / tensor"),
            "__rtruediv__": ("/", "number / tensor"), "__rpow__": ("**", "number ** tensor")}
TENSOR_SPELLING_KEYS = {"__getitem__": "x[i]", "__setitem__": "x[i] = v"}


def _public_names(module, prefix):
    table = {}
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)
        if callable(obj) and not isinstance(obj, type):
            table.setdefault(id(obj), []).append(prefix + name)
    return table


TORCH_NAMES = _public_names(torch, "torch.")
F_NAMES = _public_names(F, "F.")
KEEP_ALIVE = [getattr(torch, n, None) for n in dir(torch)] + [getattr(F, n, None) for n in dir(F)]


class Spelling:
    """How one reported function is written: kind is 'function', 'method', 'property',
    'getitem' or 'setitem'; key is its spelling in `agtrace ops`."""

    def __init__(self, kind, text, key):
        self.kind, self.text, self.key = kind, text, key


def spell(func, supported):
    qual = getattr(func, "__qualname__", "") or ""
    name = getattr(func, "__name__", "") or ""
    if name == "__get__" and type(getattr(func, "__self__", None)).__name__ == "getset_descriptor":
        prop = func.__self__.__name__
        return Spelling("property", prop, "x." + prop)
    if qual.startswith(("_TensorBase.", "Tensor.")):
        if name in TENSOR_SPELLING_KEYS:
            return Spelling(name.strip("_"), name, TENSOR_SPELLING_KEYS[name])
        if name in REVERSED:
            return Spelling("reversed", REVERSED[name][0], REVERSED[name][1])
        if name.startswith("__"):
            return None
        return Spelling("method", name, "Tensor." + name)
    candidates = F_NAMES.get(id(func), []) + TORCH_NAMES.get(id(func), [])
    if not candidates:
        return None
    for text in candidates:  # the spelling agtrace has, F.* first
        if text in supported:
            return Spelling("function", text, text)
    return Spelling("function", candidates[0], candidates[0])


DISPATCH_FLAGS = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")


def decomposable(func):
    """A Python function whose own dispatch can be skipped: it reads the has_torch_function
    flags from its module's globals (torch._assert, which imports them inside its body,
    cannot be, and is recorded at its own level)."""
    if not isinstance(func, types.FunctionType):
        return False
    code = func.__code__
    return any(f in code.co_names for f in DISPATCH_FLAGS) and not any(f in code.co_varnames for f in DISPATCH_FLAGS)


def undispatched(func):
    """func with its own has_torch_function checks answering False: its body runs and
    the calls it makes reach the mode (inner Python functions keep their own globals,
    so they still dispatch once each)."""
    globs = dict(func.__globals__)
    for flag in DISPATCH_FLAGS:
        if flag in globs:
            globs[flag] = lambda *a, **k: False
    copy = types.FunctionType(func.__code__, globs, func.__name__, func.__defaults__, func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    return copy


def qualified_name(func):
    module = getattr(func, "__module__", None) or ""
    if not module and type(getattr(func, "__self__", None)).__name__ == "module":
        module = func.__self__.__name__
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return module + "." + name if module else name


def tensors_in(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)


def clone_args(value, memo):
    if isinstance(value, torch.Tensor):
        if id(value) not in memo:
            copy = value.detach().clone()
            if value.requires_grad:
                copy.requires_grad_(True)
            memo[id(value)] = copy
        return memo[id(value)]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(clone_args(v, memo) for v in value)
    if isinstance(value, list):
        return [clone_args(v, memo) for v in value]
    if isinstance(value, dict):
        return {k: clone_args(v, memo) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------------
# The recorder.

def identifier(path):
    name = path.replace(".", "_")
    if not name.isidentifier() or name in ("torch", "F", "print", "shares_storage") or name[0].isdigit():
        name = "p_" + name
    return name


class Recorder(TorchFunctionMode):
    def __init__(self, supported, device):
        super().__init__()
        self.supported = supported
        self.device = device
        self.program = []
        self.grad_off = set()    # indices of statements recorded with grad mode off
        self.names = {}          # id(tensor) -> name
        self.refs = {}           # id(tensor) -> weakref (drops the name when the object dies)
        self.pending_del = []
        self.counter = 0
        self.used_names = set()
        self.leaves = {}         # name -> spec, in creation order
        self.leaf_objects = []   # constants found during the run, kept alive
        self.module_stack = []
        self.module_paths = {}
        self.inside = 0          # > 0 while a recorded call runs (its inner calls are PyTorch's)
        self.data_reads = []
        self.notes = []
        self.make_leaf = None

    # -- names
    def fresh(self, prefix="h"):
        while True:
            name = "%s%d" % (prefix, self.counter)
            self.counter += 1
            if name not in self.used_names:
                self.used_names.add(name)
                return name

    def bind(self, tensor, name):
        key = id(tensor)
        self.names[key] = name
        self.used_names.add(name)

        def dropped(_ref, key=key, name=name):
            if self.names.get(key) == name:
                del self.names[key]
                del self.refs[key]
                self.pending_del.append(name)
        self.refs[key] = weakref.ref(tensor, dropped)

    def emit(self, statement):
        # The mode does not see torch.no_grad() / enable_grad() themselves, only the calls
        # made under them: each statement keeps the grad mode it ran in, and a run of
        # statements made with grad off becomes a {"no_grad": [...]} block.
        if not torch.is_grad_enabled():
            self.grad_off.add(len(self.program))
        self.program.append(statement)

    def blocks(self):
        out = []
        for i, statement in enumerate(self.program):
            if i in self.grad_off:
                if not (out and isinstance(out[-1], dict)):
                    out.append({"no_grad": []})
                out[-1]["no_grad"].append(statement)
            else:
                out.append(statement)
        return out

    def flush_dels(self):
        if self.pending_del:
            self.emit("del " + ", ".join(self.pending_del))
            self.pending_del = []

    def paused(self):
        """Work of the recorder itself (targets, leaf specs): not part of the program."""
        rec = self

        class Paused:
            def __enter__(self):
                rec.inside += 1

            def __exit__(self, *exc):
                rec.inside -= 1
        return Paused()

    def where(self):
        return self.module_stack[-1] if self.module_stack else "<top level>"

    # -- formatting
    def fmt(self, value, call):
        if isinstance(value, torch.Tensor):
            name = self.names.get(id(value))
            if name is None:
                name = self.make_leaf(value, call)
            return name
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "float('nan')"
            if math.isinf(value):
                return "float('inf')" if value > 0 else "float('-inf')"
            return repr(value)
        if value is Ellipsis:
            return "..."
        if isinstance(value, torch.Size) or (isinstance(value, tuple) and not hasattr(value, "_fields")):
            items = [self.fmt(v, call) for v in value]
            return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
        if isinstance(value, list):
            return "[" + ", ".join(self.fmt(v, call) for v in value) + "]"
        if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
            return str(value)
        if isinstance(value, torch.device):
            return repr(value.type)
        raise Inexpressible("%s: an argument of type %s has no literal form" % (call, type(value).__name__))

    def fmt_index(self, key, call):
        parts = key if isinstance(key, tuple) else (key,)
        out = []
        for part in parts:
            if isinstance(part, slice):
                text = "" if part.start is None else self.fmt(part.start, call)
                text += ":" + ("" if part.stop is None else self.fmt(part.stop, call))
                if part.step is not None:
                    text += ":" + self.fmt(part.step, call)
                out.append(text)
            else:
                out.append(self.fmt(part, call))
        if isinstance(key, tuple) and len(parts) == 1:
            return out[0] + ","
        return ", ".join(out) if out else "()"

    def call_text(self, sp, args, kwargs):
        label = sp.key
        kwargs = {k: v for k, v in kwargs.items()
                  if not (k == "device" and v is not None and torch.device(v).type == self.device)}
        if sp.kind == "getitem":
            return "%s[%s]" % (self.fmt(args[0], label), self.fmt_index(args[1], label))
        if sp.kind == "property":
            return "%s.%s" % (self.fmt(args[0], label), sp.text)
        if sp.kind == "reversed":
            return "%s %s %s" % (self.fmt(args[1], label), sp.text, self.fmt(args[0], label))
        if sp.kind == "method" and sp.text == "neg" and len(args) == 1 and not kwargs:
            return "-" + self.fmt(args[0], label)
        if sp.kind == "method" and sp.text in OPERATORS and len(args) == 2 and not kwargs \
                and isinstance(args[0], torch.Tensor):
            return "%s %s %s" % (self.fmt(args[0], label), OPERATORS[sp.text], self.fmt(args[1], label))
        pieces = [self.fmt(a, label) for a in (args[1:] if sp.kind == "method" else args)]
        pieces += ["%s=%s" % (k, self.fmt(v, label)) for k, v in kwargs.items()]
        head = "%s.%s" % (self.fmt(args[0], label), sp.text) if sp.kind == "method" else sp.text
        return "%s(%s)" % (head, ", ".join(pieces))

    # -- one call
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.inside:
            return func(*args, **kwargs)
        return self.handle(func, args, kwargs)

    def handle(self, func, args, kwargs, run=None):
        sp = spell(func, self.supported)
        label = sp.key if sp else qualified_name(func)
        if torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled():
            raise Inexpressible("%s (in %s) runs under torch.autocast, which the recorder does not record"
                                % (label, self.where()))
        if sp is not None and sp.key in self.supported:
            pass
        elif decomposable(func) and self.expressible_body(func, args, kwargs):
            return self.decompose(func, args, kwargs)
        self.inside += 1
        try:
            result = (run or func)(*args, **kwargs)
        finally:
            self.inside -= 1
        produced = list(tensors_in(result))
        if sp is not None and sp.kind == "setitem":
            self.flush_dels()
            self.emit("%s[%s] = %s" % (self.fmt(args[0], label), self.fmt_index(args[1], label),
                                                 self.fmt(args[2], label)))
            return result
        if not produced:
            if sp is not None and sp.key in ("Tensor.item", "Tensor.tolist", "Tensor.__bool__"):
                self.data_reads.append("%s in %s" % (sp.key, self.where()))
            return result
        if sp is None:
            raise Inexpressible("%s (in %s) has no public spelling and cannot be decomposed"
                                % (label, self.where()))
        text = self.call_text(sp, args, kwargs)
        self.flush_dels()
        if isinstance(result, torch.Tensor):
            if id(result) in self.names:
                self.emit(text)      # in place, or returns its input (contiguous)
            else:
                name = self.fresh()
                self.bind(result, name)
                self.emit("%s = %s" % (name, text))
            return result
        # A tuple of tensors, some entries None (F.multi_head_attention_forward's weights
        # when need_weights=False): a None is unpacked into `_`.
        if (isinstance(result, (tuple, list)) and any(isinstance(r, torch.Tensor) for r in result)
                and all(isinstance(r, torch.Tensor) or r is None for r in result)):
            targets = []
            for r in result:
                if r is None or id(r) in self.names:
                    targets.append("_")
                else:
                    name = self.fresh()
                    self.bind(r, name)
                    targets.append(name)
            if len(targets) == 1:
                targets[0] += ","
            self.emit("%s = %s" % (", ".join(targets), text))
            return result
        raise Inexpressible("%s (in %s) returned %s, which mixes tensors and other values"
                            % (label, self.where(), type(result).__name__))

    def decompose(self, func, args, kwargs):
        saved, self.inside = self.inside, 0
        try:
            with self:
                return undispatched(func)(*args, **kwargs)
        finally:
            self.inside = saved

    def expressible_body(self, func, args, kwargs):
        probe = Probe(self.supported)
        memo = {}
        cargs, ckwargs = clone_args(args, memo), clone_args(kwargs, memo)
        rng = torch.random.get_rng_state()
        try:
            with probe:
                undispatched(func)(*cargs, **ckwargs)
            return True
        except Inexpressible:
            return False
        finally:
            torch.random.set_rng_state(rng)


class Probe(TorchFunctionMode):
    """A dry run of a Python function's body: raises Inexpressible at the first inner
    call that would have no spelling."""

    def __init__(self, supported):
        super().__init__()
        self.supported = supported

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        sp = spell(func, self.supported)
        if (sp is None or sp.key not in self.supported) and decomposable(func):
            with self:
                return undispatched(func)(*args, **kwargs)
        result = func(*args, **kwargs)
        if sp is None and any(True for _ in tensors_in(result)):
            raise Inexpressible(qualified_name(func))
        return result


ORIGINAL_GETITEM = torch.Tensor.__getitem__
ORIGINAL_SETITEM = torch.Tensor.__setitem__
ACTIVE = []


def _plain_getitem(self, key):
    with torch._C.DisableTorchFunction():
        return ORIGINAL_GETITEM(self, key)


def _plain_setitem(self, key, value):
    with torch._C.DisableTorchFunction():
        return ORIGINAL_SETITEM(self, key, value)


def recorded_getitem(self, key):
    rec = ACTIVE[-1] if ACTIVE else None
    if rec is None or rec.inside or not torch._C._is_torch_function_enabled():
        return ORIGINAL_GETITEM(self, key)
    return rec.handle(ORIGINAL_GETITEM, (self, key), {}, run=_plain_getitem)


def recorded_setitem(self, key, value):
    rec = ACTIVE[-1] if ACTIVE else None
    if rec is None or rec.inside or not torch._C._is_torch_function_enabled():
        return ORIGINAL_SETITEM(self, key, value)
    return rec.handle(ORIGINAL_SETITEM, (self, key, value), {}, run=_plain_setitem)


# ----------------------------------------------------------------------------------
# Leaves.

DTYPE_NAMES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
               torch.bfloat16: "bfloat16", torch.int64: "int64", torch.bool: "bool"}


def leaf_spec(tensor, exact, statistic, device):
    if tensor.dtype not in DTYPE_NAMES:
        raise Inexpressible("a leaf of dtype %s (the format has %s)" % (tensor.dtype, ", ".join(DTYPE_NAMES.values())))
    spec = {"shape": list(tensor.shape)}
    if tensor.dtype != torch.float32:
        spec["dtype"] = DTYPE_NAMES[tensor.dtype]
    if tensor.requires_grad:
        spec["requires_grad"] = True
    if device == "meta" or tensor.numel() == 0:
        return spec
    flat = tensor.detach().reshape(-1).to(torch.float64 if tensor.is_floating_point() else torch.int64)
    first = flat[0].item()
    if bool((flat == first).all()):
        if tensor.dtype == torch.bool:
            spec["init"] = "ones" if first else "zeros"
        elif first == 0:
            spec["init"] = "zeros"
        elif first == 1:
            spec["init"] = "ones"
        else:
            spec["init"] = {"full": first}
    elif exact or not tensor.is_floating_point():
        spec["init"] = {"values": [bool(v) for v in flat.tolist()] if tensor.dtype == torch.bool else flat.tolist()}
    else:
        spec["init"] = {statistic[0]: [float("%.6g" % v) for v in statistic[1](flat)]}
    return spec


def normal_moments(flat):
    return (flat.mean().item(), flat.std().item())


# ----------------------------------------------------------------------------------
# Command line.

def parse_call(text):
    """NAME or NAME(args) -> (NAME, args, kwargs), arguments as Python literals."""
    text = text.strip()
    if "(" not in text:
        return text, [], {}
    head, rest = text.split("(", 1)
    node = ast.parse("f(" + rest, mode="eval").body
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    return head.strip(), args, kwargs


def load_file_attr(spec_text):
    path, _, attr = spec_text.rpartition(":")
    name, args, kwargs = parse_call(attr)
    if not os.path.exists(path):
        fail("no file %s" % path)
    spec = importlib.util.spec_from_file_location("agtrace_user_model_%d" % abs(hash(path)), path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    if not hasattr(module, name):
        fail("%s has no %s" % (path, name))
    return getattr(module, name), args, kwargs


class MetaFactories(TorchFunctionMode):
    """Construction on meta: factory calls without a device make meta tensors, so a
    model larger than memory is built without element data."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if getattr(func, "__name__", "") in ("empty", "zeros", "ones", "full", "rand", "randn", "arange",
                                              "tensor", "eye", "linspace") \
                and kwargs.get("device") is None and id(func) in TORCH_NAMES:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def build_model(text, device):
    if ":" in text and (".py:" in text):
        factory, args, kwargs = load_file_attr(text)
    else:
        name, args, kwargs = parse_call(text)
        try:
            import torchvision.models as tvm
        except ImportError:
            fail("torchvision is needed for a torchvision model (Debian: apt-get install python3-torchvision)")
        if not hasattr(tvm, name):
            fail("torchvision.models has no %s" % name)
        factory = getattr(tvm, name)
    if device == "meta":
        with MetaFactories():
            model = factory(*args, **kwargs)
        return model.to("meta")
    return factory(*args, **kwargs)


DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "bool": torch.bool}


def parse_input(text):
    parts = text.split(":")
    try:
        shape = [int(s) for s in parts[0].split("x")] if parts[0] else []
    except ValueError:
        fail("--input %s: the shape is sizes joined by x (2x3x64x64)" % text)
    dtype = parts[1] if len(parts) > 1 else "float32"
    if dtype not in DTYPES:
        fail("--input %s: dtype is one of %s" % (text, ", ".join(DTYPES)))
    lo, hi = (int(parts[2]), int(parts[3])) if len(parts) > 3 else (0, 2)
    return shape, dtype, lo, hi


def supported_spellings(agtrace):
    try:
        out = subprocess.run([agtrace, "ops", "--format", "json"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        fail("cannot list agtrace's ops with %s ops --format json: %s" % (agtrace, exc))
    spellings = set()
    for op in json.loads(out):
        spellings.update(op["spellings"])
    spellings.update(TENSOR_SPELLING_KEYS.values())
    return spellings


def scenario_text(scenario):
    """JSON with one leaf and one statement per line: reviewable and diffable."""
    lines = ["{"]
    for key in ("format", "name", "description", "device", "seed"):
        lines.append("  %s: %s," % (json.dumps(key), json.dumps(scenario[key])))
    leaves = ["    %s: %s" % (json.dumps(k), json.dumps(v)) for k, v in scenario["tensors"].items()]
    lines.append('  "tensors": {\n' + ",\n".join(leaves) + "\n  },")
    lines.append('  "program": [\n' + ",\n".join("    " + json.dumps(s) for s in scenario["program"]) + "\n  ]")
    return "\n".join(lines) + "\n}\n"


def main(argv):
    p = argparse.ArgumentParser(prog="agtrace record", description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], help="SHAPE[:DTYPE[:LO:HI]], e.g. 2x3x64x64:float32, 2x16:int64:0:50257")
    p.add_argument("--loss", default="sum", help="cross_entropy, mse, sum, or path.py:fn (fn(output, *inputs) -> loss)")
    p.add_argument("--classes", type=int, default=None, help="cross_entropy: targets are randint [0, classes)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--train", action="store_true", default=True)
    mode.add_argument("--eval", action="store_true")
    p.add_argument("--values", action="store_true", help="every leaf holds its exact values")
    p.add_argument("--device", default="cpu", choices=["cpu", "meta"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-dropout", action="store_true",
                   help="set p = 0 on every nn.Dropout and stochastic depth before the run (the description says so)")
    p.add_argument("--name", default=None, help="scenario name (default: from -o)")
    p.add_argument("--agtrace", default=os.environ.get("AGTRACE_BIN", "agtrace"),
                   help="the agtrace binary whose `ops` decides the recording level")
    p.add_argument("-o", "--output", required=True)
    opts = p.parse_args(argv)
    command = os.environ.get("AGTRACE_RECORD_COMMAND") or "agtrace record " + " ".join(shlex.quote(a) for a in argv)

    supported = supported_spellings(opts.agtrace)
    torch.manual_seed(opts.seed)
    model = build_model(opts.model, opts.device)
    if opts.no_dropout:
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
            if type(m).__name__ == "StochasticDepth":
                m.p = 0.0
    model.train(not opts.eval)
    device = opts.device

    rec = Recorder(supported, device)
    leaf_names = set()

    prelude = []

    def add_leaf(name, tensor, exact):
        if device != "meta" and tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            # JSON and the format's `values` have no infinities: a buffer such as llama2.c's
            # causal mask (triu of -inf) is made at the start of the program from its finite
            # part and a mask per infinity, then those helper leaves are dropped.
            if bool(torch.isnan(tensor).any()):
                raise Inexpressible("leaf %s holds NaN, which a scenario cannot write" % name)
            finite = torch.where(torch.isinf(tensor), torch.zeros_like(tensor), tensor)
            rec.leaves[name + "_finite"] = leaf_spec(finite, True, None, device)
            expr = name + "_finite"
            for sign, text in ((1, "inf"), (-1, "-inf")):
                where = torch.isinf(tensor) & ((tensor > 0) if sign > 0 else (tensor < 0))
                if bool(where.any()):
                    rec.leaves["%s_is%s" % (name, "posinf" if sign > 0 else "neginf")] = leaf_spec(where, True, None, device)
                    expr += ".masked_fill(%s_is%s, float('%s'))" % (name, "posinf" if sign > 0 else "neginf", text)
            helpers = [n for n in rec.leaves if n.startswith(name + "_")]
            prelude.append("%s = %s" % (name, expr))
            prelude.append("del " + ", ".join(helpers))
            rec.notes.append("%s is made from %s by the first statements (JSON has no infinities)" % (name, " and ".join(helpers)))
        else:
            rec.leaves[name] = leaf_spec(tensor, exact, ("normal", normal_moments), device)
        rec.bind(tensor, name)
        leaf_names.add(name)

    for path, param in model.named_parameters():
        add_leaf(identifier(path), param, opts.values)
    for path, buf in model.named_buffers():
        add_leaf(identifier(path), buf, True)

    def constant_leaf(tensor, call):
        if tensor.requires_grad and tensor.grad_fn is not None:
            raise Inexpressible("%s (in %s): an argument made outside the recorded calls" % (call, rec.where()))
        name = rec.fresh("const")
        with rec.paused():
            rec.leaves[name] = leaf_spec(tensor, True, None, device)
        rec.leaf_objects.append(tensor)
        rec.bind(tensor, name)
        return name
    rec.make_leaf = constant_leaf

    inputs = []
    for i, text in enumerate(opts.input):
        shape, dtype, lo, hi = parse_input(text)
        dt = DTYPES[dtype]
        if device == "meta":
            t = torch.empty(shape, dtype=dt, device="meta")
        elif dt.is_floating_point:
            t = torch.randn(shape).to(dt)
        else:
            t = torch.randint(lo, hi, shape).to(dt)
        name = "x" if i == 0 else "x%d" % i
        spec = leaf_spec(t, opts.values, ("normal", normal_moments), device)
        if device != "meta" and not opts.values:
            spec["init"] = {"normal": [0, 1]} if dt.is_floating_point else {"randint": [lo, hi]}
        rec.leaves[name] = spec
        rec.bind(t, name)
        inputs.append(t)

    for path, module in model.named_modules():
        rec.module_paths[id(module)] = path or "<model>"

    def pre_hook(module, _inputs):
        rec.module_stack.append("%s (%s)" % (rec.module_paths.get(id(module), "?"), type(module).__name__))

    def post_hook(module, _inputs, _output):
        rec.module_stack.pop()

    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(pre_hook),
             torch.nn.modules.module.register_module_forward_hook(post_hook)]

    loss_fn = None
    if opts.loss not in ("cross_entropy", "mse", "sum"):
        if ".py:" not in opts.loss:
            fail("--loss is cross_entropy, mse, sum or path.py:fn")
        loss_fn, _, _ = load_file_attr(opts.loss)

    targets = None
    torch.Tensor.__getitem__, torch.Tensor.__setitem__ = recorded_getitem, recorded_setitem
    ACTIVE.append(rec)
    try:
        with rec:
            out = model(*inputs)
            if loss_fn is not None:
                loss = loss_fn(out, *inputs)
            else:
                if not isinstance(out, torch.Tensor):
                    raise Inexpressible("the model returned %s; --loss path.py:fn picks the loss from it" % type(out).__name__)
                if opts.loss == "cross_entropy":
                    if opts.classes is None:
                        fail("--loss cross_entropy needs --classes")
                    with rec.paused():
                        targets = (torch.empty(out.shape[0], dtype=torch.int64, device="meta") if device == "meta"
                                   else torch.randint(0, opts.classes, (out.shape[0],)))
                    add_target = True
                elif opts.loss == "mse":
                    with rec.paused():
                        targets = (torch.empty(out.shape, device="meta") if device == "meta"
                                   else torch.randn(out.shape))
                if targets is not None:
                    with rec.paused():
                        spec = leaf_spec(targets, opts.values, ("normal", normal_moments), device)
                    if device != "meta" and not opts.values:
                        spec["init"] = ({"randint": [0, opts.classes]} if opts.loss == "cross_entropy"
                                        else {"normal": [0, 1]})
                    rec.leaves["target"] = spec
                    rec.bind(targets, "target")
                if opts.loss == "cross_entropy":
                    loss = F.cross_entropy(out, targets)
                elif opts.loss == "mse":
                    loss = F.mse_loss(out, targets)
                else:
                    loss = out.sum()
            del out
    except Inexpressible as exc:
        fail("cannot express %s" % exc, EXIT_INEXPRESSIBLE)
    finally:
        ACTIVE.pop()
        torch.Tensor.__getitem__, torch.Tensor.__setitem__ = ORIGINAL_GETITEM, ORIGINAL_SETITEM
        for h in hooks:
            h.remove()
    if not isinstance(loss, torch.Tensor) or id(loss) not in rec.names:
        fail("the loss is not a tensor the recorded program made", EXIT_INEXPRESSIBLE)
    loss_name = rec.names[id(loss)]
    # the loss is bound to `loss`: rename its last binding
    for i in range(len(rec.program) - 1, -1, -1):
        stmt = rec.program[i]
        if stmt.startswith(loss_name + " = "):
            rec.program[i] = "loss = " + stmt[len(loss_name) + 3:]
            for j in range(i + 1, len(rec.program)):
                if rec.program[j].startswith("del "):
                    names = [n for n in rec.program[j][4:].split(", ")]
                    rec.program[j] = "del " + ", ".join("loss" if n == loss_name else n for n in names)
            break
    else:
        rec.program.append("loss = " + loss_name)
    # The model's locals are gone once forward returned: the Python objects of tensors the
    # graph still holds are kept alive by PyTorch (its PyObject preservation), so their
    # weakrefs never fire; every name but the leaves and the loss is dropped here.
    rec.pending_del += [n for n in rec.names.values() if n not in rec.leaves and n != loss_name
                        and n not in rec.pending_del]
    rec.flush_dels()
    if device != "meta":
        # On meta PyTorch 1.13 has no backward for some ops (convolution_backward_overrideable
        # raises NotImplementedError); the forward already gave every call and saved tensor.
        loss.backward()
    rec.program.append("loss.backward()")

    name = opts.name or os.path.splitext(os.path.basename(opts.output))[0]
    notes = ""
    if opts.no_dropout:
        notes += " Dropout and stochastic depth set to p = 0 (--no-dropout)."
    if rec.notes:
        notes += " " + "; ".join(rec.notes) + "."
    if rec.data_reads:
        notes += " Control flow read tensor data (%s): the program is unrolled as this run took it." % "; ".join(rec.data_reads)
    values = "exact leaf values" if opts.values else "leaf shapes with initialisers (normal with each parameter's own mean and std)"
    description = ("Recorded from PyTorch %s by tools/record/agtrace_record.py: %s, %s mode, %s, loss %s, on %s "
                   "(seed %d), %s.%s Command: %s" % (
                       torch.__version__, opts.model, "eval" if opts.eval else "train",
                       ", ".join("input %s" % i for i in opts.input) or "no inputs", opts.loss, device, opts.seed,
                       values, notes, command))
    scenario = {"format": 1, "name": name, "description": description, "device": device,
                "seed": opts.seed, "tensors": rec.leaves, "program": prelude + rec.blocks()}
    with open(opts.output, "w") as f:
        f.write(scenario_text(scenario))
    sys.stderr.write("agtrace record: %d statements, %d leaves -> %s\n" % (len(rec.program), len(rec.leaves), opts.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
