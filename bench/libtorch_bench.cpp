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
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

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
