#include "report/run_html_explain.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/config.h"
#include "report/svg_util.h"

namespace infinipipe::report {

namespace {

using Key = std::pair<int64_t, int32_t>;

// Lists longer than this fold into a <details> (every row is kept).
constexpr size_t kOpenRows = 16;

std::string key_value(const Key& k) {
  return fmt::format("{}-{}", k.first, k.second);
}

std::string bytes_list(const std::vector<int64_t>& bytes) {
  std::string s;
  for (size_t i = 0; i < bytes.size(); ++i) s += (i ? ", " : "") + format_bytes(bytes[i]);
  return s;
}

// A cell of text (left-aligned; the page right-aligns numbers).
std::string td(const std::string& text) {
  return "<td class=\"text\">" + svg_escape(text) + "</td>";
}

std::string table_open(const std::vector<const char*>& heads) {
  std::string h = "<table>\n<tr>";
  for (const char* t : heads) h += fmt::format("<th>{}</th>", t);
  return h + "</tr>\n";
}

// `rows` as a table, folded under `summary` when long.
std::string folded(const std::string& summary, const std::string& table, size_t rows) {
  if (rows <= kOpenRows) return table;
  return fmt::format("<details><summary>{}</summary>\n{}</details>\n", svg_escape(summary), table);
}

std::string candidates_html(const plan::PlanExplain& ex) {
  std::string h = fmt::format(
      "<h4>Settings the search evaluated ({}, in order)</h4>\n<p class=\"note\">Predicted step "
      "time and peak memory per rank of each; the chosen one (&#9733;) is the fastest that "
      "fits the budget, every other says why it lost.</p>\n",
      ex.candidates.size());
  if (ex.candidates.empty()) return h + "<p class=\"note\">None recorded.</p>\n";
  h += table_open(
      {"", "setting", "chunks", "pipelines", "predicted step", "peak per rank", "fits", "verdict"});
  for (const plan::ExplainCandidate& c : ex.candidates) {
    h += c.chosen ? "<tr class=\"chosen\"><td>&#9733;</td>" : "<tr><td></td>";
    h += td(c.setting) + fmt::format("<td>{}</td><td>{}</td>", c.chunks, c.pipelines) +
         fmt::format("<td>{:.4f} s</td>", c.step_time) + td(bytes_list(c.peak_bytes)) +
         td(c.fits ? "yes" : "no") + td(c.verdict) + "</tr>\n";
  }
  h += "</table>\n";
  if (!ex.notes.empty()) {
    h += "<ul class=\"note\">\n";
    for (const std::string& n : ex.notes) h += "<li>" + svg_escape(n) + "</li>\n";
    h += "</ul>\n";
  }
  return h;
}

std::string cuts_html(const plan::PlanExplain& ex) {
  std::string h = "<h4>Cuts</h4>\n";
  if (ex.has_limits)
    h += fmt::format(
        "<p class=\"note\">Sequence processor: T_t = {:.5f} s (forward + backward of a chunk on "
        "the reference stage), T_m = {} tokens, tails of at least {} tokens{}.</p>\n",
        ex.limits.time_threshold, ex.limits.token_threshold, ex.limits.min_tail_slice,
        ex.relaxed ? fmt::format("; {} short sequences placed above T_t", ex.relaxed) : "");
  if (ex.cuts.empty()) return h + "<p class=\"note\">No sequence is cut.</p>\n";
  h += table_open({"sequence", "tokens", "why cut there", "slices [offset, +tokens) seconds"});
  for (const plan::ExplainCut& c : ex.cuts) {
    std::string slices;
    for (size_t i = 0; i < c.lens.size(); ++i)
      slices +=
          fmt::format("{}[{}, +{}) {:.5f} s", i ? " " : "", c.offsets[i], c.lens[i], c.times[i]);
    h += fmt::format("<tr><td>{}</td><td>{}</td>", c.seq, c.length) + td(c.rule) + td(slices) +
         "</tr>\n";
  }
  return h + "</table>\n";
}

std::string packs_html(const plan::PlanExplain& ex) {
  std::string h = fmt::format(
      "<h4>Packs</h4>\n<p class=\"note\">{} chunk(s) of whole sequences: "
      "{}.</p>\n",
      ex.packs.size(), svg_escape(ex.pack_rule));
  if (ex.packs.empty()) return h;
  std::string t = table_open({"chunk", "tail slice of", "whole sequences", "tokens", "seconds"});
  for (const plan::ExplainPack& p : ex.packs) {
    std::string seqs;
    for (size_t i = 0; i < p.seqs.size(); ++i) seqs += fmt::format("{}{}", i ? " " : "", p.seqs[i]);
    t += fmt::format("<tr><td>{}</td><td>{}</td>", p.chunk,
                     p.tail_of >= 0 ? fmt::format("seq {}", p.tail_of) : "") +
         td(seqs) + fmt::format("<td>{}</td><td>{:.5f}</td></tr>\n", p.tokens, p.time);
  }
  t += "</table>\n";
  return h + folded(fmt::format("{} packed chunks", ex.packs.size()), t, ex.packs.size());
}

std::string recompute_html(const plan::PlanExplain& ex) {
  int64_t saved = 0;
  double time = 0;
  for (const plan::ExplainRecompute& r : ex.recompute) {
    saved += r.saved_bytes;
    time += r.time;
  }
  std::string h = fmt::format(
      "<h4>Recompute</h4>\n<p class=\"note\">{} (stage, chunk) recompute: {} less activation "
      "memory held from forward to backward and {:.4f} s of recompute, summed over them",
      ex.recompute.size(), format_bytes(saved), time);
  if (ex.recompute_time > 0)
    h += fmt::format(" ({:.4f} s on the critical waves, the recompute solve's objective)",
                     ex.recompute_time);
  h += ".</p>\n";
  if (ex.recompute.empty())
    return "<h4>Recompute</h4>\n<p class=\"note\">No (stage, chunk) recomputes: every chunk "
           "keeps its activations from forward to backward.</p>\n";
  std::string t = table_open({"stage", "chunk", "rank", "layers", "saves", "costs"});
  for (const plan::ExplainRecompute& r : ex.recompute)
    t += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td>", r.stage, r.chunk,
                     r.rank, r.layers, r.max_layers) +
         fmt::format("<td>{}</td><td>{:.5f} s</td></tr>\n", format_bytes(r.saved_bytes), r.time);
  t += "</table>\n";
  return h + folded(fmt::format("{} recomputing (stage, chunk)", ex.recompute.size()), t,
                    ex.recompute.size());
}

constexpr const char* kExplainSelectScript = R"(<script>
(function() {
  var select = document.getElementById('explain-plan');
  select.addEventListener('change', function() {
    var blocks = document.querySelectorAll('div.explain-plan');
    for (var i = 0; i < blocks.length; ++i)
      blocks[i].style.display = blocks[i].getAttribute('data-plan') === select.value ? '' : 'none';
  });
})();
</script>
)";

}  // namespace

std::string html_explain(const std::map<Key, plan::PlanExplain>& explains,
                         int64_t shown_iteration) {
  std::string h = "<h2>Why these plans</h2>\n";
  if (explains.empty()) {
    return h +
           "<p class=\"note\">The traced plans carry no explanation; trace with "
           "<code>train --trace DIR --trace-explain</code> to see the settings each "
           "iteration's planner evaluated and why it chose its plan.</p>\n";
  }
  const Key shown =
      explains.count({shown_iteration, 0}) ? Key{shown_iteration, 0} : explains.rbegin()->first;
  if (explains.size() > 1) {
    h += "<p><label>plan <select id=\"explain-plan\">";
    for (const auto& entry : explains)
      h += fmt::format("<option value=\"{}\"{}>iteration {}, replica {}</option>",
                       key_value(entry.first), entry.first == shown ? " selected" : "",
                       entry.first.first, entry.first.second);
    h += "</select></label></p>\n";
  }
  for (const auto& entry : explains) {
    const plan::PlanExplain& ex = entry.second;
    h += fmt::format(
        "<div class=\"explain-plan\" data-plan=\"{}\"{}>\n<h3>Iteration {}, replica {} ({} "
        "schedule)</h3>\n",
        key_value(entry.first), entry.first == shown ? "" : " style=\"display:none\"",
        entry.first.first, entry.first.second, svg_escape(ex.schedule));
    h += candidates_html(ex) + cuts_html(ex) + packs_html(ex) + recompute_html(ex) + "</div>\n";
  }
  if (explains.size() > 1) h += kExplainSelectScript;
  return h;
}

}  // namespace infinipipe::report
