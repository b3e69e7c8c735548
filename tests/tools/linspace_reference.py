#!/usr/bin/python3
"""References for tests/scenario/test_scenario.cpp's float32 linspace test: torch 1.13's
torch.linspace(lo, hi, n) on the CPU with one thread (the ranges here are at most 32,768
elements, which torch never splits between threads), as FNV-1a hashes of the float32 values.
Prints the C++ case table, and on stderr how many elements the unfused ends-in formula
(a + i * step below n / 2, b - (n - 1 - i) * step from there) gets wrong.

    /usr/bin/python3 tests/tools/linspace_reference.py
"""
import sys

import numpy as np
import torch

from fnv_hash import fnv

CASES = [(-1, 1, 8), (-1, 1, 16), (0.1, 0.7, 17), (-1, 1, 31), (-1, 1, 37), (1, -1, 48), (0, 1, 100),
         (-3.7, 2.9, 1000), (-5, 5, 2000), (-2.5, 7.25, 32768)]

torch.set_num_threads(1)
for lo, hi, n in CASES:
    t = torch.linspace(lo, hi, n)
    a, b = np.float32(lo), np.float32(hi)
    step = np.float32((b - a) / np.float32(n - 1))
    i = np.arange(n)
    plain = np.where(i < n // 2, a + (i.astype(np.float32) * step).astype(np.float32),
                     b - ((n - 1 - i).astype(np.float32) * step).astype(np.float32)).astype(np.float32)
    wrong = int((t.numpy().view(np.int32) != plain.view(np.int32)).sum())
    print("linspace(%s, %s, %d): the unfused formula differs in %d elements" % (lo, hi, n, wrong), file=sys.stderr)
    print("      {%s, %s, %d, 0x%016xull}," % (lo, hi, n, fnv(t)))
