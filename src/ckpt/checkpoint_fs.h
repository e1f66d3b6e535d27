// File-system steps that make checkpoints crash-safe: every file is written to a temporary name,
// flushed to disk (fsync), renamed into place, and its directory is flushed so the rename itself
// survives a power cut. A reader therefore sees either the old file or the complete new one.
// Nothing is written or read through a symbolic link: the temporary file is created exclusively
// (O_EXCL | O_NOFOLLOW) after any stale one is unlinked. Reads go through core/input_file.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace infinipipe {

// A file open for writing under `path + ".tmp"`; commit() flushes it and renames it to `path`.
// A `.tmp` left by a killed save (or planted there, even as a symbolic link) is unlinked, never
// written through. Destroying it without commit() removes the temporary file.
class FsAtomicFile {
 public:
  explicit FsAtomicFile(std::string path);
  ~FsAtomicFile();
  FsAtomicFile(const FsAtomicFile&) = delete;
  FsAtomicFile& operator=(const FsAtomicFile&) = delete;

  void write(const void* data, size_t n);  // Error naming the file on failure (e.g. disk full)
  void commit();                           // fsync, close, rename, fsync the directory
  int64_t bytes_written() const { return bytes_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  int64_t bytes_ = 0;
};

// Writes a whole small file atomically (JSON, the `latest` pointer).
void fs_write_atomic(const std::string& path, std::string_view text);
// Flushes a directory entry list, so renames and new files inside it are durable.
void fs_sync_dir(const std::string& dir);
// Creates `dir` and its parents (Error naming the directory on failure).
void fs_make_dirs(const std::string& dir);
// Error unless `dir` is a directory itself, not a symbolic link to one (what a checkpoint's own
// folders must be, so its files cannot land outside it).
void fs_require_real_dir(const std::string& dir);
// Creates `dir` when needed and proves it writable by creating and removing a probe file;
// ConfigError naming `flag` (e.g. "--save") and the reason otherwise. Run at start-up so a
// read-only folder fails before any work is done rather than at the first save.
void fs_check_writable_dir(const std::string& dir, const std::string& flag);

}  // namespace infinipipe
