#include "planner/workload_catalogue.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "planner/topology.hpp"

namespace tasp::planner {
namespace {

NamedWorkload entry(const char* name, const char* group, const char* keys, const char* note = "") {
  NamedWorkload n{name, group, note, parse_workload(keys)};
  n.w.config = name;
  return n;
}

// Edit distance, to suggest names close to a mistyped one.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<NamedWorkload>& workload_catalogue() {
  static const std::vector<NamedWorkload> c = {
      entry("tiny", "nnscaler small", "B=2,S=1024,H=8,D=64,causal"),
      entry("small", "nnscaler small", "B=4,S=4096,H=12,D=128,causal"),
      entry("small_fp16", "nnscaler small", "B=4,S=4096,H=12,D=128,full,fp16"),
      entry("small_window", "nnscaler small", "B=4,S=4096,H=12,D=128,causal,window=512:0"),
      entry("medium", "nnscaler medium", "B=4,S=8192,H=24,D=128,causal"),
      entry("medium_large_head", "nnscaler medium", "B=4,S=8192,H=12,D=256,full"),
      entry("medium_many_heads", "nnscaler medium", "B=4,S=8192,H=32,D=128,causal"),
      entry("medium_fp16", "nnscaler medium", "B=4,S=8192,H=24,D=128,causal,fp16"),
      entry("medium_window", "nnscaler medium", "B=4,S=8192,H=24,D=128,causal,window=512:0"),
      entry("large", "nnscaler large", "B=4,S=16384,H=32,D=128,causal"),
      entry("large_seq", "nnscaler large", "B=4,S=32768,H=24,D=128,causal"),
      entry("large_head", "nnscaler large", "B=4,S=16384,H=24,D=256,full"),
      entry("xlarge", "nnscaler large", "B=8,S=32768,H=32,D=128,causal"),
      entry("large_window", "nnscaler large", "B=4,S=16384,H=32,D=128,causal,window=512:0"),
      entry("qwen3_235b_a22b", "nnscaler gqa", "B=2,S=16384,H=64,Hkv=4,D=64,causal"),
      entry("qwen3_30b_a3b", "nnscaler gqa", "B=4,S=16384,H=32,Hkv=4,D=64,causal"),
      entry("qwen3_4b", "nnscaler gqa", "B=4,S=16384,H=32,Hkv=4,D=80,causal"),
      entry("qwen3_32b", "nnscaler gqa", "B=2,S=16384,H=64,Hkv=8,D=128,causal"),
      entry("qwen3_14b", "nnscaler gqa", "B=4,S=16384,H=40,Hkv=8,D=128,causal"),
      entry("zigzag_tiny", "nnscaler zigzag", "B=2,S=1024,H=8,D=64,causal"),
      entry("zigzag_small", "nnscaler zigzag", "B=4,S=4096,H=12,D=128,causal"),
      entry("zigzag_medium", "nnscaler zigzag", "B=4,S=8192,H=24,D=128,causal"),
      entry("zigzag_large", "nnscaler zigzag", "B=4,S=16384,H=32,D=128,causal"),
      entry("zigzag_fp16", "nnscaler zigzag", "B=4,S=4096,H=12,D=128,causal,fp16"),
      entry("zigzag_gqa", "nnscaler zigzag", "B=4,S=8192,H=32,Hkv=8,D=128,causal"),
      entry("llama3-8b", "model layer", "B=1,S=131072,H=32,Hkv=8,D=128,causal", "Llama-3-8B attention layer, 128K"),
      entry("llama3-70b", "model layer", "B=1,S=131072,H=64,Hkv=8,D=128,causal", "Llama-3-70B attention layer, 128K"),
  };
  return c;
}

const NamedWorkload& find_workload(const std::string& name) {
  const auto& c = workload_catalogue();
  for (const auto& e : c)
    if (e.name == name) return e;
  std::vector<std::pair<size_t, std::string>> near;
  for (const auto& e : c) {
    const size_t d = distance(name, e.name);
    const bool prefix = e.name.rfind(name, 0) == 0 || name.rfind(e.name, 0) == 0;
    if (d <= 3 || (prefix && !name.empty())) near.push_back({prefix ? 0 : d, e.name});
  }
  std::sort(near.begin(), near.end());
  std::string msg = "--config: no workload named '" + name + "'";
  if (!near.empty()) {
    msg += "; close: ";
    for (size_t i = 0; i < near.size() && i < 6; ++i) msg += (i ? ", " : "") + near[i].second;
  }
  throw InputError(msg + " (tasp configs lists them all)");
}

std::vector<long> read_docs_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open the document lengths");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_docs_text(text.str(), path);
}

std::vector<long> parse_docs_text(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::vector<long> docs;
  std::string line;
  for (int ln = 1; std::getline(in, line); ++ln) {
    line = line.substr(0, line.find('#'));
    for (char& c : line)
      if (c == ',' || c == '+' || c == '\t' || c == '\r') c = ' ';
    std::istringstream ls(line);
    std::string tok;
    while (ls >> tok) {
      const long v = parse_count(tok);
      if (v <= 0 || v > (1L << 40))
        throw InputError(path + ":" + std::to_string(ln) + ": '" + tok + "' is not a positive document length");
      docs.push_back(v);
    }
  }
  if (docs.empty()) throw InputError(path + ": no document lengths (expected positive integers)");
  return docs;
}

Workload workload_from(const std::string& config, const std::string& keys, const std::string& docs_file) {
  Workload w;
  if (config.empty()) {
    if (keys.empty()) throw InputError("give a workload: -w B=..,S=..,H=..,D=..[,causal] or --config NAME (tasp configs)");
    w = parse_workload(keys);
  } else {
    w = keys.empty() ? find_workload(config).w : parse_workload_over(find_workload(config).w, keys);
    w.config = config;
  }
  if (docs_file.empty()) return w;
  if (keys.find("docs=") != std::string::npos) throw InputError("--docs " + docs_file + ": the workload gives docs= already");
  w.docs = read_docs_file(docs_file);
  long sum = 0;
  for (long d : w.docs) sum += d;
  if (sum != w.S)
    throw InputError(docs_file + ": the " + std::to_string(w.docs.size()) + " lengths sum to " + std::to_string(sum) +
                     ", not S=" + std::to_string(w.S));
  return w;
}

}  // namespace tasp::planner
