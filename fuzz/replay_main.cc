// Without libFuzzer (the release build), each target links this main: it runs every file named
// on the command line, or found in a named directory, through LLVMFuzzerTestOneInput once.
// Flags (-runs=0 and the like, for libFuzzer) are ignored. ctest uses it to replay the seed
// corpora and saved reproducers in the normal suite.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int replay_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("-")) continue;
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.')
          files.push_back(e.path());
    } else {
      files.push_back(arg);
    }
    for (const auto& f : files) {
      failures += replay_file(f);
      ++inputs;
    }
  }
  std::printf("replay: %d inputs ran without a finding\n", inputs - failures);
  return failures == 0 && inputs > 0 ? 0 : 1;
}
