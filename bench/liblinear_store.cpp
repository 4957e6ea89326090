// LIBLINEAR (Debian's liblinear4, linked as a library) trained on an fgm
// store: the rows go from the store's column blocks straight into
// LIBLINEAR's row format, so a store too big to parse as text in reasonable
// time (the kddb shape: 6 GB of text) can still be compared. The data is the
// same as `liblinear-train` would read from the generator's text: column j is
// LIBLINEAR's feature j + 1 (index_base 1), labels ±1, rows in store order.
// For each C: train() with the given solver (default -s 5, no bias, eps
// 0.01: liblinear-train's defaults), its CPU and wall seconds, the nonzero
// weights, and test accuracy on a LIBSVM text file; then the peak RSS.
// Prints one JSON line per C.
#include <sys/resource.h>

#include <linear.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/memory_budget.h"
#include "io/column_block.h"
#include "io/shard_store.h"

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// The store's rows in LIBLINEAR's layout: row i is x_space[row_start[i] ..],
// ended by index -1.
struct RowProblem {
  std::vector<double> y;
  std::vector<feature_node*> x;
  std::unique_ptr<feature_node[]> x_space;
  problem prob{};
};

void fill_rows(const fgm::ShardStore& store, RowProblem& p) {
  const fgm::StoreInfo& info = store.info();
  if (info.n_features >= static_cast<uint64_t>(INT32_MAX))
    throw std::runtime_error("LIBLINEAR's feature indices are int: too many features");
  const uint64_t n = info.n_rows;
  std::vector<uint64_t> start(n + 1, 0);
  const std::vector<fgm::BlockRef> blocks = store.plan_blocks(uint64_t{64} << 20);
  fgm::BlockBuffer buffer;
  fgm::CscScratch scratch;
  for (const auto& ref : blocks) {  // nonzeros per row
    const fgm::CscColumns c = fgm::csc_columns(store.read_block(ref, buffer), scratch);
    for (uint64_t e = 0; e < c.col_ptr[c.column_count]; ++e) ++start[c.row_ids[e] + 1];
  }
  for (uint64_t i = 0; i < n; ++i) start[i + 1] += start[i] + 1;  // + the terminator of row i
  p.x_space.reset(new feature_node[start[n]]);
  std::vector<uint64_t> next(start.begin(), start.end() - 1);
  for (const auto& ref : blocks) {  // columns in increasing id: every row's indices increase
    const fgm::CscColumns c = fgm::csc_columns(store.read_block(ref, buffer), scratch);
    for (uint64_t k = 0; k < c.column_count; ++k)
      for (uint32_t e = c.col_ptr[k]; e < c.col_ptr[k + 1]; ++e)
        p.x_space[next[c.row_ids[e]]++] = {static_cast<int>(c.column_ids[k] + 1), static_cast<double>(c.values[e])};
  }
  p.x.resize(n);
  p.y.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    p.x_space[next[i]] = {-1, 0.0};
    p.x[i] = &p.x_space[start[i]];
    p.y[i] = store.labels()[i];
  }
  p.prob.l = static_cast<int>(n);
  p.prob.n = static_cast<int>(info.n_features);
  p.prob.y = p.y.data();
  p.prob.x = p.x.data();
  p.prob.bias = -1;
}

// A LIBSVM text file as LIBLINEAR rows (labels > 0 are +1, as in the store).
struct TextRows {
  std::vector<double> y;
  std::vector<uint64_t> start;
  std::vector<feature_node> nodes;
};

TextRows read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  TextRows t;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const char* s = line.c_str();
    char* end = nullptr;
    t.y.push_back(std::strtod(s, &end) > 0 ? 1.0 : -1.0);
    t.start.push_back(t.nodes.size());
    for (s = end; *s;) {
      while (*s == ' ' || *s == '\t') ++s;
      if (!*s) break;
      const long idx = std::strtol(s, &end, 10);
      if (*end != ':') throw std::runtime_error(fmt::format("{}:{}: not index:value", path, t.y.size()));
      const double v = std::strtod(end + 1, &end);
      t.nodes.push_back({static_cast<int>(idx), v});
      s = end;
    }
    t.nodes.push_back({-1, 0.0});
  }
  return t;
}

void quiet(const char*) {}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"LIBLINEAR trained on an fgm store (rows built from its column blocks), one JSON line per C"};
  std::string store_dir, test_path, label;
  std::vector<double> Cs;
  int solver = L1R_L2LOSS_SVC;
  double eps = 0.01;
  app.add_option("--store", store_dir, "store directory")->required();
  app.add_option("--test", test_path, "LIBSVM test file")->required();
  app.add_option("--C", Cs, "values of C")->required();
  app.add_option("-s,--solver", solver, "LIBLINEAR solver type (5: L1-regularised squared hinge)");
  app.add_option("--eps", eps, "stopping tolerance (liblinear-train's default for -s 5: 0.01)");
  app.add_option("--label", label, "free text copied into every JSON line");
  CLI11_PARSE(app, argc, argv);
  try {
    set_print_string_function(quiet);
    fgm::MemoryBudget budget(uint64_t{4} << 30);
    auto t0 = std::chrono::steady_clock::now();
    RowProblem p;
    {
      auto store = fgm::ShardStore::open(store_dir, budget);
      fill_rows(*store, p);
    }
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const TextRows test = read_text(test_path);
    for (double C : Cs) {
      parameter param{};
      param.solver_type = solver;
      param.eps = eps;
      param.C = C;
      param.p = 0.1;
      if (const char* wrong = check_parameter(&p.prob, &param)) throw std::runtime_error(wrong);
      std::srand(1);  // the state a fresh liblinear-train process starts its shuffles from
      const double cpu0 = cpu_seconds();
      auto w0 = std::chrono::steady_clock::now();
      model* m = train(&p.prob, &param);
      const double train_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      const double train_cpu = cpu_seconds() - cpu0;
      uint64_t nonzero = 0;
      for (int j = 0; j < m->nr_feature; ++j) nonzero += m->w[j] != 0;
      uint64_t correct = 0;
      for (size_t i = 0; i < test.y.size(); ++i)
        correct += predict(m, &test.nodes[test.start[i]]) == test.y[i];
      fmt::print(
          "{{\"bench\":\"liblinear_store\",\"label\":\"{}\",\"store\":\"{}\",\"rows\":{},\"features\":{},"
          "\"solver\":{},\"eps\":{},\"C\":{},\"load_seconds\":{:.2f},\"train_seconds\":{:.2f},"
          "\"train_cpu_seconds\":{:.2f},\"nonzero_weights\":{},\"test_rows\":{},\"test_accuracy\":{:.6f},"
          "\"peak_rss_mib\":{:.0f}}}\n",
          label, store_dir, p.prob.l, p.prob.n, solver, eps, C, load_seconds, train_wall, train_cpu, nonzero,
          test.y.size(), static_cast<double>(correct) / static_cast<double>(test.y.size()), peak_rss_mib());
      std::fflush(stdout);
      free_and_destroy_model(&m);
    }
  } catch (const std::exception& e) {
    std::cerr << "liblinear_store: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
