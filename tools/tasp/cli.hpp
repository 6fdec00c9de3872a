#pragma once
// Shared pieces of the `tasp` subcommands: error handling, atomic output files, topology arguments.
#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>

namespace tasp::cli {

// Exit status of a failed check (verify, --check); bad input exits 2.
constexpr int kCheckFailed = 1;
constexpr int kBadInput = 2;

// Thrown by a subcommand to end the program with a status and message.
struct Exit : std::runtime_error {
  int code;
  Exit(int c, const std::string& m) : std::runtime_error(m), code(c) {}
};

// Writes through a temporary file renamed into place on success, so failures leave no partial file.
// path "-" or "" writes to stdout.
void write_output(const std::string& path, const std::function<void(std::ostream&)>& body);

// This machine's physical memory (0 where it cannot be read).
double physical_memory_bytes();

void register_plan(CLI::App& app);
void register_verify(CLI::App& app);
void register_simulate(CLI::App& app);
void register_run(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_report(CLI::App& app);
void register_bench(CLI::App& app);
void register_bench_kernel(CLI::App& bench);  // CUDA builds only
void register_configs(CLI::App& app);

}  // namespace tasp::cli
