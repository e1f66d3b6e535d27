// Whether a YAML text holds more than one document. yaml-cpp's LoadAll is not used for this: a
// stray flow token after the first document (a line starting with ',') makes it loop for ever,
// growing its list of documents (found by fuzz_config_yaml).
#pragma once

#include <optional>
#include <string>

namespace infinipipe::options {

// The 1-based line where a second document (or anything after the first) starts; nullopt when
// the text holds at most one. Throws what yaml-cpp throws on text it cannot parse.
std::optional<int> yaml_second_document_line(const std::string& text);

}  // namespace infinipipe::options
