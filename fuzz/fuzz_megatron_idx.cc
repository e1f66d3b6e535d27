// A Megatron indexed dataset's PREFIX.idx, opened beside a small PREFIX.bin, then every document
// read (the first 256, to keep one input fast).
#include <algorithm>

#include "data/indexed_dataset.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string prefix = fuzz::fuzz_scratch_path("dataset");
  static const bool bin_written = [] {
    std::string bin(4096, '\0');
    for (size_t i = 0; i < bin.size(); ++i) bin[i] = static_cast<char>(i * 7);
    fuzz::fuzz_write_file(prefix + ".bin", bin.data(), bin.size());
    return true;
  }();
  (void)bin_written;
  fuzz::fuzz_write_file(prefix + ".idx", data, size);
  try {
    const data::IndexedDataset ds = data::IndexedDataset::open(prefix);
    for (int64_t d = 0; d < std::min<int64_t>(ds.num_documents(), 256); ++d) {
      (void)ds.document_length(d);
      (void)ds.document_tokens(d, 1 << 12);
      (void)ds.document_tokens(d, 64, 3);  // a piece that starts inside the document
    }
  } catch (const Error&) {
  }
  return 0;
}
