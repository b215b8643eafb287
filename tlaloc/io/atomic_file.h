// Crash-safe file replacement: write a temporary file in the target's folder, fsync it,
// rename it over the target, fsync the folder (the POSIX recipe; see rename(2), fsync(2)).
// A process killed at any point leaves either the previous file or the complete new one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace tlaloc::io {

// Points of a save, reported to SaveOptions::progress (tests kill the process there).
enum class SaveStage { temp_created, wrote, file_synced, renamed, dir_synced };

struct SaveOptions {
  // Called with the stage and the bytes written so far; `wrote` after every chunk.
  std::function<void(SaveStage, uint64_t)> progress;
  // Bytes per write(2) call.
  size_t chunk_bytes = size_t(4) << 20;
};

// Writes a file through a temporary ".NAME.tmp.XXXXXX" beside `path`. Destroying it before
// commit() removes the temporary and leaves `path` untouched. Errors (tlaloc::Error) name the
// file and the failing system call.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, SaveOptions options = {});
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(std::span<const std::byte> bytes);
  // fsync, close, rename over the target, fsync the folder.
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, temp_;
  SaveOptions opt_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Folder part of a path ("." when it has none).
std::string parent_dir(const std::string& path);

}  // namespace tlaloc::io
