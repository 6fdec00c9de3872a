#pragma once
// Named workloads people compare on: the nnscaler ring-attention benchmark's configurations (same names and
// shapes; its varlen benchmark packs each into 4 documents, its zigzag_* set is causal only) and Llama-3
// attention layers. One table: `tasp configs` lists it, `--config NAME` starts from an entry.
#include <string>
#include <vector>

#include "planner/workload.hpp"

namespace tasp::planner {

struct NamedWorkload {
  std::string name, group, note;
  Workload w;
};

const std::vector<NamedWorkload>& workload_catalogue();
// The entry, or InputError listing the closest names.
const NamedWorkload& find_workload(const std::string& name);
// A workload from `--config` (may be empty) and `-w` keys (may be empty; they override the config's), with the
// document lengths of `docs_file` (`--docs FILE`) when given.
Workload workload_from(const std::string& config, const std::string& keys, const std::string& docs_file = "");
// The catalogue as JSON text, one object per entry: name, group, workload (its -w text), B, S, H, Hkv, D, causal,
// dtype, window_left, window_right, note (`tasp configs --json`, the C ABI's tasp_configs_json).
std::string workload_catalogue_json();
// Document lengths from a file: positive integers separated by spaces, commas, '+' or new lines; '#' starts a
// comment. InputError naming the file and line of the first bad entry.
std::vector<long> read_docs_file(const std::string& path);
// The same from the file's text, errors naming `name`.
std::vector<long> parse_docs_text(const std::string& text, const std::string& name);

}  // namespace tasp::planner
