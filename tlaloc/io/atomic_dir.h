// Crash-safe replacement of a whole folder (a HuggingFace model directory): its files are
// written into a private staging folder ".NAME.saving.XXXXXX" beside NAME (each through an
// AtomicFile), which then takes NAME's place in one rename: rename(2) when NAME is absent,
// renameat2(RENAME_EXCHANGE) when it exists (the previous folder and the new one change places
// atomically; the previous one, now under the staging name, is then removed).
//
// What it guarantees about the files on disk:
//   * A process killed at any point leaves NAME as it was or the complete new folder, never a
//     mix of the two. (On a file system without RENAME_EXCHANGE the swap falls back to two
//     renames, NAME -> ".NAME.saving.XXXXXX-old" then the staging folder -> NAME; a crash between
//     them leaves no NAME and the previous folder under that -old name.)
//   * One writer at a time: the writer holds io::WriteLock on NAME (".NAME.lock" beside it) from
//     its construction to its end, so a staging folder beside NAME that it does not own belongs to
//     a killed save: those (".NAME.saving.XXXXXX" folders of this user, exactly that pattern) are
//     removed when the next save of NAME starts.
//   * The staging folder is removed on every exit path but SIGKILL and power loss: by the
//     destructor (errors, a full disk) and by remove_live_temporaries() (signal handlers).
//   * NAME must be absent or a folder (symbolic links followed to decide; the link itself is
//     then replaced by the new folder, what it points to is left alone): anything else is refused.
#pragma once

#include <functional>
#include <string>

#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/write_lock.h"

namespace tlaloc::io {

class AtomicDir {
 public:
  // Locks `path` (errors start with `what`, e.g. "train llama: --save"), refuses a `path` that
  // exists and is not a folder, removes staging folders of killed saves, creates the staging
  // folder. `options.progress` hears SaveStage::folder_published.
  AtomicDir(std::string path, const std::string& what, SaveOptions options = {});
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;
  ~AtomicDir();

  // Where the new folder's file `name` (a plain file name) is written before commit(), e.g.
  // with save_safetensors or an AtomicFile.
  std::string file(const std::string& name) const;
  // Puts the file `source` into the new folder as `name`: with `may_link`, a hard link when the
  // file system allows it (for files of the previous folder: nothing copied); otherwise, or when
  // linking fails, a copy through an AtomicFile.
  void add_existing(const std::string& name, const std::string& source, bool may_link);
  // fsyncs the staging folder, puts it in place of `path`, fsyncs the parent folder, then
  // removes the previous folder.
  void commit();

  const std::string& path() const { return path_; }

 private:
  std::string path_, what_, staging_;
  SaveOptions opt_;
  WriteLock lock_;
  int slot_ = -1;
  bool committed_ = false;
};

// Checks, before any work, that `dir` can be written as a folder of `kind` ("model directory"):
// its parent is a writable folder and `dir` is absent or a folder holding only regular files
// that `is_ours` accepts. Throws one tlaloc::Error line starting with `what`, naming the path or
// the file that is not ours ("... holds 'notes.txt', which is not a file of a <kind>: tlaloc
// writes a <kind> only to a new or empty folder or over a <kind> (<ours>)").
void check_output_folder(const std::string& dir, const std::string& what, const std::string& kind,
                         const std::function<bool(const std::string&)>& is_ours,
                         const std::string& ours);

// A folder path without trailing slashes ("out/model/" -> "out/model"). Throws tlaloc::Error
// starting with `what` for an empty path and for one whose last part is "." or ".." or that is
// "/" (a model directory needs a name of its own).
std::string folder_name(const std::string& path, const std::string& what);

}  // namespace tlaloc::io
