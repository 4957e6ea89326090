#include "features/feature_groups.h"

#include <algorithm>
#include <charconv>
#include <fstream>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

FeatureGroups read_feature_groups(const std::string& path, uint64_t n_features, int index_base,
                                  MemoryBudget& budget) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kIo, msg::cannot_open(path, "no such file or not readable"));
  FeatureGroups g;
  g.group_of = BudgetedArray<uint64_t>(budget, n_features, "feature-to-group map",
                                       "use fewer base features");
  g.group_of.fill(UINT64_MAX);
  std::vector<std::vector<uint64_t>> listed;
  std::string line;
  uint64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::vector<uint64_t> ids;
    size_t pos = 0;
    while (pos < line.size()) {
      while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
      if (pos >= line.size()) break;
      size_t end = pos;
      while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
      std::string_view tok(line.data() + pos, end - pos);
      uint64_t id = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), id);
      if (ec != std::errc() || p != tok.data() + tok.size())
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1,
                                        "'" + std::string(tok) + "' is not a feature id"));
      if (id < static_cast<uint64_t>(index_base) || id - index_base >= n_features)
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1,
                                        "feature id " + std::string(tok) +
                                            " is outside the data's features (" +
                                            std::to_string(index_base) + ".." +
                                            std::to_string(n_features - 1 + index_base) + ")"));
      uint64_t f = id - index_base;
      if (g.group_of[f] != UINT64_MAX)
        throw Error(ErrorKind::kInvalidInput,
                    msg::bad_group_line(path, line_no, pos + 1,
                                        "feature id " + std::string(tok) +
                                            " is already in another group; groups must be disjoint"));
      g.group_of[f] = listed.size();
      ids.push_back(f);
      pos = end;
    }
    if (!ids.empty()) {
      std::sort(ids.begin(), ids.end());
      listed.push_back(std::move(ids));
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
    if (g.group_of[f] == UINT64_MAX) {
      g.group_of[f] = next++;
      g.members.push_back(f);
      g.member_ptr.push_back(g.members.size());
    }
  }
  g.n_groups = next;
  return g;
}

}  // namespace fgm
