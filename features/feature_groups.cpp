#include "features/feature_groups.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <numeric>

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
  const uint64_t p = g.n_groups;
  // Larger groups first; a group's parent is the last-seen strict superset
  // containing its first member, found by walking the chain of supersets.
  std::vector<uint64_t> order(p);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return g.size(a) > g.size(b); });
  const uint64_t m = g.members.empty() ? 0 : *std::max_element(g.members.begin(), g.members.end()) + 1;
  std::vector<uint64_t> owner(m, UINT64_MAX);  // smallest group seen so far containing the feature
  std::vector<uint64_t> parent(p, UINT64_MAX);
  for (uint64_t gid : order) {
    uint64_t first = g.members[g.member_ptr[gid]];
    uint64_t par = owner[first];
    for (uint64_t q = g.member_ptr[gid]; q < g.member_ptr[gid + 1]; ++q) {
      uint64_t f = g.members[q];
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
    for (uint64_t q = g.member_ptr[gid]; q < g.member_ptr[gid + 1]; ++q) owner[g.members[q]] = gid;
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
  Reservation listed_mem = budget.reserve(n_features * sizeof(uint64_t), "feature-to-group map",
                                          "use fewer base features");
  std::vector<uint64_t> first_group(n_features, UINT64_MAX);  // for disjointness and singletons
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
      if (first_group[f] != UINT64_MAX && structure == GroupStructure::kDisjoint)
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1,
                                        fmt::format("feature id {} is already in another group; groups must be "
                                                    "disjoint (or set features.group_structure)",
                                                    tok)));
      if (first_group[f] == UINT64_MAX) first_group[f] = listed.size();
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
  uint64_t next = listed.size();
  for (uint64_t f = 0; f < n_features; ++f) {
    if (first_group[f] == UINT64_MAX) {
      ++next;
      g.members.push_back(f);
      g.member_ptr.push_back(g.members.size());
    }
  }
  g.n_groups = next;
  if (structure == GroupStructure::kTree) build_tree(g, path);
  return g;
}

}  // namespace fgm
