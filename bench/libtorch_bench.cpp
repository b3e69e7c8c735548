// The benchmark workloads written against libtorch 1.13 (Debian's libtorch-dev), the same
// programs as bench/scenarios/*.json. Built and run by bench/run.py; prints one JSON line
// per timed repetition: {"workload": ..., "threads": N, "seconds": S}.
//
//   libtorch_bench WORKLOAD --threads N --reps R
//
// Only the workload itself is timed (parameters are created before the clock starts), so
// libtorch is measured at its best; agtrace's figures include parsing and leaf creation.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall seconds of f(); cpu receives the process CPU seconds it took (all threads), a
// figure that other processes on a busy machine disturb less.
double seconds_of(const std::function<void()>& f, double& cpu) {
  const double c0 = cpu_now();
  auto t0 = Clock::now();
  f();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  cpu = cpu_now() - c0;
  return wall;
}

// x[16] requiring grad; 10,000 ops cycling mul 1.0001, add 0.001, tanh; sum; backward.
std::function<void()> tiny_chain() {
  return [] {
    auto x = torch::linspace(-1, 1, 16).requires_grad_(true);
    torch::Tensor h = x;
    for (int i = 0; i < 10000; ++i) {
      switch (i % 3) {
        case 0: h = h * 1.0001; break;
        case 1: h = h + 0.001; break;
        default: h = h.tanh(); break;
      }
    }
    h.sum().backward();
  };
}

// Batch 128, 784-512-512-10, relu, cross_entropy; 5 steps with x.grad = None between.
std::function<void()> mlp_step() {
  auto x = torch::rand({128, 784}).requires_grad_(true);
  auto target = torch::randint(0, 10, {128}, torch::kLong);
  auto W1 = (torch::rand({784, 512}) * 0.1 - 0.05).requires_grad_(true);
  auto b1 = torch::zeros({512}).requires_grad_(true);
  auto W2 = (torch::rand({512, 512}) * 0.1 - 0.05).requires_grad_(true);
  auto b2 = torch::zeros({512}).requires_grad_(true);
  auto W3 = (torch::rand({512, 10}) * 0.1 - 0.05).requires_grad_(true);
  auto b3 = torch::zeros({10}).requires_grad_(true);
  return [=]() mutable {
    for (int step = 0; step < 5; ++step) {
      auto h1 = (torch::mm(x, W1) + b1).relu();
      auto h2 = (torch::mm(h1, W2) + b2).relu();
      auto logits = torch::mm(h2, W3) + b3;
      auto loss = torch::nn::functional::cross_entropy(logits, target);
      loss.backward();
      x.mutable_grad() = torch::Tensor();
      for (auto* p : {&W1, &b1, &W2, &b2, &W3, &b3}) p->mutable_grad() = torch::Tensor();
    }
  };
}

// Sequence 128, batch 4, hidden 256, 4 heads, pre-LayerNorm, attention with matmul and
// softmax, GELU MLP of width 1024, residuals; forward and backward.
std::function<void()> transformer_block() {
  namespace F = torch::nn::functional;
  auto x = (torch::rand({4, 128, 256}) - 0.5).requires_grad_(true);
  auto mk = [](std::vector<int64_t> s) { return (torch::rand(s) * 0.1 - 0.05).requires_grad_(true); };
  auto ln1_w = torch::ones({256}).requires_grad_(true), ln1_b = torch::zeros({256}).requires_grad_(true);
  auto ln2_w = torch::ones({256}).requires_grad_(true), ln2_b = torch::zeros({256}).requires_grad_(true);
  auto Wq = mk({256, 256}), Wk = mk({256, 256}), Wv = mk({256, 256}), Wo = mk({256, 256});
  auto W1 = mk({256, 1024}), b1 = torch::zeros({1024}).requires_grad_(true);
  auto W2 = mk({1024, 256}), b2 = torch::zeros({256}).requires_grad_(true);
  return [=] {
    auto h = torch::layer_norm(x, {256}, ln1_w, ln1_b);
    auto q = torch::matmul(h, Wq).view({4, 128, 4, 64}).transpose(1, 2);
    auto k = torch::matmul(h, Wk).view({4, 128, 4, 64}).transpose(1, 2);
    auto v = torch::matmul(h, Wv).view({4, 128, 4, 64}).transpose(1, 2);
    auto att = (torch::matmul(q, k.transpose(-2, -1)) * 0.125).softmax(-1);
    auto o = torch::matmul(att, v).transpose(1, 2).reshape({4, 128, 256});
    auto x1 = x + torch::matmul(o, Wo);
    auto h2 = torch::layer_norm(x1, {256}, ln2_w, ln2_b);
    auto m = torch::matmul(F::gelu(torch::matmul(h2, W1) + b1), W2) + b2;
    auto out = x1 + m;
    out.sum().backward();
  };
}

// bench/scenarios/conv_block.json: conv2d 3->16 (3x3, padding 1) + batch_norm (training)
// + relu + max_pool2d 2, conv2d 16->32 + relu, linear 8192->10, cross_entropy; batch 32.
std::function<void()> conv_block() {
  namespace F = torch::nn::functional;
  auto x = torch::rand({32, 3, 32, 32});
  auto target = torch::randint(0, 10, {32}, torch::kLong);
  auto mk = [](std::vector<int64_t> s, double a) { return (torch::rand(s) * (2 * a) - a).requires_grad_(true); };
  auto w1 = mk({16, 3, 3, 3}, 0.19), b1 = torch::zeros({16}).requires_grad_(true);
  auto g1 = torch::ones({16}).requires_grad_(true), be1 = torch::zeros({16}).requires_grad_(true);
  auto rm1 = torch::zeros({16}), rv1 = torch::ones({16});
  auto w2 = mk({32, 16, 3, 3}, 0.083), b2 = torch::zeros({32}).requires_grad_(true);
  auto W = mk({10, 8192}, 0.011), bW = torch::zeros({10}).requires_grad_(true);
  return [=]() mutable {
    auto h = torch::conv2d(x, w1, b1, 1, 1);
    h = torch::batch_norm(h, g1, be1, rm1, rv1, /*training=*/true, 0.1, 1e-5, /*cudnn_enabled=*/false);
    h = torch::max_pool2d(torch::relu(h), 2);
    h = torch::relu(torch::conv2d(h, w2, b2, 1, 1));
    auto logits = F::linear(h.flatten(1), W, bW);
    auto loss = F::cross_entropy(logits, target);
    loss.backward();
    // Each repetition is a fresh step, as `agtrace run` of the scenario is.
    for (auto* p : {&w1, &b1, &g1, &be1, &w2, &b2, &W, &bW}) p->mutable_grad() = torch::Tensor();
  };
}

// bench/scenarios/mlp_linear.json: one step as users write it, F.linear with [out, in]
// weights, the input not requiring grad.
std::function<void()> mlp_linear() {
  namespace F = torch::nn::functional;
  auto x = torch::rand({128, 784});
  auto target = torch::randint(0, 10, {128}, torch::kLong);
  auto mk = [](std::vector<int64_t> s, double a) { return (torch::rand(s) * (2 * a) - a).requires_grad_(true); };
  auto W1 = mk({512, 784}, 0.035), b1 = mk({512}, 0.035);
  auto W2 = mk({512, 512}, 0.044), b2 = mk({512}, 0.044);
  auto W3 = mk({10, 512}, 0.044), b3 = mk({10}, 0.044);
  return [=]() mutable {
    auto h1 = F::relu(F::linear(x, W1, b1));
    auto h2 = F::relu(F::linear(h1, W2, b2));
    auto logits = F::linear(h2, W3, b3);
    auto loss = F::cross_entropy(logits, target);
    loss.backward();
    for (auto* p : {&W1, &b1, &W2, &b2, &W3, &b3}) p->mutable_grad() = torch::Tensor();
  };
}

// bench/scenarios/transformer_linear.json: the pre-LayerNorm block with F.linear projections.
std::function<void()> transformer_linear() {
  namespace F = torch::nn::functional;
  auto x = (torch::rand({4, 128, 256}) - 0.5).requires_grad_(true);
  auto mk = [](std::vector<int64_t> s, double a) { return (torch::rand(s) * (2 * a) - a).requires_grad_(true); };
  auto ln1_w = torch::ones({256}).requires_grad_(true), ln1_b = torch::zeros({256}).requires_grad_(true);
  auto ln2_w = torch::ones({256}).requires_grad_(true), ln2_b = torch::zeros({256}).requires_grad_(true);
  auto Wq = mk({256, 256}, 0.0625), bq = mk({256}, 0.0625), Wk = mk({256, 256}, 0.0625), bk = mk({256}, 0.0625);
  auto Wv = mk({256, 256}, 0.0625), bv = mk({256}, 0.0625), Wo = mk({256, 256}, 0.0625), bo = mk({256}, 0.0625);
  auto W1 = mk({1024, 256}, 0.0625), b1 = mk({1024}, 0.0625);
  auto W2 = mk({256, 1024}, 0.03125), b2 = mk({256}, 0.03125);
  return [=]() mutable {
    auto h = F::layer_norm(x, F::LayerNormFuncOptions({256}).weight(ln1_w).bias(ln1_b));
    auto q = F::linear(h, Wq, bq).view({4, 128, 4, 64}).transpose(1, 2);
    auto k = F::linear(h, Wk, bk).view({4, 128, 4, 64}).transpose(1, 2);
    auto v = F::linear(h, Wv, bv).view({4, 128, 4, 64}).transpose(1, 2);
    auto att = F::softmax(torch::matmul(q, k.transpose(-2, -1)) * 0.125, F::SoftmaxFuncOptions(-1));
    auto o = torch::matmul(att, v).transpose(1, 2).reshape({4, 128, 256});
    auto x1 = x + F::linear(o, Wo, bo);
    auto h2 = F::layer_norm(x1, F::LayerNormFuncOptions({256}).weight(ln2_w).bias(ln2_b));
    auto m = F::linear(F::gelu(F::linear(h2, W1, b1)), W2, b2);
    auto out = x1 + m;
    out.sum().backward();
    for (auto* p : {&x, &ln1_w, &ln1_b, &ln2_w, &ln2_b, &Wq, &bq, &Wk, &bk, &Wv, &bv, &Wo, &bo, &W1, &b1, &W2, &b2})
      p->mutable_grad() = torch::Tensor();
  };
}

// scenarios/seed_walk.json, the cold-start row: y = (x @ W + b).relu().sum() on 2x3 and 3x4,
// then backward; its figure is mostly the process's start-up and library loading.
std::function<void()> seed_walk() {
  auto x = torch::linspace(-1, 1, 6).view({2, 3}).requires_grad_(true);
  auto W = torch::linspace(-0.5, 0.9, 12).view({3, 4}).requires_grad_(true);
  auto b = torch::zeros({4}).requires_grad_(true);
  return [=]() mutable {
    auto y = (torch::mm(x, W) + b).relu().sum();
    y.backward();
    for (auto* p : {&x, &W, &b}) p->mutable_grad() = torch::Tensor();
  };
}

// bench/scenarios/resnet18_b8.json: torchvision resnet18(num_classes=10) in train mode, one
// step on a batch of 8x3x64x64. Stem: conv2d 7x7 stride 2 + batch_norm + relu + max_pool2d
// 3/2; four stages of two BasicBlocks (64, 128, 256, 512 channels; the first block of
// stages 2-4 strides 2 and adds a 1x1 conv + batch_norm downsample of its input); then
// adaptive_avg_pool2d, flatten, linear 512->10, cross_entropy. Each batch_norm uses and
// updates its running statistics and counts num_batches_tracked, as nn.BatchNorm2d does.
std::function<void()> resnet18_b8() {
  namespace F = torch::nn::functional;
  struct BN {
    torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  };
  struct Block {
    int64_t stride;
    torch::Tensor conv1;
    BN bn1;
    torch::Tensor conv2;
    BN bn2;
    torch::Tensor down_conv;  // undefined where the block keeps its shape
    BN down_bn;
  };
  std::vector<torch::Tensor> params;
  // kaiming_normal_(mode="fan_out", nonlinearity="relu"), torchvision's conv initialisation.
  auto conv = [&](int64_t out, int64_t in, int64_t k) {
    auto w = (torch::randn({out, in, k, k}) * std::sqrt(2.0 / static_cast<double>(out * k * k))).requires_grad_(true);
    params.push_back(w);
    return w;
  };
  auto bn = [&](int64_t c) {
    BN b{torch::ones({c}).requires_grad_(true), torch::zeros({c}).requires_grad_(true), torch::zeros({c}),
         torch::ones({c}), torch::zeros({}, torch::kLong)};
    params.push_back(b.weight);
    params.push_back(b.bias);
    return b;
  };
  auto x = torch::randn({8, 3, 64, 64});
  auto target = torch::randint(0, 10, {8}, torch::kLong);
  auto conv1 = conv(64, 3, 7);
  auto bn1 = bn(64);
  std::vector<Block> blocks;
  int64_t in = 64;
  for (int64_t width : {64, 128, 256, 512}) {
    for (int i = 0; i < 2; ++i) {
      Block b;
      b.stride = (i == 0 && width != 64) ? 2 : 1;
      b.conv1 = conv(width, in, 3);
      b.bn1 = bn(width);
      b.conv2 = conv(width, width, 3);
      b.bn2 = bn(width);
      if (b.stride != 1 || in != width) {
        b.down_conv = conv(width, in, 1);
        b.down_bn = bn(width);
      }
      blocks.push_back(b);
      in = width;
    }
  }
  // nn.Linear's default uniform init has std 1/sqrt(3 * 512) = 0.0255; the scenario draws a
  // normal of that std, and so does this.
  auto fc_w = (torch::randn({10, 512}) * 0.0255).requires_grad_(true);
  auto fc_b = (torch::randn({10}) * 0.0255).requires_grad_(true);
  params.push_back(fc_w);
  params.push_back(fc_b);
  return [=]() mutable {
    auto batch_norm = [](const torch::Tensor& h, BN& b) {
      b.num_batches_tracked.add_(1);
      return torch::batch_norm(h, b.weight, b.bias, b.running_mean, b.running_var, /*training=*/true, 0.1, 1e-5,
                               /*cudnn_enabled=*/false);
    };
    auto h = batch_norm(torch::conv2d(x, conv1, {}, 2, 3), bn1);
    torch::relu_(h);
    h = torch::max_pool2d(h, 3, 2, 1);
    for (auto& b : blocks) {
      auto out = batch_norm(torch::conv2d(h, b.conv1, {}, b.stride, 1), b.bn1);
      torch::relu_(out);
      out = batch_norm(torch::conv2d(out, b.conv2, {}, 1, 1), b.bn2);
      if (b.down_conv.defined()) out.add_(batch_norm(torch::conv2d(h, b.down_conv, {}, b.stride), b.down_bn));
      else out.add_(h);
      torch::relu_(out);
      h = out;
    }
    auto logits = F::linear(torch::flatten(torch::adaptive_avg_pool2d(h, {1, 1}), 1), fc_w, fc_b);
    auto loss = F::cross_entropy(logits, target);
    loss.backward();
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
  };
}

// bench/scenarios/nanogpt_step.json: nanoGPT's GPT (scenarios/models/src/nanogpt.py) with
// n_layer 4, n_head 4, n_embd 128, block_size 64, vocab 65, in train mode; one step on 8x64
// tokens: token + position embeddings, per layer LayerNorm, c_attn, causal attention written
// out (masked_fill with the tril buffer, softmax), c_proj, residual, LayerNorm, GELU MLP,
// residual; ln_f, the lm_head tied to wte, cross_entropy with ignore_index -1. Dropout has
// p = 0, so the scenario's F.dropout calls are the identity and are left out here.
std::function<void()> nanogpt_step() {
  namespace F = torch::nn::functional;
  using torch::indexing::None;
  using torch::indexing::Slice;
  const int64_t n_layer = 4, n_head = 4, C = 128, T = 64, V = 65, B = 8;
  struct Layer {
    torch::Tensor ln1_w, ln1_b, attn_w, attn_b, attn_proj_w, attn_proj_b, ln2_w, ln2_b, fc_w, fc_b, mlp_proj_w,
        mlp_proj_b, mask;
  };
  std::vector<torch::Tensor> params;
  auto normal = [&](std::vector<int64_t> s, double std) {
    auto p = (torch::randn(s) * std).requires_grad_(true);
    params.push_back(p);
    return p;
  };
  auto filled = [&](int64_t n, double v) {
    auto p = torch::full({n}, v, torch::kFloat).requires_grad_(true);
    params.push_back(p);
    return p;
  };
  auto idx = torch::randint(0, V, {B, T}, torch::kLong);
  auto targets = torch::randint(0, V, {B, T}, torch::kLong);
  // GPT._init_weights: normal(0, 0.02) for linears and embeddings, c_proj weights scaled
  // down by sqrt(2 * n_layer); biases zero, LayerNorm weights one.
  const double proj_std = 0.02 / std::sqrt(2.0 * n_layer);
  auto wte = normal({V, C}, 0.02), wpe = normal({T, C}, 0.02);
  std::vector<Layer> layers;
  for (int64_t i = 0; i < n_layer; ++i) {
    Layer l;
    l.ln1_w = filled(C, 1), l.ln1_b = filled(C, 0);
    l.attn_w = normal({3 * C, C}, 0.02), l.attn_b = filled(3 * C, 0);
    l.attn_proj_w = normal({C, C}, proj_std), l.attn_proj_b = filled(C, 0);
    l.ln2_w = filled(C, 1), l.ln2_b = filled(C, 0);
    l.fc_w = normal({4 * C, C}, 0.02), l.fc_b = filled(4 * C, 0);
    l.mlp_proj_w = normal({C, 4 * C}, proj_std), l.mlp_proj_b = filled(C, 0);
    l.mask = torch::tril(torch::ones({T, T})).view({1, 1, T, T});  // the "bias" buffer, one per layer
    layers.push_back(l);
  }
  auto ln_f_w = filled(C, 1), ln_f_b = filled(C, 0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(C / n_head));
  return [=]() mutable {
    auto ln = [C](const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& b) {
      return F::layer_norm(h, F::LayerNormFuncOptions({C}).weight(w).bias(b).eps(1e-5));
    };
    auto pos = torch::arange(0, T, torch::kLong);
    auto x = F::embedding(idx, wte) + F::embedding(pos, wpe);
    for (auto& l : layers) {
      auto qkv = F::linear(ln(x, l.ln1_w, l.ln1_b), l.attn_w, l.attn_b).split(C, 2);
      auto k = qkv[1].view({B, T, n_head, C / n_head}).transpose(1, 2);
      auto q = qkv[0].view({B, T, n_head, C / n_head}).transpose(1, 2);
      auto v = qkv[2].view({B, T, n_head, C / n_head}).transpose(1, 2);
      auto att = torch::matmul(q, k.transpose(-2, -1)) * scale;
      auto causal = l.mask.index({Slice(), Slice(), Slice(None, T), Slice(None, T)}) == 0;
      att = F::softmax(att.masked_fill(causal, -std::numeric_limits<double>::infinity()), F::SoftmaxFuncOptions(-1));
      auto y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
      x = x + F::linear(y, l.attn_proj_w, l.attn_proj_b);
      auto m = F::linear(F::gelu(F::linear(ln(x, l.ln2_w, l.ln2_b), l.fc_w, l.fc_b)), l.mlp_proj_w, l.mlp_proj_b);
      x = x + m;
    }
    auto logits = F::linear(ln(x, ln_f_w, ln_f_b), wte);  // lm_head.weight is wte's
    auto loss = F::cross_entropy(logits.view({-1, V}), targets.view(-1), F::CrossEntropyFuncOptions().ignore_index(-1));
    loss.backward();
    for (auto& p : params) p.mutable_grad() = torch::Tensor();
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: libtorch_bench WORKLOAD [--threads N] [--reps R]\n");
    return 2;
  }
  const std::string workload = argv[1];
  int threads = 1, reps = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(threads);
  at::set_num_interop_threads(1);
  torch::manual_seed(7);

  if (workload == "gemm") {
    torch::NoGradGuard ng;
    auto a = torch::rand({1024, 1024}), b = torch::rand({1024, 1024});
    torch::mm(a, b);  // warm-up: BLAS thread pool and buffers
    for (int r = 0; r < reps; ++r) {
      torch::Tensor c;
      double cpu = 0;
      double s = seconds_of([&] { c = torch::mm(a, b); }, cpu);
      std::printf("{\"workload\": \"gemm\", \"threads\": %d, \"seconds\": %.9f, \"cpu_seconds\": %.9f}\n", threads,
                  s, cpu);
    }
    return 0;
  }
  std::function<void()> f;
  if (workload == "tiny_chain") f = tiny_chain();
  else if (workload == "mlp_step") f = mlp_step();
  else if (workload == "transformer_block") f = transformer_block();
  else if (workload == "conv_block") f = conv_block();
  else if (workload == "mlp_linear") f = mlp_linear();
  else if (workload == "transformer_linear") f = transformer_linear();
  else if (workload == "seed_walk") f = seed_walk();
  else if (workload == "resnet18_b8") f = resnet18_b8();
  else if (workload == "nanogpt_step") f = nanogpt_step();
  else {
    std::fprintf(stderr, "unknown workload %s\n", workload.c_str());
    return 2;
  }
  f();  // warm-up
  for (int r = 0; r < reps; ++r) {
    double cpu = 0;
    double s = seconds_of(f, cpu);
    std::printf("{\"workload\": \"%s\", \"threads\": %d, \"seconds\": %.9f, \"cpu_seconds\": %.9f}\n",
                workload.c_str(), threads, s, cpu);
  }
  return 0;
}
