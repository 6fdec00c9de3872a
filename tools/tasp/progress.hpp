#pragma once
// Progress of a long command on stderr: "\r<label> done/total" at most every half second, starting only after
// two seconds, and only when stderr is a terminal (logs and pipes stay clean).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tasp::cli {

class Progress {
 public:
  explicit Progress(std::string label) : label_(std::move(label)), t0_(Clock::now()), last_(t0_), tty_(isatty(2)) {}
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }
  void update(double done, double total, const std::string& unit = "") {
    if (!tty_) return;
    const auto now = Clock::now();
    if (now - t0_ < std::chrono::seconds(2) || (shown_ && now - last_ < std::chrono::milliseconds(500))) return;
    last_ = now, shown_ = true;
    std::fprintf(stderr, "\r%s %.0f / %.0f%s   ", label_.c_str(), done, total, unit.c_str());
    std::fflush(stderr);
  }
  void label(std::string l) { label_ = std::move(l); }

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  Clock::time_point t0_, last_;
  bool tty_, shown_ = false;
};

}  // namespace tasp::cli
