#include "runtime/train_log_rewind.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe::runtime {

namespace {

// The iteration of one record; Error when the line is not one.
int64_t record_iteration(const std::string& line, const std::string& where) {
  const nlohmann::json rec =
      json_parse(line, where, "it is not a log of infinipipe train: choose another path");
  if (!rec.is_object()) fail("{} is not a JSON object; choose another path", where);
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
    fail("{} is a symbolic link; a run's logs are never written through one: remove the link",
         path);
  }
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
    if (!line.empty() &&
        record_iteration(line, path + " line " + std::to_string(n)) > last_kept)
      drop = true;
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
