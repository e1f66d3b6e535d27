// A run's JSON-lines logs (metrics.jsonl, --timings) go on across resumes, one record per
// iteration. A run that starts after iteration N keeps the records of iterations up to N and
// drops the later ones, written by an earlier run that went past its last checkpoint or by a
// run from scratch in the same folder, so the file tells each iteration once, as this run did.
#pragma once

#include <cstdint>
#include <string>

namespace infinipipe::runtime {

// Truncates `path` at its first record of an iteration after `last_kept`, or at a half-written
// last line (a killed run's). Nothing when `path` is empty or does not exist. ConfigError, the
// file untouched, when an earlier line is not a record with an integer "iteration" (the path
// names some other file) or `path` is a symbolic link.
void train_log_rewind(const std::string& path, int64_t last_kept);

}  // namespace infinipipe::runtime
