// Values that can fail without an exception: Result<T, E> (a value or an
// application error) and Status (success, a framework error, or an
// application enum code with a message). Both are ordinary wire values:
// parameters, results, struct fields (docs/async-and-errors.md §1).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "myelin/errors.h"

namespace myelin {

/// Why the runtime could not complete a call, in a framework Status.
enum class FrameworkError : std::uint8_t {
  kNone = 0,
  kConnectionClosed = 1,  ///< the endpoint closed or faulted before the reply
  kTimedOut = 2,          ///< the call's CallTimeout ran out
  kCanceled = 3,          ///< the caller canceled the call
  kRemoteFailure = 4,     ///< the remote handler threw
  kInvalidMessage = 5,    ///< the reply could not be decoded
};

/// Name of a framework error, for messages.
const char* toString(FrameworkError e);

namespace detail {

template <class T, class>
struct Codec;

/// The qualified name of enum type `E` ("ns::Code"), as both GCC and Clang
/// spell it: how a Status names its code's type without generated traits.
template <class E>
constexpr std::string_view enumTypeName() {
  // __PRETTY_FUNCTION__ rather than std::source_location: clang 14 with
  // libstdc++ 12 lacks the builtin the latter needs.
  std::string_view f = __PRETTY_FUNCTION__;
  // GCC: "... [with E = ns::Code; std::string_view = ...]"; Clang: "... [E = ns::Code]".
  std::size_t b = f.find("E = ");
  if (b == std::string_view::npos) return f;
  b += 4;
  std::size_t e = f.find_first_of(";]", b);
  return f.substr(b, e - b);
}

}  // namespace detail

/// The outcome of an operation: success, a framework error (the call could
/// not complete: the peer is gone, it timed out, it was canceled, the
/// handler threw), or an application error (a code of one of the
/// application's enums, and a message).
///
/// A method declared to return Status gets framework errors as a Status
/// instead of an exception: `Status s = Store::put(k, v); if (!s.isOk()) …`.
/// A service returns `{}` for success or `Status(MyError::kFull, "why")`.
class Status {
 public:
  enum class Kind : std::uint8_t { kOk = 0, kFramework = 1, kApplication = 2 };

  /// Success.
  Status() = default;
  /// An application error: `code` of the application's enum `E`, and a
  /// message. Implicit, so a method can `return MyError::kNotFound;`.
  template <class E>
    requires std::is_enum_v<E>
  Status(E code, std::string message = {})  // NOLINT(google-explicit-constructor)
      : kind_(Kind::kApplication),
        code_(static_cast<std::int64_t>(code)),
        codeType_(detail::enumTypeName<E>()),
        message_(std::move(message)) {}

  /// A framework error (made by the runtime, or passed on by a service that
  /// got one from a call it made).
  static Status framework(FrameworkError error, EndpointState state, std::string message) {
    Status s;
    s.kind_ = Kind::kFramework;
    s.framework_ = error;
    s.state_ = state;
    s.message_ = std::move(message);
    return s;
  }

  Kind kind() const { return kind_; }
  bool isOk() const { return kind_ == Kind::kOk; }
  bool isFrameworkError() const { return kind_ == Kind::kFramework; }
  bool isAppError() const { return kind_ == Kind::kApplication; }

  /// The application code, if this is an application error whose code is of
  /// enum type `E`; nullopt otherwise.
  template <class E>
    requires std::is_enum_v<E>
  std::optional<E> getCode() const {
    if (kind_ != Kind::kApplication || codeType_ != detail::enumTypeName<E>()) return std::nullopt;
    return static_cast<E>(code_);
  }
  /// True if this is the application error `code`.
  template <class E>
    requires std::is_enum_v<E>
  bool is(E code) const {
    auto c = getCode<E>();
    return c && *c == code;
  }

  /// For a framework error: what went wrong, and the state of the endpoint
  /// the call went to when it happened.
  FrameworkError frameworkError() const { return framework_; }
  EndpointState endpointState() const { return state_; }
  /// For an application error: the qualified name of the code's enum type
  /// and the code's value.
  const std::string& codeType() const { return codeType_; }
  std::int64_t codeValue() const { return code_; }
  /// The message given with the error ("" for success).
  const std::string& message() const { return message_; }

  /// Everything in one line: "ok", "timed out (endpoint connected): …",
  /// "app::StoreError 2: …".
  std::string getFormattedMessage() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  template <class, class>
  friend struct detail::Codec;
  Kind kind_ = Kind::kOk;
  FrameworkError framework_ = FrameworkError::kNone;
  EndpointState state_ = EndpointState::kConnected;
  std::int64_t code_ = 0;
  std::string codeType_;
  std::string message_;
};

/// A value of type `T` or an error of type `E`, constructed implicitly from
/// either: a method returns `value;` or `error;`. `T` and `E` must not
/// convert into each other, else `return x;` would be ambiguous.
template <class T, class E>
class Result {
  static_assert(!std::is_void_v<T> && !std::is_void_v<E>, "Result<T, E>: neither T nor E can be void");
  static_assert(!std::is_reference_v<T> && !std::is_reference_v<E>, "Result<T, E>: T and E are values");
  static_assert(!std::is_convertible_v<T, E> && !std::is_convertible_v<E, T>,
                "Result<T, E>: T and E convert into each other, so `return x;` would be ambiguous; "
                "wrap one of them in a struct or an enum");

  template <class U, class To, class Other>
  static constexpr bool kConvertsOnlyTo = !std::is_same_v<std::remove_cvref_t<U>, Result> &&
                                          std::is_convertible_v<U&&, To> && !std::is_convertible_v<U&&, Other>;

 public:
  using ValueType = T;
  using ErrorType = E;

  /// A default-constructed value.
  Result() : v_(std::in_place_index<0>) {}
  /// A value (anything that converts to T and not to E).
  template <class U = T>
    requires kConvertsOnlyTo<U, T, E>
  Result(U&& v) : v_(std::in_place_index<0>, std::forward<U>(v)) {}  // NOLINT(google-explicit-constructor)
  /// An error (anything that converts to E and not to T).
  template <class U = E>
    requires kConvertsOnlyTo<U, E, T>
  Result(U&& e) : v_(std::in_place_index<1>, std::forward<U>(e)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// The value; throws std::logic_error if this holds an error.
  T& value() & { return *checkedValue(this); }
  const T& value() const& { return *checkedValue(this); }
  T&& value() && { return std::move(*checkedValue(this)); }
  T* operator->() { return checkedValue(this); }
  const T* operator->() const { return checkedValue(this); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// The error; throws std::logic_error if this holds a value.
  E& error() & { return *checkedError(this); }
  const E& error() const& { return *checkedError(this); }

  /// The value, or `fallback` if this holds an error.
  template <class U>
  T valueOr(U&& fallback) const& {
    return ok() ? std::get<0>(v_) : static_cast<T>(std::forward<U>(fallback));
  }

  friend bool operator==(const Result& a, const Result& b)
    requires requires(const T& t, const E& e) {
      t == t;
      e == e;
    }
  {
    return a.v_ == b.v_;
  }

 private:
  template <class Self>
  static auto checkedValue(Self* self) {
    if (!self->ok()) throw std::logic_error("Result::value() on a Result that holds an error");
    return &std::get<0>(self->v_);
  }
  template <class Self>
  static auto checkedError(Self* self) {
    if (self->ok()) throw std::logic_error("Result::error() on a Result that holds a value");
    return &std::get<1>(self->v_);
  }
  template <class, class>
  friend struct detail::Codec;
  std::variant<T, E> v_;
};

}  // namespace myelin
