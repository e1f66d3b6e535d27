// Reading the files people name on the command line (and the files inside folders they name):
// one size bound per kind of file, and only regular files, so a FIFO, a device such as
// /dev/zero or a runaway file ends in one clear error instead of a wait or bad_alloc
// (docs/reliability.md, "Input bounds"). Every whole-file read of user input goes through here.
#pragma once

#include <cstdint>
#include <string>

namespace infinipipe {

// One kind of input file: what messages call it and the largest size accepted.
struct InputKind {
  const char* what;   // "configuration file", "prompt file", ...
  int64_t max_bytes;  // larger files are refused before they are read
  bool config_error;  // a ConfigError (exit 2) rather than an Error (exit 1)
};

// The bounds, each well above any file the project writes or reads in practice.
namespace input_kind {
inline constexpr InputKind kConfigYaml{"YAML configuration file", 16ll << 20, true};
inline constexpr InputKind kPrompt{"prompt file", 64ll << 20, true};
inline constexpr InputKind kTokenizerModel{"tokenizer model", 1ll << 30, true};
inline constexpr InputKind kTokenizerConfig{"tokenizer config", 16ll << 20, true};
inline constexpr InputKind kLengths{"lengths file", 1ll << 30, false};
inline constexpr InputKind kPlan{"plan file", 1ll << 30, false};
inline constexpr InputKind kCalibration{"calibration file", 64ll << 20, false};
inline constexpr InputKind kJson{"JSON file", 1ll << 30, false};
// `data prepare --input`: streamed line by line, so only a line is held at once.
inline constexpr InputKind kDataInput{"data prepare input", 1ll << 40, false};
inline constexpr int64_t kDataInputMaxLineBytes = 256ll << 20;  // one document
// The files of a traced run's directory (`report`).
inline constexpr InputKind kRunTrace{"trace file", 4ll << 30, false};
inline constexpr InputKind kRunMetrics{"metrics file", 1ll << 30, false};
inline constexpr InputKind kRunPlan{"plan file", 1ll << 30, false};
inline constexpr InputKind kRunConfig{"saved configuration", 16ll << 20, false};
// A Hugging Face model folder's config.json and safetensors index (real ones are under 1 MB).
inline constexpr InputKind kModelFolderJson{"model folder JSON file", 64ll << 20, true};
// A checkpoint's state.json, config.json and indexes: a rank state or an index of many tensors.
inline constexpr InputKind kCheckpointJson{"checkpoint JSON file", 1ll << 30, false};
// Any file a checkpoint's state.json lists, tensor shards included (checked, not read whole).
inline constexpr InputKind kCheckpointFile{"checkpoint file", 4ll << 40, false};
// A listed checkpoint file read whole into memory (tokenizer files, JSON) and the `latest` pointer.
inline constexpr InputKind kCheckpointWholeFile{"checkpoint file read whole", 1ll << 30, false};
}  // namespace input_kind

// Whether a symbolic link at the path itself is followed (a file the user named) or refused (a
// file inside a folder that is read as a whole, such as a checkpoint or a run directory).
enum class InputLinks { follow, refuse };

// Checks that `path` is a regular file within `kind`'s bound and returns its size; throws the
// kind's error class with what is wrong and how to fix it. `label` prefixes messages (a flag such
// as "--config"; empty: the kind's name).
int64_t input_file_check(const std::string& path, const InputKind& kind,
                         InputLinks links = InputLinks::follow, const std::string& label = "");

// input_file_check, then the whole file. Opened non-blocking and re-checked on the descriptor,
// so a file swapped for a FIFO between the two never blocks, and never reads past the bound.
std::string input_file_read(const std::string& path, const InputKind& kind,
                            InputLinks links = InputLinks::follow, const std::string& label = "");

// "16 MiB", "1 GiB": a bound as messages and docs show it.
std::string input_bytes_text(int64_t bytes);

}  // namespace infinipipe
