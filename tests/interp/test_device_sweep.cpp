// Every operation of agtrace's op table on cuda against the CPU (issue #8: "every operation
// on CUDA against the CPU result (forward and gradients, dtype-aware tolerances, fresh
// non-zero inputs)"). One small program per op, run in float32 and float64 on the CPU and on
// the host-simulated device (support/device_compare.hpp): the same nodes, saved values,
// walks, printed lines and, within the dtype's tolerance, gradients. Forward values reach
// the gradients through the sums that end each program. A test fails if the op table gains
// an op with no program here.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/table.hpp"
#include "interp/run_helpers.hpp"
#include "support/device_compare.hpp"
#include "support/sim_device.hpp"

using namespace agtrace;

namespace {

// op table name -> statements (a JSON array's items). Leaves: x, y (positive) [3, 4]; v [4];
// w [4, 5]; B [2, 3, 4]; img [1, 2, 5, 5]; k [3, 2, 2, 2]; e [5, 4]; i [3] int64; t [3]
// int64 class targets; all floating leaves require grad.
const std::map<std::string, std::vector<std::string>>& sweep() {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"add", {"s = (torch.add(x, y, alpha=2) + x + 1.5 + torch.add(x, v)).sum()"}},
      {"sub", {"s = (torch.sub(x, y, alpha=0.5) - v - 2).sum()"}},
      {"rsub", {"s = ((1.0 - x) ** 2).sum()"}},
      {"mul", {"s = (x * y * v * 3).sum()"}},
      {"div", {"s = (x / y + x / 2.0 + torch.div(x, v)).sum()"}},
      {"rdiv", {"s = (2.0 / y).sum()"}},
      {"neg", {"s = (torch.neg(x) * y + (-x) * x).sum()"}},
      {"pow", {"s = (y ** 2.5 + torch.pow(y, x) + x ** 2).sum()"}},
      {"rpow", {"s = (2.0 ** x).sum()"}},
      {"reciprocal", {"s = (torch.reciprocal(y) * x).sum()"}},
      {"eq", {"s = torch.where(torch.eq(x, x * (x > 0.5)), x, y).sum()"}},
      {"ne", {"s = torch.where(x.ne(y), x, y).sum()"}},
      {"lt", {"s = torch.where(x < y, x, y).sum()", "print((x < 0.5).sum().item())"}},
      {"le", {"s = torch.where(torch.le(x, 0.5), x, y).sum()"}},
      {"gt", {"s = torch.where(x > v, x, y).sum()"}},
      {"ge", {"s = torch.where(x >= y, x, y).sum()"}},
      {"exp", {"s = (x.exp() * y).sum()"}},
      {"log", {"s = (torch.log(y) * x).sum()"}},
      {"sqrt", {"s = (y.sqrt() * x).sum()"}},
      {"tanh", {"s = (x.tanh() * y).sum()"}},
      {"sigmoid", {"s = (torch.sigmoid(x) * y).sum()"}},
      {"relu", {"s = (x.relu() * y + torch.relu(x) + F.relu(x)).sum()"}},
      {"sum", {"s = x.sum() + (x.sum(1) * y.sum(1)).sum() + (x.sum(0, keepdim=True) ** 2).sum() + (B.sum(2) ** 2).sum()"}},
      {"mean", {"s = x.mean() + (x.mean(1) ** 2).sum() + (B.mean(0, keepdim=True) * y).sum()"}},
      {"mm", {"s = (torch.mm(x, w) ** 2).sum()"}},
      {"matmul", {"s = (torch.matmul(B, w) ** 2).sum() + (x @ v).sum() + (v @ w).sum()"}},
      {"view", {"s = (x.view(4, 3) ** 2).sum() + (x.view(-1) * 2).sum()"}},
      {"reshape", {"s = (x.reshape(2, 6) ** 2).sum() + (x.t().reshape(-1) ** 2).sum()"}},
      {"t", {"s = (x.t() @ y).sum()"}},
      {"transpose", {"s = (B.transpose(0, 2) ** 2).sum()"}},
      {"select", {"s = (x[1] ** 2).sum() + (torch.select(B, 1, 2) ** 2).sum() + (x[-1] * 3).sum()"}},
      {"slice", {"s = (x[1:3, ::2] ** 2).sum() + (B[:, 1:] * 2).sum()"}},
      {"clone", {"s = (x.clone() ** 2).sum()"}},
      {"contiguous", {"s = (x.t().contiguous() ** 2).sum()"}},
      {"T", {"s = (B.T ** 2).sum() + (x.T @ y).sum()"}},
      {"mT", {"s = (B.mT ** 2).sum()"}},
      {"movedim", {"s = (torch.movedim(B, 0, 2) ** 2).sum() + (B.moveaxis((0, 1), (2, 0)) * B.movedim(0, 2)).sum()"}},
      {"narrow", {"s = (x.narrow(1, 1, 2) ** 2).sum() + (torch.narrow(B, -1, 0, 3) * 2).sum()"}},
      {"unfold", {"s = (x.unfold(1, 3, 1) ** 2).sum() + (B.unfold(0, 1, 1) * 2).sum() + (x.unfold(0, 2, 2) ** 2).sum()"}},
      {"view_as", {"s = (x.view_as(torch.zeros(12, device=x.device)) ** 2).sum()"}},
      {"reshape_as", {"s = (x.t().reshape_as(x) ** 2).sum()"}},
      {"swapaxes", {"s = (B.swapaxes(0, 2) ** 2).sum()"}},
      {"swapdims", {"s = (torch.swapdims(B, 1, -1) ** 2).sum()"}},
      {"allclose", {"print(torch.allclose(x, x * 1.0), x.allclose(y, atol=0.1))", "s = x.sum()"}},
      {"tolist", {"print(i.tolist(), (x > 10).tolist())", "s = x.sum()"}},
      {"retain_grad", {"h = x * 2", "h.retain_grad()", "s = (h * y).sum()"}},
      {"autograd.backward", {"torch.autograd.backward([(x * y).sum()], inputs=[y])", "s = (x * y).sum()"}},
      {"set_grad_enabled", {"torch.set_grad_enabled(False)", "n = x * 2", "torch.set_grad_enabled(True)",
                            "s = (x * y).sum() + n.sum()"}},
      {"arange", {"a = torch.arange(12, device=x.device, dtype=x.dtype).view(3, 4)", "s = (x * a).sum()"}},
      {"type_as", {"s = (x.type_as(v.double()) * 2).sum() + (x.type_as(y) * y).sum()"}},  // model_ops.cpp
      // attention.cpp: 1.13's Python body, every op of it with a cuda route.
      {"multi_head_attention_forward",
       {"o, a = F.multi_head_attention_forward(B, B, B, 4, 2, torch.cat([w.t(), w.t(), w.t()])[:12], "
        "torch.cat([v, v, v]), None, None, False, 0.0, e[:4], v)",
        "s = o.sum() + (a * a).sum()"}},
      {"full", {"f = torch.full((3, 4), 2.5, device=x.device, dtype=x.dtype)", "s = (x * f).sum()"}},
      {"empty", {"e0 = torch.empty(3, 4, device=x.device, dtype=x.dtype)", "s = (x + e0 * 0).sum()"}},
      {"empty_like", {"s = (x * y + torch.empty_like(x) * 0).sum()"}},
      {"full_like", {"s = (x * torch.full_like(x, 3)).sum()"}},
      {"new_zeros", {"s = (x * y + x.new_zeros(3, 4)).sum()"}},
      {"new_ones", {"s = (x * x.new_ones((3, 4))).sum()"}},
      {"new_empty", {"s = (x * y + x.new_empty(4) * 0).sum()"}},
      {"new_full", {"s = (x * x.new_full((4,), 2)).sum()"}},
      {"new_tensor", {"s = (x * x.new_tensor([1, 2, 3, 4])).sum()"}},
      {"rand", {"r = torch.rand(3, 4, device=x.device, dtype=x.dtype)", "s = (x * r).sum()"}},
      {"randn", {"r = torch.randn(3, 4, device=x.device, dtype=x.dtype)", "s = (x * r).sum()"}},
      {"rand_like", {"s = (x * torch.rand_like(x)).sum()"}},
      {"randn_like", {"s = (x * torch.randn_like(x)).sum()"}},
      {"randint", {"r = torch.randint(1, 3, (3, 4), device=x.device)", "s = (x * r).sum()"}},
      {"randperm", {"p = torch.randperm(4, device=x.device)", "s = (x * p).sum()"}},
      {"detach", {"d = x.detach()", "s = (x * d).sum()"}},
      {"add_", {"h = x * 1.0", "h.add_(y, alpha=2)", "h.add_(1.0)", "s = (h ** 2).sum()"}},
      {"sub_", {"h = x * 1.0", "h.sub_(y)", "h.sub_(v, alpha=3)", "s = (h ** 2).sum()"}},
      {"mul_", {"h = x * 1.0", "h.mul_(y)", "h.mul_(0.5)", "s = (h ** 2).sum()"}},
      {"div_", {"h = x * 1.0", "h.div_(y)", "h.div_(4.0)", "s = (h ** 2).sum()"}},
      {"relu_", {"h = x * 1.0", "h.relu_()", "s = (h * y).sum()"}},
      {"exp_", {"h = x * 1.0", "h.exp_()", "s = (h * y).sum()"}},
      {"sigmoid_", {"h = x * 1.0", "h.sigmoid_()", "s = (h * y).sum()"}},
      {"tanh_", {"h = x * 1.0", "h.tanh_()", "s = (h * y).sum()"}},
      {"zero_", {"h = x * 2.0", "h[0].zero_()", "s = (h ** 2).sum()"}},
      {"sin_", {"h = x * 1.0", "h.sin_()", "s = (h * y).sum()"}},
      {"cos_", {"h = x * 1.0", "h.cos_()", "s = (h * y).sum()"}},
      {"abs_", {"h = x * 1.0", "h.abs_()", "s = (h * y).sum()"}},
      {"log_", {"h = y * 1.0", "h.log_()", "s = (h * x).sum()"}},
      {"sqrt_", {"h = y * 1.0", "h.sqrt_()", "s = (h * x).sum()"}},
      {"rsqrt_", {"h = y * 1.0", "h.rsqrt_()", "s = (h * x).sum()"}},
      {"neg_", {"h = x * 1.0", "h.neg_()", "s = (h * y).sum()"}},
      {"pow_", {"h = y * 1.0", "h.pow_(2.5)", "g = y * 1.0", "g.pow_(x)", "s = (h * x + g).sum()"}},
      {"copy_", {"h = x * 1.0", "h.copy_(y * 2.0)", "h[1].copy_(v)", "s = (h * x).sum()"}},
      {"fill_", {"h = x * 1.0", "h.fill_(0.5)", "h[0].fill_(v[1])", "s = (h * y).sum()"}},
      {"detach_", {"h = x * 1.0", "h.detach_()", "s = (h * y).sum()"}},
      {"backward", {"r = (x ** 2 * y).sum()", "r.backward(retain_graph=True)", "s = r * 1.0"}},
      {"grad", {"g, = torch.autograd.grad((x ** 3 * y).sum(), [x], create_graph=True)", "s = (g * y).sum()"}},
      {"requires_grad_", {"d = x.detach() * 2.0", "d.requires_grad_()", "s = (d ** 2 * y).sum()"}},
      {"is_grad_enabled", {"print(torch.is_grad_enabled())", "s = x.sum()"}},
      {"is_autocast_enabled", {"print(torch.is_autocast_enabled())", "s = x.sum()"}},
      {"is_autocast_cpu_enabled", {"print(torch.is_autocast_cpu_enabled())", "s = x.sum()"}},
      {"get_autocast_cpu_dtype", {"print(torch.get_autocast_cpu_dtype())", "s = x.sum()"}},
      {"get_autocast_gpu_dtype", {"print(torch.get_autocast_gpu_dtype())", "s = x.sum()"}},
      {"is_autocast_cache_enabled", {"print(torch.is_autocast_cache_enabled())", "s = x.sum()"}},
      {"zeros", {"z = torch.zeros(3, 4, device=x.device) + torch.zeros(4, dtype=x.dtype, device=x.device)", "s = (x * (z + 1)).sum()"}},
      {"ones", {"s = (x * torch.ones(3, 4, device=x.device, dtype=x.dtype)).sum()"}},
      {"zeros_like", {"s = (x * torch.zeros_like(x) + y).sum()"}},
      {"ones_like", {"s = (x * torch.ones_like(y)).sum()"}},
      {"tensor", {"c = torch.tensor([1.0, -2.0, 3.0, 0.5], device=x.device, dtype=x.dtype)", "s = (x * c).sum()"}},
      {"print", {"print(x.shape, x.dtype, x.requires_grad, x.is_leaf, (x * 2).grad_fn.name())", "s = x.sum()"}},
      {"shares_storage", {"print(shares_storage(x, x.view(-1)), shares_storage(x, x * 1))", "s = x.sum()"}},
      {"equal", {"print(torch.equal(x, x * 1.0), torch.equal(x, y))", "s = x.sum()"}},
      {"size", {"print(x.size(), x.size(1), B.size(-1))", "s = x.sum()"}},
      {"dim", {"print(x.dim(), B.dim())", "s = x.sum()"}},
      {"numel", {"print(x.numel(), torch.numel(B))", "s = x.sum()"}},
      {"element_size", {"print(x.element_size(), i.element_size())", "s = x.sum()"}},
      {"_is_view", {"print(x._is_view(), x[0]._is_view(), (x * 1)._is_view())", "s = x.sum()"}},
      {"is_contiguous", {"print(x.is_contiguous(), x.t().is_contiguous())", "s = x.sum()"}},
      {"stride", {"print(x.stride(), x.t().stride(1), x[:, ::2].stride())", "s = x.sum()"}},
      {"storage_offset", {"print(x.storage_offset(), x[1].storage_offset())", "s = x.sum()"}},
      {"data_ptr", {"print(x.data_ptr() == x.view(-1).data_ptr(), x.data_ptr() == x[1].data_ptr())", "s = x.sum()"}},
      {"item", {"print(x[0, 0].item(), i[1].item())", "s = x.sum()"}},
      {"abs", {"s = (x.abs() * y + torch.abs(x)).sum()"}},
      {"sin", {"s = (x.sin() * y).sum()"}},
      {"cos", {"s = (torch.cos(x) * y).sum()"}},
      {"rsqrt", {"s = (y.rsqrt() * x).sum()"}},
      {"clamp", {"s = (x.clamp(-1.0, 1.0) * y + torch.clamp(x, min=0.2) + x.clamp(max=0.5)).sum()"}},
      {"leaky_relu", {"s = (F.leaky_relu(x) * y + F.leaky_relu(x, 0.2)).sum()"}},
      {"gelu", {"s = (F.gelu(x) * y + F.gelu(x, approximate='tanh')).sum()"}},
      {"silu", {"s = (F.silu(x) * y).sum()"}},
      {"softmax", {"s = (torch.softmax(x, -1) * y).sum() + (F.softmax(x, dim=0) * y).sum()"}},
      {"log_softmax", {"s = (torch.log_softmax(x, 1) * y).sum() + (F.log_softmax(B, dim=0) ** 2).sum()"}},
      {"max", {"values, idx = x.max(dim=1)", "s = (values * y[0, :3]).sum() + x.max() + torch.max(x, 0, keepdim=True)[0].sum()"}},
      {"min", {"values, idx = x.min(dim=1)", "s = (values * y[0, :3]).sum() + x.min() + torch.min(x, 0, keepdim=True)[0].sum() + x.min(1).values.sum()"}},
      {"argmax", {"print(x.argmax(1).sum().item(), x.argmax().item(), x.argmax(dim=0, keepdim=True).sum().item())", "s = (x * y).sum()"}},
      {"argmin", {"print(x.argmin(1).sum().item(), torch.argmin(x).item(), B.argmin(2).sum().item())", "s = (x * y).sum()"}},
      {"l1_loss", {"s = F.l1_loss(x, y) + F.l1_loss(x, y, reduction='sum') + (F.l1_loss(x, y, reduction='none') * y).sum()"}},
      {"outer", {"s = (torch.outer(v, v) * x[0]).sum() + (v.outer(x[1]) ** 2).sum()"}},
      {"square", {"s = (x.square() * y).sum() + torch.square(v).sum()"}},
      {"amax", {"s = (x.amax(1) * v[:3]).sum() + (torch.amax(B, 0) ** 2).sum()"}},
      {"var", {"s = x.var() + (x.var(1) * v[:3]).sum() + torch.var(x, 0, keepdim=True).sum()"}},
      {"norm", {"s = x.norm() + (x.norm(dim=1) * v[:3]).sum() + torch.norm(B, dim=0, keepdim=True).sum()"}},
      {"where", {"s = torch.where(x > 0.5, x, y).sum() + x.where(x < 1.0, y).sum()"}},
      {"masked_fill", {"s = (x.masked_fill(x < 0, 0.5) * y).sum() + torch.masked_fill(y, x > 1.0, 2.0).sum()"}},
      {"mse_loss", {"s = F.mse_loss(x, y) + F.mse_loss(x, y, reduction='sum') + (F.mse_loss(x, y, reduction='none') * y).sum()"}},
      {"nll_loss", {"s = F.nll_loss(F.log_softmax(x, 1), t) + F.nll_loss(x, t, reduction='sum') + F.nll_loss(x, t, weight=v.detach() + 2.0)"}},
      {"cross_entropy", {"s = F.cross_entropy(x, t) + F.cross_entropy(x[0], t[0]) + F.cross_entropy(x, t, reduction='sum')"}},
      {"permute", {"s = (B.permute(2, 0, 1) ** 2).sum()"}},
      {"expand", {"s = (v.expand(3, 4) * x).sum()"}},
      {"expand_as", {"s = (v.expand_as(x) * x).sum()"}},
      {"unsqueeze", {"s = (x.unsqueeze(0) * B).sum() + (torch.unsqueeze(v, 1) ** 2).sum()"}},
      {"squeeze", {"s = (x.unsqueeze(1).squeeze(1) ** 2).sum() + (torch.squeeze(v.view(1, 4)) * 2).sum()"}},
      {"flatten", {"s = (B.flatten(1) ** 2).sum() + (torch.flatten(x) * 2).sum()"}},
      {"split", {"parts = x.split(2, 1)", "s = (parts[0] ** 2).sum() + (parts[1] * 3).sum() + (torch.split(x, [1, 2])[1] ** 2).sum()"}},
      {"chunk", {"s = (x.chunk(2)[1] ** 2).sum() + (torch.chunk(x, 2, 1)[0] * 3).sum()"}},
      {"unbind", {"s = (x.unbind(1)[2] ** 2).sum() + (torch.unbind(B)[0] * 3).sum()"}},
      {"index_select", {"s = (x.index_select(1, i) ** 2).sum() + (torch.index_select(x, 0, i) * v).sum()"}},
      {"index", {"s = (x[i] ** 2).sum() + (x.t()[i] * 2).sum() + (x[i - 3] * y[0, :3].view(3, 1)).sum() + (x[x > 0.5] ** 2).sum()"}},
      {"cat", {"s = (torch.cat([x, y], 1) ** 2).sum() + (torch.cat([x, x * 2]) * 3).sum()"}},
      {"stack", {"s = (torch.stack([x, y], 2) ** 2).sum() + (torch.stack([v, v * 2]) * 3).sum()"}},
      {"to", {"s = (x.to(torch.float64) ** 2).sum() + (x.to(y) * y).sum() + (x.to(y.device) ** 2).sum()"}},
      {"float", {"s = (x.float() * y).sum()"}},
      {"double", {"s = (x.double() ** 2).sum()"}},
      {"half", {"s = (x.half().float() * y).sum()"}},
      {"bfloat16", {"s = (x.bfloat16().double() * y).sum()"}},
      {"long", {"print(x.long().sum().item())", "s = (x * x.long()).sum()"}},
      {"dot", {"s = torch.dot(v, v * 2) + v.dot(w[:, 0])"}},
      {"mv", {"s = (torch.mv(x, v) ** 2).sum() + (w.t().mv(v) * 2).sum()"}},
      {"bmm", {"s = (torch.bmm(B, B.transpose(1, 2)) ** 2).sum()"}},
      {"addmm", {"s = (torch.addmm(w[0], x, w, beta=2, alpha=0.5) ** 2).sum()"}},
      {"linear", {"s = (F.linear(x, w.t(), w[1]) ** 2).sum() + (F.linear(B, x) * 2).sum()"}},
      {"layer_norm", {"s = (F.layer_norm(x, [4], v, v * 0.5) * y).sum() + (F.layer_norm(B, [3, 4]) ** 2).sum()"}},
      {"batch_norm", {"rm = torch.zeros(2, device=x.device, dtype=x.dtype)", "rv = torch.ones(2, device=x.device, dtype=x.dtype)",
                      "s = (F.batch_norm(img, rm, rv, v[:2], v[2:], training=True) ** 2).sum() + (F.batch_norm(img, rm, rv) * img).sum()"}},
      {"dropout", {"s = (F.dropout(x, 0.0) * y).sum() + (F.dropout(x, 0.5, training=False) ** 2).sum()"}},
      {"embedding", {"s = (F.embedding(i, e) ** 2).sum() + (F.embedding(i.view(3, 1), e) * 3).sum()"}},
      {"conv2d", {"s = (F.conv2d(img, k, v[:3]) ** 2).sum() + (F.conv2d(img, k, stride=2, padding=1) * 2).sum()"}},
      {"max_pool2d", {"s = (F.max_pool2d(img, 2) ** 2).sum() + (F.max_pool2d(img, 3, stride=1, padding=1) * 2).sum()"}},
      // shapes_extra.cpp and einsum.cpp: views, cat and the ops einsum decomposes into.
      {"diagonal", {"s = (x.diagonal() ** 2).sum() + (torch.diagonal(B, 1, 1, 2) * 3).sum()"}},
      {"diag", {"s = (torch.diag(x, 1) ** 2).sum() + (v.diag(-1) * 3).sum()"}},
      {"atleast_1d", {"s = (torch.atleast_1d(x[0, 0]) ** 2).sum()"}},
      {"atleast_2d", {"s = (torch.atleast_2d(v) ** 2).sum()"}},
      {"atleast_3d", {"p, q = torch.atleast_3d(v, x)", "s = (p ** 2).sum() + q.sum()"}},
      {"eye", {"s = (x * torch.eye(3, 4, device=x.device, dtype=x.dtype)).sum() + (torch.eye(4, device=x.device) * w[:, :4]).sum()"}},
      {"hstack", {"s = (torch.hstack([x, y]) ** 2).sum() + torch.hstack([v, v]).sum()"}},
      {"vstack", {"s = (torch.vstack([x, v]) ** 2).sum()"}},
      {"dstack", {"s = (torch.dstack([x, y]) ** 2).sum()"}},
      {"broadcast_tensors", {"p, q = torch.broadcast_tensors(x, v)", "s = (p * q * y).sum()"}},
      {"einsum", {"s = (torch.einsum('ij,jk->ik', x, w) ** 2).sum() + torch.einsum('bij,j->bi', B, v).sum() + (torch.einsum('ii->i', x[:, :3]) ** 2).sum()"}},
      {"type", {"s = (x.type(torch.float64) ** 2).sum() + (x.type(torch.float32) * y).sum()"}},
      {"split_with_sizes", {"p, q = x.split_with_sizes([1, 3], 1)", "s = (p ** 2).sum() + (q * 3).sum()"}},
      {"unsafe_split", {"p, q = x.unsafe_split(2)", "s = (p ** 2).sum() + (q * 3).sum()"}},
      {"unsafe_split_with_sizes", {"p, q = (x * 1.0).unsafe_split_with_sizes([3, 1], 1)", "p.mul_(2)", "s = (p ** 2).sum() + q.sum()"}},
      {"unsafe_chunk", {"p, q = torch.unsafe_chunk(x, 2, 1)", "s = (p * q).sum()"}},
      // binary and ternary math (lib/ops/binary_more.cpp, table_binary.cpp): the ops with cuda routes.
      {"maximum", {"s = (torch.maximum(x, y) + x.max(y) + torch.maximum(x, v) + torch.max(x, x)).sum()"}},
      {"minimum", {"s = (torch.minimum(x, y) + torch.min(x, v) + x.minimum(x)).sum()"}},
      {"rsub_function", {"s = (torch.rsub(x, y, alpha=2) + torch.rsub(x, 1.5) + torch.rsub(x, v)).sum()"}},
      {"true_divide", {"s = (x.true_divide(y) + torch.true_divide(x, 2)).sum()"}},
      {"ger", {"s = (v.ger(v) * w[:, :4]).sum()"}},
      {"true_divide_", {"h = x * 1.0", "h.true_divide_(y)", "s = h.sum()"}},
  };
  return m;
}

// Ops whose cuda behaviour differs from the CPU's by design (PyTorch's too) or needs more
// than one program, checked in their own test files.
const std::map<std::string, std::string>& checked_elsewhere() {
  static const std::map<std::string, std::string> m = {
      {"cuda", "test_device.cpp: x.cuda() / x.cpu() record ToCopyBackward0 where the CPU has no node"},
      {"cpu", "test_device.cpp: x.cuda() / x.cpu() record ToCopyBackward0 where the CPU has no node"},
      {"cumsum", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"prod", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"logsumexp", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"log1p", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"expm1", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"softplus", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"elu", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"selu", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"hardtanh", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"relu6", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"threshold", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"logsigmoid", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"tril", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"triu", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"flip", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"roll", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"smooth_l1_loss", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"binary_cross_entropy", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"binary_cross_entropy_with_logits", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"one_hot", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"std", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"repeat", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"gather", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"masked_select", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"pad", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"kl_div", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"sort", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"argsort", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"topk", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"masked_fill_", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"clamp_", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"clamp_min", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"clamp_min_", "test_device_more.cpp: no cuda kernel, raises unsupported naming the op"},
      {"normalize", "test_device_more.cpp: its clamp_min has no cuda kernel"},
      {"Size", "test_shapes_extra.cpp: torch.Size makes no tensor"},
  };
  return m;
}

// Ops with no cuda route yet: on the device they raise `unsupported` naming the op (as
// PyTorch raises NotImplementedError for a kernel it lacks), never run on host memory.
const std::map<std::string, std::vector<std::string>>& no_cuda_route() {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"index_put_", {"h = x * 1.0", "h.index_put_((i,), v)", "s = h.sum()"}},
      {"floor", {"s = (x.floor() * y).sum()"}},
      {"ceil", {"s = (torch.ceil(x) * y).sum()"}},
      {"round", {"s = (x.round() * y).sum()"}},
      {"trunc", {"s = (x.trunc() * y).sum()"}},
      {"frac", {"s = (x.frac() * y).sum()"}},
      {"sign", {"s = (x.sign() * y).sum()"}},
      {"sinh", {"s = (x.sinh() * y).sum()"}},
      {"cosh", {"s = (x.cosh() * y).sum()"}},
      {"tan", {"s = (x.tan() * y).sum()"}},
      {"atan", {"s = (x.atan() * y).sum()"}},
      {"asin", {"s = ((x * 0.3).asin() * y).sum()"}},
      {"acos", {"s = ((x * 0.3).acos() * y).sum()"}},
      {"log2", {"s = (y.log2() * x).sum()"}},
      {"log10", {"s = (y.log10() * x).sum()"}},
      {"exp2", {"s = (x.exp2() * y).sum()"}},
      {"t_", {"h = x * 1.0", "h.t_()", "s = h.sum()"}},
      {"transpose_", {"h = x * 1.0", "h.transpose_(0, 1)", "s = h.sum()"}},
      {"unsqueeze_", {"h = x * 1.0", "h.unsqueeze_(0)", "s = h.sum()"}},
      {"squeeze_", {"h = x.unsqueeze(0) * 1.0", "h.squeeze_()", "s = h.sum()"}},
      // index/scatter family and median/kthvalue (index_family.cpp, median.cpp): host and meta kernels only.
      {"index_add", {"s = x.index_add(0, i, y, alpha=2).sum()"}},
      {"index_add_", {"h = x * 1.0", "h.index_add_(0, i, y)", "s = h.sum()"}},
      {"index_copy", {"s = x.index_copy(1, t, y[:, :3]).sum()"}},
      {"index_copy_", {"h = x * 1.0", "h.index_copy_(1, t, y[:, :3])", "s = h.sum()"}},
      {"index_fill", {"s = x.index_fill(1, t, 0.5).sum()"}},
      {"index_fill_", {"h = x * 1.0", "h.index_fill_(1, t, 0.5)", "s = h.sum()"}},
      {"scatter", {"s = x.scatter(1, t.unsqueeze(0), y[:1, :3]).sum()"}},
      {"scatter_", {"h = x * 1.0", "h.scatter_(1, t.unsqueeze(0), 2.0)", "s = h.sum()"}},
      {"scatter_add", {"s = x.scatter_add(1, t.unsqueeze(0), y[:1, :3]).sum()"}},
      {"scatter_add_", {"h = x * 1.0", "h.scatter_add_(1, i.unsqueeze(0), y[:1, :3])", "s = h.sum()"}},
      {"median", {"s = x.median() + x.median(1).values.sum()"}},
      {"nanmedian", {"s = x.nanmedian(1).values.sum()"}},
      {"kthvalue", {"s = x.kthvalue(2).values.sum()"}},
      // shapes_extra.cpp and rounding_trig.cpp: host kernels only.
      {"erf", {"s = (x.erf() * y).sum()"}},
      {"erfc", {"s = (x.erfc() * y).sum()"}},
      {"erfinv", {"s = ((x * 0.3).erfinv() * y).sum()"}},
      {"var_mean", {"a, b = torch.var_mean(x, 1)", "s = (a * b).sum()"}},
      {"std_mean", {"a, b = torch.std_mean(x)", "s = a * b"}},
      {"cumprod", {"s = (x.cumprod(1) * y).sum()"}},
      {"isnan", {"s = (y + x.isnan()).sum()"}},
      {"isinf", {"s = (y + torch.isinf(x)).sum()"}},
      {"isfinite", {"s = (y + x.isfinite()).sum()"}},
      // binary and ternary math (lib/ops/binary_more.cpp): host and meta kernels only.
      {"fmax", {"s = torch.fmax(x, y).sum()"}},
      {"fmin", {"s = x.fmin(y).sum()"}},
      {"atan2", {"s = torch.atan2(x, y).sum()"}},
      {"hypot", {"s = x.hypot(y).sum()"}},
      {"remainder", {"s = (x.remainder(y) + torch.remainder(x, 1.5)).sum()"}},
      {"fmod", {"s = (torch.fmod(x, y) + x.fmod(1.5)).sum()"}},
      {"lerp", {"s = (torch.lerp(x, y, 0.3) + x.lerp(y, y)).sum()"}},
      {"addcmul", {"s = x.addcmul(y, x, value=2).sum()"}},
      {"addcdiv", {"s = torch.addcdiv(x, x, y, value=0.5).sum()"}},
      {"dist", {"s = x.dist(y) + torch.dist(x, v, p=3)"}},
      {"addmv", {"s = torch.addmv(v, w, e[:, 0], beta=2).sum()"}},
      {"addr", {"s = torch.addr(x, x[:, 0], v, alpha=0.5).sum()"}},
      {"addbmm", {"s = torch.addbmm(x, B[:, :, :3], B).sum()"}},
      {"baddbmm", {"s = torch.baddbmm(B, B[:, :, :3], B, beta=0.5).sum()"}},
      {"floor_divide", {"q = torch.floor_divide(x.detach(), y.detach())", "s = (q * x).sum()"}},
      {"atan2_", {"h = x * 1.0", "h.atan2_(y)", "s = h.sum()"}},
      {"hypot_", {"h = x * 1.0", "h.hypot_(y)", "s = h.sum()"}},
      {"remainder_", {"h = x * 1.0", "h.remainder_(y)", "s = h.sum()"}},
      {"fmod_", {"h = x * 1.0", "h.fmod_(1.5)", "s = h.sum()"}},
      {"lerp_", {"h = x * 1.0", "h.lerp_(y, 0.25)", "s = h.sum()"}},
      {"addcmul_", {"h = x * 1.0", "h.addcmul_(y, v)", "s = h.sum()"}},
      {"addcdiv_", {"h = x * 1.0", "h.addcdiv_(x, y, value=2)", "s = h.sum()"}},
      {"addmv_", {"h = v * 1.0", "h.addmv_(w, e[:, 0])", "s = h.sum()"}},
      {"addr_", {"h = x * 1.0", "h.addr_(x[:, 0], v)", "s = h.sum()"}},
      {"addbmm_", {"h = x * 1.0", "h.addbmm_(B[:, :, :3], B)", "s = h.sum()"}},
      {"baddbmm_", {"h = B * 1.0", "h.baddbmm_(B[:, :, :3], B)", "s = h.sum()"}},
      // in-place activations and their out-of-place companions (activations_inplace.cpp)
      {"elu_", {"h = x * 1.0", "F.elu_(h)", "s = h.sum()"}},
      {"selu_", {"h = x * 1.0", "torch.selu_(h)", "s = h.sum()"}},
      {"celu_", {"h = x * 1.0", "F.celu_(h, 2.0)", "s = h.sum()"}},
      {"celu", {"s = F.celu(x).sum()"}},
      {"leaky_relu_", {"h = x * 1.0", "F.leaky_relu_(h, 0.2)", "s = h.sum()"}},
      {"hardtanh_", {"h = x * 1.0", "F.hardtanh_(h)", "s = h.sum()"}},
      {"threshold_", {"h = x * 1.0", "F.threshold_(h, 0.5, 0.0)", "s = h.sum()"}},
      {"rrelu", {"s = F.rrelu(x).sum()"}},
      {"rrelu_", {"h = x * 1.0", "F.rrelu_(h)", "s = h.sum()"}},
      {"hardsigmoid", {"s = (F.hardsigmoid(x) + F.hardsigmoid(x * 1.0, inplace=True)).sum()"}},
      {"hardswish", {"s = F.hardswish(x).sum()"}},
      {"mish", {"s = F.mish(x).sum()"}},
      // random in-place fills and torch.bernoulli (random_inplace.cpp)
      {"uniform_", {"h = x * 1.0", "h.uniform_()", "s = h.sum()"}},
      {"normal_", {"h = x * 1.0", "h.normal_()", "s = h.sum()"}},
      {"bernoulli_", {"h = x * 1.0", "h.bernoulli_(0.5)", "s = h.sum()"}},
      {"bernoulli", {"s = torch.bernoulli(x.sigmoid()).sum()"}},
      {"random_", {"h = x * 1.0", "h.random_(3)", "s = h.sum()"}},
      // conv1d (nn.cpp): cuda/conv.cuh takes 4-D tensors only.
      {"conv1d", {"s = (F.conv1d(B[:, :2], k[:, :, 0], v[:3]) ** 2).sum() + F.conv1d(x[:2], k[:, :, 1], stride=2).sum()"}},
      // Model layers (model_ops.cpp): host and meta kernels only.
      {"adaptive_avg_pool2d", {"s = F.adaptive_avg_pool2d(img, 3).sum()"}},
      {"adaptive_avg_pool1d", {"s = F.adaptive_avg_pool1d(B, 3).sum()"}},
      {"adaptive_max_pool2d", {"s = F.adaptive_max_pool2d(img, 3).sum()"}},
      {"avg_pool2d", {"s = F.avg_pool2d(img, 2).sum()"}},
      {"avg_pool1d", {"s = F.avg_pool1d(B, 2).sum()"}},
      {"group_norm", {"s = F.group_norm(img, 2).sum()"}},
      {"interpolate", {"s = F.interpolate(img, scale_factor=2).sum()"}},
  };
  return m;
}

std::string scenario(const std::string& dtype, const std::vector<std::string>& statements) {
  std::string program;
  for (const std::string& s : statements) program += "\"" + s + "\", ";
  program += "\"s.backward()\"";
  auto f = [&](const char* shape, const char* init) {
    return std::string(R"({"shape": )") + shape + R"(, "dtype": ")" + dtype + R"(", "requires_grad": true, "init": )" +
           init + "}";
  };
  return R"({"name": "sweep", "seed": 11, "tensors": {"x": )" + f("[3, 4]", R"({"uniform": [-1.5, 2.0]})") +
         R"(, "y": )" + f("[3, 4]", R"({"uniform": [0.5, 2.0]})") + R"(, "v": )" + f("[4]", R"({"uniform": [-1.0, 1.0]})") +
         R"(, "w": )" + f("[4, 5]", R"({"uniform": [-1.0, 1.0]})") + R"(, "B": )" +
         f("[2, 3, 4]", R"({"uniform": [-1.0, 1.0]})") + R"(, "img": )" + f("[1, 2, 5, 5]", R"({"uniform": [-1.0, 1.0]})") +
         R"(, "k": )" + f("[3, 2, 2, 2]", R"({"uniform": [-0.5, 0.5]})") + R"(, "e": )" +
         f("[5, 4]", R"({"uniform": [-1.0, 1.0]})") +
         R"(, "i": {"shape": [3], "dtype": "int64", "init": {"values": [2, 0, 2]}},
             "t": {"shape": [3], "dtype": "int64", "init": {"values": [1, 3, 0]}}}, "program": [)" +
         program + "]}";
}

}  // namespace

TEST_CASE("every op of the table has a cuda check against the CPU", "[device][sweep]") {
  std::set<std::string> missing;
  for (const ops::OpEntry& e : ops::op_table())
    if (!sweep().count(e.name) && !checked_elsewhere().count(e.name) && !no_cuda_route().count(e.name))
      missing.insert(e.name);
  std::string list;
  for (const std::string& m : missing) list += " " + m;
  INFO("ops with no cuda check:" << list);
  CHECK(missing.empty());

}

TEST_CASE("each op gives the CPU's graph, saved values and gradients on cuda, in float32 and float64",
          "[device][sweep]") {
  for (const char* dtype : {"float32", "float64"}) {
    for (const auto& [name, statements] : sweep()) {
      INFO(name << " in " << dtype);
      // torch.testing.assert_close's float32 atol (1e-5): a layer_norm gradient's small
      // elements come from cancelling terms near 1, which float arithmetic on the device
      // leaves about 1e-6 off the CPU's double-then-rounded values.
      testing::CompareOptions o;
      o.atol = 1e-5;
      if (std::string(dtype) == "float64") o.rtol = o.atol = 1e-12;
      o.require_nonzero_grads = false;  // leaves an op does not reach have zero-free .grad or none
      const testing::DeviceComparison c = testing::compare_devices(scenario(dtype, statements), o);
      CHECK(c.launches > 0);
      // The program's own sum reaches x or another leaf: some gradient is non-zero.
      bool nonzero = false;
      for (const GradRecord& g : c.cpu.grads)
        for (double v : g.values) nonzero = nonzero || v != 0;
      CHECK(nonzero);
    }
  }
}

TEST_CASE("create_graph through abs, norm(p=1) and pow on cuda matches the CPU", "[device][sweep]") {
  // Their double backwards need sgn and the exponent masks on the device (max()'s, PyTorch's
  // cuda branch of evenly_distribute_backward, is checked by [parity] on create_graph_ops).
  testing::CompareOptions o;
  o.atol = 1e-5;
  const testing::DeviceComparison c = testing::compare_devices(
      scenario("float32", {"g, = torch.autograd.grad((x.abs() * y).sum() + x.norm(1) + (y ** x).sum(), [x], create_graph=True)",
                           "s = (g * y).sum()"}),
      o);
  CHECK(c.launches > 0);
}

TEST_CASE("ops with no cuda route raise unsupported on the device and run on the CPU", "[device][sweep]") {
  for (const auto& [name, statements] : no_cuda_route()) {
    INFO(name);
    auto sc = load_scenario_text(scenario("float32", statements), "<test>");
    testing::SimulatedDevice dev;
    const RunResult cpu = test::run_on_device(*sc, "cpu", nullptr);
    const RunResult gpu = test::run_on_device(*sc, "cuda", &dev);
    CHECK(cpu.errors.empty());
    REQUIRE(gpu.errors.size() == 1);
    CHECK(gpu.errors[0].kind == "unsupported");
    CHECK(gpu.errors[0].message.find(name) != std::string::npos);
  }
}
