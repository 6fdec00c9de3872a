#pragma once
// The attention problem a plan is run or simulated on.
#include <string>

namespace tasp::planner {

struct Workload {
  int B = 1;
  long S = 0;
  int H = 0;    // query heads
  int Hkv = 0;  // key/value heads (GQA/MQA: H % Hkv == 0)
  int D = 0;
  bool causal = false;
  int dtype_bytes = 2;  // bf16/fp16 KV on GPUs; sizes of what moves between ranks
};

// "B=1,S=131072,H=32,Hkv=8,D=128,causal" (Hkv defaults to H, B to 1). Throws InputError.
Workload parse_workload(const std::string& text);
std::string to_string(const Workload& w);
// "131072", "128k", "1M" (binary k and M); -1 when not a non-negative integer.
long parse_count(const std::string& text);

}  // namespace tasp::planner
