// tests/helper_process.hpp - a running tle_cache_helper (tests/cache_helper.cpp, next to
// tle_tests) started with posix_spawn, for tests that need a fresh process: the global disk cache
// reads TLE_CACHE_DIR once, NVRTC is loaded once per process, and no fork() of a process running
// LLVM's threads. Used by test_cache_attack.cpp and test_hostile.cpp.
#pragma once
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace proctest {

inline std::string helper_path() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "tle_cache_helper").string();
}

/// A running tle_cache_helper with `args`; its environment is this process's without TLE_CACHE and
/// TLE_CACHE_DIR, plus `env` (which replaces variables of the same name). Its stdout and stderr go
/// to one pipe (a pipe is not subject to RLIMIT_FSIZE, which some children set).
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    static const std::string helper = helper_path();
    REQUIRE(std::filesystem::exists(helper));
    std::vector<std::string> argv_s = {helper};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      std::string k = kv.substr(0, kv.find('='));
      if (k == "TLE_CACHE" || k == "TLE_CACHE_DIR" || env.count(k)) continue;
      env_s.push_back(kv);
    }
    for (auto& [k, v] : env) env_s.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    int rc = ::posix_spawn(&pid_, helper.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    fd_ = fds[0];
    REQUIRE(rc == 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      finish();
    }
  }
  void kill9() { ::kill(pid_, SIGKILL); }
  /// Waits for the child; its exit status (128 + signal when killed) and output.
  int finish() {
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out_.append(buf, static_cast<size_t>(n));
    }
    ::close(fd_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }
  const std::string& output() const { return out_; }
  int status() const { return status_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = -1;
  std::string out_;
};

}  // namespace proctest
