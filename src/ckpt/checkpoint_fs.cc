#include "ckpt/checkpoint_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace infinipipe {

FsAtomicFile::FsAtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fail("cannot create {}: {}; check that the directory exists and is writable", tmp_,
         std::strerror(errno));
  }
}

FsAtomicFile::~FsAtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void FsAtomicFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd_, p, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail("cannot write {}: {}; check free disk space", tmp_, std::strerror(errno));
    }
    p += put;
    n -= static_cast<size_t>(put);
    bytes_ += put;
  }
}

void FsAtomicFile::commit() {
  if (fd_ < 0) fail("internal: {} committed twice", path_);
  if (::fsync(fd_) != 0) fail("cannot flush {} to disk: {}", tmp_, std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close {}: {}", tmp_, std::strerror(errno));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    fail("cannot rename {} to {}: {}", tmp_, path_, std::strerror(errno));
  }
  fs_sync_dir(std::filesystem::path(path_).parent_path().string());
}

void fs_write_atomic(const std::string& path, std::string_view text) {
  FsAtomicFile f(path);
  f.write(text.data(), text.size());
  f.commit();
}

std::string fs_read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read {}", path);
  return ss.str();
}

void fs_sync_dir(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory {}: {}", d, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems (e.g. certain network mounts) refuse fsync on directories; that is not a
  // failure of the checkpoint itself.
  if (rc != 0 && err != EINVAL && err != EROFS) {
    fail("cannot flush directory {}: {}", d, std::strerror(err));
  }
}

void fs_make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create directory {}: {}", dir, ec.message());
}

}  // namespace infinipipe
