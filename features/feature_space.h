// Feature spaces: what the worst-case analysis (FGM Algorithm 2, and its
// incremental form Algorithm 5) searches. A space enumerates its candidates
// (features or groups of generated features) block by block through a typed
// BlockStream (features/block_stream.h), scores them against a = α∘y, keeps the top-B
// unselected ones, and generates a selected candidate's columns for the
// APG. Spaces: linear (base features), group (disjoint/overlapping/tree
// groups of base features), poly2 (degree-2 polynomial map, Section 6.2),
// hik and additive (kernel expansions, Section 6.1).
//
// One class per space serves both data backends: made over the single store
// it scores that store's one part with its fast paths; made over this rank's
// partitions of a partitioned store (SpacePartitions) its score() sums each
// partition's partials in the fixed partition tree (core/partition_sum.h)
// and is a collective. Both generate columns with the same columns() code,
// so a model's features are the same bits.
//
// Candidate ids are exact encodings (never hashes); ties in score are broken
// by the smaller id so results do not depend on threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/selected_features.h"
#include "cache/top_b_cache.h"
#include <functional>

#include "core/communicator.h"
#include "core/memory_budget.h"
#include "core/partition_sum.h"
#include "features/block_stream.h"
#include "io/model_file.h"
#include "io/partitioned_store.h"
#include "io/shard_store.h"

namespace fgm {

// One of this rank's partitions as a scoring pass sees it.
struct PartitionScoringInput {
  const BlockStream* stream = nullptr;
  const std::vector<BlockRef>* blocks = nullptr;
  const double* a = nullptr;  // α∘y over the partition's rows
};

// The rows a pass scores: for a space made over the single store its one part
// (store, blocks, stream, a), over partitions this rank's partitions (parts).
struct ScoringContext {
  const ShardStore* store = nullptr;
  const std::vector<BlockRef>* blocks = nullptr;
  const BlockStream* stream = nullptr;
  const double* a = nullptr;  // α_i y_i, n entries
  std::vector<PartitionScoringInput> parts;
  uint64_t B = 10;
  int threads = 1;
  MemoryBudget* budget = nullptr;
};

struct SpaceScores {
  std::vector<ScoredCandidate> top;   // best first, scores > 0, unselected only
  Reservation top_memory;              // covers `top` (B may far exceed the candidates)
  uint64_t candidates_scored = 0;     // generated features (or groups) whose score was computed
  uint64_t pair_updates = 0;          // Σ_i a_i x_ij x_ik accumulations (poly2; this rank's)
  PassStats pass;                     // all streaming of this analysis (this rank's)
  // c_j of each selected column, in selection order, when a partitioned pass
  // computed them on the way (linear, group); else the caller sums its columns.
  std::optional<std::vector<double>> selected_dots;
};

// One generated column of a candidate on one store (the single store or a partition).
struct GeneratedColumn {
  FeatureKey key;
  std::vector<uint32_t> rows;
  std::vector<float> values;
};

struct FeatureGroups;

// This rank's partitions of a partitioned store as a space scores over them
// (engine/own_partitions.h implements it): their stores, and the collectives
// that add the partitions' partials in the fixed partition tree, so every
// decision taken from the sums is the same on every rank for every rank count.
class SpacePartitions {
 public:
  virtual ~SpacePartitions() = default;
  virtual Communicator& comm() = 0;
  virtual const std::string& dir() const = 0;
  virtual const PartitionManifest& manifest() const = 0;
  virtual size_t size() const = 0;
  virtual const ShardStore& store(size_t q) const = 0;
  // Σ over every partition's sparse sums, on every rank.
  virtual SparseSums sum(const std::vector<SparseSums>& local) = 0;
  // Its reduce-scatter: rank d gets the keys of `wanted[d]`, own partition
  // q's sums made by `partial(q)` when the tree needs them.
  virtual SparseSums reduce_scatter(const std::function<SparseSums(size_t)>& partial,
                                    const std::vector<ColumnSpans>& wanted, Reservation* memory) = 0;
  // The linear or group pass by column ranges (OwnPartitions::score_by_ranges).
  struct RangeScores {
    std::vector<ScoredCandidate> top;   // sorted, the same on every rank
    std::vector<double> selected_dots;  // c_j of each `selected` column, in order
    Reservation top_memory;
  };
  struct RangeRequest {
    std::vector<const double*> a;  // per own partition
    std::function<bool(uint64_t)> is_selected;
    const std::vector<uint64_t>* selected = nullptr;
    const std::vector<uint64_t>* selected_group = nullptr;
    size_t B = 0;
  };
  virtual std::vector<RangeScores> score_by_ranges(const FeatureGroups* groups,
                                                   const std::vector<RangeRequest>& requests,
                                                   uint64_t& bytes_streamed) = 0;
};

// The rows a space is made over: the single store or this rank's partitions.
struct SpaceRows {
  SpaceRows(const ShardStore& single) : store(&single) {}  // NOLINT: a store is the one-part case
  SpaceRows(SpacePartitions& own) : partitions(&own) {}    // NOLINT
  const ShardStore* store = nullptr;
  SpacePartitions* partitions = nullptr;
  uint64_t n_features() const { return store ? store->info().n_features : partitions->manifest().n_features; }
  uint64_t n_rows() const { return store ? store->info().n_rows : partitions->manifest().n_rows; }
  int index_base() const {
    return static_cast<int>(store ? store->info().index_base : partitions->manifest().index_base);
  }
};

// The column of base feature `feature` (linear), the columns of group
// `group`'s members (group), as stored; both backends' linear spaces read these.
std::vector<GeneratedColumn> linear_columns(const ShardStore& store, uint64_t feature);
std::vector<GeneratedColumn> group_columns(const ShardStore& store, const FeatureGroups& groups, uint64_t group);

struct ScoreRequest;

class FeatureSpace {
 public:
  virtual ~FeatureSpace() = default;
  virtual std::string kind() const = 0;
  // Number of candidates (generated features or groups); may exceed 10^14.
  virtual double dimension() const = 0;

  // The top-B unselected candidates of a pass over context's rows (over
  // partitions: a collective, the same top-B on every rank).
  virtual SpaceScores score(const ScoringContext& context) = 0;
  // Excludes a candidate from later passes (over partitions: every rank, the same candidates).
  virtual void mark_selected(uint64_t candidate) = 0;
  // The candidate's columns on `store` (the single store, or one partition:
  // the same keys in the same order on every partition; a column may be empty).
  virtual std::vector<GeneratedColumn> columns(const ShardStore& store, uint64_t candidate) = 0;
  // Whether a column empty on all rows is kept (base columns, as read) or
  // dropped (a generated column no row reaches carries no weight).
  virtual bool keeps_empty_columns() const { return false; }
  // Appends the candidate's columns (those kept) to the current batch of `cache`.
  void materialize(const ShardStore& store, uint64_t candidate, SelectedFeatureCache& cache);
  // The candidate whose materialisation produced a column with this key.
  virtual uint64_t candidate_of(const FeatureKey& key) const = 0;
  // Writes the space's definition (kind, parameters, scaling) into the model.
  virtual void describe(Model& model) const = 0;
  // score_many for requests on spaces of this one's kind (those scores_many admits).
  virtual std::vector<SpaceScores> score_many(const ScoringContext& context, const std::vector<ScoreRequest>& requests);
};

struct FeatureSpaceSettings {
  std::string kind = "linear";          // linear | poly2 | hik | additive
  std::string groups_path;              // group file (kind linear)
  std::string group_structure = "disjoint";  // disjoint | overlapping | tree
  bool tree_pruning = true;             // tree groups: Remark 2 pruning (false: score every group)
  double gamma = 1.0, coef0 = 1.0;      // poly2: (γ x'z + r)²
  uint32_t levels = 100;                // hik
  uint32_t order = 5;                   // additive: 2·order+1 components
  double period = 0;                    // additive: sampling period L (0: additive_default_period)
  std::string kernel = "chi2";          // additive: chi2 | intersection
  uint64_t pair_block_features = 0;     // poly2: features per block of the pair stage (0: from budget)
};

class Config;

// A feature space as registered once (feature_space_kinds(), in
// features/feature_space.cpp): features.kind, its own features.* keys (set
// with another kind, each is refused naming it), the degree of its values in
// the base values (the value-span warning), whether score_many serves it, and
// its maker over either backend.
struct FeatureSpaceKind {
  std::string kind;
  std::vector<std::string> keys;
  int value_degree = 1;
  bool scores_many = false;
  std::unique_ptr<FeatureSpace> (*make)(const FeatureSpaceSettings&, const SpaceRows&, MemoryBudget&) = nullptr;
};
const std::vector<FeatureSpaceKind>& feature_space_kinds();
// The entry of features.kind = `kind` (a config error naming the key if none).
const FeatureSpaceKind& feature_space_kind(const std::string& kind);
// FeatureSpaceSettings from the features.* keys.
FeatureSpaceSettings feature_space_settings(const Config& config);

std::unique_ptr<FeatureSpace> make_feature_space(const FeatureSpaceSettings& settings,
                                                 const ShardStore& store, MemoryBudget& budget);
// The space over this rank's partitions (collective: hik/additive exchange
// the column ranges). Its score() reads context.parts and context.B and is a
// collective: the same top-B on every rank.
std::unique_ptr<FeatureSpace> make_feature_space(const FeatureSpaceSettings& settings,
                                                 SpacePartitions& partitions, MemoryBudget& budget);

// One dual vector of a shared scoring pass (one-vs-rest lockstep): scored
// against `space`'s own exclusions into its own top-`B`.
struct ScoreRequest {
  FeatureSpace* space = nullptr;
  const double* a = nullptr;  // α_i y_i of this problem, n entries
  std::vector<PartitionScoringInput> parts;  // over partitions: this problem's a per own partition
  uint64_t B = 10;
};

// Whether score_many can serve spaces made from these settings (linear and
// group; the poly2 and expansion spaces score one vector per pass).
inline bool scores_many(const FeatureSpaceSettings& settings) { return feature_space_kind(settings.kind).scores_many; }

// Scores every request in ONE stream over the store (or this rank's
// partitions): result r equals requests[r].space->score() with a =
// requests[r].a (parts) and B = requests[r].B, bit for bit, except that every
// result's `pass` is the one shared pass. The spaces are all linear or all
// group (of one group file) made over the same rows; context.a and context.B
// are unused. The K interleaved dual vectors (K·n doubles) and the
// per-request heaps are reserved from context.budget.
std::vector<SpaceScores> score_many(const ScoringContext& context, const std::vector<ScoreRequest>& requests);

// The selected candidates of a space: sized by
// the selection, never by the id space (hashed ids reach 2^63). Written
// between passes only; test() is read by the parallel scoring stage.
class CandidateSet {
 public:
  explicit CandidateSet(MemoryBudget* budget = nullptr) : budget_(budget) {}
  bool test(uint64_t id) const { return std::binary_search(ids_.begin(), ids_.end(), id); }
  // False if `id` was already in the set.
  bool insert(uint64_t id) {
    auto at = std::lower_bound(ids_.begin(), ids_.end(), id);
    if (at != ids_.end() && *at == id) return false;
    if (budget_ && ids_.size() == ids_.capacity()) {
      const size_t grown = std::max<size_t>(16, 2 * ids_.capacity());
      Reservation next = budget_->reserve(grown * sizeof(uint64_t), "selected-candidate set");
      const size_t offset = static_cast<size_t>(at - ids_.begin());
      ids_.reserve(grown);
      at = ids_.begin() + static_cast<std::ptrdiff_t>(offset);
      memory_ = std::move(next);
    }
    ids_.insert(at, id);
    return true;
  }
  size_t size() const { return ids_.size(); }

 private:
  MemoryBudget* budget_;
  Reservation memory_;
  std::vector<uint64_t> ids_;  // increasing
};

// One worst-case analysis (FGM Algorithm 2) of `space` against a = α∘y over
// `blocks`: the top-B unselected candidates.
inline SpaceScores run_worst_case_analysis(FeatureSpace& space, const BlockStream& stream,
                                           const std::vector<BlockRef>& blocks, const double* a, uint64_t B,
                                           MemoryBudget& budget) {
  ScoringContext ctx;
  ctx.store = &stream.store();
  ctx.blocks = &blocks;
  ctx.stream = &stream;
  ctx.a = a;
  ctx.B = B;
  ctx.threads = stream.threads();
  ctx.budget = &budget;
  return space.score(ctx);
}

}  // namespace fgm
