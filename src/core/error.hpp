// Errors that reach the user. InputError is bad input (exit code 2): it names where and why.
#pragma once

#include <stdexcept>
#include <string>

namespace ffpa {

constexpr int kExitBadInput = 2;

class InputError : public std::runtime_error {
 public:
  // where: the file (or "command line"); path: JSON pointer or flag name; reason: what was wrong.
  InputError(std::string where, std::string path, std::string reason)
      : std::runtime_error(where + ": " + path + ": " + reason),
        where_(std::move(where)),
        path_(std::move(path)),
        reason_(std::move(reason)) {}
  const std::string& where() const { return where_; }
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string where_, path_, reason_;
};

// A failure of the GPU, a library or the file system while running: the row fails or is skipped.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ffpa
