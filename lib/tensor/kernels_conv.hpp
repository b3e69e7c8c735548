// Convolution kernels on host element arrays: a grouped, strided, dilated, zero-padded 2-D
// convolution (a 1-D one is the same with height 1), forward and backward, as im2col and
// col2im around BLAS products, in the element type itself (float for float32, double for
// float64). PyTorch 1.13's CPU convolutions (slow_conv2d's im2col + gemm, or oneDNN for
// batched float32) accumulate float32 products in float, never in double. ops/nn.cpp uses
// the float instance; float64 convolutions keep a sequential double sum there, whose digits
// are PyTorch's to the last place (the double instance is dgemm's blocked order).
#pragma once
#include <cstdint>

namespace agtrace::kernels {

struct ConvShape {
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, group_in = 0, kernel_h = 0, kernel_w = 0;
  int64_t out_h = 0, out_w = 0, groups = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};

// out (N, C_out, out_h, out_w), contiguous, every element written; x (N, C_in, H, W) and
// w (C_out, C_in / groups, kh, kw) contiguous; bias (C_out) or null.
template <typename T>
void conv_forward(const ConvShape& s, const T* x, const T* w, const T* bias, T* out);

// convolution_backward (transposed=False) for the gradients asked for (a null output
// pointer is one nobody needs, PyTorch's output_mask): grad_input = col2im(W^T @ grad),
// grad_weight = sum over the batch of grad @ im2col(x)^T, grad_bias = grad summed over
// (N, H, W). Every element of each requested output is written.
template <typename T>
void conv_backward(const ConvShape& s, const T* grad, const T* x, const T* w, T* grad_input, T* grad_weight,
                   T* grad_bias);

// Tests: the most elements the side-by-side column matrices of one chunk of samples may hold
// (at least one sample is always taken, at most as many as make 512 columns); 0 restores the
// default (2^21).
void set_conv_chunk_column_elements(int64_t elements);

}  // namespace agtrace::kernels
