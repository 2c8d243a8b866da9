// tle/error.hpp - the exceptions tle throws.
//
// UserError: a mistake in the user's kernel or launch; it names the user's file:line (taken with
//   std::source_location at the tle call the user wrote) and says what to change.
// RuntimeError: a failure of the driver, the JIT or the toolchain; it names the call and carries
//   its log.
#pragma once
#include <source_location>
#include <stdexcept>
#include <string>

namespace tle {

/// A source position in user code.
struct SrcLoc {
  const char* file = "";
  unsigned line = 0;
  unsigned column = 0;
  SrcLoc() = default;
  SrcLoc(const std::source_location& l) : file(l.file_name()), line(l.line()), column(l.column()) {}
  bool known() const { return line != 0; }
};

/// Thrown for every user mistake. what() reads "FILE:LINE: error: MESSAGE".
class UserError : public std::runtime_error {
 public:
  UserError(const SrcLoc& loc, const std::string& message);
  const std::string& file() const { return file_; }
  unsigned line() const { return line_; }
  /// The message without the location prefix.
  const std::string& message() const { return message_; }

 private:
  std::string file_, message_;
  unsigned line_;
};

/// Thrown when the driver, the JIT or a toolchain step fails. what() reads "CALL: MESSAGE" (then
/// the log on its own lines); log() holds the diagnostic output, if any.
class RuntimeError : public std::runtime_error {
 public:
  RuntimeError(const std::string& call, const std::string& message, std::string log = {});
  const std::string& call() const { return call_; }
  /// The message without the call and the log.
  const std::string& message() const { return message_; }
  const std::string& log() const { return log_; }

 private:
  std::string call_, message_, log_;
};

/// Thrown when tle itself breaks an invariant (a bug in tle, never the user's fault).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace tle
