// Replays fuzz corpora through a target (tests/fuzz/fuzz_loaders.cpp): every file of every directory given,
// as the CPU test suite's regression check; libFuzzer's own main is used instead for fuzzing (tools/fuzz.sh).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t n = 0;
  for (int i = 1; i < argc; ++i)
    for (const auto& e : std::filesystem::recursive_directory_iterator(argv[i])) {
      if (!e.is_regular_file()) continue;
      std::ifstream in(e.path(), std::ios::binary);
      const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
      ++n;
    }
  std::cout << "replayed " << n << " inputs\n";
  return n > 0 ? 0 : 1;
}
