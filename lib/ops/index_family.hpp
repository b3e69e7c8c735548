// index_add, index_fill, index_copy, scatter, scatter_add (index_family.cpp) and median,
// nanmedian, kthvalue (median.cpp): forward, node, saved values and backward side by side,
// measured with /usr/bin/python3 and torch 1.13. Each in-place form records the
// out-of-place op's node over the edited tensor (ops/inplace_util.hpp's steps).
#pragma once
#include <utility>

#include "interp/value.hpp"
#include "tensor/tensor.hpp"

namespace agtrace::ops {

// self.index_add(dim, index, source, alpha=alpha): IndexAddBackward0 saving alpha, dim,
// index and source (both only when source requires grad), source_dim.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Value& alpha);
void index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Value& alpha);
// self.index_copy(dim, index, source): IndexCopyBackward0 saving dim, index, source (only
// when source requires grad), source_dim.
Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
void index_copy_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
// self.index_fill(dim, index, value): a number is IndexFillBackward0, a 0-d tensor
// IndexFillBackward1 (edges self, value); both save dim and index.
Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Value& value);
void index_fill_(const Tensor& self, int64_t dim, const Tensor& index, const Value& value);
// self.scatter(dim, index, src) (ScatterBackward0, edges self, src) or scatter(dim, index,
// value) with a number (ScatterBackward1); both save dim and index.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Value& src);
void scatter_(const Tensor& self, int64_t dim, const Tensor& index, const Value& src);
// self.scatter_add(dim, index, src): ScatterAddBackward0 saving dim, index (only when src
// requires grad).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
void scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// self.median() (MedianBackward0, saving result and self) / self.nanmedian()
// (NanmedianBackward0): the lower median, NaN propagating for median and skipped by nanmedian.
Tensor median_all(const Tensor& self, bool ignore_nan);
// self.median(dim, keepdim) / nanmedian: (values, indices), MedianBackward1 /
// NanmedianBackward1 saving dim, indices (the returned object), keepdim, self_sizes.
std::pair<Tensor, Tensor> median_dim(const Tensor& self, int64_t dim, bool keepdim, bool ignore_nan);
// self.kthvalue(k, dim, keepdim): KthvalueBackward0, saved as MedianBackward1.
std::pair<Tensor, Tensor> kthvalue(const Tensor& self, int64_t k, int64_t dim, bool keepdim);

}  // namespace agtrace::ops
