#include "runner/workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/interrupt.hpp"
#include "gpu/cuda.hpp"
#include "plan/shard.hpp"
#include "report/results_json.hpp"
#include "runner/runner.hpp"

extern char** environ;

namespace ffpa {
namespace {

using nlohmann::json;

constexpr int kInFd = 3;   // worker reads the pool's commands here
constexpr int kOutFd = 4;  // and writes its messages here
// How often the pool looks at interrupted() while no worker speaks: the signal thread cannot wake
// its poll.
constexpr int kPollMs = 100;

// Writes all of `text`; false when the reader has gone.
bool write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

// Reads one line (without the newline) from fd, buffered; false at end of file.
bool read_line(int fd, std::string& buf, std::string& line) {
  while (true) {
    const size_t nl = buf.find('\n');
    if (nl != std::string::npos) {
      line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return true;
    }
    char chunk[65536];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return fmt::format("killed by signal {} (SIG{})", sig, name ? name : "?");
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

// A pipe whose ends are above the fds a worker is given, so that dup2 onto 3 and 4 never meets
// one of them; both ends close on exec.
void make_pipe(int fds[2]) {
  int raw[2];
  if (::pipe(raw) != 0) throw RunError("pipe: " + errno_text());
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
    ::close(raw[i]);
    if (fds[i] < 0) throw RunError("fcntl: " + errno_text());
  }
}

Row unrun_row(const PlanItem& item, int device, Status status, const std::string& reason) {
  Row r = make_row(item);
  r.device.index = device;
  r.baselines.push_back(whole_row(status, reason));
  return r;
}

struct Worker {
  int device = 0;
  pid_t pid = -1;
  int to = -1, from = -1;  // pool's ends: commands, messages
  std::string buf;         // unread message bytes
  enum class State { starting, waiting, warming, idle, busy, gone } state = State::starting;
  int item = -1;         // plan index of the row it works on
  bool leaving = false;  // said it ends after its row: hand it no more
  std::optional<Environment> env;
  std::string error;  // what it said before it ended
};

class Pool {
 public:
  Pool(const Plan& plan, PoolObserver& obs) : plan_(plan), obs_(obs) {
    for (size_t i = 0; i < plan.items.size(); ++i) by_index_[plan.items[i].index] = i;
  }

  ~Pool() {
    // Normal end: the workers have gone. On an exception: stop those still running.
    for (Worker& w : workers_) {
      if (w.to >= 0) ::close(w.to);
      if (w.from >= 0) ::close(w.from);
      if (w.pid > 0) {
        ::kill(w.pid, SIGTERM);
        stop_forwarding_to(w.pid);
        int status = 0;
        ::waitpid(w.pid, &status, 0);
      }
    }
  }

  void spawn(const WorkerLaunch& launch, int device) {
    Worker w;
    w.device = device;
    int in[2], out[2];  // in: pool -> worker, out: worker -> pool
    make_pipe(in);
    make_pipe(out);
    std::vector<std::string> args = {launch.program};
    args.insert(args.end(), launch.args.begin(), launch.args.end());
    args.push_back("--worker");
    args.push_back(std::to_string(device));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], kInFd);
    posix_spawn_file_actions_adddup2(&fa, out[1], kOutFd);
    // Anything a library prints on stdout goes to the console, not into the protocol.
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t dflt;
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);  // the pool ignores it; the worker must not inherit that
    posix_spawnattr_setsigdefault(&attr, &dflt);
    // SIGINT and SIGTERM reach a worker only through the pool (forward_interrupts_to): in the
    // terminal's process group a Ctrl-C would reach it twice, and a second signal quits without
    // saving. Blocked from the start, they wait for the worker's own signal thread.
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGTERM);
    posix_spawnattr_setsigmask(&attr, &blocked);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    const int err = posix_spawn(&w.pid, launch.program.c_str(), &fa, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    w.to = in[1];
    w.from = out[0];
    if (err != 0) {
      w.pid = -1;
      w.state = Worker::State::gone;
      w.error = "cannot start " + launch.program + ": " + std::strerror(err);
      obs_.on_log(device, w.error);
    } else {
      forward_interrupts_to(w.pid);
      obs_.on_log(device, fmt::format("worker started, pid {}", w.pid));
    }
    workers_.push_back(std::move(w));
  }

  Results run(const std::vector<int>& devices, const WorkerLaunch& launch) {
    t0_ = std::chrono::steady_clock::now();
    for (int d : devices) spawn(launch, d);
    for (int i : longest_first(plan_)) queue_.push_back(plan_.items[i].index);

    // Every worker says hello (or ends) before any row: the models are checked first.
    while (count(Worker::State::starting) > 0) step();
    check_models();
    start_warm_up();
    while (!interrupted()) {
      dispatch();
      if (count(Worker::State::gone) == static_cast<int>(workers_.size())) break;
      if (queue_.empty() && count(Worker::State::busy) == 0) break;
      step();
    }
    // After a signal the workers stop at their next safe point (they got it too); the idle ones
    // wait for a command and end when the pipe closes.
    for (Worker& w : workers_) stop(w);
    for (Worker& w : workers_)
      while (w.state != Worker::State::gone) step();
    if (interrupted()) return std::move(results_);  // complete stays false

    // Rows no worker was left to run.
    std::string last;
    for (const Worker& w : workers_)
      if (!w.error.empty()) last = fmt::format("cuda:{} {}", w.device, w.error);
    while (!queue_.empty()) {
      const PlanItem& item = plan_.items[by_index_.at(queue_.front())];
      queue_.pop_front();
      finish(unrun_row(item, -1, Status::skipped,
                       "not run: no worker left" + (last.empty() ? "" : " (last: " + last + ")")));
    }
    results_.complete = true;
    return std::move(results_);
  }

 private:
  int count(Worker::State s) const {
    return static_cast<int>(std::count_if(workers_.begin(), workers_.end(),
                                          [s](const Worker& w) { return w.state == s; }));
  }

  void send(Worker& w, const json& msg) {
    if (w.to < 0) return;
    if (!write_all(w.to, msg.dump() + "\n")) {
      // It has ended or is ending; its end of file tells how.
      ::close(w.to);
      w.to = -1;
    }
  }

  void stop(Worker& w) {
    if (w.to >= 0) {
      ::close(w.to);
      w.to = -1;
    }
  }

  void check_models() {
    std::string first, list;
    bool mixed = false;
    for (const Worker& w : workers_) {
      if (!w.env) continue;
      list += fmt::format("{}cuda:{} {}", list.empty() ? "" : ", ", w.device, w.env->gpu);
      if (first.empty()) first = w.env->gpu;
      mixed = mixed || w.env->gpu != first;
    }
    if (mixed)
      throw InputError("command line", "--devices",
                       "GPUs of different models (" + list +
                           "): a results file, its tables and the tuning cache describe one "
                           "model; run one --devices list per model");
    Environment env;
    for (const Worker& w : workers_)
      if (w.env) {
        env = *w.env;
        break;
      }
    env.command_line = plan_.settings.command_line;  // the pool's, not a worker's
    results_ = start_results(plan_, std::move(env));
  }

  // The first worker compiles the plan's kernels alone; the others start once it is ready (or
  // gone), and read the cubin cache.
  void start_warm_up() {
    for (Worker& w : workers_)
      if (w.state == Worker::State::waiting) {
        w.state = Worker::State::warming;
        send(w, {{"warm", true}});
        return;
      }
  }

  void dispatch() {
    for (Worker& w : workers_) {
      if (w.state != Worker::State::idle || w.leaving || queue_.empty() || w.to < 0 ||
          interrupted())
        continue;
      w.item = queue_.front();
      queue_.pop_front();
      w.state = Worker::State::busy;
      const int done = static_cast<int>(results_.rows.size());
      const int total = static_cast<int>(plan_.items.size());
      const double elapsed = seconds_since(t0_);
      const double eta = done == 0 ? -1.0 : elapsed / done * (total - done);
      obs_.on_start(w.device, plan_.items[by_index_.at(w.item)], done, total, elapsed, eta);
      send(w, {{"item", w.item}});
    }
  }

  // Waits for messages from the workers and handles them.
  void step() {
    std::vector<pollfd> fds;
    std::vector<Worker*> who;
    for (Worker& w : workers_)
      if (w.state != Worker::State::gone) {
        fds.push_back({w.from, POLLIN, 0});
        who.push_back(&w);
      }
    if (fds.empty()) return;
    if (::poll(fds.data(), fds.size(), kPollMs) < 0) {
      if (errno == EINTR) return;
      throw RunError("poll: " + errno_text());
    }
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) receive(*who[i]);
  }

  void receive(Worker& w) {
    char chunk[65536];
    const ssize_t n = ::read(w.from, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) return ended(w);
    w.buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = w.buf.find('\n')) != std::string::npos;) {
      const std::string line = w.buf.substr(0, nl);
      w.buf.erase(0, nl + 1);
      handle(w, line);
    }
  }

  void handle(Worker& w, const std::string& line) {
    try {
      dispatch_message(w, json::parse(line));
    } catch (const std::exception& e) {
      // Same build on both ends: this is a worker gone wrong. Its row fails, it gets no more.
      const std::string why = "unreadable message from the worker (" + std::string(e.what()) + ")";
      obs_.on_log(w.device, why);
      w.error = why;
      w.leaving = true;
      stop(w);  // it ends when it next asks for work
      if (w.state == Worker::State::busy) {
        Row row = unrun_row(plan_.items[by_index_.at(w.item)], w.device, Status::failed, why);
        w.state = Worker::State::idle;
        w.item = -1;
        finish(std::move(row));
      }
    }
  }

  void dispatch_message(Worker& w, const json& msg) {
    const std::string where = fmt::format("worker cuda:{}", w.device);
    if (msg.contains("hello")) {
      w.env = env_from_json(msg.at("hello"), where);
      w.state = Worker::State::waiting;
    } else if (msg.contains("ready")) {
      const bool first = count(Worker::State::idle) + count(Worker::State::busy) == 0;
      w.state = Worker::State::idle;
      if (first) warm_others();
    } else if (msg.contains("row")) {
      Row row = row_from_json(msg.at("row"), where);
      if (w.state != Worker::State::busy || row.plan_index != w.item) {
        obs_.on_log(w.device, fmt::format("sent row {} while working on {}: ignored",
                                          row.plan_index, w.item));
        return;
      }
      w.state = Worker::State::idle;
      w.item = -1;
      finish(std::move(row));
    } else if (msg.contains("log")) {
      obs_.on_log(w.device, msg.at("log").get<std::string>());
    } else if (msg.contains("error")) {
      w.error = msg.at("error").get<std::string>();
      w.leaving = true;
      obs_.on_log(w.device, w.error);
    } else {
      throw RunError("unknown message " + msg.dump());
    }
  }

  void warm_others() {
    for (Worker& o : workers_)
      if (o.state == Worker::State::waiting) {
        o.state = Worker::State::warming;
        send(o, {{"warm", true}});
      }
  }

  // End of file from a worker: it has ended (or is about to). Its row, if any, fails.
  void ended(Worker& w) {
    stop_forwarding_to(w.pid);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.pid = -1;
    const std::string how = how_it_ended(status);
    const bool was_warming = w.state == Worker::State::warming;
    const bool crashed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (crashed) {
      if (w.error.empty()) w.error = how;
      obs_.on_log(w.device, "worker " + how + (w.state == Worker::State::busy ? "" : " (idle)"));
    }
    // After a signal its row is abandoned, as a one-GPU run abandons the row it was in.
    if (w.state == Worker::State::busy && !interrupted()) {
      const PlanItem& item = plan_.items[by_index_.at(w.item)];
      Row row = unrun_row(item, w.device, Status::failed,
                          fmt::format("worker on cuda:{} {} while running this row{}", w.device,
                                      how, w.error == how ? "" : ": " + w.error));
      row.device.host = w.env ? w.env->host : "";
      finish(std::move(row));
    }
    w.state = Worker::State::gone;
    stop(w);
    ::close(w.from);
    w.from = -1;
    // The first worker died compiling: hand warm-up to the next one.
    if (was_warming && count(Worker::State::warming) == 0 && count(Worker::State::idle) == 0)
      start_warm_up();
  }

  void finish(Row row) {
    const auto at = std::lower_bound(results_.rows.begin(), results_.rows.end(), row.plan_index,
                                     [](const Row& r, int index) { return r.plan_index < index; });
    results_.rows.insert(at, std::move(row));
    obs_.on_row(results_);
  }

  const Plan& plan_;
  PoolObserver& obs_;
  std::map<int, size_t> by_index_;  // plan index -> position in plan_.items
  std::vector<Worker> workers_;
  std::deque<int> queue_;  // plan indices not yet handed out, longest first
  Results results_;
  std::chrono::steady_clock::time_point t0_;
};

// Worker-side observer: Session diagnostics go to the pool.
class ChannelObserver : public RunObserver {
 public:
  explicit ChannelObserver(WorkerChannel& ch) : ch_(ch) {}
  void on_row(const Results&) override {}
  void on_log(int, const std::string& msg) override { ch_.log(msg); }

 private:
  WorkerChannel& ch_;
};

}  // namespace

Results run_pool(const Plan& plan, const std::vector<int>& devices, const WorkerLaunch& launch,
                 PoolObserver& obs) {
  // A worker that ends while the pool writes to it must not end the pool.
  ::signal(SIGPIPE, SIG_IGN);
  Pool pool(plan, obs);
  return pool.run(devices, launch);
}

struct WorkerChannel::Impl {
  std::string buf;
  bool send(const json& msg) {
    return write_all(kOutFd, msg.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  }
  std::optional<json> receive() {
    std::string line;
    if (!read_line(kInFd, buf, line)) return std::nullopt;
    try {
      return json::parse(line);
    } catch (const json::parse_error&) {
      return std::nullopt;
    }
  }
};

WorkerChannel::WorkerChannel() : impl_(std::make_unique<Impl>()) {
  if (::fcntl(kInFd, F_GETFD) < 0 || ::fcntl(kOutFd, F_GETFD) < 0)
    throw InputError("command line", "--worker",
                     "internal option of --devices: started without the pool's pipes");
}

WorkerChannel::~WorkerChannel() = default;

void WorkerChannel::hello(const Environment& env) {
  impl_->send({{"hello", env_to_json(env)}});
}

bool WorkerChannel::wait_warm() {
  const auto msg = impl_->receive();
  return msg && msg->contains("warm");
}

void WorkerChannel::ready() {
  impl_->send({{"ready", true}});
}

std::optional<int> WorkerChannel::next_item() {
  const auto msg = impl_->receive();
  if (!msg || !msg->contains("item") || !(*msg)["item"].is_number_integer()) return std::nullopt;
  return (*msg)["item"].get<int>();
}

void WorkerChannel::row(const Row& r) {
  if (!impl_->send({{"row", row_to_json(r)}})) throw RunError("the pool has gone");
}

void WorkerChannel::log(const std::string& msg) {
  impl_->send({{"log", msg}});
}

void WorkerChannel::error(const std::string& msg) {
  impl_->send({{"error", msg}});
}

int run_worker(const Plan& plan, int device, Registry& reg) {
  WorkerChannel ch;
  gpu::DeviceInfo dev;
  try {
    dev = gpu::open_device(device);
  } catch (const std::exception& e) {
    ch.error(e.what());
    return 3;
  }
  ch.hello(describe_environment(dev, reg, plan.settings.command_line));
  const auto ended = [] { return interrupted() ? interrupt_exit_code(interrupted()) : 0; };
  if (!ch.wait_warm()) return ended();
  ChannelObserver obs(ch);
  Session session(plan, dev, reg, obs);
  ch.ready();
  while (!interrupted()) {
    const auto index = ch.next_item();
    if (!index) break;
    const auto it = std::find_if(plan.items.begin(), plan.items.end(),
                                 [&](const PlanItem& i) { return i.index == *index; });
    if (it == plan.items.end()) {
      ch.error(fmt::format("plan item {} is not in this worker's plan", *index));
      return 1;
    }
    Row row;
    try {
      row = session.run(*it);
    } catch (const Interrupted&) {
      break;  // the row is abandoned; the pool, which forwarded the signal, expects no row
    }
    // A fresh process would get a fresh context; this one has none left. Said before the row, so
    // that the pool hands this worker nothing more.
    const bool lost = !session.lost().empty();
    if (lost) ch.error(session.lost() + "; this worker ends");
    ch.row(row);
    if (lost) return 1;
  }
  return ended();
}

}  // namespace ffpa
