#include "planner/plan_io.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <numeric>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/topology.hpp"
#include "planner/yaml_ctx.hpp"

namespace tasp::planner {
namespace {

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// "a, b, c"
template <class T>
std::string join_numbers(const std::vector<T>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

void write_transfer(std::ostream& o, const Transfer& x, bool yaml) {
  if (yaml) o << "{src: " << x.src << ", dst: " << x.dst << ", owner: " << x.owner << ", piece: " << x.piece << (x.grad ? ", kind: grad}" : "}");
  else o << "{\"src\":" << x.src << ",\"dst\":" << x.dst << ",\"owner\":" << x.owner << ",\"piece\":" << x.piece << (x.grad ? ",\"kind\":\"grad\"}" : "}");
}
void write_compute(std::ostream& o, const Compute& c, bool yaml) {
  const std::string move = c.move < 0 ? "" : (yaml ? ", move: " : ",\"move\":") + std::to_string(c.move);
  if (yaml) o << "{rank: " << c.rank << ", owner: " << c.owner << ", piece: " << c.piece << move << "}";
  else o << "{\"rank\":" << c.rank << ",\"owner\":" << c.owner << ",\"piece\":" << c.piece << move << "}";
}
void write_rows(std::ostream& o, const RowsTransfer& x, bool yaml) {
  if (yaml) o << "{move: " << x.move << (x.back ? ", back: true}" : "}");
  else o << "{\"move\":" << x.move << (x.back ? ",\"back\":true}" : "}");
}

void write_ring(std::ostream& o, const std::vector<int>& r) {
  o << "[";
  for (size_t i = 0; i < r.size(); ++i) o << (i ? "," : "") << r[i];
  o << "]";
}

}  // namespace

namespace {

const char* format_of(const Plan& p) { return p.has_backward ? "tasp-plan/2" : "tasp-plan/1"; }
const char* accumulator_name(const Plan& p) { return p.accumulator_bytes == 2 ? "bf16" : "fp32"; }

using Progress = std::function<void(int, int)>;

void write_steps_json(std::ostream& o, const std::vector<Step>& steps, const char* indent, const Progress& progress) {
  o << "[";
  for (size_t t = 0; t < steps.size(); ++t) {
    if (progress) progress(int(t), int(steps.size()));
    const Step& s = steps[t];
    o << (t ? ",\n" : "\n") << indent << " {\"transfers\": [";
    for (size_t i = 0; i < s.transfers.size(); ++i) {
      o << (i ? ",\n" : "\n") << indent << "   ";
      write_transfer(o, s.transfers[i], false);
    }
    o << "],\n" << indent << "  \"compute\": [";
    for (size_t i = 0; i < s.compute.size(); ++i) {
      o << (i ? ",\n" : "\n") << indent << "   ";
      write_compute(o, s.compute[i], false);
    }
    o << "]";
    if (!s.rows.empty()) {
      o << ",\n" << indent << "  \"rows\": [";
      for (size_t i = 0; i < s.rows.size(); ++i) {
        o << (i ? ", " : "");
        write_rows(o, s.rows[i], false);
      }
      o << "]";
    }
    o << "}";
  }
  o << "\n" << indent << "]";
}

void write_steps_yaml(std::ostream& o, const std::vector<Step>& steps, const std::string& indent, const Progress& progress) {
  for (const Step& s : steps) {
    if (progress) progress(int(&s - steps.data()), int(steps.size()));
    o << indent << "- transfers:" << (s.transfers.empty() ? " []\n" : "\n");
    for (const auto& x : s.transfers) {
      o << indent << "    - ";
      write_transfer(o, x, true);
      o << "\n";
    }
    o << indent << "  compute:" << (s.compute.empty() ? " []\n" : "\n");
    for (const auto& c : s.compute) {
      o << indent << "    - ";
      write_compute(o, c, true);
      o << "\n";
    }
    if (s.rows.empty()) continue;
    o << indent << "  rows:\n";
    for (const auto& x : s.rows) {
      o << indent << "    - ";
      write_rows(o, x, true);
      o << "\n";
    }
  }
}

std::string query_moves_text(const Plan& p, bool yaml) {
  std::string s;
  for (size_t i = 0; i < p.query_moves.size(); ++i) {
    const QueryMove& m = p.query_moves[i];
    s += std::string(i ? ", " : "") + (yaml ? "{owner: " : "{\"owner\": ") + std::to_string(m.owner) +
         (yaml ? ", range: " : ", \"range\": ") + std::to_string(m.range) + (yaml ? ", at: " : ", \"at\": ") +
         std::to_string(m.at) + "}";
  }
  return "[" + s + "]";
}

}  // namespace

void write_plan_json(std::ostream& o, const Plan& p, const Progress& progress) {
  o << "{\n\"format\": " << quoted(format_of(p)) << ",\n\"scheme\": " << quoted(p.scheme) << ",\n\"ranks\": " << p.ranks
    << ",\n\"causal\": " << (p.causal ? "true" : "false") << ",\n\"layout\": " << quoted(layout_name(p.layout))
    << ",\n\"pieces_per_rank\": " << p.pieces_per_rank;
  if (!p.gather_steps.empty()) o << ",\n\"gather_steps\": [" << join_numbers(p.gather_steps) << "]";
  if (p.pieces_by_chunk) o << ",\n\"pieces_by_chunk\": true";
  if (!p.query_moves.empty()) o << ",\n\"query_moves\": " << query_moves_text(p, false);
  if (!p.layout_docs.empty()) o << ",\n\"layout_docs\": [" << join_numbers(p.layout_docs) << "]";
  if (p.ulysses != 1) o << ",\n\"ulysses\": " << p.ulysses;
  if (p.head_groups != 1) o << ",\n\"head_groups\": " << p.head_groups;
  if (!p.topology.empty()) o << ",\n\"topology\": " << quoted(p.topology);
  if (!p.note.empty()) o << ",\n\"note\": " << quoted(p.note);
  if (p.pruned.any()) {
    o << ",\n\"pruned_for\": {\"S\": " << p.pruned.S << ", \"window\": [" << p.pruned.window_left << ", " << p.pruned.window_right
      << "], \"docs\": [";
    o << join_numbers(p.pruned.docs);
    o << "]}";
  }
  o << ",\n\"rings\": [";
  for (size_t i = 0; i < p.rings.size(); ++i) {
    if (progress && p.compact()) progress(int(i), int(p.rings.size()));
    o << (i ? ",\n  " : "\n  ");
    write_ring(o, p.rings[i]);
  }
  o << (p.rings.empty() ? "]" : "\n]");
  if (p.compact()) {
    o << ",\n\"schedule\": " << quoted(p.schedule) << ",\n\"step_count\": " << p.step_count;
  } else {
    o << ",\n\"steps\": ";
    write_steps_json(o, p.steps, "", progress);
  }
  if (p.has_backward) {
    o << ",\n\"backward\": {\"accumulator\": " << quoted(accumulator_name(p));
    if (p.backward.keeps_kv) o << ", \"keeps_kv\": true";
    if (p.backward.compact()) {
      o << ", \"schedule\": " << quoted(p.backward.rule) << ", \"step_count\": " << p.backward.step_count << "}";
    } else {
      o << ",\n \"steps\": ";
      write_steps_json(o, p.backward.steps, " ", progress);
      o << "}";
    }
  }
  o << "\n}\n";
}

void write_plan_yaml(std::ostream& o, const Plan& p, const Progress& progress) {
  o << "format: " << quoted(format_of(p)) << "\nscheme: " << quoted(p.scheme) << "\nranks: " << p.ranks
    << "\ncausal: " << (p.causal ? "true" : "false") << "\nlayout: " << layout_name(p.layout)
    << "\npieces_per_rank: " << p.pieces_per_rank << "\n";
  if (!p.gather_steps.empty()) o << "gather_steps: [" << join_numbers(p.gather_steps) << "]\n";
  if (p.pieces_by_chunk) o << "pieces_by_chunk: true\n";
  if (!p.query_moves.empty()) o << "query_moves: " << query_moves_text(p, true) << "\n";
  if (!p.layout_docs.empty()) o << "layout_docs: [" << join_numbers(p.layout_docs) << "]\n";
  if (p.ulysses != 1) o << "ulysses: " << p.ulysses << "\n";
  if (p.head_groups != 1) o << "head_groups: " << p.head_groups << "\n";
  if (!p.topology.empty()) o << "topology: " << quoted(p.topology) << "\n";
  if (!p.note.empty()) o << "note: " << quoted(p.note) << "\n";
  if (p.pruned.any()) {
    o << "pruned_for:\n  S: " << p.pruned.S << "\n  window: [" << p.pruned.window_left << ", " << p.pruned.window_right
      << "]\n  docs: [";
    o << join_numbers(p.pruned.docs) << "]\n";
  }
  o << "rings:" << (p.rings.empty() ? " []\n" : "\n");
  for (const auto& r : p.rings) {
    o << "  - ";
    write_ring(o, r);
    o << "\n";
  }
  if (p.compact()) {
    o << "schedule: " << p.schedule << "\nstep_count: " << p.step_count << "\n";
  } else {
    o << "steps:" << (p.steps.empty() ? " []\n" : "\n");
    write_steps_yaml(o, p.steps, "  ", progress);
  }
  if (!p.has_backward) return;
  o << "backward:\n  accumulator: " << accumulator_name(p) << "\n";
  if (p.backward.keeps_kv) o << "  keeps_kv: true\n";
  if (p.backward.compact()) {
    o << "  schedule: " << p.backward.rule << "\n  step_count: " << p.backward.step_count << "\n";
  } else {
    o << "  steps:" << (p.backward.steps.empty() ? " []\n" : "\n");
    write_steps_yaml(o, p.backward.steps, "    ", progress);
  }
}

namespace {

// SAX reader: tracks the JSON path and fills the plan; any unexpected key or type is an error. The
// backward's keys are the forward's under "backward." (plus accumulator and a transfer's kind).
class PlanSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit PlanSax(std::string name) : name_(std::move(name)) {}
  Plan plan;
  std::string error;
  bool saw_format = false;

  bool null() override { return fail("null is not allowed here"); }
  bool boolean(bool v) override {
    const std::string k = path();
    if (k == "steps[].rows[].back" || k == "backward.steps[].rows[].back") {
      std::vector<Step>& steps = k[0] == 'b' ? plan.backward.steps : plan.steps;
      return steps.back().rows.back().back = v, advance(), true;
    }
    if (path() == "causal") return plan.causal = v, advance(), true;
    if (path() == "pieces_by_chunk") return plan.pieces_by_chunk = v, advance(), true;
    if (path() == "backward.keeps_kv") return plan.backward.keeps_kv = v, advance(), true;
    return fail("unexpected true/false");
  }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return integer(v > 2147483647ULL ? -2 : long(v)); }
  bool number_float(number_float_t, const string_t&) override { return fail("expected an integer"); }
  bool binary(binary_t&) override { return fail("unexpected binary value"); }
  bool string(string_t& v) override {
    const std::string k = path();
    advance();
    if (k == "format") return plan.format = v, saw_format = true, true;
    if (k == "scheme") return plan.scheme = v, true;
    if (k == "topology") return plan.topology = v, true;
    if (k == "note") return plan.note = v, true;
    if (k == "schedule" || k == "backward.schedule") {
      if (v != "ring-flow" && v != "allgather") return fail("unknown schedule '" + v + "' (ring-flow or allgather)");
      return (k == "schedule" ? plan.schedule : plan.backward.rule) = v, true;
    }
    if (k == "layout") return parse_layout(v, &plan.layout) ? true : fail("expected contiguous, zigzag or zigzag-docs");
    if (k == "backward.accumulator") {
      if (v != "fp32" && v != "bf16") return fail("expected fp32 or bf16");
      return plan.accumulator_bytes = v == "fp32" ? 4 : 2, true;
    }
    if (k == "backward.steps[].transfers[].kind") {
      if (v != "kv" && v != "grad") return fail("expected kv or grad");
      return plan.backward.steps.back().transfers.back().grad = v == "grad", true;
    }
    return fail("unexpected string");
  }
  bool start_object(std::size_t) override {
    std::string k = path();
    if (frames_.empty()) { /* root */ }
    else if (k == "backward") plan.has_backward = true;
    else if (k == "pruned_for") { /* its keys below */ }
    else if (k == "query_moves[]") plan.query_moves.emplace_back();
    else if (!step_entry(k, true)) return fail("unexpected object");
    frames_.push_back({false, "", 0});
    return true;
  }
  bool end_object() override {
    frames_.pop_back();
    const std::string k = path();
    const bool bwd = k.rfind("backward.", 0) == 0;
    const std::string sub = bwd ? k.substr(9) : k;
    std::vector<Step>& steps = bwd ? plan.backward.steps : plan.steps;
    if (sub == "steps[].transfers[]") {
      const Transfer& x = steps.back().transfers.back();
      if (x.src < 0 || x.dst < 0 || x.owner < 0 || x.piece < 0) return fail("needs src, dst, owner and piece (all >= 0)");
    } else if (sub == "steps[].compute[]") {
      const Compute& c = steps.back().compute.back();
      if (c.rank < 0 || c.owner < 0 || c.piece < 0) return fail("needs rank, owner and piece (all >= 0)");
    } else if (sub == "steps[].rows[]") {
      if (steps.back().rows.back().move < 0) return fail("needs move (>= 0)");
    } else if (k == "query_moves[]") {
      const QueryMove& m = plan.query_moves.back();
      if (m.owner < 0 || m.range < 0 || m.at < 0) return fail("needs owner, range and at (all >= 0)");
    }
    advance();
    return true;
  }
  bool start_array(std::size_t) override {
    const std::string k = path();
    if (k == "rings[]") plan.rings.emplace_back();
    else if (k == "pruned_for.window") plan.pruned.window_left = plan.pruned.window_right = -2;
    else if (k == "pruned_for.docs") plan.pruned.docs.clear();
    else if (k == "layout_docs") plan.layout_docs.clear();
    else if (k == "gather_steps") plan.gather_steps.clear();
    else if (k != "rings" && k != "steps" && k != "steps[].transfers" && k != "steps[].compute" && k != "backward.steps" &&
             k != "backward.steps[].transfers" && k != "backward.steps[].compute" && k != "steps[].rows" &&
             k != "backward.steps[].rows" && k != "query_moves")
      return fail("unexpected list");
    frames_.push_back({true, "", 0});
    return true;
  }
  bool end_array() override {
    frames_.pop_back();
    advance();
    return true;
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    static const std::vector<std::string> top{"format", "scheme", "ranks", "causal", "layout", "pieces_per_rank", "rings",
                                              "steps", "schedule", "step_count", "topology", "note", "backward", "ulysses",
                                              "head_groups", "pruned_for", "layout_docs", "gather_steps", "pieces_by_chunk",
                                              "query_moves"};
    static const std::vector<std::string> pf{"S", "window", "docs"};
    static const std::vector<std::string> bw{"accumulator", "steps", "schedule", "step_count", "keeps_kv"};
    static const std::vector<std::string> tr{"src", "dst", "owner", "piece"};
    static const std::vector<std::string> trb{"src", "dst", "owner", "piece", "kind"};
    static const std::vector<std::string> co{"rank", "owner", "piece", "move"};
    static const std::vector<std::string> st{"transfers", "compute", "rows"};
    static const std::vector<std::string> ro{"move", "back"};
    static const std::vector<std::string> qm{"owner", "range", "at"};
    const std::string parent = parent_path();
    auto in = [&](const std::vector<std::string>& b) { return std::find(b.begin(), b.end(), k) != b.end(); };
    bool ok = parent.empty() ? in(top)
              : parent == "backward" ? in(bw)
              : parent == "pruned_for" ? in(pf)
              : parent == "steps[]" || parent == "backward.steps[]" ? in(st)
              : parent == "steps[].transfers[]" ? in(tr)
              : parent == "backward.steps[].transfers[]" ? in(trb)
              : parent == "steps[].compute[]" || parent == "backward.steps[].compute[]" ? in(co)
              : parent == "steps[].rows[]" || parent == "backward.steps[].rows[]" ? in(ro)
              : parent == "query_moves[]" ? in(qm) : false;
    return ok ? true : fail("unknown key");
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) override {
    error = name_ + ": byte " + std::to_string(pos) + ": " + ex.what();
    return false;
  }

 private:
  struct Frame {
    bool array;
    std::string key;
    long index;
  };
  std::string name_;
  std::vector<Frame> frames_;

  // A step, transfer or compute entry starting at schematic path k (forward or backward); false if k is none.
  bool step_entry(const std::string& k, bool create) {
    const bool bwd = k.rfind("backward.", 0) == 0;
    const std::string sub = bwd ? k.substr(9) : k;
    std::vector<Step>& steps = bwd ? plan.backward.steps : plan.steps;
    if (sub == "steps[]") return create ? (steps.emplace_back(), true) : true;
    if (sub == "steps[].transfers[]") return create ? (steps.back().transfers.emplace_back(), true) : true;
    if (sub == "steps[].compute[]") return create ? (steps.back().compute.emplace_back(), true) : true;
    if (sub == "steps[].rows[]") return create ? (steps.back().rows.emplace_back(), true) : true;
    return false;
  }
  void advance() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  // Schematic path ("steps[].transfers[].src") to dispatch on, and the concrete one for messages.
  std::string path(bool concrete = false) const {
    std::string s;
    for (const Frame& f : frames_) {
      if (f.array) s += concrete ? "[" + std::to_string(f.index) + "]" : "[]";
      else if (!f.key.empty()) s += (s.empty() ? "" : ".") + f.key;
    }
    return s;
  }
  std::string parent_path() const {
    std::string s;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.array) s += "[]";
      else s += (s.empty() ? "" : ".") + f.key;
    }
    return s;
  }
  bool fail(const std::string& msg) {
    std::string where = path(true);
    error = name_ + ": " + (where.empty() ? "(top level)" : where) + ": " + msg;
    return false;
  }
  bool integer(long v) {
    const std::string k = path();
    auto set = [&](int& f) {
      if (v < 0 || v > (1 << 30)) return fail("expected a non-negative integer");
      f = int(v);
      advance();
      return true;
    };
    if (k == "ranks") return set(plan.ranks);
    if (k == "pieces_per_rank") return set(plan.pieces_per_rank);
    if (k == "ulysses") return set(plan.ulysses);
    if (k == "head_groups") return set(plan.head_groups);
    if (k == "step_count") return set(plan.step_count);
    if (k == "backward.step_count") return set(plan.backward.step_count);
    if (k == "pruned_for.S") {
      if (v < 1) return fail("expected a positive sequence length");
      return plan.pruned.S = v, advance(), true;
    }
    if (k == "pruned_for.window[]") {
      if (v < -1) return fail("expected a count of keys or -1 (unbounded)");
      long& side = plan.pruned.window_left == -2 ? plan.pruned.window_left : plan.pruned.window_right;
      if (plan.pruned.window_right != -2) return fail("expected [LEFT, RIGHT]");
      return side = v, advance(), true;
    }
    if (k == "gather_steps[]") {
      if (v < 1 || v > 64) return fail("expected a count of pieces, 1 to 64");
      return plan.gather_steps.push_back(int(v)), advance(), true;
    }
    if (k == "layout_docs[]") {
      if (v < 1) return fail("expected a positive document length");
      return plan.layout_docs.push_back(v), advance(), true;
    }
    if (k == "pruned_for.docs[]") {
      if (v < 1) return fail("expected a positive document length");
      return plan.pruned.docs.push_back(v), advance(), true;
    }
    if (k.rfind("query_moves[].", 0) == 0) {
      QueryMove& m = plan.query_moves.back();
      const std::string f = k.substr(14);
      return set(f == "owner" ? m.owner : f == "range" ? m.range : m.at);
    }
    if (k == "rings[][]") {
      if (v < 0 || v > (1 << 30)) return fail("expected a rank");
      plan.rings.back().push_back(int(v));
      advance();
      return true;
    }
    const bool bwd = k.rfind("backward.", 0) == 0;
    const std::string sub = bwd ? k.substr(9) : k;
    std::vector<Step>& steps = bwd ? plan.backward.steps : plan.steps;
    if (sub.rfind("steps[].transfers[].", 0) == 0) {
      Transfer& x = steps.back().transfers.back();
      const std::string f = sub.substr(20);
      if (f == "kind") return fail("expected kv or grad");
      return set(f == "src" ? x.src : f == "dst" ? x.dst : f == "owner" ? x.owner : x.piece);
    }
    if (sub.rfind("steps[].compute[].", 0) == 0) {
      Compute& c = steps.back().compute.back();
      const std::string f = sub.substr(18);
      return set(f == "rank" ? c.rank : f == "owner" ? c.owner : f == "move" ? c.move : c.piece);
    }
    if (sub == "steps[].rows[].move") return set(steps.back().rows.back().move);
    if (sub == "steps[].rows[].back") return fail("expected true or false");
    return fail("unexpected integer");
  }
};

nlohmann::json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (auto it = n.begin(); it != n.end(); ++it) j[it->first.as<std::string>()] = yaml_to_json(it->second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : n) j.push_back(yaml_to_json(e));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() != "!") {  // unquoted: integers and booleans keep their type
        try { size_t used = 0; long v = std::stol(s, &used); if (used == s.size()) return v; } catch (...) {}
        if (s == "true") return true;
        if (s == "false") return false;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

Plan read_plan_json(std::istream& in, const std::string& name) {
  PlanSax sax(name);
  bool ok = nlohmann::json::sax_parse(in, &sax);
  if (!ok) throw InputError(sax.error.empty() ? name + ": malformed JSON" : sax.error);
  if (!sax.saw_format) throw InputError(name + ": format: missing (expected tasp-plan/1 or tasp-plan/2)");
  Plan& p = sax.plan;
  if (p.format != "tasp-plan/1" && p.format != "tasp-plan/2")
    throw InputError(name + ": format: '" + p.format + "' is not tasp-plan/1 or tasp-plan/2");
  if (p.has_backward && p.format != "tasp-plan/2")
    throw InputError(name + ": backward: a plan with a backward part is tasp-plan/2 (format says " + p.format + ")");
  if (p.ranks < 1) throw InputError(name + ": ranks: missing or < 1");
  if (p.pruned.window_left == -2 || p.pruned.window_right == -2)
    throw InputError(name + ": pruned_for.window: expected [LEFT, RIGHT] (counts of keys, -1 unbounded)");
  if (!p.pruned.docs.empty() && std::accumulate(p.pruned.docs.begin(), p.pruned.docs.end(), 0L) != p.pruned.S)
    throw InputError(name + ": pruned_for.docs: the lengths do not sum to pruned_for.S");
  if (!p.pruned.any() && (p.pruned.window_left != -1 || p.pruned.window_right != -1 || !p.pruned.docs.empty()))
    throw InputError(name + ": pruned_for.S: missing");
  if ((p.layout == Layout::ZigzagDocs) != !p.layout_docs.empty())
    throw InputError(name + (p.layout_docs.empty() ? ": layout_docs: missing (the zigzag-docs layout needs the documents' lengths)"
                                                   : ": layout_docs: only the zigzag-docs layout has documents"));
  if (!p.schedule.empty() && !p.steps.empty()) throw InputError(name + ": schedule: give either steps or a schedule, not both");
  if (!p.schedule.empty() && p.step_count < 1) throw InputError(name + ": step_count: missing for a compact plan");
  if (p.schedule == "ring-flow" && p.rings.empty()) throw InputError(name + ": rings: a ring-flow schedule needs rings");
  if (p.has_backward) {
    const Schedule& b = p.backward;
    if (!b.rule.empty() && !b.steps.empty()) throw InputError(name + ": backward.schedule: give either steps or a schedule, not both");
    if (!b.rule.empty() && b.step_count < 1) throw InputError(name + ": backward.step_count: missing for a compact backward");
    if (b.rule == "ring-flow" && p.rings.empty()) throw InputError(name + ": rings: a ring-flow backward needs rings");
    if (b.rule.empty() && b.steps.empty()) throw InputError(name + ": backward: needs steps or a schedule");
  }
  return std::move(sax.plan);
}

Plan plan_from_yaml_text(const std::string& text, const std::string& name) {
  const YAML::Node root = load_yaml_checked(text, name);
  nlohmann::json j;
  try {
    j = yaml_to_json(root);
  } catch (const YAML::Exception& e) {
    throw InputError(name + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  std::string text_json;
  try {
    text_json = j.dump();
  } catch (const nlohmann::json::exception&) {
    throw InputError(name + ": a string is not valid UTF-8");
  }
  std::istringstream js(text_json);
  return read_plan_json(js, name);
}

Plan read_plan_file(const std::string& path) {
  const bool yaml = path.size() > 5 && (path.substr(path.size() - 5) == ".yaml" || path.substr(path.size() - 4) == ".yml");
  if (yaml) return plan_from_yaml_text(read_text_file(path, "plan file"), path);
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open plan file");
  return read_plan_json(in, path);
}

}  // namespace tasp::planner
