#include "core/interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

namespace ffpa {
namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    constexpr char msg[] =
        "\nffpa-bench: interrupted; finishing the current step and saving (again to quit now)\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    return;
  }
  constexpr char msg[] = "\nffpa-bench: interrupted twice; quitting without saving\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(128 + sig);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a blocking read or sleep returns EINTR and the caller reaches its check sooner.
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
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
