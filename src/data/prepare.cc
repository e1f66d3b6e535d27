#include "data/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "core/output_file.h"
#include "core/strings.h"
#include "data/indexed_dataset.h"
#include "tokenize/prepared_tokenizer.h"
#include "tokenize/tokenizer.h"

namespace infinipipe::data {

namespace {

// Lines tokenized together: enough to keep every worker busy, few enough to bound memory.
constexpr size_t kBlockLinesPerWorker = 256;

struct LineResult {
  bool blank = false;
  std::string error;                         // the line's fault; empty when it is fine
  std::vector<std::vector<int32_t>> tokens;  // one document per json key
};

LineResult line_tokenize(const std::string& line, const PrepareOptions& o,
                         const tokenize::Tokenizer& tok, int64_t line_no) {
  LineResult r;
  if (line.find_first_not_of(" \t\r") == std::string::npos) {
    r.blank = true;
    return r;
  }
  nlohmann::json doc;
  try {
    doc = json_parse(line, fmt::format("{}:{}:", o.input, line_no),
                     "each line must hold one JSON object");
  } catch (const Error& e) {
    r.error = e.what();
    return r;
  }
  if (!doc.is_object()) {
    r.error = fmt::format("{}:{}: expected a JSON object with a \"{}\" field, found a {}", o.input,
                          line_no, o.json_keys.front(), doc.type_name());
    return r;
  }
  for (const std::string& key : o.json_keys) {
    const auto it = doc.find(key);
    if (it == doc.end()) {
      r.error =
          fmt::format("{}:{}: the object has no \"{}\" field; pick the fields with --json-keys",
                      o.input, line_no, key);
      return r;
    }
    if (!it->is_string()) {
      r.error = fmt::format("{}:{}: field \"{}\" is a {}, not a string", o.input, line_no, key,
                            it->type_name());
      return r;
    }
    const std::string& text = it->get_ref<const std::string&>();
    std::vector<int32_t> ids = text.empty() ? std::vector<int32_t>{} : tok.encode(text);
    if (o.append_eod) ids.push_back(tok.eod());
    r.tokens.push_back(std::move(ids));
  }
  return r;
}

// Tokenizes lines[i] for i ≡ w (mod workers) on worker w; results keep the lines' order.
std::vector<LineResult> block_tokenize(const std::vector<std::string>& lines, int64_t first_line,
                                       const PrepareOptions& o, const tokenize::Tokenizer& tok) {
  std::vector<LineResult> out(lines.size());
  const size_t workers = std::min<size_t>(static_cast<size_t>(o.workers), lines.size());
  auto run = [&](size_t w) {
    for (size_t i = w; i < lines.size(); i += workers) {
      try {
        out[i] = line_tokenize(lines[i], o, tok, first_line + static_cast<int64_t>(i));
      } catch (const Error& e) {
        out[i].error =
            fmt::format("{}:{}: {}", o.input, first_line + static_cast<int64_t>(i), e.what());
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(run, w);
  if (workers > 0) run(0);
  for (std::thread& t : pool) t.join();
  return out;
}

void options_check(const PrepareOptions& o) {
  if (o.input.empty()) fail_config("data prepare needs --input FILE.jsonl");
  if (o.output.empty() == o.output_prefix.empty()) {
    fail_config(
        "data prepare needs exactly one of --output PREFIX (writes PREFIX.bin/.idx) and "
        "--output-prefix PREFIX (Megatron's PREFIX_{{key}}_document.bin/.idx)");
  }
  if (o.json_keys.empty()) fail_config("--json-keys needs at least one field name");
  for (const std::string& k : o.json_keys) {
    if (k.empty()) fail_config("--json-keys: a field name must not be empty");
    if (std::count(o.json_keys.begin(), o.json_keys.end(), k) > 1) {
      fail_config("--json-keys names \"{}\" twice", k);
    }
  }
  if (!o.output.empty() && o.json_keys.size() > 1) {
    fail_config(
        "--output writes one dataset, but --json-keys names {}; use --output-prefix, which "
        "writes one dataset per key",
        o.json_keys.size());
  }
  if (o.workers < 1 || o.workers > 1024) {
    fail_config("--workers must be between 1 and 1024, got {}", o.workers);
  }
}

// With --output-prefix a key becomes part of a file name: it must not lead out of the folder.
void json_keys_check_for_names(const PrepareOptions& o) {
  if (o.output_prefix.empty()) return;
  for (const std::string& k : o.json_keys) {
    if (k.find('/') != std::string::npos || k.find("..") != std::string::npos ||
        k.find('\0') != std::string::npos) {
      fail_config(
          "--json-keys \"{}\": with --output-prefix each key is part of a file name "
          "(PREFIX_{{key}}_document), so it cannot hold '/' or '..'; use --output PREFIX for "
          "this key",
          k);
    }
  }
}

// Each output prefix names files in an existing folder, none of them an input of the run.
void outputs_check(const PrepareOptions& o) {
  json_keys_check_for_names(o);
  const std::string label = o.output.empty() ? "--output-prefix" : "--output";
  for (const std::string& key : o.json_keys) {
    const std::string prefix = prepare_output_prefix(o, key);
    output_prefix_check(prefix, label);  // `--output DIR/` would write DIR/.bin and DIR/.idx
    for (const char* ext : {".bin", ".idx", ".bin.tmp", ".idx.tmp", ".tokenizer_info.json"}) {
      const std::string out = prefix + ext;
      output_path_check(out, label);
      output_not_input_check(out, o.input, label);
      if (!o.tokenizer_model.empty()) output_not_input_check(out, o.tokenizer_model, label);
    }
  }
}

// std::getline with a bound: a file without newlines is refused, not held in memory whole.
bool line_read_bounded(std::istream& in, std::string& line, int64_t line_no,
                       const std::string& path) {
  line.clear();
  std::streambuf* buf = in.rdbuf();
  for (;;) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return !line.empty();
    }
    if (c == '\n') return true;
    line.push_back(static_cast<char>(c));
    if (static_cast<int64_t>(line.size()) > input_kind::kDataInputMaxLineBytes) {
      fail(
          "{}:{}: the line is longer than {}, the most one document may be; each line holds "
          "one JSON object (is this a JSON lines file?)",
          path, line_no, input_bytes_text(input_kind::kDataInputMaxLineBytes));
    }
  }
}

// "prepare: 12000 documents, 40.0 of 80.0 MiB read (50%), 12.5 MiB/s, ETA 3s", rewritten in
// place on a terminal and printed at every quarter otherwise; the last line gives the time taken.
class PrepareProgress {
 public:
  PrepareProgress(std::FILE* out, int64_t total_bytes)
      : out_(out),
        total_(std::max<int64_t>(total_bytes, 1)),
        tty_(out && isatty(fileno(out))),
        start_(std::chrono::steady_clock::now()) {}
  void update(int64_t documents, int64_t bytes, bool done) {
    if (out_ == nullptr) return;
    const int64_t pct = std::min<int64_t>(100, bytes * 100 / total_);
    if (!tty_ && !done && pct / 25 == last_quarter_) return;
    last_quarter_ = pct / 25;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double mib = static_cast<double>(bytes) / (1 << 20);
    const double rate = seconds > 0 ? mib / seconds : 0;
    const std::string when =
        done
            ? fmt::format("in {}", format_duration(seconds))
            : fmt::format("ETA {}", rate > 0 ? format_duration(static_cast<double>(total_ - bytes) /
                                                               (1 << 20) / rate)
                                             : std::string("?"));
    fmt::print(out_, "{}prepare: {} documents, {:.1f} of {:.1f} MiB read ({}%), {:.1f} MiB/s, {}{}",
               tty_ ? "\r\033[K" : "", documents, mib, static_cast<double>(total_) / (1 << 20), pct,
               rate, when, tty_ && !done ? "" : "\n");
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  int64_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  int64_t last_quarter_ = 0;
};

}  // namespace

std::string prepare_output_prefix(const PrepareOptions& options, const std::string& key) {
  if (!options.output.empty()) return options.output;
  return fmt::format("{}_{}_document", options.output_prefix, key);
}

PrepareSummary prepare_jsonl(const PrepareOptions& options) {
  options_check(options);
  input_file_check(options.input, input_kind::kDataInput, InputLinks::follow, "--input");
  outputs_check(options);
  const std::unique_ptr<tokenize::Tokenizer> tok =
      tokenize::tokenizer_open(options.tokenizer_type, options.tokenizer_model);
  std::ifstream in(options.input, std::ios::binary);
  if (!in) fail("cannot open {}: {}", options.input, std::strerror(errno));
  std::error_code ec;
  const auto total = static_cast<int64_t>(std::filesystem::file_size(options.input, ec));

  PrepareSummary summary;
  summary.vocab_size = tok->vocab_size();
  // Megatron's DType.optimal_dtype: uint16 while the vocabulary fits below 65500.
  const TokenDType dtype = tok->vocab_size() < 65500 ? TokenDType::uint16 : TokenDType::int32;
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const std::string& key : options.json_keys) {
    summary.outputs.push_back(prepare_output_prefix(options, key));
    writers.push_back(std::make_unique<IndexedDatasetWriter>(summary.outputs.back(), dtype));
  }
  PrepareProgress progress(options.progress, ec ? 0 : total);
  const size_t block = kBlockLinesPerWorker * static_cast<size_t>(options.workers);
  int64_t line_no = 0, bytes = 0;
  std::vector<std::string> lines;
  for (bool more = true; more;) {
    lines.clear();
    std::string line;
    while (lines.size() < block &&
           (more = line_read_bounded(in, line, line_no + static_cast<int64_t>(lines.size()) + 1,
                                     options.input))) {
      bytes += static_cast<int64_t>(line.size()) + 1;
      lines.push_back(std::move(line));
    }
    for (LineResult& r : block_tokenize(lines, line_no + 1, options, *tok)) {
      ++line_no;
      if (!r.error.empty()) throw Error(r.error);
      if (r.blank) {
        ++summary.skipped_blank_lines;
        continue;
      }
      for (size_t k = 0; k < writers.size(); ++k) {
        if (r.tokens[k].empty()) {
          ++summary.skipped_empty_documents;
          continue;
        }
        writers[k]->add_document(r.tokens[k]);
      }
    }
    progress.update(writers.front()->num_documents(), bytes, !more);
  }
  if (in.bad()) fail("cannot read {}", options.input);
  for (size_t k = 0; k < writers.size(); ++k) {
    if (writers[k]->num_documents() == 0) {
      fail("{} holds no documents (no line with a non-empty \"{}\" field)", options.input,
           options.json_keys[k]);
    }
  }
  for (size_t k = 0; k < writers.size(); ++k) {
    writers[k]->finalize();
    summary.documents += writers[k]->num_documents();
    summary.tokens += writers[k]->num_tokens();
    tokenize::prepared_tokenizer_write(summary.outputs[k], *tok, options.tokenizer_model,
                                       options.append_eod);
  }
  return summary;
}

}  // namespace infinipipe::data
