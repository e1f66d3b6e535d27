#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenize/hf_regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "tokenize/hf_text.h"

namespace infinipipe::tokenize {

struct HfRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Match data per thread, grown to the largest pattern seen: encode runs on many workers.
pcre2_match_data* thread_match_data(const pcre2_code* code) {
  struct Holder {
    pcre2_match_data* data = nullptr;
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder h;
  uint32_t pairs = 0;
  pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &pairs);
  if (h.data == nullptr || pcre2_get_ovector_count(h.data) < pairs + 1) {
    pcre2_match_data_free(h.data);
    h.data = pcre2_match_data_create(pairs + 1 < 16 ? 16 : pairs + 1, nullptr);
    if (h.data == nullptr) fail("out of memory for a regular expression match");
  }
  return h.data;
}

// A JIT stack per thread large enough for long runs of one character class (the default 32 KiB
// ends matching on a few thousand spaces).
pcre2_match_context* thread_match_context() {
  struct Holder {
    pcre2_jit_stack* stack = nullptr;
    pcre2_match_context* context = nullptr;
    ~Holder() {
      pcre2_match_context_free(context);
      pcre2_jit_stack_free(stack);
    }
  };
  thread_local Holder h;
  if (h.context == nullptr) {
    h.stack = pcre2_jit_stack_create(32 << 10, 16 << 20, nullptr);
    h.context = pcre2_match_context_create(nullptr);
    if (h.stack == nullptr || h.context == nullptr) fail("out of memory for a regular expression");
    pcre2_jit_stack_assign(h.context, nullptr, h.stack);
  }
  return h.context;
}

}  // namespace

HfRegex::HfRegex(const std::string& pattern, bool literal, const std::string& where)
    : code_(std::make_unique<Code>()) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // (PCRE2_LITERAL takes no PCRE2_UCP: a literal has no character classes anyway.)
  const uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &err, &offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(err, message, sizeof message);
    fail_config("{}: the regular expression cannot be compiled at offset {} ({})", where, offset,
                reinterpret_cast<const char*>(message));
  }
  // JIT is a speed-up only; without it (an unsupported machine) the interpreter gives the same.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

HfRegex::~HfRegex() = default;

std::vector<std::pair<size_t, size_t>> HfRegex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = thread_match_data(code_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, md,
                               thread_match_context());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail("a tokenizer regular expression failed on a text ({})",
           reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.emplace_back(ov[0], ov[1]);
    if (ov[1] > ov[0]) {
      at = ov[1];
    } else {
      if (ov[1] >= text.size()) break;
      at = ov[1] + utf8_char_len(static_cast<unsigned char>(text[ov[1]]));
    }
  }
  return out;
}

std::string HfRegex::replace_all(std::string_view text, std::string_view with) const {
  std::string out;
  size_t at = 0;
  for (const auto& [b, e] : find_all(text)) {
    out.append(text.substr(at, b - at));
    out.append(with);
    at = e;
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace infinipipe::tokenize
