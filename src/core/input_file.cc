#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace infinipipe {

namespace {

[[noreturn]] void input_refuse(const InputKind& kind, const std::string& message) {
  if (kind.config_error) throw ConfigError(message);
  throw Error(message);
}

std::string input_name(const std::string& path, const std::string& label) {
  return label.empty() ? path : label + " " + path;
}

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// The checks shared by the path (stat) and the open descriptor (fstat).
int64_t input_stat_check(const struct stat& st, const std::string& path, const InputKind& kind,
                         const std::string& label) {
  const std::string name = input_name(path, label);
  if (!S_ISREG(st.st_mode)) {
    input_refuse(kind, fmt::format("{} is {}, not a regular file; give the path of a {} (a "
                                   "pipe or a device is not accepted)",
                                   name, file_type_name(st.st_mode), kind.what));
  }
  if (st.st_size > kind.max_bytes) {
    input_refuse(kind, fmt::format("{} is {} bytes, more than the {} a {} may be; it is not "
                                   "the file meant, or split it",
                                   name, static_cast<int64_t>(st.st_size),
                                   input_bytes_text(kind.max_bytes), kind.what));
  }
  return static_cast<int64_t>(st.st_size);
}

}  // namespace

std::string input_bytes_text(int64_t bytes) {
  if (bytes >= (1ll << 40) && bytes % (1ll << 40) == 0) return fmt::format("{} TiB", bytes >> 40);
  if (bytes >= (1ll << 30) && bytes % (1ll << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ll << 20) && bytes % (1ll << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

int64_t input_file_check(const std::string& path, const InputKind& kind, InputLinks links,
                         const std::string& label) {
  const std::string name = input_name(path, label);
  struct stat st {};
  const int rc = links == InputLinks::refuse ? ::lstat(path.c_str(), &st)
                                             : ::stat(path.c_str(), &st);
  if (rc != 0) {
    const int err = errno;
    if (err == ENOENT)
      input_refuse(kind, fmt::format("{} cannot be read: it does not exist; check the path", name));
    input_refuse(kind, fmt::format("{} cannot be read: {}; check the path and its permissions",
                                   name, std::strerror(err)));
  }
  if (links == InputLinks::refuse && S_ISLNK(st.st_mode)) {
    input_refuse(kind, fmt::format("{} is a symbolic link; the files of this folder are never "
                                   "read through one: copy the folder with its links resolved "
                                   "(cp -rL) and use the copy",
                                   name));
  }
  return input_stat_check(st, path, kind, label);
}

std::string input_file_read(const std::string& path, const InputKind& kind, InputLinks links,
                            const std::string& label) {
  input_file_check(path, kind, links, label);
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (links == InputLinks::refuse ? O_NOFOLLOW : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    input_refuse(kind, fmt::format("cannot open {}: {}; check the path and its permissions",
                                   input_name(path, label), std::strerror(errno)));
  }
  std::string text;
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      input_refuse(kind, fmt::format("cannot read {}: {}", input_name(path, label),
                                     std::strerror(errno)));
    }
    const int64_t size = input_stat_check(st, path, kind, label);
    text.reserve(static_cast<size_t>(size));
    char buf[1 << 16];
    for (;;) {
      const ssize_t got = ::read(fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        input_refuse(kind, fmt::format("cannot read {}: {}", input_name(path, label),
                                       std::strerror(errno)));
      }
      if (got == 0) break;
      // A file growing while it is read is held to the same bound.
      if (static_cast<int64_t>(text.size()) + got > kind.max_bytes) {
        input_refuse(kind, fmt::format("{} grew past the {} a {} may be while it was read",
                                       input_name(path, label), input_bytes_text(kind.max_bytes),
                                       kind.what));
      }
      text.append(buf, static_cast<size_t>(got));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return text;
}

}  // namespace infinipipe
