// The schema of this program: every struct, enum and class registered by
// generated code at static-initialisation time, and its encoding as the
// handshake descriptor (docs/wire-format.md §3).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "myelin/detail/runtime_api.h"
#include "myelin/detail/wire_codec.h"

namespace myelin::detail {

struct StructSchema {
  std::string name;
  std::vector<NamedSig> fields;
};

struct EnumSchema {
  std::string name;
  std::vector<std::pair<std::string, std::int64_t>> values;
};

struct ClassSchema {
  std::string name;
  std::vector<MethodInfo> implemented;  // methods this side serves
  std::vector<MethodInfo> called;       // methods this side calls
};

/// What a side says of itself in its HELLO after its schema
/// (docs/wire-format.md §3): limits its peer keeps to. Named, so that a
/// limit added later is skipped by a side that does not know it.
struct HelloLimits {
  /// The largest frame body the side accepts (its EndpointConfig's
  /// maxMessageSize); none: not announced.
  std::optional<std::uint64_t> maxMessageSize;
};

/// A whole schema: ours (LocalSchema) or the peer's (parsed from HELLO).
struct SchemaDescriptor {
  std::vector<StructSchema> structs;
  std::vector<EnumSchema> enums;
  std::vector<ClassSchema> classes;
  /// The limits the HELLO announced (decode() fills them in).
  HelloLimits limits;

  /// Serialises into the HELLO body format, announcing `ours`.
  void encode(ByteBuffer& out, const HelloLimits& ours = {}) const;
  /// Parses a HELLO body strictly; throws InvalidMessageError.
  static SchemaDescriptor decode(const std::uint8_t* p, std::size_t n);
};

/// A method's position: class index and method index within the class list.
struct MethodRef {
  std::uint32_t cls;
  std::uint32_t method;
};

/// Process-wide registry of this program's schema. Registration happens
/// during static initialisation; after the first connection it is frozen
/// (further registration throws InvalidConfigurationError).
class LocalSchema {
 public:
  static LocalSchema& instance();

  int addStruct(std::string name, std::vector<NamedSig> fields);
  void addEnum(std::string name, std::vector<std::pair<std::string, std::int64_t>> values);
  int addClass(std::string name, Role role, std::vector<MethodInfo> methods);
  /// Index of a registered class in the descriptor, or -1.
  std::int32_t classIndex(const std::string& name);

  /// Freezes the schema and returns it; stable afterwards. Inline: every
  /// call a peer makes reads it (21 instructions a call out of line,
  /// callgrind of StreamSmallMsgFromServer's client).
  const SchemaDescriptor& frozen() {
    if (frozen_.load(std::memory_order_acquire)) [[likely]] return schema_;
    return freeze();
  }
  /// Flat tables: implemented methods by wire id (descriptor order, valid
  /// after frozen()), called methods by local index (registration order).
  const std::vector<MethodRef>& implementedFlat() const { return implementedFlat_; }
  const std::vector<MethodRef>& calledFlat() const { return calledFlat_; }

 private:
  const SchemaDescriptor& freeze();

  std::mutex mu_;
  std::atomic<bool> frozen_{false};  // set once under mu_; read without it on every call
  SchemaDescriptor schema_;
  std::vector<MethodRef> implementedFlat_;
  std::vector<MethodRef> calledFlat_;
};

}  // namespace myelin::detail
