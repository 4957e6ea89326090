#include "features/transformed_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"

namespace fgm {
namespace {

constexpr char kStatsMagic[8] = {'F', 'G', 'M', 'T', 'R', 'S', 'T', '1'};
constexpr const char* kStatsRemedy = "raise engine.memory_budget or drop a transform stage";

template <typename T>
void append_scalar(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

TransformedStore::TransformedStore(std::unique_ptr<ShardStore> inner, std::vector<TransformKind> stages,
                                   MemoryBudget& budget, uint64_t block_bytes)
    : inner_(std::move(inner)) {
  const StoreInfo& info = inner_->info();
  for (TransformKind k : stages) {
    Stage s;
    s.kind = k;
    if (needs_statistics(k)) {
      const uint64_t count = is_row_norm(k) ? info.n_rows : info.n_features;
      s.memory = budget.reserve(count * sizeof(double),
                                std::string("statistics of feature transform ") + transform_name(k),
                                kStatsRemedy);
      s.factors.assign(count, 0.0);
    }
    stages_.push_back(std::move(s));
  }
  for (size_t k = 0; k < stages_.size(); ++k) {
    if (!needs_statistics(stages_[k].kind)) continue;
    if (load_cache(k)) {
      ++report_.stages_from_cache;
      continue;
    }
    compute_statistics(k, budget, block_bytes);
    ++report_.stages_computed;
    save_cache(k, budget);
  }
}

double TransformedStore::transformed(size_t upto, uint32_t row, uint64_t feature, double x) const {
  for (size_t k = 0; k < upto; ++k) {
    const Stage& s = stages_[k];
    if (is_row_norm(s.kind)) x *= s.factors[row];
    else if (is_per_feature(s.kind)) x *= s.factors[feature];
    else x = apply_elementwise(s.kind, x);
  }
  return x;
}

void TransformedStore::transform_values(uint64_t feature, const uint32_t* rows, float* values,
                                        size_t count) const {
  for (size_t e = 0; e < count; ++e)
    values[e] = static_cast<float>(transformed(stages_.size(), rows[e], feature, values[e]));
}

ColumnBlock TransformedStore::read_block(const BlockRef& block, BlockBuffer& buffer) const {
  ColumnBlock c = inner_->read_block(block, buffer);
  // The arrays live in the caller's buffer: transform them in place.
  auto* values = const_cast<float*>(c.values);
  auto* col_min = const_cast<float*>(c.col_min);
  auto* col_max = const_cast<float*>(c.col_max);
  const uint64_t n = info().n_rows;
  // Cell by cell (each cell: one column's rows inside one tile).
  std::vector<uint64_t> nnz(c.column_count, 0);
  for (uint64_t k = 0; k < c.column_count; ++k) {
    col_min[k] = std::numeric_limits<float>::infinity();
    col_max[k] = -std::numeric_limits<float>::infinity();
  }
  for (uint64_t x = 0; x < c.cell_count(); ++x) {
    const uint32_t k = c.cell_column[x];
    const uint64_t b = c.cell_ptr[x], e = c.cell_ptr[x + 1];
    transform_values(c.column_ids[k], c.row_ids + b, values + b, e - b);
    for (uint64_t i = b; i < e; ++i) {
      col_min[k] = std::min(col_min[k], values[i]);
      col_max[k] = std::max(col_max[k], values[i]);
    }
    nnz[k] += e - b;
  }
  for (uint64_t k = 0; k < c.column_count; ++k) {
    if (nnz[k] < n) {
      col_min[k] = std::min(col_min[k], 0.0f);
      col_max[k] = std::max(col_max[k], 0.0f);
    }
    if (n == 0) col_min[k] = col_max[k] = 0.0f;
  }
  return c;
}

void TransformedStore::read_column(uint64_t feature, std::vector<uint32_t>& rows,
                                   std::vector<float>& values) const {
  inner_->read_column(feature, rows, values);
  transform_values(feature, rows.data(), values.data(), values.size());
}

float TransformedStore::column_min(uint64_t feature) const {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  read_column(feature, rows, values);
  float lo = values.size() < info().n_rows ? 0.0f : std::numeric_limits<float>::infinity();
  for (float v : values) lo = std::min(lo, v);
  return info().n_rows == 0 ? 0.0f : lo;
}

float TransformedStore::column_max(uint64_t feature) const {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  read_column(feature, rows, values);
  float hi = values.size() < info().n_rows ? 0.0f : -std::numeric_limits<float>::infinity();
  for (float v : values) hi = std::max(hi, v);
  return info().n_rows == 0 ? 0.0f : hi;
}

// One streamed pass: every value transformed by the preceding stages adds its
// term to its feature's (or row's) statistic, then statistics become factors.
// Sequential, in column order, so the sums (and the model) do not depend on
// the thread count.
void TransformedStore::compute_statistics(size_t stage, MemoryBudget& budget, uint64_t block_bytes) {
  Stage& s = stages_[stage];
  const bool per_row = is_row_norm(s.kind), use_max = statistic_is_max(s.kind);
  std::fill(s.factors.begin(), s.factors.end(), 0.0);
  std::vector<BlockRef> blocks = inner_->plan_blocks(block_bytes);
  uint64_t buffer_bytes = 0;
  for (const auto& b : blocks) buffer_bytes = std::max(buffer_bytes, b.read_bytes);
  Reservation buffer_memory = budget.reserve(buffer_bytes, "feature transform statistics pass (one block)",
                                             "lower engine.block_bytes or raise engine.memory_budget");
  BlockBuffer buffer;
  for (const BlockRef& ref : blocks) {
    const ColumnBlock block = inner_->read_block(ref, buffer);
    CscScratch scratch;
    const CscColumns c = csc_columns(block, scratch);
    for (uint64_t k = 0; k < c.column_count; ++k) {
      const uint64_t feature = c.column_ids[k];
      for (uint64_t e = c.col_ptr[k]; e < c.col_ptr[k + 1]; ++e) {
        const uint32_t row = c.row_ids[e];
        const double term = statistic_term(s.kind, transformed(stage, row, feature, c.values[e]));
        double& acc = s.factors[per_row ? row : feature];
        acc = use_max ? std::max(acc, term) : acc + term;
      }
    }
  }
  const uint64_t n = info().n_rows;
  for (double& f : s.factors) f = transform_factor(s.kind, f, n);
}

std::string TransformedStore::prefix(size_t stage) const {
  std::string out;
  for (size_t k = 0; k <= stage; ++k) out += (k ? "," : "") + std::string(transform_name(stages_[k].kind));
  return out;
}

std::string TransformedStore::cache_file(size_t stage) const {
  std::string key = prefix(stage);
  append_scalar(key, info().store_checksum);
  return (std::filesystem::path(dir()) / ("transform-" + hex64(xxh64(key.data(), key.size())) + ".stats"))
      .string();
}

bool TransformedStore::load_cache(size_t stage) {
  Stage& s = stages_[stage];
  const std::string path = cache_file(stage), want_prefix = prefix(stage);
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const uint64_t data_bytes = s.factors.size() * sizeof(double);
  const uint64_t expect = 8 + 8 + 8 + 8 + want_prefix.size() + data_bytes + 8;
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  auto reject = [&](const char* why) {
    spdlog::warn("transform statistics cache {} is {}; computing them again", path, why);
    return false;
  };
  if (ec || size != expect) return reject("of the wrong size");
  std::string head(8 + 8 + 8 + 8 + want_prefix.size(), '\0');
  if (!in.read(head.data(), static_cast<std::streamsize>(head.size()))) return reject("unreadable");
  if (!in.read(reinterpret_cast<char*>(s.factors.data()), static_cast<std::streamsize>(data_bytes)))
    return reject("unreadable");
  uint64_t stored_sum = 0;
  if (!in.read(reinterpret_cast<char*>(&stored_sum), 8)) return reject("unreadable");
  uint64_t sum = xxh64(head.data(), head.size());
  sum = xxh64(s.factors.data(), data_bytes, sum);
  uint64_t checksum = 0, count = 0, prefix_len = 0;
  std::memcpy(&checksum, head.data() + 8, 8);
  std::memcpy(&count, head.data() + 16, 8);
  std::memcpy(&prefix_len, head.data() + 24, 8);
  if (std::memcmp(head.data(), kStatsMagic, 8) != 0 || sum != stored_sum) return reject("corrupt");
  if (checksum != info().store_checksum || count != s.factors.size() || prefix_len != want_prefix.size() ||
      head.compare(32, std::string::npos, want_prefix) != 0)
    return reject("of another store or transform list");
  return true;
}

void TransformedStore::save_cache(size_t stage, MemoryBudget& budget) const {
  const Stage& s = stages_[stage];
  const std::string path = cache_file(stage), p = prefix(stage);
  const uint64_t data_bytes = s.factors.size() * sizeof(double);
  try {
    Reservation copy = budget.reserve(data_bytes + p.size() + 40, "transform statistics cache file", kStatsRemedy);
    std::string out;
    out.reserve(data_bytes + p.size() + 40);
    out.append(kStatsMagic, 8);
    append_scalar<uint64_t>(out, info().store_checksum);
    append_scalar<uint64_t>(out, s.factors.size());
    append_scalar<uint64_t>(out, p.size());
    out += p;
    // Chained like load_cache reads it: XXH64 of the header, seeding the factors'.
    const uint64_t sum = xxh64(s.factors.data(), data_bytes, xxh64(out.data(), out.size()));
    out.append(reinterpret_cast<const char*>(s.factors.data()), data_bytes);
    append_scalar<uint64_t>(out, sum);
    write_file_atomic(path, out);
  } catch (const Error& e) {
    // Only the cache is lost (a read-only store, a full disk, a small budget).
    spdlog::warn("transform statistics not cached in {}: {}", dir(), e.what());
  }
}

std::vector<ModelTransform> TransformedStore::record_for(const Model& model) const {
  std::vector<uint64_t> needed;
  for (const auto& f : model.features) {
    needed.push_back(f.key.ids[0]);
    if (f.key.kind == FeatureKind::kCross) needed.push_back(f.key.ids[1]);
  }
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  std::vector<ModelTransform> out;
  for (size_t k = 0; k < stages_.size(); ++k) {
    const Stage& s = stages_[k];
    ModelTransform t;
    t.name = transform_name(s.kind);
    if (is_per_feature(s.kind)) {
      t.absent_factor = transform_factor(s.kind, 0.0, info().n_rows);
      bool row_follows = false;
      for (size_t later = k + 1; later < stages_.size(); ++later) row_follows |= is_row_norm(stages_[later].kind);
      auto record = [&](uint64_t j) {
        if (j < s.factors.size() && s.factors[j] != t.absent_factor) {
          t.ids.push_back(j);
          t.factors.push_back(s.factors[j]);
        }
      };
      if (row_follows) {
        for (uint64_t j = 0; j < s.factors.size(); ++j) record(j);
      } else {
        for (uint64_t j : needed) record(j);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::unique_ptr<ShardStore> apply_feature_transforms(std::unique_ptr<ShardStore> store,
                                                     const std::vector<std::string>& names,
                                                     MemoryBudget& budget, uint64_t block_bytes) {
  if (names.empty()) return store;
  auto out = std::make_unique<TransformedStore>(std::move(store), parse_transforms(names), budget, block_bytes);
  const auto& r = out->stats_report();
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  spdlog::info("feature transforms [{}]: statistics of {} stages computed, {} from the cache", list,
               r.stages_computed, r.stages_from_cache);
  return out;
}

void record_feature_transforms(const ShardStore& store, Model& model) {
  if (const auto* t = dynamic_cast<const TransformedStore*>(&store)) model.transforms = t->record_for(model);
}

}  // namespace fgm
