#include "ckpt/checkpoint_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace infinipipe {

FsAtomicFile::FsAtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  // unlink never follows a symbolic link: a stale or planted temporary goes, its target stays.
  if (::unlink(tmp_.c_str()) != 0 && errno != ENOENT) {
    fail("cannot remove the stale temporary file {}: {}; remove it by hand", tmp_,
         std::strerror(errno));
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == EEXIST) {
    fail(
        "cannot create {}: another process created it while this one saved; run one save per "
        "directory at a time",
        tmp_);
  }
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

void fs_require_real_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) fail("cannot inspect {}: {}", dir, std::strerror(errno));
  if (S_ISLNK(st.st_mode)) {
    fail(
        "{} is a symbolic link; a checkpoint is never written or read through one (its files "
        "would land elsewhere): remove the link",
        dir);
  }
  if (!S_ISDIR(st.st_mode)) fail("{} is not a directory; move it away", dir);
}

void fs_check_writable_dir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    fail_config("{} {}: cannot create the folder ({}); choose a folder you can write", flag, dir,
                ec.message());
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    fail_config("{} {}: not a folder; choose a folder", flag, dir);
  }
  std::string probe = (std::filesystem::path(dir) / ".infinipipe-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    fail_config(
        "{} {}: cannot create a file there ({}); make the folder writable or choose "
        "another {}",
        flag, dir, std::strerror(errno), flag);
  }
  ::close(fd);
  if (::unlink(probe.c_str()) != 0) {
    fail_config("{} {}: cannot remove the probe file {} ({}); check the folder's permissions", flag,
                dir, probe, std::strerror(errno));
  }
}

}  // namespace infinipipe
