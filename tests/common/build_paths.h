#pragma once

// Where the checkout and the built `infinipipe` binary are. CMake writes them into a generated
// source of their own (the library infinipipe_build_paths), not into compile definitions, so
// that no test's object depends on the checkout's path: a fresh clone reuses the compiler
// cache's objects of every test (ccache, CMakeLists.txt).
namespace infinipipe::testing {
extern const char* const kSourceDir;
extern const char* const kBinary;
}  // namespace infinipipe::testing

#define INFINIPIPE_SOURCE_DIR (::infinipipe::testing::kSourceDir)
#define INFINIPIPE_BINARY (::infinipipe::testing::kBinary)
