#include "features/transformed_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"

namespace fgm {
namespace {

// Version 2: per-feature factors are stored with their column ids.
constexpr char kStatsMagic[8] = {'F', 'G', 'M', 'T', 'R', 'S', 'T', '2'};
constexpr const char* kStatsRemedy = "raise engine.memory_budget or drop a transform stage";

template <typename T>
void append_scalar(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

TransformedStore::TransformedStore(std::unique_ptr<ShardStore> inner, std::vector<TransformKind> stages,
                                   MemoryBudget& budget, uint64_t block_bytes)
    : TransformedStore(std::move(inner), std::move(stages), budget, 0, true) {
  // A cache writer killed before its rename left ".transform-<key>.stats.tmp-<pid>-<hex>";
  // those of dead writers go (a live writer's are kept; a read-only store keeps them).
  for (const std::string& path : remove_stale_temporaries(dir())) spdlog::info("{}", msg::stale_temporary_removed(path));
  for (size_t k = 0; k < stages_.size(); ++k) {
    if (!needs_statistics(stages_[k].kind)) continue;
    if (load_cache(k)) {
      ++report_.stages_from_cache;
      continue;
    }
    accumulate_statistics(k, budget, block_bytes);
    finish_statistics(k);
    ++report_.stages_computed;
    save_cache(k, budget);
  }
}

TransformedStore::TransformedStore(std::unique_ptr<ShardStore> inner, std::vector<TransformKind> stages,
                                   MemoryBudget& budget, uint64_t statistics_rows, bool)
    : inner_(std::move(inner)) {
  const StoreInfo& info = inner_->info();
  statistics_rows_ = statistics_rows ? statistics_rows : info.n_rows;
  for (TransformKind k : stages) {
    Stage s;
    s.kind = k;
    if (is_row_norm(k)) {
      s.memory = budget.reserve(info.n_rows * sizeof(double),
                                std::string("statistics of feature transform ") + transform_name(k),
                                kStatsRemedy);
      s.factors.assign(info.n_rows, 0.0);
    } else if (is_per_feature(k)) {
      s.memory = budget.reserve(0, std::string("statistics of feature transform ") + transform_name(k),
                                kStatsRemedy);
      s.absent_factor = transform_factor(k, 0.0, statistics_rows_);
    }
    stages_.push_back(std::move(s));
  }
}

std::vector<std::unique_ptr<ShardStore>> TransformedStore::over_partitions(
    std::vector<std::unique_ptr<ShardStore>> partitions, const std::vector<TransformKind>& stages,
    const PartitionedTransformStatistics& statistics, MemoryBudget& budget, uint64_t block_bytes) {
  std::vector<std::unique_ptr<TransformedStore>> parts;
  for (auto& p : partitions)
    parts.push_back(std::unique_ptr<TransformedStore>(
        new TransformedStore(std::move(p), stages, budget, statistics.n_rows, true)));
  for (size_t k = 0; k < stages.size(); ++k) {
    if (!needs_statistics(stages[k])) continue;
    std::vector<SparseSums> local;
    for (auto& part : parts) {
      part->accumulate_statistics(k, budget, block_bytes);
      ++part->report_.stages_computed;
      if (is_per_feature(stages[k])) local.push_back({part->stages_[k].ids, part->stages_[k].factors});
    }
    if (is_per_feature(stages[k])) {
      SparseSums all = statistics.combine(local, statistic_is_max(stages[k]));
      for (auto& part : parts) {
        Stage& s = part->stages_[k];
        s.memory.resize(all.keys.size() * 2 * sizeof(double));
        s.ids = all.keys;
        s.factors = all.values;
      }
    }
    for (auto& part : parts) part->finish_statistics(k);
  }
  std::vector<std::unique_ptr<ShardStore>> out;
  for (auto& part : parts) out.push_back(std::move(part));
  return out;
}

double TransformedStore::transformed(size_t upto, uint32_t row, const double* feature_factor, double x) const {
  for (size_t k = 0; k < upto; ++k) {
    const Stage& s = stages_[k];
    if (is_row_norm(s.kind)) x *= s.factors[row];
    else if (is_per_feature(s.kind)) x *= feature_factor[k];
    else x = apply_elementwise(s.kind, x);
  }
  return x;
}

void TransformedStore::factors_of(uint64_t feature, double* out) const {
  for (size_t k = 0; k < stages_.size(); ++k)
    out[k] = is_per_feature(stages_[k].kind) ? stages_[k].factor_of(feature) : 1.0;
}

float TransformedStore::stored_value(uint64_t feature, uint32_t row, const double* feature_factor, float raw) const {
  const double x = transformed(stages_.size(), row, feature_factor, raw);
  const float stored = static_cast<float>(x);
  if (!std::isfinite(stored)) [[unlikely]] {
    std::string list;
    for (const Stage& s : stages_) list += (list.empty() ? "" : ",") + std::string(transform_name(s.kind));
    throw Error(ErrorKind::kInvalidInput,
                msg::transform_overflow(dir(), feature + static_cast<uint64_t>(info().index_base),
                                        uint64_t{row} + 1, raw, x, list));
  }
  return stored;
}

void TransformedStore::transform_values(uint64_t feature, const uint32_t* rows, float* values,
                                        size_t count) const {
  std::vector<double> factor(stages_.size());
  factors_of(feature, factor.data());
  for (size_t e = 0; e < count; ++e)
    values[e] = stored_value(feature, rows[e], factor.data(), values[e]);
}

std::vector<BlockRef> TransformedStore::plan_blocks(uint64_t target_bytes) const {
  std::vector<BlockRef> refs = inner_->plan_blocks(target_bytes);
  for (BlockRef& r : refs) {
    if (!r.unit_values) continue;
    r.unit_values = false;
    r.bytes += 4 * r.nnz;
    r.read_bytes += unit_values_bytes(r);
  }
  return refs;
}

uint64_t TransformedStore::unit_values_bytes(const BlockRef& block) {
  return (4 * block.nnz + 63) / 64 * 64;
}

// The values are transformed cell by cell (tile by tile) in the caller's
// buffer; each column's min/max then covers its cells and, when it has fewer
// than n entries, the implicit zeros.
ColumnBlock TransformedStore::read_block(const BlockRef& block, BlockBuffer& buffer) const {
  ColumnBlock c = inner_->read_block(block, buffer);
  if (c.unit_values) {  // its ones are shared: the transformed values go beside the block
    float* own = buffer.values_room(c.nnz());
    std::fill_n(own, c.nnz(), 1.0f);
    c.values = own;
    c.unit_values = false;
  }
  auto* values = const_cast<float*>(c.values);
  auto* col_min = const_cast<float*>(c.col_min);
  auto* col_max = const_cast<float*>(c.col_max);
  const uint64_t n = info().n_rows, k_count = c.column_count, S = stages_.size();
  std::vector<double> factor(k_count * S);
  for (uint64_t k = 0; k < k_count; ++k) factors_of(c.column_ids[k], &factor[k * S]);
  std::vector<uint64_t> entries(k_count, 0);
  for (uint64_t k = 0; k < k_count; ++k) {
    col_min[k] = std::numeric_limits<float>::infinity();
    col_max[k] = -std::numeric_limits<float>::infinity();
  }
  for (uint32_t cell = 0; cell < c.cell_count(); ++cell) {
    const uint32_t k = c.cell_column[cell];
    for (uint32_t e = c.cell_ptr[cell]; e < c.cell_ptr[cell + 1]; ++e) {
      values[e] = stored_value(c.column_ids[k], c.row_ids[e], &factor[k * S], values[e]);
      col_min[k] = std::min(col_min[k], values[e]);
      col_max[k] = std::max(col_max[k], values[e]);
    }
    entries[k] += c.cell_ptr[cell + 1] - c.cell_ptr[cell];
  }
  for (uint64_t k = 0; k < k_count; ++k) {
    if (entries[k] < n) {
      col_min[k] = std::min(col_min[k], 0.0f);
      col_max[k] = std::max(col_max[k], 0.0f);
    }
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
void TransformedStore::accumulate_statistics(size_t stage, MemoryBudget& budget, uint64_t block_bytes) {
  Stage& s = stages_[stage];
  const bool per_row = is_row_norm(s.kind), use_max = statistic_is_max(s.kind);
  const size_t S = stages_.size();
  std::fill(s.factors.begin(), s.factors.end(), 0.0);
  if (!per_row) {
    s.ids.clear();
    s.factors.clear();
  }
  std::vector<BlockRef> blocks = inner_->plan_blocks(block_bytes);
  uint64_t buffer_bytes = 0;
  for (const auto& b : blocks) buffer_bytes = std::max(buffer_bytes, b.read_bytes);
  Reservation buffer_memory = budget.reserve(buffer_bytes, "feature transform statistics pass (one block)",
                                             "lower engine.block_bytes or raise engine.memory_budget");
  BlockBuffer buffer;
  std::vector<double> factor, column_stat;
  for (const BlockRef& ref : blocks) {
    ColumnBlock c = inner_->read_block(ref, buffer);
    factor.assign(c.column_count * S, 1.0);
    for (uint64_t k = 0; k < c.column_count; ++k) factors_of(c.column_ids[k], &factor[k * S]);
    column_stat.assign(per_row ? 0 : c.column_count, 0.0);
    // Cells in storage order: each column's terms, and each row's, arrive in
    // the order of a column-by-column walk (rows increasing, columns increasing).
    for (uint32_t cell = 0; cell < c.cell_count(); ++cell) {
      const uint32_t k = c.cell_column[cell];
      for (uint32_t e = c.cell_ptr[cell]; e < c.cell_ptr[cell + 1]; ++e) {
        const uint32_t row = c.row_ids[e];
        const double term = statistic_term(s.kind, transformed(stage, row, &factor[k * S], c.values[e]));
        double& acc = per_row ? s.factors[row] : column_stat[k];
        acc = use_max ? std::max(acc, term) : acc + term;
      }
    }
    if (per_row) continue;
    s.memory.resize((s.ids.size() + c.column_count) * 2 * sizeof(double));
    for (uint64_t k = 0; k < c.column_count; ++k) {
      s.ids.push_back(c.column_ids[k]);
      s.factors.push_back(column_stat[k]);
    }
  }
}

void TransformedStore::finish_statistics(size_t stage) {
  Stage& s = stages_[stage];
  for (double& f : s.factors) f = transform_factor(s.kind, f, statistics_rows_);
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

// Cache file: magic, store checksum, factor count, prefix length, prefix,
// the ids (per-feature stages: count uint64), the factors (count doubles),
// XXH64 of everything before it.
bool TransformedStore::load_cache(size_t stage) {
  Stage& s = stages_[stage];
  const bool per_row = is_row_norm(s.kind);
  const std::string path = cache_file(stage), want_prefix = prefix(stage);
  auto reject = [&](const char* why) {
    spdlog::warn("transform statistics cache {} is {}; computing them again", path, why);
    return false;
  };
  // Only a regular file is read: opening a FIFO planted at the name would
  // wait for a writer forever (save_cache's rename replaces it).
  std::error_code status_error;
  const std::filesystem::file_status status = std::filesystem::symlink_status(path, status_error);
  if (status_error || !std::filesystem::exists(status)) return false;
  if (!std::filesystem::is_regular_file(status)) return reject("not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string head(8 + 8 + 8 + 8 + want_prefix.size(), '\0');
  if (!in.read(head.data(), static_cast<std::streamsize>(head.size()))) return reject("unreadable");
  uint64_t checksum = 0, count = 0, prefix_len = 0;
  std::memcpy(&checksum, head.data() + 8, 8);
  std::memcpy(&count, head.data() + 16, 8);
  std::memcpy(&prefix_len, head.data() + 24, 8);
  if (std::memcmp(head.data(), kStatsMagic, 8) != 0) return reject("corrupt");
  if (checksum != info().store_checksum || prefix_len != want_prefix.size() ||
      head.compare(32, std::string::npos, want_prefix) != 0 || (per_row && count != info().n_rows))
    return reject("of another store or transform list");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  const uint64_t id_bytes = per_row ? 0 : count * sizeof(uint64_t);
  if (ec || count > size || size != head.size() + id_bytes + count * sizeof(double) + 8)
    return reject("of the wrong size");
  if (!per_row) {
    s.memory.resize(count * 2 * sizeof(double));
    s.ids.resize(count);
    s.factors.resize(count);
  }
  if (!in.read(reinterpret_cast<char*>(s.ids.data()), static_cast<std::streamsize>(id_bytes)) ||
      !in.read(reinterpret_cast<char*>(s.factors.data()), static_cast<std::streamsize>(count * sizeof(double))))
    return reject("unreadable");
  uint64_t stored_sum = 0;
  if (!in.read(reinterpret_cast<char*>(&stored_sum), 8)) return reject("unreadable");
  uint64_t sum = xxh64(head.data(), head.size());
  sum = xxh64(s.ids.data(), id_bytes, sum);
  sum = xxh64(s.factors.data(), count * sizeof(double), sum);
  bool increasing = true;
  for (size_t i = 1; i < s.ids.size(); ++i) increasing &= s.ids[i - 1] < s.ids[i];
  if (sum != stored_sum || !increasing) {
    s.ids.clear();
    if (!per_row) s.factors.clear();
    return reject("corrupt");
  }
  return true;
}

void TransformedStore::save_cache(size_t stage, MemoryBudget& budget) const {
  const Stage& s = stages_[stage];
  const std::string path = cache_file(stage), p = prefix(stage);
  const uint64_t id_bytes = s.ids.size() * sizeof(uint64_t), data_bytes = s.factors.size() * sizeof(double);
  try {
    Reservation copy = budget.reserve(id_bytes + data_bytes + p.size() + 40, "transform statistics cache file",
                                      kStatsRemedy);
    std::string out;
    out.reserve(id_bytes + data_bytes + p.size() + 40);
    out.append(kStatsMagic, 8);
    append_scalar<uint64_t>(out, info().store_checksum);
    append_scalar<uint64_t>(out, s.factors.size());
    append_scalar<uint64_t>(out, p.size());
    out += p;
    // Chained like load_cache reads it: XXH64 of the header, seeding the ids', then the factors'.
    const uint64_t sum = xxh64(s.factors.data(), data_bytes, xxh64(s.ids.data(), id_bytes, xxh64(out.data(), out.size())));
    out.append(reinterpret_cast<const char*>(s.ids.data()), id_bytes);
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
      t.absent_factor = transform_factor(s.kind, 0.0, statistics_rows_);
      bool row_follows = false;
      for (size_t later = k + 1; later < stages_.size(); ++later) row_follows |= is_row_norm(stages_[later].kind);
      auto record = [&](uint64_t j, double factor) {
        if (factor != t.absent_factor) {
          t.ids.push_back(j);
          t.factors.push_back(factor);
        }
      };
      if (row_follows) {
        for (size_t q = 0; q < s.ids.size(); ++q) record(s.ids[q], s.factors[q]);
      } else {
        for (uint64_t j : needed) record(j, s.factor_of(j));
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

std::vector<std::unique_ptr<ShardStore>> apply_partitioned_feature_transforms(
    std::vector<std::unique_ptr<ShardStore>> partitions, const std::vector<std::string>& names,
    const PartitionedTransformStatistics& statistics, MemoryBudget& budget, uint64_t block_bytes) {
  if (names.empty()) return partitions;
  return TransformedStore::over_partitions(std::move(partitions), parse_transforms(names), statistics, budget,
                                           block_bytes);
}

void record_feature_transforms(const ShardStore& store, Model& model) {
  if (const auto* t = dynamic_cast<const TransformedStore*>(&store)) model.transforms = t->record_for(model);
}

}  // namespace fgm
