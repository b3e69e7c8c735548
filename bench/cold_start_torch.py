# The cold_start reference: scenarios/seed_walk.json's check written as a Python script
# with PyTorch (what a user would otherwise run). bench/run.py times it end to end with
# /usr/bin/python3, process start to the last printed line.
import torch

x = torch.linspace(-1, 1, 6).reshape(2, 3).requires_grad_()
W = torch.linspace(-0.5, 0.9, 12).reshape(3, 4).requires_grad_()
b = torch.linspace(-0.2, 0.3, 4).requires_grad_()
y = (x @ W + b).relu().sum()
print(y.grad_fn.name())
relu = y.grad_fn.next_functions[0][0]
mm = relu.next_functions[0][0].next_functions[0][0]
print(relu.name(), mm.name())
print(mm._saved_self is x, mm._saved_mat2 is W)
print(relu._saved_result.shape, relu._saved_result.requires_grad)


def walk(fn, out):
    if fn is None:
        return
    out.append(fn.name())
    for nxt, _ in fn.next_functions:
        walk(nxt, out)


names = []
walk(y.grad_fn, names)
print(names)
y.backward()
print(x.grad.shape, W.grad.shape, b.grad.shape)
