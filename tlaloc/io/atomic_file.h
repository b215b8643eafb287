// Crash-safe file replacement: write a temporary file in the target's folder, fsync it,
// rename it over the target, fsync the folder (the POSIX recipe; see rename(2), fsync(2)).
// A process killed at any point leaves either the previous file or the complete new one.
//
// What it guarantees about the files on disk:
//   * Only regular files are replaced: a target that exists and is anything else (a device such
//     as /dev/null or /dev/full, a FIFO, a folder; symbolic links are followed) is refused with
//     a tlaloc::Error, when the AtomicFile is made and again just before the rename.
//   * The temporary ".NAME.tmp.XXXXXX" (mkostemp: a unique name) is removed on every exit path
//     but SIGKILL and power loss: by the destructor (exceptions, a full disk) and by
//     remove_live_temporaries(), which signal handlers call before the process exits.
//   * While it exists, the writer holds flock(LOCK_EX) on its temporary. Making an AtomicFile
//     for NAME removes the temporaries of NAME left by killed writers: only names of exactly
//     that pattern beside NAME, only regular files owned by this user, only those nobody holds
//     locked (a live writer's temporary is left alone, so two concurrent writers of one target
//     never break each other; the last rename wins, whole).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace tlaloc::io {

// Points of a save, reported to SaveOptions::progress (tests kill the process there);
// folder_published: an AtomicDir's new folder has taken its name (atomic_dir.h).
enum class SaveStage { temp_created, wrote, file_synced, renamed, dir_synced, folder_published };

struct SaveOptions {
  // Called with the stage and the bytes written so far; `wrote` after every chunk.
  std::function<void(SaveStage, uint64_t)> progress;
  // Bytes per write(2) call.
  size_t chunk_bytes = size_t(4) << 20;
};

// Writes a file through a temporary ".NAME.tmp.XXXXXX" beside `path` (see the top of this
// file). Destroying it before commit() removes the temporary and leaves `path` untouched.
// Errors (tlaloc::Error) name the file and the failing system call.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, SaveOptions options = {});
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(std::span<const std::byte> bytes);
  // fsync, rename over the target, close, fsync the folder.
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  void create_temp();
  void drop_temp();  // closes and removes the temporary (before commit)
  std::string path_, temp_;
  SaveOptions opt_;
  int fd_ = -1;
  int slot_ = -1;  // its entry for remove_live_temporaries()
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Removes every temporary of a live AtomicFile of this process and every staging folder of a
// live AtomicDir (atomic_dir.h). Async-signal-safe (unlink(2), getdents64(2), rmdir(2) on fixed
// buffers): for signal handlers that end the process, so a Ctrl-C or SIGTERM during a save
// leaves no ".NAME.tmp.*" or ".NAME.saving.*" behind.
void remove_live_temporaries() noexcept;

namespace detail {
// The slots remove_live_temporaries() reads: `path` is a temporary file (`folder` false) or a
// staging folder holding only files. Returns the slot, or -1 when all are taken.
int register_live(const std::string& path, bool folder);
void unregister_live(int slot);
}  // namespace detail

// How an output file will be written, for check_output_file.
enum class OutputMode {
  replace,  // AtomicFile: a temporary in the folder renamed over the file
  append,   // opened for appending (a metrics CSV)
};

// Checks, before any work, that `path` can be written as `mode`: not empty, its folder exists
// and is writable (as this user: permissions and read-only file systems), and the file is
// absent or a regular file (writable, when appended to). Throws one tlaloc::Error line that
// starts with `what` (e.g. "train fmnist: --save") and names the path:
//   "<what> is empty", "<what> P: folder D does not exist", "<what> P is a folder; give a file
//   name", "<what> P is a character device, not a regular file (tlaloc writes only regular
//   files)", "<what> P: folder D is not writable: <reason>", ...
void check_output_file(const std::string& path, const std::string& what,
                       OutputMode mode = OutputMode::replace);

// Throws one tlaloc::Error line unless `dir`, the folder `path` goes in, is a folder this user
// can write: "<what> <path>: folder <dir> does not exist", "... is not a folder", "... is not
// writable: <reason>".
// check_output_file(path, what, replace), and an existing `path` must be a PNG picture (its
// 8-byte signature): a picture never replaces a file of another kind (a text, a dataset, a
// config.json). With `not_inside`, `path` may not be directly inside that folder (the model or
// adapter directory a run saves, which holds only its own files).
void check_output_png(const std::string& path, const std::string& what,
                      const std::optional<std::string>& not_inside = std::nullopt);

void check_writable_folder(const std::string& path, const std::string& what,
                           const std::string& dir);

// Whether paths a and b name one file: the same file when both exist, else the same path once
// made absolute and normal (two outputs of one command must not be one file).
bool same_file(const std::string& a, const std::string& b);

// Folder part of a path ("." when it has none).
std::string parent_dir(const std::string& path);
// File name part of a path (after the last '/').
std::string base_name(const std::string& path);

}  // namespace tlaloc::io
