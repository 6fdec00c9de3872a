#pragma once
// The head dims a pass has kernels for, listed once: membership, the list as text, and the call of
// f(std::integral_constant<int, D>{}) that picks the kernels' template.
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tasp::kernels {

template <int... Ds>
struct HeadDims {
  static bool has(int D) { return ((D == Ds) || ...); }
  static std::string text() {
    std::string s;
    ((s += (s.empty() ? "" : ", ") + std::to_string(Ds)), ...);
    return s;
  }
  template <typename F>
  static void dispatch(int D, F&& f) {
    if (!((D == Ds && (f(std::integral_constant<int, Ds>{}), true)) || ...))
      throw std::invalid_argument("attention: head dim D=" + std::to_string(D) + " not supported (" + text() + ")");
  }
};

using FwdHeadDims = HeadDims<64, 80, 96, 128, 256>;  // attention_fwd.cu's kernels
using BwdHeadDims = HeadDims<64, 80, 96, 128, 256>;  // attention_bwd.cu's kernels

}  // namespace tasp::kernels
