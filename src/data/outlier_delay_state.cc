#include "data/outlier_delay_state.h"

#include <vector>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe::data {

nlohmann::json outlier_delay_state(const OutlierDelay& delay) {
  auto entries = [](const std::vector<DelayedDocument>& docs) {
    nlohmann::json j = nlohmann::json::array();
    // A piece of a split document (--long-documents split) adds its first token.
    for (const DelayedDocument& d : docs) {
      nlohmann::json e = {d.ref.dataset, d.ref.document, d.epoch};
      if (d.ref.start != 0) e.push_back(d.ref.start);
      j.push_back(std::move(e));
    }
    return j;
  };
  return {{"queue", entries(delay.queue())}, {"lookahead", entries(delay.lookahead())}};
}

void outlier_delay_restore(OutlierDelay* delay, const nlohmann::json& state,
                           const std::function<int64_t(const DocumentRef&)>& length) {
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json queue = state.is_object() ? state.value("queue", none) : none;
  const nlohmann::json lookahead = state.is_object() ? state.value("lookahead", none) : none;
  const bool saved = !queue.empty() || !lookahead.empty();
  if (delay == nullptr) {
    if (saved)
      fail_config(
          "the checkpoint was saved with --outlier-delay and holds {} delayed documents not yet "
          "trained: resume with --outlier-delay so none is lost",
          queue.size() + lookahead.size());
    return;
  }
  if (!saved) return;
  auto docs = [&length](const nlohmann::json& j, const char* what) {
    std::vector<DelayedDocument> out;
    try {
      for (const nlohmann::json& e : j) {
        const DocumentRef ref{e.at(0).get<int32_t>(), e.at(1).get<int64_t>(),
                              e.size() > 3 ? e.at(3).get<int64_t>() : 0};
        out.push_back({ref, length(ref), e.at(2).get<int64_t>()});
      }
    } catch (const nlohmann::json::exception& ex) {
      fail("the checkpoint's outlier-delay {} is damaged: {}", what, json_error_text(ex));
    }
    return out;
  };
  delay->restore(docs(queue, "queue"), docs(lookahead, "lookahead"));
}

}  // namespace infinipipe::data
