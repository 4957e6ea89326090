#include "features/feature_groups.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

GroupStructure parse_group_structure(const std::string& text) {
  if (text == "overlapping") return GroupStructure::kOverlapping;
  if (text == "tree") return GroupStructure::kTree;
  return GroupStructure::kDisjoint;
}

namespace {

// Builds the tree of a laminar family: parent = smallest strict superset.
void build_tree(FeatureGroups& g, const std::string& path) {
  const uint64_t p = g.listed_groups;
  // Larger groups first; a group's parent is the last-seen strict superset
  // containing its first member, found by walking the chain of supersets.
  std::vector<uint64_t> order(p);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return g.size(a) > g.size(b); });
  // Smallest group seen so far containing each listed feature (by listed index).
  std::vector<uint64_t> owner(g.listed_features.size(), UINT64_MAX);
  std::vector<uint64_t> parent(p, UINT64_MAX);
  for (uint64_t gid : order) {
    uint64_t first = g.listed_index(g.members[g.member_ptr[gid]]);
    uint64_t par = owner[first];
    for (uint64_t q = g.member_ptr[gid]; q < g.member_ptr[gid + 1]; ++q) {
      uint64_t f = g.listed_index(g.members[q]);
      if (owner[f] != par) {
        // Two groups that overlap without nesting: not a tree.
        uint64_t other = owner[f] != UINT64_MAX ? owner[f] : par;
        uint64_t gl = gid < g.line.size() ? g.line[gid] : 0;
        uint64_t ol = other < g.line.size() ? g.line[other] : 0;
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, gl, 0,
                                        fmt::format("this group and the group on line {} overlap without one "
                                                    "containing the other; tree-structured groups must nest "
                                                    "(use features.group_structure = \"overlapping\")",
                                                    ol)));
      }
    }
    if (par != UINT64_MAX && g.size(par) == g.size(gid)) {
      throw Error(ErrorKind::kInvalidInput,
                  msg::bad_group_line(path, gid < g.line.size() ? g.line[gid] : 0, 0,
                                      fmt::format("this group repeats the group on line {}",
                                                  par < g.line.size() ? g.line[par] : 0)));
    }
    parent[gid] = par;
    for (uint64_t q = g.member_ptr[gid]; q < g.member_ptr[gid + 1]; ++q) owner[g.listed_index(g.members[q])] = gid;
  }
  std::vector<std::vector<uint64_t>> kids(p);
  for (uint64_t gid = 0; gid < p; ++gid) {
    if (parent[gid] == UINT64_MAX) g.roots.push_back(gid);
    else kids[parent[gid]].push_back(gid);
  }
  g.child_ptr.assign(1, 0);
  for (uint64_t gid = 0; gid < p; ++gid) {
    g.children.insert(g.children.end(), kids[gid].begin(), kids[gid].end());
    g.child_ptr.push_back(g.children.size());
  }
}

}  // namespace

FeatureGroups read_feature_groups(const std::string& path, uint64_t n_features, int index_base,
                                  MemoryBudget& budget, GroupStructure structure) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, "no such file or not readable"));
  FeatureGroups g;
  g.structure = structure;
  g.n_features = n_features;
  // For disjointness: the first group listing each feature (grows with the
  // file, counted as it grows).
  std::unordered_map<uint64_t, uint64_t> first_group;
  Reservation listed_mem;
  std::vector<std::vector<uint64_t>> listed;
  std::string text;
  uint64_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    auto hash = text.find('#');
    if (hash != std::string::npos) text.resize(hash);
    std::vector<uint64_t> ids;
    size_t pos = 0;
    while (pos < text.size()) {
      while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      if (pos >= text.size()) break;
      size_t end = pos;
      while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
      std::string_view tok(text.data() + pos, end - pos);
      uint64_t id = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), id);
      if (ec != std::errc() || p != tok.data() + tok.size())
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1, "'" + std::string(tok) + "' is not a feature id"));
      if (id < static_cast<uint64_t>(index_base) || id - index_base >= n_features)
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1,
                                        fmt::format("feature id {} is outside the data's features ({}..{})", tok,
                                                    index_base, n_features - 1 + index_base)));
      uint64_t f = id - index_base;
      if (std::find(ids.begin(), ids.end(), f) != ids.end())
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1, fmt::format("feature id {} appears twice in this group", tok)));
      const auto seen = first_group.find(f);
      if (seen != first_group.end() && structure == GroupStructure::kDisjoint)
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1,
                                        fmt::format("feature id {} is already in another group; groups must be "
                                                    "disjoint (or set features.group_structure)",
                                                    tok)));
      if (seen == first_group.end()) {
        first_group.emplace(f, listed.size());
        if (first_group.size() * 64 > listed_mem.bytes())
          listed_mem = budget.reserve(2 * first_group.size() * 64, "feature-to-group map of the group file",
                                      "list fewer features in the group file");
      }
      ids.push_back(f);
      pos = end;
    }
    if (!ids.empty()) {
      std::sort(ids.begin(), ids.end());
      listed.push_back(std::move(ids));
      g.line.push_back(line_no);
    }
  }
  g.listed_groups = listed.size();
  g.member_ptr.push_back(0);
  for (const auto& ids : listed) {
    g.members.insert(g.members.end(), ids.begin(), ids.end());
    g.member_ptr.push_back(g.members.size());
  }
  g.listed_features.reserve(first_group.size());
  for (const auto& entry : first_group) g.listed_features.push_back(entry.first);
  std::sort(g.listed_features.begin(), g.listed_features.end());
  g.n_groups = g.listed_groups + (n_features - g.listed_features.size());
  if (structure == GroupStructure::kTree) build_tree(g, path);
  return g;
}

uint64_t FeatureGroups::listed_index(uint64_t feature) const {
  auto it = std::lower_bound(listed_features.begin(), listed_features.end(), feature);
  return it != listed_features.end() && *it == feature ? static_cast<uint64_t>(it - listed_features.begin())
                                                       : UINT64_MAX;
}

uint64_t FeatureGroups::singleton_group(uint64_t feature) const {
  const auto below = std::lower_bound(listed_features.begin(), listed_features.end(), feature) -
                     listed_features.begin();
  return listed_groups + feature - static_cast<uint64_t>(below);
}

uint64_t FeatureGroups::singleton_feature(uint64_t group) const {
  // The t-th unlisted feature is t + (listed features below it); listed[i] − i
  // is nondecreasing and counts the unlisted features below listed[i].
  const uint64_t t = group - listed_groups;
  uint64_t lo = 0, hi = listed_features.size();
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (listed_features[mid] - mid <= t) lo = mid + 1;
    else hi = mid;
  }
  return t + lo;
}

}  // namespace fgm
