#include "runtime/train_log_rewind.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"

namespace infinipipe::runtime {

namespace {

// The iteration of one record; Error when the line is not one.
int64_t record_iteration(const std::string& line, const std::string& where) {
  const nlohmann::json rec = json_parse(line, where);
  if (!rec.is_object()) fail("{} is not a JSON object", where);
  return json_int(json_field(rec, "iteration", where), where + ": iteration", 0);
}

}  // namespace

void train_log_rewind(const std::string& path, int64_t last_kept) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return;
  if (fs::is_symlink(st)) {
    fail_config(
        "{} is a symbolic link; a run's logs are never written through one: remove the link or "
        "choose another path",
        path);
  }
  // A FIFO or a device at the path would block the read; a runaway file would fill memory.
  input_file_check(path, input_kind::kRunMetrics, InputLinks::refuse);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}", path, std::strerror(errno));
  // Every line is checked before anything is cut: the path may name some other file.
  std::streamoff keep = 0;  // bytes before the first record to drop
  bool drop = false;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (in.eof()) {  // a last line without its newline was cut short by a killed run
      drop = true;
      break;
    }
    int64_t iteration = 0;
    try {
      if (!line.empty()) iteration = record_iteration(line, path + " line " + std::to_string(n));
    } catch (const Error& e) {
      // Some other file (--metrics, --timings or the log folder named the wrong one): a usage
      // error, and the file stays as it is.
      fail_config("{}; this run appends one record per iteration there: choose another path",
                  e.what());
    }
    if (iteration > last_kept) drop = true;
    if (!drop) keep = in.tellg();
  }
  if (!drop) return;
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, keep) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    fail("cannot cut {} back to iteration {}: {}", path, last_kept, std::strerror(err));
  }
  ::close(fd);
}

}  // namespace infinipipe::runtime
