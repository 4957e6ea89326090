// Parameters are declared once (key, type, default, range, description) in
// core/config.cpp. A Config is read from a TOML file, then `key=value`
// command-line overrides are applied (the command line wins). Unknown keys,
// wrong types and out-of-range values are configuration errors that name the
// key and where it was set (file:line:column or "command line").
//
// Relative paths in a config file are resolved against the file's directory;
// relative paths given on the command line against the working directory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fgm {

enum class ParamType { kInt, kFloat, kBool, kString, kPath, kBytes, kEnum, kIntList, kFloatList,
                       kStringList };  // kStringList: each element one of `choices`

struct ParamSpec {
  std::string key;
  ParamType type;
  std::string default_value;  // TOML literal, empty = unset
  double min = 0, max = 0;    // numeric range (inclusive) when has_range
  bool has_range = false;
  bool min_exclusive = false;
  std::vector<std::string> choices;  // kEnum, kStringList (allowed elements)
  std::string description;
};

const std::vector<ParamSpec>& param_specs();
const ParamSpec* find_param(const std::string& key);
// Human-readable table of every parameter, for --help-config.
std::string describe_params();

// A parameter value after parsing and validation.
struct ParamValue {
  ParamType type = ParamType::kString;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<double> list;
  std::vector<std::string> strings;  // kStringList
  std::string source;  // "configs/a.toml:3:1", "command line", "default"
  bool set = false;
};

class Config {
 public:
  // Defaults only.
  Config();
  // Reads `path` (TOML; may be empty for defaults only) and applies overrides.
  static Config load(const std::string& path, const std::vector<std::string>& overrides);
  // Applies one "key=value" (value read as a TOML value; a bare word is a string).
  // "key=" (nothing after '=') resets the key to its default: unset, as if the
  // config file had not set it.
  void apply_override(const std::string& argument);

  bool is_set(const std::string& key) const;
  // Set in the config file or on the command line (not a default), to a
  // non-empty value (`data.test=` or `path.B=[]` explicitly mean "none").
  bool set_by_user(const std::string& key) const;
  // "file:line:column: " or "command line: " for a key the user set.
  std::string where_set(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;  // also kPath, kEnum
  uint64_t get_bytes(const std::string& key) const;
  std::vector<double> get_list(const std::string& key) const;
  std::vector<std::string> get_string_list(const std::string& key) const;
  const std::string& source(const std::string& key) const;
  // key -> TOML literal of every set parameter (for the run log).
  std::map<std::string, std::string> dump() const;

 private:
  const ParamValue& value(const std::string& key, ParamType expected) const;
  std::map<std::string, ParamValue> values_;
};

}  // namespace fgm
