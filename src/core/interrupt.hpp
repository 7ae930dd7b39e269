// SIGINT and SIGTERM: the first one asks the run to stop at the next safe point (between tuning
// trials, rows or compile jobs) so that the results file and the tuning cache are written; a
// second one exits at once. Exit status 128 + signal, as a shell reports a killed process.
#pragma once

#include <stdexcept>

namespace ffpa {

// Blocks SIGINT and SIGTERM in this and every later thread and takes them on a thread of its own
// (idempotent). Call first in main, before any other thread exists.
void catch_interrupts();
// The signal received so far (SIGINT or SIGTERM), or 0.
int interrupted();
// 130 for SIGINT, 143 for SIGTERM.
int interrupt_exit_code(int signal);
// "SIGINT" or "SIGTERM".
const char* signal_name(int signal);
// Test hook: behave as if `signal` had arrived (0 clears).
void set_interrupted(int signal);

// Thrown at a safe point once a signal arrived; unwinds to the command, which saves and exits.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

// Throws Interrupted when a signal arrived.
void check_interrupted();

}  // namespace ffpa
