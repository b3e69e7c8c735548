// Golden reports: for every scenario in scenarios/, the text, JSON and DOT reports are
// compared with tests/golden/<name>.{txt,json,dot}. A mismatch writes <file>.new next to
// the golden and names the first differing line; `scripts/update-goldens` approves.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <vector>

#include "support/command.hpp"

namespace fs = std::filesystem;
using namespace agtrace::test;

namespace {

std::vector<fs::path> scenario_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(source_dir()) / "scenarios"))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The version string is volatile: it changes with every release, not with behaviour.
std::string without_volatile(const std::string& s) {
  std::istringstream in(s);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("\"agtrace_version\"") == std::string::npos) out += line + "\n";
  return out;
}

// A number at s[i]: [-]digits[.digits][e[+-]digits]; its length (0 when none) and whether it
// has a fraction or an exponent (a floating-point value rather than a count or an id).
size_t number_at(const std::string& s, size_t i, bool& is_float) {
  size_t j = i;
  if (j < s.size() && s[j] == '-') ++j;
  const size_t digits = j;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
  if (j == digits) return 0;
  is_float = false;
  if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
    is_float = true;
    for (++j; j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]));) ++j;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
      is_float = true;
      for (j = k; j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]));) ++j;
    }
  }
  return j - i;
}

// Two report lines agree: the same text, white space runs alike, integers (ids, bytes,
// statement numbers) equal, and floating-point values within the differential test's
// float32 tolerance (rtol 1e-5, atol 1e-6). Gradients and losses come out of BLAS, whose
// kernel the CPU selects (OpenBLAS' SkylakeX kernel rounds mlp_toy's W1 gradient
// -0.0008444938 as -0.0008444936, Haswell's as the golden), so the last digits are the
// machine's, not agtrace's.
bool lines_agree(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool wa = std::isspace(static_cast<unsigned char>(a[i])), wb = std::isspace(static_cast<unsigned char>(b[j]));
    if (wa || wb) {
      if (!(wa && wb)) return false;
      while (i < a.size() && std::isspace(static_cast<unsigned char>(a[i]))) ++i;
      while (j < b.size() && std::isspace(static_cast<unsigned char>(b[j]))) ++j;
      continue;
    }
    // A number starts at a digit or a '-' not glued to a preceding word (`a-1` is text).
    const bool boundary = i == 0 || !std::isalnum(static_cast<unsigned char>(a[i - 1]));
    bool fa = false, fb = false;
    const size_t na = boundary ? number_at(a, i, fa) : 0, nb = boundary ? number_at(b, j, fb) : 0;
    if (na > 0 && nb > 0) {
      const std::string ta = a.substr(i, na), tb = b.substr(j, nb);
      if (ta != tb) {
        if (!(fa || fb)) return false;
        const double x = std::stod(ta), y = std::stod(tb);
        if (std::fabs(x - y) > 1e-6 + 1e-5 * std::fabs(y)) return false;
      }
      i += na;
      j += nb;
      continue;
    }
    if (a[i] != b[j]) return false;
    ++i;
    ++j;
  }
  auto rest_blank = [](const std::string& s, size_t k) {
    for (; k < s.size(); ++k)
      if (!std::isspace(static_cast<unsigned char>(s[k]))) return false;
    return true;
  };
  return rest_blank(a, i) && rest_blank(b, j);
}

std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  for (int n = 1;; ++n) {
    bool ea = !std::getline(ia, la), eb = !std::getline(ib, lb);
    if (ea && eb) return "";
    if (ea != eb || !lines_agree(la, lb))
      return "line " + std::to_string(n) + ":\n  golden: " + (ea ? "<end>" : la) + "\n  now:    " + (eb ? "<end>" : lb);
  }
}

void compare_golden(const fs::path& golden, const std::string& actual) {
  const bool update = std::getenv("AGTRACE_UPDATE_GOLDENS") != nullptr;
  if (update) {
    spit(golden.string(), actual);
    return;
  }
  INFO("golden " << golden.string());
  REQUIRE(fs::exists(golden));
  const std::string expected = slurp(golden.string());
  const std::string diff = first_difference(without_volatile(expected), without_volatile(actual));
  if (!diff.empty()) spit(golden.string() + ".new", actual);
  INFO("first difference at " << diff << "\n(new output written to " << golden.string() << ".new; approve with scripts/update-goldens)");
  CHECK(diff.empty());
}

}  // namespace

// Goldens hold 1.13's bfloat16 results on a CPU with AVX-512 (oneDNN's kernels), whatever CPU
// runs the test: agtrace otherwise follows its host, as 1.13 does.
namespace {
CommandResult golden_run(const std::string& args) {
  return run_shell(std::string("AGTRACE_BF16_KERNELS=onednn NO_COLOR=1 ") + AGTRACE_BINARY + " " + args);
}
}  // namespace

TEST_CASE("every scenario has golden text, JSON and DOT reports", "[golden]") {
  const auto files = scenario_files();
  REQUIRE(files.size() >= 7);
  const fs::path golden_dir = fs::path(source_dir()) / "tests" / "golden";
  const std::string tmp = temp_dir();
  for (const auto& f : files) {
    const std::string name = f.stem().string();
    SECTION(name) {
      auto text = golden_run("run " + f.string() + " --values --color never");
      INFO(text.err);
      REQUIRE((text.status == 0 || text.status == 3));
      compare_golden(golden_dir / (name + ".txt"), text.out);

      auto json = golden_run("run " + f.string() + " --values --format json --detail full");
      REQUIRE(json.status == text.status);
      compare_golden(golden_dir / (name + ".json"), json.out);

      const std::string dot_path = tmp + "/" + name + ".dot";
      auto dot = golden_run("run " + f.string() + " --format json -o " + tmp + "/report.json --dot " + dot_path);
      REQUIRE(dot.status == text.status);
      compare_golden(golden_dir / (name + ".dot"), slurp(dot_path));
    }
  }
}

TEST_CASE("the golden comparison detects a changed report", "[golden]") {
  // The comparison itself must be able to fail.
  CHECK(first_difference("a\nb\n", "a\nb\n").empty());
  CHECK_FALSE(first_difference("a\nb\n", "a\nc\n").empty());
  CHECK_FALSE(first_difference("a\n", "a\nb\n").empty());
  CHECK(without_volatile("{\n  \"agtrace_version\": \"1\",\n  \"x\": 1\n}\n") == "{\n  \"x\": 1\n}\n");
  // Floating-point values within float32 tolerance agree; integers, text and larger
  // differences do not.
  CHECK(first_difference("g [-0.0008444938, 2.5e-08]\n", "g [-0.0008444936,  2.4e-08]\n").empty());
  CHECK_FALSE(first_difference("g [-0.0008444938]\n", "g [-0.0009444938]\n").empty());
  CHECK_FALSE(first_difference("peak 244 B\n", "peak 240 B\n").empty());
  CHECK_FALSE(first_difference("#41 x\n", "#40 x\n").empty());
  CHECK_FALSE(first_difference("a-1.0\n", "a+1.0\n").empty());
  CHECK_FALSE(first_difference("x 1.0\n", "x 1.0 y\n").empty());
}

TEST_CASE("mlp_toy matches its golden whichever BLAS kernel OpenBLAS picks", "[golden]") {
  // The kernels this x86-64 machine can run: Haswell (AVX2) always on an AVX2 CPU, SkylakeX
  // only with AVX-512 (OpenBLAS stops with an illegal instruction otherwise).
  const std::string cpuinfo = slurp("/proc/cpuinfo");
  std::vector<std::string> cores;
  if (cpuinfo.find(" avx2") != std::string::npos) cores.push_back("Haswell");
  if (cpuinfo.find(" avx512f") != std::string::npos) cores.push_back("SkylakeX");
  const fs::path sc = fs::path(source_dir()) / "scenarios" / "mlp_toy.json";
  const std::string golden = slurp((fs::path(source_dir()) / "tests" / "golden" / "mlp_toy.json").string());
  for (const std::string& core : cores) {
    INFO("OPENBLAS_CORETYPE=" << core);
    auto r = run_shell("OPENBLAS_CORETYPE=" + core + " " + AGTRACE_BINARY + " run " + sc.string() + " --values --format json --detail full");
    REQUIRE(r.status == 0);
    CHECK(first_difference(without_volatile(golden), without_volatile(r.out)).empty());
  }
}

TEST_CASE("AGTRACE_BF16_KERNELS names the machine whose bfloat16 kernels a run follows", "[golden]") {
  // autocast_conv_net's bfloat16 conv2d and linear round differently under oneDNN (a CPU with
  // AVX-512) and under slow_conv2d and cpublas (elsewhere): its loss differs in the 3rd digit.
  const fs::path sc = fs::path(source_dir()) / "scenarios" / "autocast_conv_net.json";
  auto onednn = run_shell("AGTRACE_BF16_KERNELS=onednn " + std::string(AGTRACE_BINARY) + " run " + sc.string() +
                          " --format json --detail full");
  auto cpublas = run_shell("AGTRACE_BF16_KERNELS=cpublas " + std::string(AGTRACE_BINARY) + " run " + sc.string() +
                           " --format json --detail full");
  REQUIRE(onednn.status == 0);
  REQUIRE(cpublas.status == 0);
  CHECK(onednn.out.find("2.9804627895355225") != std::string::npos);
  CHECK(cpublas.out.find("2.976449489593506") != std::string::npos);
}
