// `infinipipe data`: corpus tools (stats, prepare, synth). Flags are named like Megatron-LM's.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "data/indexed_dataset.h"
#include "data/lengths.h"
#include "data/prepare.h"
#include "data/run_datasets.h"
#include "data/synth.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::cli {

namespace {

struct StatsArgs {
  std::vector<std::string> data_path;  // one PREFIX, or a blend "W1 P1 W2 P2 ..."
  std::string lengths;
  std::string distribution;
  int64_t num_sequences = 0;
  int64_t seq_length = 0;
  int64_t seed = 1234;
  std::string long_documents = "truncate";
};

// A dataset's lengths with --long-documents split: a document of n tokens becomes n / cap
// samples of cap tokens and one of the rest (an empty document stays one empty entry).
std::vector<int64_t> lengths_split(const std::vector<int64_t>& documents, int64_t cap) {
  std::vector<int64_t> out;
  for (const int64_t n : documents) {
    for (int64_t i = 0; i < n / cap; ++i) out.push_back(cap);
    if (n % cap != 0 || n == 0) out.push_back(n % cap);
  }
  return out;
}

// Megatron's counts of an indexed dataset: documents (document_indices entries − 1) and the
// sequences (index entries) they span, which differ when preprocessing split sentences.
std::string dataset_counts(const data::IndexedDataset& ds, const std::string& prefix) {
  int64_t tokens = 0;
  for (int64_t d = 0; d < ds.num_documents(); ++d) tokens += ds.document_length(d);
  return fmt::format("{}: {} documents ({} sequences in its index), {} tokens", prefix,
                     ds.num_documents(), ds.num_sequences(), tokens);
}

// A blend: the documents its seeded order draws, as many as the datasets hold together, so the
// shares follow the weights; each truncated to `cap`.
std::string words_joined(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& w : words) joined += (joined.empty() ? "" : " ") + w;
  return joined;
}

// With --long-documents split a sample is a piece of at most `cap` tokens (cap < INT64_MAX).
std::vector<int64_t> blend_lengths(const std::vector<std::string>& words, int64_t cap, bool split,
                                   uint64_t seed, std::string& what) {
  const data::RunDatasets rd =
      data::RunDatasets::open({words_joined(words), "100,0,0", "", "", "", split ? cap : 0});
  for (size_t i = 0; i < rd.prefixes().size(); ++i) {
    what +=
        fmt::format("{}\n", dataset_counts(rd.dataset(static_cast<int32_t>(i)), rd.prefixes()[i]));
  }
  const int64_t n = rd.split(data::DataSplit::train).samples();
  data::DocumentStream stream = rd.stream(data::DataSplit::train, n, seed);
  std::vector<int64_t> lengths;
  for (const data::DocumentRef& ref : stream.next()) {
    lengths.push_back(std::min(rd.document_length(data::DataSplit::train, ref), cap));
  }
  what += split ? fmt::format(
                      "the blend's order (seed {}): {} samples drawn by weight, each a document "
                      "or a piece of at most {} tokens of one",
                      seed, n, cap)
                : fmt::format(
                      "the blend's order (seed {}): {} documents drawn by weight, one sequence "
                      "each",
                      seed, n);
  return lengths;
}

void run_data_stats(const StatsArgs& a) {
  const int sources = !a.data_path.empty() + !a.lengths.empty() + !a.distribution.empty();
  if (sources != 1) {
    fail_config(
        "data stats needs exactly one of --data-path PREFIX, --lengths FILE or "
        "--distribution NAME");
  }
  if (a.seq_length < 0) fail_config("--seq-length must be positive, got {}", a.seq_length);
  const bool split = a.long_documents == "split";
  if (split && a.seq_length == 0)
    fail_config("--long-documents split cuts documents at --seq-length: give --seq-length N");
  if (split && !a.distribution.empty())
    fail_config(
        "--long-documents split splits documents, and --distribution draws lengths already cut "
        "at --seq-length: give --data-path PREFIX or --lengths FILE");
  std::vector<int64_t> lengths;
  std::string what;
  std::string warning;
  if (!a.data_path.empty() && a.seq_length > 0 && !split) {
    // The tokens truncation drops, weighed as a blend draws its datasets.
    const data::RunDatasets rd =
        data::RunDatasets::open({words_joined(a.data_path), "100,0,0", "", "", ""});
    warning = data::truncation_warning(rd.truncation(data::DataSplit::train, a.seq_length),
                                       a.seq_length, "the data");
  }
  if (a.data_path.size() == 1) {
    const int64_t cap = a.seq_length > 0 ? a.seq_length : INT64_MAX;
    if (split) {
      lengths = lengths_split(data::lengths_from_indexed(a.data_path[0], INT64_MAX), cap);
    } else {
      lengths = data::lengths_from_indexed(a.data_path[0], cap);
    }
    what = dataset_counts(data::IndexedDataset::open(a.data_path[0]), a.data_path[0]) +
           (split ? fmt::format("\nits samples as train reads them with --long-documents split "
                                "(a document, or consecutive pieces of at most {} tokens of a "
                                "longer one)",
                                cap)
                  : std::string("\nits sequences as train reads them (one per document)"));
  } else if (!a.data_path.empty()) {
    const int64_t cap = a.seq_length > 0 ? a.seq_length : INT64_MAX;
    lengths = blend_lengths(a.data_path, cap, split, static_cast<uint64_t>(a.seed), what);
  } else if (!a.lengths.empty()) {
    lengths = data::lengths_from_text(a.lengths);
    if (split) {
      lengths = lengths_split(lengths, a.seq_length);
    } else if (a.seq_length > 0) {
      data::Truncation t;
      for (auto& len : lengths) {
        t.tokens += len;
        if (len > a.seq_length) ++t.long_documents, t.dropped_tokens += len - a.seq_length;
        len = std::min(len, a.seq_length);
      }
      t.documents = static_cast<int64_t>(lengths.size());
      t.dropped_share =
          t.tokens > 0 ? static_cast<double>(t.dropped_tokens) / static_cast<double>(t.tokens) : 0;
      warning = data::truncation_warning(t, a.seq_length, "the lengths file");
    }
    what = fmt::format("lengths file {}", a.lengths);
  } else {
    if (a.seq_length <= 0) fail_config("--distribution needs --seq-length (the maximum length)");
    if (a.num_sequences <= 0) {
      fail_config("--distribution needs --num-sequences N (a positive count)");
    }
    lengths = data::lengths_synthetic(a.distribution, a.num_sequences, a.seq_length,
                                      static_cast<uint64_t>(a.seed));
    what = fmt::format("distribution {} (seed {})", a.distribution, a.seed);
  }
  const std::string cap = a.seq_length <= 0 ? ""
                          : split           ? fmt::format(", split at {} tokens", a.seq_length)
                                            : fmt::format(", truncated to {} tokens", a.seq_length);
  // A sequence is what train feeds the model: one document, truncated to --seq-length (or with
  // --long-documents split a piece of one).
  fmt::print("{}: {} sequences{}\n\n", what, lengths.size(), cap);
  if (!warning.empty()) fmt::print("{}\n\n", warning);
  fmt::print("{}", data::format_length_stats(data::length_stats(lengths)));
}

}  // namespace

void add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data",
                                      "corpus tools: length statistics, jsonl -> "
                                      "Megatron .bin/.idx, synthetic corpora");
  data->require_subcommand(1);

  auto stats = std::make_shared<StatsArgs>();
  CLI::App* st = data->add_subcommand(
      "stats", "share of sequences and tokens per length bucket, and percentiles");
  st->add_option("--data-path", stats->data_path,
                 "Megatron dataset PREFIX (.bin/.idx), or a blend W1 PREFIX1 W2 PREFIX2 ...")
      ->expected(1, -1);
  st->add_option("--lengths", stats->lengths, "text file with one sequence length per line");
  st->add_option("--distribution", stats->distribution,
                 "built-in distribution: github, commoncrawl, uniform, fixed");
  st->add_option("--num-sequences", stats->num_sequences, "sequences to draw from --distribution");
  st->add_option("--seq-length", stats->seq_length,
                 "maximum sequence length; longer documents are truncated, or split with "
                 "--long-documents split (0 = none)");
  st->add_option("--seed", stats->seed, "seed of --distribution and of a blend's order")
      ->capture_default_str();
  st->add_option("--long-documents", stats->long_documents,
                 "a document longer than --seq-length: truncate (train's default; the share of "
                 "tokens it drops is shown) | split (consecutive samples of at most --seq-length)")
      ->check(CLI::IsMember({"truncate", "split"}))
      ->capture_default_str();
  st->callback([stats] { run_data_stats(*stats); });

  auto prep = std::make_shared<data::PrepareOptions>();
  CLI::App* pr = data->add_subcommand(
      "prepare",
      "tokenize JSON lines (one object per line) into Megatron .bin/.idx datasets, with "
      "Megatron-LM preprocess_data.py's flags");
  pr->add_option("--input", prep->input, "input FILE.jsonl")->required();
  pr->add_option("--output", prep->output, "output PREFIX: PREFIX.bin/.idx (one json key)");
  pr->add_option("--output-prefix", prep->output_prefix,
                 "Megatron's output naming: PREFIX_{key}_document.bin/.idx for every json key");
  pr->add_option("--json-keys,--json-key", prep->json_keys, "fields holding the documents' text")
      ->capture_default_str();
  pr->add_flag("--append-eod", prep->append_eod,
               "end each document with the tokenizer's end-of-document token");
  pr->add_option(
        "--tokenizer-type", prep->tokenizer_type,
        std::string(tokenize::tokenizer_types_text<tokenize::TokenizerTypesText::with_help>()))
      ->capture_default_str();
  pr->add_option(
      "--tokenizer-model", prep->tokenizer_model,
      fmt::format("the file of --tokenizer-type: {}",
                  tokenize::tokenizer_types_text<tokenize::TokenizerTypesText::model_file>()));
  pr->add_option("--workers", prep->workers, "tokenizing threads (output is the same for any)")
      ->capture_default_str();
  pr->callback([prep] {
    prep->progress = stderr;
    const data::PrepareSummary s = data::prepare_jsonl(*prep);
    for (const std::string& out : s.outputs) fmt::print("wrote {}.bin/.idx\n", out);
    fmt::print("{} documents, {} tokens, vocabulary {} ({})", s.documents, s.tokens, s.vocab_size,
               prep->tokenizer_type);
    if (s.skipped_empty_documents > 0) {
      fmt::print(" ({} empty documents skipped)", s.skipped_empty_documents);
    }
    fmt::print("\n");
  });

  auto synth = std::make_shared<data::SynthOptions>();
  CLI::App* sy = data->add_subcommand(
      "synth", "write a synthetic corpus with long-tail lengths and learnable structure");
  sy->add_option("--distribution", synth->distribution,
                 "document lengths: github, commoncrawl, uniform, fixed")
      ->capture_default_str();
  sy->add_option("--num-documents", synth->num_documents, "documents to write")
      ->capture_default_str();
  sy->add_option("--seq-length", synth->seq_length, "maximum document length")
      ->capture_default_str();
  sy->add_option("--seed", synth->seed, "seed of the lengths and of the text")
      ->capture_default_str();
  sy->add_option("--output,--output-prefix", synth->output, "output PREFIX")->required();
  sy->callback([synth] {
    const data::SynthSummary s = data::synth_corpus_write(*synth);
    fmt::print("wrote {}.bin/.idx: {} documents, {} tokens ({} lengths, seed {})\n", synth->output,
               s.documents, s.tokens, synth->distribution, synth->seed);
  });
}

}  // namespace infinipipe::cli
