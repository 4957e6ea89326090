// core/partition_sum: the fixed partition tree, checked against a recursive
// tree sum written here, on 1..8 ranks simulated by threads (a test
// communicator whose allgather meets at a barrier).
#include <catch2/catch.hpp>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/partition_sum.h"

namespace fgm {
namespace {

// K "ranks" as threads: allgather puts each rank's bytes in its slot, waits
// for all, concatenates in rank order, waits again before slots are reused.
struct ThreadWorld {
  explicit ThreadWorld(int ranks) : slots(static_cast<size_t>(ranks)), posted(static_cast<size_t>(ranks)), sync(ranks) {}
  std::vector<std::vector<uint8_t>> slots;
  std::vector<std::vector<std::vector<uint8_t>>> posted;  // alltoallv: each rank's parts
  std::barrier<> sync;
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_.slots.size()); }
  std::vector<uint8_t> allgather(const void* data, size_t bytes, std::vector<size_t>* sizes) override {
    const auto* p = static_cast<const uint8_t*>(data);
    world_.slots[static_cast<size_t>(rank_)].assign(p, p + bytes);
    world_.sync.arrive_and_wait();
    std::vector<uint8_t> out;
    if (sizes) sizes->clear();
    for (const auto& s : world_.slots) {
      out.insert(out.end(), s.begin(), s.end());
      if (sizes) sizes->push_back(s.size());
    }
    stats_.calls += 1;
    world_.sync.arrive_and_wait();
    return out;
  }
  // Each rank posts its K parts; rank r takes part r of every rank, in rank order.
  std::vector<uint8_t> alltoallv(const std::vector<std::vector<uint8_t>>& parts, std::vector<size_t>* sizes) override {
    world_.posted[static_cast<size_t>(rank_)] = parts;
    world_.sync.arrive_and_wait();
    std::vector<uint8_t> out;
    if (sizes) sizes->clear();
    for (const auto& from : world_.posted) {
      const auto& part = from[static_cast<size_t>(rank_)];
      out.insert(out.end(), part.begin(), part.end());
      if (sizes) sizes->push_back(part.size());
    }
    stats_.calls += 1;
    world_.sync.arrive_and_wait();
    return out;
  }
  void broadcast(void*, size_t, int) override {}
  [[noreturn]] void abort(const std::string& reason, int) override { throw std::runtime_error(reason); }

 private:
  ThreadWorld& world_;
  int rank_;
};

// The tree of the header comment, written again: [l, r) splits at l + the
// largest power of two below r − l.
double reference_tree(const std::vector<double>& leaves, size_t l, size_t r) {
  if (r - l == 1) return leaves[l];
  size_t half = 1;
  while (2 * half < r - l) half *= 2;
  return reference_tree(leaves, l, l + half) + reference_tree(leaves, l + half, r);
}

// Values whose sums round differently in different orders.
std::vector<std::vector<double>> random_partials(uint32_t partitions, size_t length, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<std::vector<double>> v(partitions, std::vector<double>(length));
  for (auto& part : v)
    for (auto& x : part) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

std::vector<double> run_on_ranks(const std::vector<std::vector<double>>& partials, int ranks) {
  const auto P = static_cast<uint32_t>(partials.size());
  const size_t length = partials.front().size();
  ThreadWorld world(ranks);
  std::vector<std::vector<double>> results(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(world, r);
      const PartitionRange range = partitions_of_rank(P, ranks, r);
      std::vector<std::vector<double>> mine(partials.begin() + range.first,
                                            partials.begin() + range.first + range.count);
      results[static_cast<size_t>(r)] = allreduce_partition_sums(comm, P, range.first, mine, length);
    });
  for (auto& t : threads) t.join();
  for (int r = 1; r < ranks; ++r) REQUIRE(std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(), length * sizeof(double)) == 0);
  return results[0];
}

}  // namespace

TEST_CASE("covering nodes tile a rank's partitions with nodes of the fixed tree", "[partition_sum]") {
  for (uint32_t P : {1u, 2u, 3u, 4u, 6u, 7u, 8u, 12u, 13u}) {
    for (uint32_t first = 0; first < P; ++first)
      for (uint32_t last = first + 1; last <= P; ++last) {
        const auto nodes = covering_nodes(P, first, last);
        uint32_t at = first;
        for (const auto& n : nodes) {
          CHECK(n.begin == at);
          at = n.end;
          // A node of the tree: reached from the root by splits.
          uint32_t b = 0, e = P;
          while (!(b == n.begin && e == n.end)) {
            REQUIRE(e - b >= 2);
            const uint32_t mid = partition_tree_split(b, e);
            if (n.end <= mid) e = mid;
            else if (n.begin >= mid) b = mid;
            else FAIL("node straddles a split");
          }
        }
        CHECK(at == last);
      }
  }
  // Ranks dealt a power-of-two share of a power-of-two tree send one node each.
  CHECK(covering_nodes(8, 4, 6).size() == 1);
  CHECK(covering_nodes(8, 2, 6).size() == 2);
}

TEST_CASE("partition sums are the reference tree sum, bit for bit, on every rank count dividing P",
          "[partition_sum]") {
  for (uint32_t P : {1u, 4u, 6u, 8u, 12u}) {
    const auto partials = random_partials(P, 257, 11 + P);
    std::vector<double> expected(257);
    std::vector<double> column(P);
    for (size_t i = 0; i < expected.size(); ++i) {
      for (uint32_t p = 0; p < P; ++p) column[p] = partials[p][i];
      expected[i] = reference_tree(column, 0, P);
    }
    for (int K = 1; K <= static_cast<int>(P); ++K) {
      if (P % static_cast<uint32_t>(K) != 0) continue;
      INFO("P = " << P << ", K = " << K);
      const std::vector<double> got = run_on_ranks(partials, K);
      CHECK(std::memcmp(got.data(), expected.data(), expected.size() * sizeof(double)) == 0);
    }
  }
}

TEST_CASE("a different tree would give other bits: the test data is order-sensitive", "[partition_sum]") {
  const auto partials = random_partials(8, 257, 5);
  size_t differ = 0;
  for (size_t i = 0; i < 257; ++i) {
    double left_to_right = 0;
    std::vector<double> column;
    for (const auto& p : partials) {
      left_to_right += p[i];
      column.push_back(p[i]);
    }
    differ += left_to_right != reference_tree(column, 0, 8);
  }
  CHECK(differ > 0);
}

TEST_CASE("sparse partition sums are the dense reference tree sum with missing keys as zeros, on every rank count",
          "[partition_sum]") {
  // Partition p holds a random subset of 40 keys (some partitions none at all);
  // the expected value of a key is the reference tree over the dense column
  // with zeros where a partition lacks the key.
  for (uint32_t P : {1u, 4u, 6u, 8u}) {
    const auto dense = random_partials(P, 40, 101 + P);
    std::mt19937 rng(7 * P);
    std::vector<SparseSums> partials(P);
    std::vector<std::vector<double>> with_zeros(P, std::vector<double>(40, 0.0));
    for (uint32_t p = 0; p < P; ++p) {
      if (p == 1) continue;  // an empty partition
      for (uint64_t key = 0; key < 40; ++key)
        if (rng() % 3 == 0) {
          partials[p].keys.push_back(key * 1000003);  // sparse, increasing
          partials[p].values.push_back(dense[p][key]);
          with_zeros[p][key] = dense[p][key];
        }
    }
    for (int K = 1; K <= static_cast<int>(P); ++K) {
      if (P % static_cast<uint32_t>(K) != 0) continue;
      INFO("P = " << P << ", K = " << K);
      ThreadWorld world(K);
      std::vector<SparseSums> results(static_cast<size_t>(K));
      std::vector<std::thread> threads;
      for (int r = 0; r < K; ++r)
        threads.emplace_back([&, r] {
          ThreadCommunicator comm(world, r);
          const PartitionRange range = partitions_of_rank(P, K, r);
          std::vector<SparseSums> mine(partials.begin() + range.first, partials.begin() + range.first + range.count);
          results[static_cast<size_t>(r)] = allreduce_partition_sparse_sums(comm, P, range.first, mine);
        });
      for (auto& t : threads) t.join();
      for (const SparseSums& got : results) {
        std::vector<uint64_t> expected_keys;
        for (uint64_t key = 0; key < 40; ++key) {
          bool present = false;
          for (uint32_t p = 0; p < P; ++p) present = present || with_zeros[p][key] != 0;
          if (present) expected_keys.push_back(key * 1000003);
        }
        REQUIRE(got.keys == expected_keys);
        for (size_t e = 0; e < got.keys.size(); ++e) {
          std::vector<double> column(P);
          for (uint32_t p = 0; p < P; ++p) column[p] = with_zeros[p][got.keys[e] / 1000003];
          const double expected = reference_tree(column, 0, P);
          CHECK(std::memcmp(&got.values[e], &expected, sizeof(double)) == 0);
        }
      }
    }
  }
}

namespace {

// Partition p of P holds keys key_of(k) for some k < keys: every key
// (partitions 0 and 3: dense, so their shares go without keys), a random
// third of them, or none (partition 1).
struct SparsePartials {
  std::vector<SparseSums> sparse;
  std::vector<std::vector<double>> with_zeros;  // [p][k]
};
SparsePartials sparse_partials(uint32_t P, uint64_t keys, uint64_t (*key_of)(uint64_t), uint32_t seed) {
  const auto dense = random_partials(P, keys, seed);
  std::mt19937 rng(seed);
  SparsePartials out{std::vector<SparseSums>(P), std::vector<std::vector<double>>(P, std::vector<double>(keys, 0.0))};
  for (uint32_t p = 0; p < P; ++p) {
    if (p == 1) continue;
    for (uint64_t k = 0; k < keys; ++k)
      if (p == 0 || p == 3 || rng() % 3 == 0) {
        out.sparse[p].keys.push_back(key_of(k));
        out.sparse[p].values.push_back(dense[p][k]);
        out.with_zeros[p][k] = dense[p][k];
      }
  }
  return out;
}

uint64_t dense_key(uint64_t k) { return k; }
uint64_t hashed_key(uint64_t k) { return (uint64_t{1} << 40) + k * 1000003; }

}  // namespace

TEST_CASE("a reduce-scatter gives each rank the full tree sum's bits on its own columns only", "[partition_sum]") {
  const uint64_t keys = 60;
  for (auto key_of : {dense_key, hashed_key})
    for (uint32_t P : {1u, 4u, 6u, 8u}) {
      const SparsePartials partials = sparse_partials(P, keys, key_of, 31 + P);
      for (int K = 1; K <= static_cast<int>(P); ++K) {
        if (P % static_cast<uint32_t>(K) != 0) continue;
        for (const bool ranges : {true, false}) {
          INFO("P = " << P << ", K = " << K << (ranges ? ", column ranges" : ", overlapping spans"));
          // Column ranges of the id space, or spans shared by several ranks
          // (groups with common members): every key k with k % K == r, and keys 0..5 on every rank.
          std::vector<ColumnSpans> wanted;
          for (int r = 0; r < K; ++r) {
            if (ranges) {
              wanted.push_back(column_range_of_rank(key_of(keys - 1) + 1, K, r));
              continue;
            }
            std::vector<uint64_t> ids;
            for (uint64_t k = 0; k < keys; ++k)
              if (k % uint64_t(K) == uint64_t(r) || k <= 5) ids.push_back(key_of(k));
            wanted.push_back(spans_of_sorted_ids(ids));
          }
          ThreadWorld world(K);
          std::vector<SparseSums> results(static_cast<size_t>(K));
          std::vector<std::thread> threads;
          for (int r = 0; r < K; ++r)
            threads.emplace_back([&, r] {
              ThreadCommunicator comm(world, r);
              const PartitionRange range = partitions_of_rank(P, K, r);
              std::vector<SparseSums> mine(partials.sparse.begin() + range.first,
                                           partials.sparse.begin() + range.first + range.count);
              results[static_cast<size_t>(r)] = reduce_scatter_partition_sparse_sums(comm, P, range.first, mine, wanted);
            });
          for (auto& t : threads) t.join();
          for (int r = 0; r < K; ++r) {
            const SparseSums& got = results[static_cast<size_t>(r)];
            REQUIRE(std::is_sorted(got.keys.begin(), got.keys.end()));
            std::map<uint64_t, double> by_key;
            for (size_t e = 0; e < got.keys.size(); ++e) {
              CHECK(wanted[static_cast<size_t>(r)].contains(got.keys[e]));
              by_key[got.keys[e]] = got.values[e];
            }
            for (uint64_t k = 0; k < keys; ++k) {
              if (!wanted[static_cast<size_t>(r)].contains(key_of(k))) continue;
              std::vector<double> column(P);
              for (uint32_t p = 0; p < P; ++p) column[p] = partials.with_zeros[p][k];
              const double expected = reference_tree(column, 0, P);
              const auto it = by_key.find(key_of(k));
              if (expected == 0) {  // a key on no partition: absent, or an exact zero
                CHECK((it == by_key.end() || it->second == 0));
                continue;
              }
              REQUIRE(it != by_key.end());
              CHECK(std::memcmp(&it->second, &expected, sizeof(double)) == 0);
            }
          }
        }
      }
    }
}

TEST_CASE("column ranges split any id space below 2^64 into consecutive spans; spans of sorted ids", "[partition_sum]") {
  const uint64_t m = (uint64_t{1} << 63) + 12345;
  uint64_t at = 0;
  for (int r = 0; r < 7; ++r) {
    const ColumnSpans range = column_range_of_rank(m, 7, r);
    REQUIRE(range.spans.size() == 1);
    CHECK(range.spans[0].first == at);
    at = range.spans[0].second;
    CHECK(range.contains(at - 1));
    CHECK_FALSE(range.contains(at));
  }
  CHECK(at == m);
  CHECK(column_range_of_rank(2, 4, 0).spans.empty());  // more ranks than columns: some own none
  const ColumnSpans spans = spans_of_sorted_ids({3, 4, 4, 5, 9, 11, 12});
  CHECK(spans.spans == std::vector<std::pair<uint64_t, uint64_t>>{{3, 6}, {9, 10}, {11, 13}});
  CHECK(spans.columns() == 6);
  CHECK_FALSE(spans.contains(2));
  CHECK_FALSE(spans.contains(10));
  CHECK(spans.contains(12));
}

TEST_CASE("partitions_of_rank deals consecutive equal runs and refuses a rank count not dividing P",
          "[partition_sum]") {
  CHECK(partitions_of_rank(8, 4, 3).first == 6);
  CHECK(partitions_of_rank(8, 4, 3).count == 2);
  CHECK_THROWS(partitions_of_rank(8, 3, 0));
}

TEST_CASE("check_same_on_all_ranks names the rank that differs", "[partition_sum]") {
  ThreadWorld world(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(world, r);
      try {
        check_same_on_all_ranks(comm, "store", r == 2 ? "B" : "A");
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  CHECK(errors[0].find("rank 2") != std::string::npos);
  CHECK(errors[2].find("rank 0") != std::string::npos);
}

}  // namespace fgm
