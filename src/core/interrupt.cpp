#include "core/interrupt.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace ffpa {
namespace {

std::atomic<int> g_signal{0};

// Runs on its own thread: SIGINT and SIGTERM are blocked in every thread and taken here with
// sigwait, so no handler ever runs. NVRTC installs its own SIGINT/SIGTERM handlers while it
// compiles (they end the process with status 4); blocked signals never reach them.
void wait_for_signals(sigset_t set) {
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    int expected = 0;
    if (g_signal.compare_exchange_strong(expected, sig)) {
      constexpr char msg[] =
          "\nffpa-bench: interrupted; finishing the current step and saving (again to quit now)\n";
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
      continue;
    }
    constexpr char msg[] = "\nffpa-bench: interrupted twice; quitting without saving\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(128 + sig);
  }
}

}  // namespace

void catch_interrupts() {
  static std::once_flag once;
  std::call_once(once, [] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    // Threads started later (compilers, CUDA's) inherit the mask.
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(wait_for_signals, set).detach();
  });
}

int interrupted() {
  return g_signal.load();
}

int interrupt_exit_code(int signal) {
  return 128 + signal;
}

const char* signal_name(int signal) {
  return signal == SIGTERM ? "SIGTERM" : "SIGINT";
}

void set_interrupted(int signal) {
  g_signal.store(signal);
}

Interrupted::Interrupted(int signal)
    : std::runtime_error(std::string("interrupted by ") + signal_name(signal)), signal_(signal) {}

void check_interrupted() {
  if (const int s = interrupted()) throw Interrupted(s);
}

}  // namespace ffpa
