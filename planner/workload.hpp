#pragma once
// The attention problem a plan is run or simulated on, and its text form (`-w`, `--config`).
#include <string>
#include <vector>

namespace tasp::planner {

struct Workload {
  int B = 1;
  long S = 0;
  int H = 0;    // query heads
  int Hkv = 0;  // key/value heads (GQA/MQA: H % Hkv == 0)
  int D = 0;
  bool causal = false;
  std::string dtype = "bf16";  // bf16 | fp16: what the GPU kernels and transfers use
  int dtype_bytes = 2;         // sizes of what moves between ranks
  // Sliding window (FlashAttention's convention: a query sees keys up to `left` before and `right` after it);
  // -1: unbounded on that side.
  long window_left = -1, window_right = -1;
  std::vector<long> docs;  // packed documents' lengths (summing to S); empty: one sequence
  std::string config;      // the catalogue name it came from, if any

  bool windowed() const { return window_left >= 0 || window_right >= 0; }
  bool packed() const { return docs.size() > 1; }
};

// "B=1,S=131072,H=32,Hkv=8,D=128,causal" (Hkv defaults to H, B to 1); also bf16 | fp16 (or dtype=),
// window=LEFT[:RIGHT], docs=L1+L2+... Throws InputError naming the key (unknown, given twice, not a positive
// integer, inconsistent).
Workload parse_workload(const std::string& text);
// `base` with the keys of `text` applied (S, H, D needed only if base lacks them): --config NAME -w KEYS.
Workload parse_workload_over(const Workload& base, const std::string& text);
std::string to_string(const Workload& w);
// "131072", "128k", "1M" (binary k and M); -1 when not a non-negative integer.
long parse_count(const std::string& text);

}  // namespace tasp::planner
