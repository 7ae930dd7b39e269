// Test double of a --devices worker: speaks the pool's protocol through the real WorkerChannel on
// the real plan and takes SIGINT/SIGTERM as ffpa-bench does (core/interrupt), but opens no GPU
// and measures nothing. Every row it sends is skipped with the reason "test double: nothing
// measured", so no file it contributes to can pass for a measurement. Built with the tests only;
// ffpa-bench starts workers from its own executable and cannot start this one.
//
// The pool tests steer it through the environment:
//   FAKE_GPU_<N>=name     the GPU model device N reports (default "Fake GPU")
//   FAKE_ROW_MS_<N>=ms    a row on device N takes this long (default 0); a signal meanwhile
//                         abandons it, as a safe point of a real row does, and the worker says so
//   FAKE_KILL_ITEM=i      the worker handed plan item i kills itself with SIGKILL
//   FAKE_LOSE_ITEM=i      the worker handed plan item i fails it as a lost CUDA context, exits 1
//   FAKE_GARBLE_ITEM=i    the worker handed plan item i sends a message that is not JSON
//   FAKE_TRACE=file       every worker appends "<device> <item>" when it is handed an item
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "cli/options.hpp"
#include "core/interrupt.hpp"
#include "plan/plan.hpp"
#include "runner/runner.hpp"
#include "runner/workers.hpp"

using namespace ffpa;

namespace {

int env_int(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::atoi(v) : -1;
}

Row row_of(const PlanItem& item, int device) {
  Row r = make_row(item);
  r.device = {"fake-host", device};
  Measurement m;
  m.impl = "test-double";
  m.kind = "ffpa";
  m.status = Status::skipped;
  m.reason = "test double: nothing measured";
  r.ffpa = m;
  return r;
}

// Waits `ms`, returning false as soon as a signal arrived.
bool work(int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (interrupted()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return !interrupted();
}

}  // namespace

int main(int argc, char** argv) {
  catch_interrupts();
  try {
    const auto opts = parse_cli(argc, argv);
    if (!opts || !opts->worker) {
      std::cerr << "fake_worker: expects the pool's arguments and --worker N\n";
      return 2;
    }
    const Plan plan = make_plan(*opts, *opts);
    const int device = opts->device;
    const std::string n = std::to_string(device);
    WorkerChannel ch;
    Environment env;
    const char* gpu = std::getenv(("FAKE_GPU_" + n).c_str());
    env.gpu = gpu ? gpu : "Fake GPU";
    env.host = "fake-host";
    ch.hello(env);
    const auto ended = [] { return interrupted() ? interrupt_exit_code(interrupted()) : 0; };
    if (!ch.wait_warm()) return ended();
    ch.ready();
    while (const auto index = ch.next_item()) {
      if (const char* trace = std::getenv("FAKE_TRACE"))
        std::ofstream(trace, std::ios::app) << device << " " << *index << "\n";
      if (*index == env_int("FAKE_KILL_ITEM")) ::raise(SIGKILL);
      if (*index == env_int("FAKE_GARBLE_ITEM")) {
        const char garbled[] = "{\"row\": \n";
        if (::write(4, garbled, sizeof garbled - 1) < 0) return 1;
        continue;
      }
      const PlanItem* item = nullptr;
      for (const PlanItem& it : plan.items)
        if (it.index == *index) item = &it;
      if (!item) return 1;
      if (!work(env_int("FAKE_ROW_MS_" + n))) {
        ch.log(std::string("interrupted by ") + signal_name(interrupted()));
        return ended();
      }
      Row row = row_of(*item, device);
      if (*index == env_int("FAKE_LOSE_ITEM")) {
        row.ffpa->status = Status::failed;
        row.ffpa->reason = "CUDA context lost: test double";
        ch.error("CUDA context lost: this worker ends");  // before the row, as run_worker does
        ch.row(row);
        return 1;
      }
      ch.row(row);
    }
    return ended();
  } catch (const std::exception& e) {
    std::cerr << "fake_worker: " << e.what() << "\n";
    return 1;
  }
}
