#include "data/prepare.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "data/byte_tokenizer.h"
#include "data/indexed_dataset.h"

namespace infinipipe::data {

PrepareSummary prepare_jsonl(const PrepareOptions& options) {
  if (options.input.empty()) fail_config("data prepare needs --input FILE.jsonl");
  if (options.output.empty()) fail_config("data prepare needs --output PREFIX");
  if (options.json_key.empty()) fail_config("--json-key must not be empty");
  std::ifstream in(options.input, std::ios::binary);
  if (!in) fail("cannot open {}: {}", options.input, std::strerror(errno));

  IndexedDatasetWriter writer(options.output, TokenDType::uint16);
  PrepareSummary summary;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      ++summary.skipped_blank_lines;
      continue;
    }
    const nlohmann::json doc = json_parse(line, fmt::format("{}:{}:", options.input, line_no),
                                          "each line must hold one JSON object");
    if (!doc.is_object()) {
      fail("{}:{}: expected a JSON object with a \"{}\" field, found a {}", options.input, line_no,
           options.json_key, doc.type_name());
    }
    const auto it = doc.find(options.json_key);
    if (it == doc.end()) {
      fail("{}:{}: the object has no \"{}\" field; pick the field with --json-key", options.input,
           line_no, options.json_key);
    }
    if (!it->is_string()) {
      fail("{}:{}: field \"{}\" is a {}, not a string", options.input, line_no, options.json_key,
           it->type_name());
    }
    const std::string& text = it->get_ref<const std::string&>();
    if (text.empty() && !options.append_eod) {
      ++summary.skipped_empty_documents;
      continue;
    }
    const std::vector<int32_t> tokens = byte_tokenize(text, options.append_eod);
    writer.add_document(tokens);
  }
  if (in.bad()) fail("cannot read {}", options.input);
  if (writer.num_documents() == 0) {
    fail("{} holds no documents (no line with a non-empty \"{}\" field)", options.input,
         options.json_key);
  }
  writer.finalize();
  summary.documents = writer.num_documents();
  summary.tokens = writer.num_tokens();
  return summary;
}

}  // namespace infinipipe::data
