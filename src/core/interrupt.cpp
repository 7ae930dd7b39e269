#include "core/interrupt.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ffpa {
namespace {

std::atomic<int> g_signal{0};
// Guards g_forward. A signal is recorded and forwarded under it, so that a process added at the
// same moment gets that signal exactly once (a second one would make it quit without saving).
std::mutex g_forward_mutex;
std::vector<pid_t> g_forward;

// Runs on its own thread: SIGINT and SIGTERM are blocked in every thread and taken here with
// sigwait, so no handler ever runs. NVRTC installs its own SIGINT/SIGTERM handlers while it
// compiles (they end the process with status 4); blocked signals never reach them.
void wait_for_signals(sigset_t set) {
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    bool first = false;
    {
      const std::lock_guard<std::mutex> lock(g_forward_mutex);
      int expected = 0;
      first = g_signal.compare_exchange_strong(expected, sig);
      for (pid_t pid : g_forward) ::kill(pid, sig);
    }
    if (first) {
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

void forward_interrupts_to(int pid) {
  const std::lock_guard<std::mutex> lock(g_forward_mutex);
  g_forward.push_back(pid);
  if (const int sig = g_signal.load()) ::kill(pid, sig);
}

void stop_forwarding_to(int pid) {
  const std::lock_guard<std::mutex> lock(g_forward_mutex);
  g_forward.erase(std::remove(g_forward.begin(), g_forward.end(), pid), g_forward.end());
}

Interrupted::Interrupted(int signal)
    : std::runtime_error(std::string("interrupted by ") + signal_name(signal)), signal_(signal) {}

void check_interrupted() {
  if (const int s = interrupted()) throw Interrupted(s);
}

}  // namespace ffpa
