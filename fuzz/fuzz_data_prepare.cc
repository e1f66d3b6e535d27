// The JSON-lines input of `data prepare`, written out as an indexed dataset and read back.
#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string input = fuzz::fuzz_scratch_path("input.jsonl");
  static const std::string output = fuzz::fuzz_scratch_path("prepared");
  fuzz::fuzz_write_file(input, data, size);
  try {
    data::PrepareOptions o;
    o.input = input;
    o.output = output;
    o.append_eod = size % 2 == 0;
    const data::PrepareSummary s = data::prepare_jsonl(o);
    const data::IndexedDataset ds = data::IndexedDataset::open(output);
    if (ds.num_documents() != s.documents) std::abort();  // what was written must read back
  } catch (const Error&) {
  }
  return 0;
}
