#pragma once
// Integer knobs from the environment for kernel experiments (A/B runs: tools/gpu/ab.sh), read by the launches.
#include <cstdlib>

namespace tasp::kernels {

// `dflt` when unset, empty or not a number.
inline int env_int(const char* name, int dflt) {
  const char* e = std::getenv(name);
  if (!e || !*e) return dflt;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return *end ? dflt : int(v);
}

}  // namespace tasp::kernels
