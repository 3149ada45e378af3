// Reads of a file through a read-only mapping kept across calls, for the
// kernels that read many small ranges of a warm file (packed rows on the
// fly, GPT samples): a copy out of mapped page-cache pages costs no system
// call, where a positional read costs one per range.
//
// A mapped file that shrinks makes a read of its lost pages raise SIGBUS.
// Every copy out of a mapping is therefore guarded: a SIGBUS on a thread
// inside a guarded copy returns from the copy with `false` (the handler,
// installed by arm_mapped_reads, jumps back; any other SIGBUS goes to the
// handler that was there before), and the caller then reads the same range
// with pread, which says what happened (the file ended, or an I/O error).
// Bytes of a lost page's remainder read as zeros; the callers check the
// file's size, time and inode after the call, as for positional reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace posembed {

// A read-only shared mapping of the first `size` bytes of the file `fd`
// (none for size 0); unmapped when destroyed. Throws std::system_error when
// the mapping fails.
class FileMap {
 public:
  FileMap(int fd, int64_t size);
  ~FileMap();
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;
  const uint8_t* data() const { return base_; }
  int64_t size() const { return size_; }

 private:
  const uint8_t* base_ = nullptr;
  int64_t size_ = 0;
};

// What a file must still be: its size, modification time (ns) and inode, as
// first seen; `given` false: only a regular file is asked for.
struct FileStamp {
  bool given = false;
  int64_t size = 0, mtime_ns = 0, inode = 0;
};

// How a file stood when opened or checked: `err` the errno of a failed
// open; `size` the size seen (for `resized`).
struct FileStatus {
  enum Kind { ok, unreadable, not_regular, resized, replaced } kind = ok;
  int err = 0;
  int64_t size = 0;
};

// The file a StableFile reads while the file at its path is the same one:
// a descriptor (for positional reads) and its read-only mapping (null where
// it cannot be mapped, or for an empty file). Closed when the last holder
// lets go.
class OpenFile {
 public:
  OpenFile(int fd, const int64_t identity[4]);
  ~OpenFile();
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int fd() const { return fd_; }
  const FileMap* map() const { return map_.get(); }
  bool same(const int64_t identity[4]) const;

 private:
  int fd_;
  std::unique_ptr<const FileMap> map_;
  int64_t identity_[4];
};

// A file a kernel reads on each call, checked against its stamp before the
// reads (its path looked up again: a file replaced, rewritten or removed
// since is seen) and after them (the file read, through its descriptor: one
// rewritten or shrunk meanwhile is seen). The descriptor and the mapping
// are kept across calls while the file at the path is the same one (device,
// inode, size and modification time), so a call costs a lookup and a status
// check, not an open. Calls may come from several threads at once; none
// needs the GIL.
class StableFile {
 public:
  StableFile(std::string path, FileStamp stamp) : path_(std::move(path)), stamp_(stamp) {}
  const std::string& path() const { return path_; }
  // The file checked, in *file (held by the caller for its reads), or what
  // was wrong with it (*file then null).
  FileStatus open(std::shared_ptr<const OpenFile>* file);
  // The file checked again (after the reads: rewritten meanwhile, old and
  // new tokens would mix).
  FileStatus check(const OpenFile& file) const;

 private:
  std::string path_;
  FileStamp stamp_;
  std::shared_ptr<const OpenFile> kept_;
};

// Where a kernel reads `file`: its descriptor and its mapping (null, 0 where
// it has none), with the SIGBUS guard armed for copies out of the mapping.
void set_file(const OpenFile& file, int* fd, const uint8_t** map, int64_t* map_size);

// Installs the SIGBUS handler that guarded copies need, once per process
// (later calls do nothing); call it before a kernel that copies out of a
// mapping, from any thread.
void arm_mapped_reads();

// Copies n bytes from `from` (inside a mapping) to `to`; false when the
// source's pages are gone (SIGBUS), with `to` partly written.
bool guarded_copy(uint8_t* to, const uint8_t* from, int64_t n);

// Guarded copies that met a lost page since the process started (a probe
// for the tests).
int64_t mapped_faults();

// A probe for the tests: a thread of its own holds the lock every
// StableFile takes to look at its kept file for `seconds` (returns once it
// holds it), as a reader would at the moment another thread forks.
void hold_file_lock(double seconds);

// A probe for the tests: the next StableFile::open of `path` truncates the
// file to `size` bytes once its checks passed and its mapping was taken (a
// file that shrinks while it is read, at a known moment).
void truncate_after_open(const std::string& path, int64_t size);

// n bytes at byte `offset` of the file into `to`: copied out of `map` (the
// file's first map_size bytes, or null) where the range lies inside it and
// its pages are there, else read with pread. 0, an errno, or -1 when the
// file ended first (`*ended` then holds the byte), as pread_all.
int read_mapped(int fd, const uint8_t* map, int64_t map_size, uint8_t* to, int64_t n,
                int64_t offset, int64_t* ended);

}  // namespace posembed
