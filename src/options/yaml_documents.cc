#include "options/yaml_documents.h"

#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

namespace infinipipe::options {

namespace {

// Keeps only where each event is, so a document is parsed without building its nodes.
class YamlEventMarks : public YAML::EventHandler {
 public:
  int first_line = -1;  // of this document's first event, 0-based; -1 when it had none
  void OnDocumentStart(const YAML::Mark& m) override { seen(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { seen(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { seen(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string&) override {
    seen(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    seen(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    seen(m);
  }
  void OnMapEnd() override {}

 private:
  void seen(const YAML::Mark& m) {
    if (first_line < 0) first_line = m.line;
  }
};

}  // namespace

std::optional<int> yaml_second_document_line(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  YamlEventMarks first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  // One more call at most: it returns true for a second document, and for a token it cannot
  // start one with, where LoadAll's loop would never end.
  YamlEventMarks second;
  if (!parser.HandleNextDocument(second)) return std::nullopt;
  return (second.first_line >= 0 ? second.first_line : first.first_line) + 1;
}

}  // namespace infinipipe::options
