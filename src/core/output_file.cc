#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace infinipipe {

namespace fs = std::filesystem;

void output_prefix_check(const std::string& path, const std::string& label) {
  if (path.empty()) fail_config("{} needs a file name", label);
  const fs::path p(path);
  const std::string base = p.filename().string();
  if (path.back() == '/' || base.empty() || base == "." || base == "..") {
    fail_config("{} {}: names a folder, not a file; give a file name in it, such as {}{}name",
                label, path, path, path.back() == '/' ? "" : "/");
  }
  std::error_code ec;
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(parent, ec)) {
    fail_config("{} {}: the folder {} does not exist; create it first or choose another path",
                label, path, parent.string());
  }
}

void output_path_check(const std::string& path, const std::string& label) {
  output_prefix_check(path, label);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fail_config("{} {} is an existing folder; give a file name in it, such as {}/name", label,
                path, path);
  }
}

void output_not_input_check(const std::string& output, const std::string& input,
                            const std::string& label) {
  std::error_code ec;
  if (fs::equivalent(output, input, ec) && !ec) {
    fail_config("{} {} is the input {}: writing it would replace what is being read; choose "
                "another output path",
                label, output, input);
  }
}

void output_file_write(const std::string& path, std::string_view text, const std::string& label) {
  output_path_check(path, label);
  const std::string tmp = path + ".tmp";
  // A stale temporary (or a link planted at its name) is removed, never written through.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    fail("cannot write {} ({}): check that its folder is writable", tmp, std::strerror(errno));
  }
  const auto give_up = [&](const char* doing, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("{} {} failed ({}); nothing was written to {}", doing, tmp, std::strerror(err), path);
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t got = ::write(fd, text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) give_up("writing", got < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(got);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("writing {} failed ({}); nothing was written to {}", tmp, std::strerror(err), path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename {} to {} ({}); check the path and its permissions", tmp, path,
         std::strerror(err));
  }
}

}  // namespace infinipipe
