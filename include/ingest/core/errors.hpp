// Errors: every exception ingest throws derives from ingest::Error and carries
// where it happened (stage, element index, file, byte offset, line/column).
// tf.data counterpart: tensorflow::Status codes (InvalidArgument, DataLoss, ...).
// A stage adds context to an error on its way out; context set closer to the
// source is never overwritten, so the innermost stage names the failing place.
// An error never shows a secret: URLs in its message and file are redacted
// when it is built (core/redact.hpp), whoever builds it.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ingest/core/redact.hpp"

namespace ingest {

/// Where an error happened. Every field is optional.
struct ErrorContext {
  std::string stage{};                    ///< "map", "tfrecord", "batch", ...
  std::optional<std::int64_t> element{};  ///< index of the element in the stage's input
  std::string file{};                     ///< path of the file being read
  std::optional<std::uint64_t> offset{};  ///< byte offset in the (decompressed) file
  std::optional<std::int64_t> line{};     ///< 1-based line (text formats)
  std::optional<std::int64_t> column{};   ///< 0-based column (CSV, as select_cols)
};

/// Base of every exception ingest throws.
class Error : public std::exception {
 public:
  /// Makes an error from its message and where it happened; URLs in either
  /// are redacted (core/redact.hpp).
  explicit Error(std::string message, ErrorContext context = {})
      : message_(redact_urls(message)), context_(std::move(context)) {
    redact_file();
    compose();
  }

  /// "Kind: message [stage 'map', element 3, file '...']": the kind, the
  /// message and the context fields that are set.
  const char* what() const noexcept override { return what_.c_str(); }
  /// The message without context.
  const std::string& message() const noexcept { return message_; }
  /// Where the error happened, as far as it is known.
  const ErrorContext& context() const noexcept { return context_; }
  /// A short name of the error's kind ("DataLossError", ...).
  virtual const char* kind() const noexcept { return "Error"; }

  /// Fills context fields that are still empty; fields already set are kept
  /// (the stage nearest the failure knows best).
  void add_context(const ErrorContext& outer) {
    if (context_.stage.empty()) context_.stage = outer.stage;
    if (!context_.element) context_.element = outer.element;
    if (context_.file.empty()) {
      context_.file = outer.file;
      redact_file();
    }
    if (!context_.offset) context_.offset = outer.offset;
    if (!context_.line) context_.line = outer.line;
    if (!context_.column) context_.column = outer.column;
    compose();
  }

 protected:
  /// Rebuilds what() from kind(), the message and the context; derived
  /// constructors call it again so what() starts with their kind.
  void compose() {
    what_ = kind();
    what_ += ": ";
    what_ += message_;
    std::string where;
    auto add = [&where](std::string_view part) {
      if (!where.empty()) where += ", ";
      where += part;
    };
    if (!context_.stage.empty()) add("stage '" + context_.stage + "'");
    if (context_.element) add("element " + std::to_string(*context_.element));
    if (!context_.file.empty()) add("file '" + context_.file + "'");
    if (context_.offset) add("offset " + std::to_string(*context_.offset));
    if (context_.line) add("line " + std::to_string(*context_.line));
    if (context_.column) add("column " + std::to_string(*context_.column));
    if (!where.empty()) what_ += " [" + where + "]";
  }

 private:
  // The whole field is one path or URL (it may hold a space), so it is
  // redacted as one, not scanned for URLs as a message is.
  void redact_file() {
    if (context_.file.find("://") != std::string::npos) context_.file = redact_url(context_.file);
  }

  std::string message_;
  ErrorContext context_;
  std::string what_;
};

#define INGEST_DEFINE_ERROR(Name)                                  \
  class Name : public Error {                                      \
   public:                                                         \
    /** Makes the error from its message and where it happened. */ \
    explicit Name(std::string message, ErrorContext context = {})  \
        : Error(std::move(message), std::move(context)) {          \
      compose();                                                   \
    }                                                              \
    const char* kind() const noexcept override { return #Name; }   \
  };

/// A caller passed a value the library cannot accept.
INGEST_DEFINE_ERROR(InvalidArgument)
/// Opening, reading or writing a file failed.
INGEST_DEFINE_ERROR(IoError)
/// Stored data is corrupt or truncated (bad CRC, short record, bad encoding).
INGEST_DEFINE_ERROR(DataLossError)
/// A user function threw; the original exception is nested (std::rethrow_if_nested).
INGEST_DEFINE_ERROR(FunctionError)
/// A resource is not present on this machine (e.g. no CUDA device).
INGEST_DEFINE_ERROR(Unavailable)
/// A broken invariant inside ingest; please report it.
INGEST_DEFINE_ERROR(InternalError)
/// An operation ingest does not support (yet), e.g. saving a stage's state.
INGEST_DEFINE_ERROR(Unimplemented)

#undef INGEST_DEFINE_ERROR

namespace detail {

/// Thrown inside a pipeline whose consumer is gone (its cancellation token
/// was stopped) to unwind a batch fill or an input loop between elements.
/// Not an ingest::Error on purpose: ignore_errors does not swallow it, no
/// cache publishes a pass it ended, and no context wraps it. It never reaches
/// a user: only iterators being destroyed see it.
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "ingest: iterator cancelled"; }
};

/// Who raised an exception that a stage passes on: a user function (map's f,
/// a generator...), whose foreign exceptions become FunctionError, or ingest's
/// own code (stacking, padding, allocating), whose exceptions keep their type.
enum class Raiser : std::uint8_t { user_function, internal };

/// Call from inside a catch block: the active exception with `context`
/// added, as rethrow_with_context would throw it, captured for later.
inline std::exception_ptr capture_with_context(const ErrorContext& context,
                                               Raiser raiser = Raiser::user_function);

/// Call from inside a catch block: rethrows the active exception with
/// `context` added. ingest::Errors keep their dynamic type. std::bad_alloc
/// always keeps its type (running out of memory is not a user function's
/// failure). Anything else from a user function is wrapped in FunctionError
/// with the original nested (std::rethrow_if_nested); from internal code it
/// keeps its type.
[[noreturn]] inline void rethrow_with_context(const ErrorContext& context,
                                              Raiser raiser = Raiser::user_function) {
  try {
    throw;
  } catch (Error& e) {
    e.add_context(context);
    throw;
  } catch (const Cancelled&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    if (raiser == Raiser::internal) throw;
    std::throw_with_nested(FunctionError(e.what(), context));
  } catch (...) {
    if (raiser == Raiser::internal) throw;
    std::throw_with_nested(FunctionError("non-standard exception", context));
  }
}

inline std::exception_ptr capture_with_context(const ErrorContext& context, Raiser raiser) {
  try {
    rethrow_with_context(context, raiser);
  } catch (...) {
    return std::current_exception();
  }
}

/// The same for an exception captured earlier (e.g. by a bulk fill_map).
inline std::exception_ptr capture_with_context(std::exception_ptr error,
                                               const ErrorContext& context,
                                               Raiser raiser = Raiser::user_function) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (...) {
    return capture_with_context(context, raiser);
  }
}

/// Calls a user function; an exception from it leaves with `stage` and
/// `element` as context. Zero cost when nothing throws.
template <class F, class... Args>
decltype(auto) invoke_user(const char* stage, std::optional<std::int64_t> element, F& f,
                           Args&&... args) {
  try {
    return f(std::forward<Args>(args)...);
  } catch (...) {
    rethrow_with_context({.stage = stage, .element = element});
  }
}

}  // namespace detail
}  // namespace ingest
