// Writing the files people name on the command line: an output path must name a file in a
// folder that exists (not a folder, not `DIR/`), never one of the command's inputs, and a write
// goes through PATH.tmp, renamed into place, so a failed write leaves neither a half-written
// file nor its temporary (docs/reliability.md, "Outputs").
#pragma once

#include <string>
#include <string_view>

namespace infinipipe {

// ConfigError (exit 2) when `prefix` cannot name files PREFIX.ext: empty, ending in '/', "." or
// "..", or in a folder that does not exist. `label` names the flag ("--output").
void output_prefix_check(const std::string& prefix, const std::string& label);

// output_prefix_check, and not an existing folder: `path` names one output file ("--html").
void output_path_check(const std::string& path, const std::string& label);

// ConfigError when writing `output` would replace `input` (the same file, by any path).
void output_not_input_check(const std::string& output, const std::string& input,
                            const std::string& label);

// output_path_check, then `text` written to PATH.tmp and renamed to PATH; any failure removes
// the temporary and is an Error naming the file and the reason (exit 1).
void output_file_write(const std::string& path, std::string_view text, const std::string& label);

}  // namespace infinipipe
