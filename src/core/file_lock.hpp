// An exclusive lock shared by the processes that read, merge and rewrite one file: the tuning
// cache's save after every search (a run, its --devices workers, shards on one file system) and
// `merge --caches`.
#pragma once

#include <string>

namespace ffpa {

// flock(2) on `<path>.lock`, held from construction (which waits for it) to destruction; the
// directory must exist. The lock file stays behind: removing it would let two processes lock two
// different files. flock is per open file: one process takes it once, not nested.
class FileLock {
 public:
  explicit FileLock(const std::string& path);  // throws RunError when it cannot be taken
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace ffpa
